#include "trellis/train/plan/plan_search.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"
#include "trellis/optim/optimizer.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace trellis {

namespace {

std::vector<int> powers_of_two_up_to(std::int64_t limit) {
  std::vector<int> out;
  for (std::int64_t v = 1; v <= limit && v <= (1 << 20); v *= 2) out.push_back(static_cast<int>(v));
  return out;
}

std::vector<int> node_counts(const MachineType& m) {
  std::vector<int> out;
  for (int n = 1; n <= m.max_nodes; n *= 2)
    if (n >= m.min_nodes) out.push_back(n);
  if (out.empty() || out.back() != m.max_nodes) out.push_back(m.max_nodes);
  return out;
}

// What a failed layout would need, from its largest memory categories.
std::string memory_reason(const MemoryPlan& plan, double usable, const PlanLayout& l,
                          const ModelRegistration& model) {
  const auto bytes = [&](MemoryCategory c) {
    return static_cast<double>(plan.bytes[static_cast<std::size_t>(c)]);
  };
  const double state = bytes(MemoryCategory::parameters) + bytes(MemoryCategory::gradients) +
                       bytes(MemoryCategory::optimizer_state);
  const double saved = bytes(MemoryCategory::activations) + bytes(MemoryCategory::recompute);
  std::vector<std::string> help;
  if (l.dp > 1 && l.zero < 3 && state > saved) help.push_back("zero=3");
  if (saved > state && l.recompute != "full" && model.recompute_blocks)
    help.push_back("recompute=full");
  if (saved > state && l.micro_batch > 1) help.push_back("a smaller micro-batch");
  if (model.tensor_parallel) help.push_back("tp=" + std::to_string(l.tp * 2));
  if (model.pipeline_parallel) help.push_back("pp=" + std::to_string(l.pp * 2));
  std::string text = "needs " + format_bytes(static_cast<double>(plan.total())) + " per rank of " +
                     format_bytes(usable) + " (" + describe_memory_plan(plan) + ")";
  for (std::size_t i = 0; i < help.size(); ++i) text += (i == 0 ? ": try " : " or ") + help[i];
  return text;
}

}  // namespace

TrainConfig plan_config(const TrainConfig& config, const Plan& plan) {
  TrainConfig c = config;
  const PlanLayout& l = plan.layout;
  c.parallel.tp = l.tp;
  c.parallel.pp = l.pp;
  c.parallel.zero = l.zero;
  c.parallel.sequence_parallel = l.sequence_parallel;
  c.parallel.schedule = l.schedule;
  if (l.pp != config.parallel.pp) c.parallel.stages.clear();
  c.memory.recompute = l.recompute;
  c.precision.mode = parse_precision(l.precision, "precision.mode");
  if (plan.machine != nullptr && !plan.machine->cpu_ranks && l.precision != "fp32")
    c.precision.kernels = "native";  // GPUs have 16-bit GEMMs
  c.train.micro_batch = l.micro_batch;
  return c;
}

std::vector<std::string> plan_overrides(const TrainConfig& config, const Plan& plan) {
  const PlanLayout& l = plan.layout;
  std::vector<std::string> out;
  const auto set = [&](bool changed, const std::string& key, const std::string& value) {
    if (changed) out.push_back("--" + key + "=" + value);
  };
  set(l.tp != config.parallel.tp, "parallel.tp", std::to_string(l.tp));
  set(l.pp != config.parallel.pp, "parallel.pp", std::to_string(l.pp));
  set(l.pp > 1 && l.schedule != config.parallel.schedule, "parallel.schedule",
      pipeline_schedule_name(l.schedule));
  set(l.zero != config.parallel.zero, "parallel.zero", std::to_string(l.zero));
  set(l.sequence_parallel != config.parallel.sequence_parallel, "parallel.sequence_parallel",
      l.sequence_parallel ? "true" : "false");
  set(l.recompute != config.memory.recompute, "memory.recompute", l.recompute);
  set(l.precision != precision_name(config.precision.mode), "precision.mode", l.precision);
  set(l.micro_batch != config.train.micro_batch, "train.micro_batch",
      std::to_string(l.micro_batch));
  return out;
}

