// `trellis plan` (command.hpp): the planner (train/plan/). Every rank parses and searches alike
// (so a bad file fails on all of them); rank 0 prints. --calibrate measures this machine with
// every rank of the job instead and writes it as a machine type.
#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/comm/mpi_comm.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"
#include "trellis/train/commands/command.hpp"
#include "trellis/train/config/raw_config.hpp"
#include "trellis/train/input/data_factory.hpp"
#include "trellis/train/model/model_registry.hpp"
#include "trellis/train/plan/calibration.hpp"
#include "trellis/train/plan/plan_report.hpp"
#include "trellis/train/plan/plan_search.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace trellis {

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// The data's shape and the samples of one epoch (whole global batches; 0 when not read): a token
// model with model.vocab set needs no data; anything else opens the training set as training would.
std::pair<DataShape, std::int64_t> plan_data(const TrainConfig& config, MPI_Comm world) {
  const ModelRegistration& model = model_registration(config.model.type);
  if (model.data == DataKind::tokens && config.model.vocab > 0) {
    DataShape data;
    data.classes = config.model.vocab;
    data.seq_len = config.model.seq_len;
    return {data, 0};
  }
  const MpiComm comm = MpiComm::borrow(world);
  const auto source = open_train_source(config, comm);
  return {source->shape(), source->steps_per_epoch() * config.train.global_batch};
}

double target_samples(const CommandArgs& args, const TrainConfig& config, const DataShape& data,
                      std::int64_t dataset_samples) {
  const double tokens = args.real("--target-tokens"), samples = args.real("--target-samples"),
               epochs = args.real("--target-epochs");
  if ((tokens > 0) + (samples > 0) + (epochs > 0) > 1)
    throw ConfigError(
        "trellis plan: give one of --target-tokens, --target-samples, --target-epochs");
  if (tokens > 0) {
    if (data.seq_len <= 0)
      throw ConfigError(
          "trellis plan: --target-tokens needs a language model (model.type gpt or llama)");
    return tokens / static_cast<double>(data.seq_len);
  }
  if (samples > 0) return samples;
  if (epochs > 0 || config.train.max_steps <= 0) {
    if (dataset_samples <= 0)
      throw ConfigError(
          "trellis plan: --target-epochs (or train.epochs without train.max_steps) "
          "needs the training data, which a model with model.vocab set does not read: "
          "give --target-tokens or --target-samples");
    return (epochs > 0 ? epochs : static_cast<double>(config.train.epochs)) *
           static_cast<double>(dataset_samples);
  }
  return static_cast<double>(config.train.max_steps) *
         static_cast<double>(config.train.global_batch);
}

int run_calibration(const CommandContext& context, const CommandArgs& args) {
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(context.world, &rank));
  MachineType base;
  base.max_nodes = 1;
  base.checkpoint_bandwidth_gbs = 0.5;
  if (!args.text("--cluster").empty()) {
    run_agreed(context.world, context.log,
               [&] { base = read_cluster_file(args.text("--cluster")).front(); });
  }
  CalibrationOptions options;
  options.name = args.text("--name");
  const bool tty = isatty(STDERR_FILENO) != 0;
  options.progress = [tty](double fraction, const std::string& what) {
    const int width = 30, filled = static_cast<int>(std::lround(fraction * width));
    std::fprintf(stderr, "%scalibrating [%s%s] %3.0f%% %-60s%s", tty ? "\r" : "",
                 std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(width - filled), ' ').c_str(), fraction * 100,
                 what.c_str(), tty && fraction < 1 ? "" : "\n");
    std::fflush(stderr);
  };
  const MachineType machine = calibrate_machine(context.world, context.node.local_size,
                                                context.node.node_count, base, options);
  std::ostringstream text;
  text << "# " << machine.description << "\n";
  write_machine_type(text, machine);
  const std::string out = args.text("--out");
  if (rank == 0) {
    if (out.empty()) {
      std::fputs(text.str().c_str(), stdout);
    } else {
      std::ofstream file(out);
      file << text.str();
      if (!file.flush()) throw Error("trellis plan --calibrate: cannot write " + out);
      context.log.info("wrote machine type [" + machine.name + "] to " + out);
    }
  }
  return 0;
}

}  // namespace

int run_plan_command(const CommandContext& context, const CommandArgs& args) {
  if (args.flag("--calibrate")) return run_calibration(context, args);
  PlanRequest request;
  std::vector<MachineType> machines;
  std::int64_t dataset_samples = 0;
  run_agreed(context.world, context.log, [&] {
    if (args.config_file().empty())
      throw ConfigError("trellis plan: --config MODEL.ini is required");
    if (args.text("--cluster").empty())
      throw ConfigError(
          "trellis plan: --cluster CLUSTER.ini is required (inputs/clusters/ has examples)");
    request.config = TrainConfig::from(RawConfig::parse(args.config_file(), args.overrides()));
    machines = read_cluster_file(args.text("--cluster"));
  });
  run_agreed(context.world, context.log, [&] {
    std::tie(request.data, dataset_samples) = plan_data(request.config, context.world);
  });
  PlanResult result;
  run_agreed(context.world, context.log, [&] {
    request.target_samples = target_samples(args, request.config, request.data, dataset_samples);
    request.deadline_hours = args.real("--deadline");
    request.budget_usd = args.real("--budget");
    request.max_micro_batch = args.integer("--max-micro-batch");
    const std::string precisions = args.text("--precision");
    request.precisions =
        precisions == "all" ? std::vector<std::string>{"fp32", "bf16"} : split_list(precisions);
    for (const std::string& p : request.precisions) parse_precision(p, "--precision");
    result = search_plans(request, machines);
  });
  ReportOptions options;
  options.config_file = args.config_file();
  options.rows = static_cast<int>(args.integer("--rows"));
  const std::size_t slash = options.config_file.find_last_of('/');
  options.model_name = options.config_file.substr(slash == std::string::npos ? 0 : slash + 1);
  if (options.model_name.size() > 4 &&
      options.model_name.substr(options.model_name.size() - 4) == ".ini")
    options.model_name.resize(options.model_name.size() - 4);
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(context.world, &rank));
  if (rank == 0) {
    if (args.flag("--json")) {
      std::fputs(plan_json(request, result, options).c_str(), stdout);
      std::fflush(stdout);
    } else {
      std::string text = plan_text(request, result, options);
      if (!text.empty() && text.back() == '\n') text.pop_back();
      context.log.info(text);
    }
  }
  return result.chosen >= 0 || result.cheapest >= 0 ? 0 : 1;
}

}  // namespace trellis