namespace {

// Powers of two up to `largest` that divide the local batch, the whole local batch (no
// accumulation) and the configuration's own micro-batch where it divides.
std::vector<std::int64_t> micro_batches(std::int64_t local, const TrainConfig& config,
                                        std::int64_t largest) {
  std::vector<std::int64_t> out;
  for (int m : powers_of_two_up_to(std::min(local, largest)))
    if (local % m == 0) out.push_back(m);
  for (std::int64_t m : {local, config.train.micro_batch})
    if (m > 0 && local % m == 0 && std::find(out.begin(), out.end(), m) == out.end())
      out.push_back(m);
  return out;
}

// 1F1B, and GPipe where it differs and may still pay: with up to pp micro-batches both run
// every forward first (the same plan twice); beyond 4 x pp GPipe keeps 4 times 1F1B's
// activations for the same bubble, and the memory plan would build one model replica per
// micro-batch to say so.
std::vector<PipelineSchedule> schedules(int pp, std::int64_t micro_batches) {
  if (pp > 1 && micro_batches > pp && micro_batches <= 4 * pp)
    return {PipelineSchedule::one_f_one_b, PipelineSchedule::gpipe};
  return {PipelineSchedule::one_f_one_b};
}

// Every layout of one machine type the grid and the batch allow, before memory is asked.
struct Candidate {
  PlanLayout layout;
  std::vector<int> bounds;  // stage boundaries (units)
  std::string split_error;  // the units do not split over pp stages
};

std::vector<Candidate> candidate_layouts(const MachineType& machine, const PlanRequest& request,
                                         const ModelRegistration& model,
                                         const std::vector<double>& unit_costs, int units) {
  const TrainConfig& config = request.config;
  const std::int64_t global = config.train.global_batch;
  const int per_node = machine.devices_per_node;
  std::vector<std::string> precisions = request.precisions;
  if (precisions.empty()) precisions.push_back(precision_name(config.precision.mode));
  std::vector<std::string> recomputes = {"none"};
  if (model.recompute_selective) recomputes.push_back("selective");
  if (model.recompute_blocks) recomputes.push_back("full");
  std::vector<Candidate> out;
  for (int nodes : node_counts(machine)) {
    const int devices = nodes * per_node;
    for (int tp : powers_of_two_up_to(model.tensor_parallel ? per_node : 1)) {
      for (int pp : powers_of_two_up_to(model.pipeline_parallel ? units : 1)) {
        if (per_node % tp != 0 || devices % (tp * pp) != 0) continue;
        const int dp = devices / (tp * pp);
        if (global % dp != 0) continue;
        Candidate base;
        base.bounds = {0, units};
        try {
          if (pp > 1)
            base.bounds = stage_boundaries(pp == config.parallel.pp ? config.parallel.stages : "",
                                           unit_costs, pp);
        } catch (const ConfigError& e) {
          base.split_error = e.what();
        }
        const std::int64_t local = global / dp;
        for (const bool sp : {false, true}) {
          if (sp && (tp == 1 || request.data.seq_len <= 0)) continue;
          for (const std::string& precision : precisions)
            for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero)
              for (const std::string& recompute : recomputes)
                for (std::int64_t micro : micro_batches(local, config, request.max_micro_batch))
                  for (PipelineSchedule schedule : schedules(pp, local / micro)) {
                    Candidate c = base;
                    PlanLayout& l = c.layout;
                    l.nodes = nodes, l.dp = dp, l.tp = tp, l.pp = pp;
                    l.micro_batch = micro, l.zero = zero, l.recompute = recompute;
                    l.precision = precision, l.sequence_parallel = sp, l.schedule = schedule;
                    out.push_back(c);
                  }
        }
      }
    }
  }
  return out;
}

using MemoryKey = std::tuple<int, int, int, std::int64_t, int, std::string, std::string, bool, bool,
                             bool, PipelineSchedule>;

}  // namespace

PlanResult search_plans(const PlanRequest& request, const std::vector<MachineType>& machines) {
  if (machines.empty()) throw ConfigError("trellis plan: the cluster file has no machine type");
  const TrainConfig& config = request.config;
  const ModelRegistration& model = model_registration(config.model.type);
  if (!model.work)
    throw ConfigError(std::string("trellis plan: model.type = ") + model.name +
                      " has no work description");
  const DataShape& data = request.data;
  const int vocab = data.seq_len > 0 ? std::max(config.model.vocab, data.classes) : 0;
  const std::vector<double> unit_costs =
      model.pipeline_parallel ? model_unit_costs(config.model, data) : std::vector<double>{};
  std::map<std::pair<int, bool>, ModelWork> work_cache;
  const auto work_of = [&](int tp, bool sp) -> const ModelWork& {
    auto found = work_cache.find({tp, sp});
    if (found == work_cache.end())
      found =
          work_cache.emplace(std::make_pair(tp, sp), model.work(config.model, data, vocab, tp, sp))
              .first;
    return found->second;
  };
  const int units = static_cast<int>(work_of(1, false).units.size());

  StepInputs inputs;
  inputs.global_batch = config.train.global_batch;
  inputs.optimizer_state_buffers = optimizer_state_buffers(config.optimizer_spec());
  inputs.grad_wire_bytes = config.parallel.grad_dtype == Precision::fp32 ? 4 : 2;
  inputs.gather_wire_bytes = config.parallel.gather_dtype == Precision::fp32 ? 4 : 2;
  inputs.bucket_bytes = config.parallel.bucket_mb * 1024 * 1024;
  // Memory plans depend on the layout and the machine's kind, not on its speed or size.
  std::map<MemoryKey, std::pair<MemoryPlan, std::string>> memory_cache;
  PlanResult result;
  for (const MachineType& machine : machines) {
    const double usable = machine.device_memory_gib * (1 - request.memory_headroom) * 1073741824.0;
    for (const Candidate& candidate :
         candidate_layouts(machine, request, model, unit_costs, units)) {
      Plan plan;
      plan.machine = &machine;
      plan.layout = candidate.layout;
      const PlanLayout& l = plan.layout;
      if (!candidate.split_error.empty()) {
        plan.reason = candidate.split_error;
        result.plans.push_back(plan);
        continue;
      }
      PlannedGrid grid{l.dp, l.tp, l.pp, false};
      grid.shared_exchange = machine.cpu_ranks && l.nodes == 1 && l.dp > 1 && l.zero < 2 &&
                             config.parallel.grad_exchange != "communicator" &&
                             config.parallel.grad_dtype == Precision::fp32 &&
                             config.parallel.powersgd_rank == 0;
      const MemoryKey key{l.dp,
                          l.tp,
                          l.pp,
                          l.micro_batch,
                          l.zero,
                          l.recompute,
                          l.precision,
                          l.sequence_parallel,
                          machine.cpu_ranks,
                          grid.shared_exchange,
                          l.schedule};
      auto memory = memory_cache.find(key);
      if (memory == memory_cache.end()) {
        std::pair<MemoryPlan, std::string> entry;
        try {
          TrainConfig c = plan_config(config, plan);
          c.resolve_batch(l.dp);
          entry.first = plan_memory(c, data, grid);
        } catch (const ConfigError& e) {
          entry.second = e.what();
        }
        memory = memory_cache.emplace(key, entry).first;
      }
      plan.memory = memory->second.first;
      if (!memory->second.second.empty()) {
        plan.reason = memory->second.second;
      } else if (static_cast<double>(plan.memory.total()) > usable) {
        plan.reason = memory_reason(plan.memory, usable, l, model);
      } else {
        plan.fits = true;
        StepInputs in = inputs;
        in.stage_bounds = candidate.bounds;
        in.cpu_shared_exchange = grid.shared_exchange;
        plan.step = predict_step(work_of(l.tp, l.sequence_parallel), l, in, machine);
      }
      result.plans.push_back(plan);
    }
  }
  price_and_rank(request, work_of(1, false).params, inputs.optimizer_state_buffers, result);
  return result;
}

}  // namespace trellis
