// trellis: one SPMD executable. Subcommands are wiring only; the work lives in the library.
//
//   trellis train --config FILE [--section.key=value ...]
//   trellis eval  --weights FILE --data FILE [--batch N] [--cache]
//   trellis export --weights FILE --out FILE --prune
//   trellis quantize --weights FILE --calib DATA --out FILE [--method M] [--percentile P]
//                    [--batches N] [--batch B]
//   trellis info  [--config FILE] [--section.key=value ...]
//   trellis generate --weights FILE [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K]
//   [--seed S]
//
// Exit codes: 0 ok, 1 failure, 2 bad configuration or usage, 3 bad input data or weights,
// 75 stopped early by a signal or time limit after writing a checkpoint (resubmit to resume),
// 76 ended by the watchdog because other ranks were lost (their heartbeats stopped).
#include "trellis/comm/device_binding.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/log.hpp"
#include "trellis/kernels/host_threads.hpp"
#include "trellis/train/agreement.hpp"
#include "trellis/train/build_info.hpp"
#include "trellis/train/error_policy.hpp"
#include "trellis/train/evaluate.hpp"
#include "trellis/train/export.hpp"
#include "trellis/train/generate.hpp"
#include "trellis/train/quantize.hpp"
#include "trellis/train/stop_control.hpp"
#include "trellis/train/train_config.hpp"
#include "trellis/train/trainer.hpp"

#include <mpi.h>
#include <sys/stat.h>
#include <Kokkos_Core.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace trellis;

const char* kUsage =
    "usage: trellis <command> [options]\n"
    "  train --config FILE [--resume auto|DIR] [--section.key=value ...]\n"
    "                                                   train a model (see `trellis train "
    "--help`)\n"
    "  eval  --weights FILE --data FILE [--batch N] [--cache]\n"
    "                                                   evaluate saved weights (fp32 or int8) on\n"
    "                                                   a dataset (--cache: read into memory "
    "first)\n"
    "  export --weights FILE --out FILE --prune        write a structurally pruned model without\n"
    "                                                   its pruned neurons/channels\n"
    "  quantize --weights FILE --calib DATA --out FILE [--method minmax|percentile|entropy]\n"
    "           [--percentile P] [--batches N] [--batch B]\n"
    "                                                   int8 model calibrated on DATA\n"
    "  info  [--config FILE] [--section.key=value ...]  build, backends, ranks and devices\n"
    "  generate --weights FILE [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--seed "
    "S]\n"
    "                                                   sample text from a trained gpt\n";

struct CommandLine {
  std::string command;
  std::string config_file;
  std::vector<std::string> overrides;
  std::string weights, data;
  long batch = 1000;
  bool cache = false;  // eval --cache
  bool help = false;
  GenerateOptions generate;
  ExportOptions exported;
  QuantizeOptions quantize;
};

// Splits "--name value" / "--name=value" for the few options each command owns; every other
// "--section.key=value" is a config override checked against the schema later.
CommandLine parse_command_line(int argc, char** argv) {
  CommandLine cl;
  if (argc < 2) throw ConfigError(std::string("no command given\n") + kUsage);
  cl.command = argv[1];
  if (cl.command == "--help" || cl.command == "-h" || cl.command == "help") {
    cl.help = true;
    return cl;
  }
  if (cl.command != "train" && cl.command != "eval" && cl.command != "info" &&
      cl.command != "generate" && cl.command != "export" && cl.command != "quantize")
    throw ConfigError("unknown command '" + cl.command + "'\n" + kUsage);
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    auto take_value = [&](const std::string& name) -> std::string {
      if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
      if (i + 1 >= argc) throw ConfigError("option " + name + " needs a value");
      return argv[++i];
    };
    auto is = [&](const std::string& name) { return arg == name || arg.rfind(name + "=", 0) == 0; };
    if (arg == "--help" || arg == "-h")
      cl.help = true;
    else if (is("--config"))
      cl.config_file = take_value("--config");
    else if (cl.command == "train" && is("--resume"))
      cl.overrides.push_back("--ckpt.resume=" + take_value("--resume"));
    else if (cl.command == "eval" && is("--weights"))
      cl.weights = take_value("--weights");
    else if (cl.command == "eval" && is("--data"))
      cl.data = take_value("--data");
    else if (cl.command == "eval" && is("--batch"))
      cl.batch = std::stol(take_value("--batch"));
    else if (cl.command == "eval" && arg == "--cache")
      cl.cache = true;
    else if (cl.command == "eval")
      throw ConfigError("unknown eval option '" + arg + "'\n" + kUsage);
    else if (cl.command == "quantize" && is("--weights"))
      cl.quantize.weights = take_value("--weights");
    else if (cl.command == "quantize" && is("--calib"))
      cl.quantize.calib = take_value("--calib");
    else if (cl.command == "quantize" && is("--out"))
      cl.quantize.out = take_value("--out");
    else if (cl.command == "quantize" && is("--method"))
      cl.quantize.method = take_value("--method");
    else if (cl.command == "quantize" && is("--percentile"))
      cl.quantize.percentile = std::stod(take_value("--percentile"));
    else if (cl.command == "quantize" && is("--batches"))
      cl.quantize.batches = std::stol(take_value("--batches"));
    else if (cl.command == "quantize" && is("--batch"))
      cl.quantize.batch = std::stol(take_value("--batch"));
    else if (cl.command == "quantize")
      throw ConfigError("unknown quantize option '" + arg + "'\n" + kUsage);
    else if (cl.command == "export" && is("--weights"))
      cl.exported.weights = take_value("--weights");
    else if (cl.command == "export" && is("--out"))
      cl.exported.out = take_value("--out");
    else if (cl.command == "export" && arg == "--prune")
      cl.exported.prune = true;
    else if (cl.command == "export")
      throw ConfigError("unknown export option '" + arg + "'\n" + kUsage);
    else if (cl.command == "generate" && is("--weights"))
      cl.generate.weights = take_value("--weights");
    else if (cl.command == "generate" && is("--prompt"))
      cl.generate.prompt = take_value("--prompt");
    else if (cl.command == "generate" && is("--tokens"))
      cl.generate.tokens = std::stol(take_value("--tokens"));
    else if (cl.command == "generate" && is("--temperature"))
      cl.generate.temperature = std::stod(take_value("--temperature"));
    else if (cl.command == "generate" && is("--top-k"))
      cl.generate.top_k = std::stoi(take_value("--top-k"));
    else if (cl.command == "generate" && is("--seed"))
      cl.generate.seed = std::stoull(take_value("--seed"));
    else if (cl.command == "generate")
      throw ConfigError("unknown generate option '" + arg + "'\n" + kUsage);
    else if (arg.rfind("--", 0) == 0 && arg.find('=') == std::string::npos && i + 1 < argc &&
             std::string(argv[i + 1]).rfind("--", 0) != 0)
      cl.overrides.push_back(arg + "=" + argv[++i]);
    else
      cl.overrides.push_back(arg);
  }
  if (cl.command == "eval" && !cl.help && (cl.weights.empty() || cl.data.empty()))
    throw ConfigError("eval needs --weights FILE and --data FILE\n" + std::string(kUsage));
  if (cl.command == "eval" && cl.batch < 1) throw ConfigError("eval --batch must be >= 1");
  if (cl.command == "quantize" && !cl.help &&
      (cl.quantize.weights.empty() || cl.quantize.calib.empty() || cl.quantize.out.empty()))
    throw ConfigError("quantize needs --weights FILE, --calib DATA and --out FILE\n" +
                      std::string(kUsage));
  if (cl.command == "export" && !cl.help &&
      (cl.exported.weights.empty() || cl.exported.out.empty()))
    throw ConfigError("export needs --weights FILE and --out FILE\n" + std::string(kUsage));
  if (cl.command == "generate" && !cl.help && cl.generate.weights.empty())
    throw ConfigError("generate needs --weights FILE\n" + std::string(kUsage));
  if (cl.command == "generate" &&
      (cl.generate.tokens < 0 || cl.generate.top_k < 0 || cl.generate.temperature < 0))
    throw ConfigError("generate: --tokens, --top-k and --temperature must be >= 0");
  return cl;
}

void print_help(const std::string& command) {
  std::printf("%s", kUsage);
  if (command == "train" || command == "info") {
    std::printf("\nconfig keys (INI [section] key = value, or --section.key=value):\n");
    for (const auto& key : config_schema())
      std::printf("  %-24s %-14s %s\n  %-39s (%s)\n", key.name,
                  key.default_value[0] ? key.default_value : "\"\"", key.help, "", key.allowed);
  }
}

void initialize_kokkos(int device) {
#if KOKKOS_VERSION >= 30700
  Kokkos::InitializationSettings settings;
  if (device >= 0) settings.set_device_id(device);
  Kokkos::initialize(settings);
#else
  Kokkos::InitArguments arguments;
  if (device >= 0) arguments.device_id = device;
  Kokkos::initialize(arguments);
#endif
}

int run(int argc, char** argv, int rank) {
  CommandLine cl;
  run_agreed(MPI_COMM_WORLD, Logger(rank), [&] {
    try {
      cl = parse_command_line(argc, argv);
    } catch (const std::logic_error& e) {  // std::stol and friends on a malformed number
      throw ConfigError(std::string("malformed numeric option value (") + e.what() + ")\n" +
                        kUsage);
    }
  });
  if (cl.help) {
    if (rank == 0) print_help(cl.command);
    return 0;
  }
  const NodeBinding node = bind_to_node(MPI_COMM_WORLD);
  initialize_kokkos(node.device);
  kernels::configure_host_threads();
  struct KokkosFinalizer {
    ~KokkosFinalizer() { Kokkos::finalize(); }
  } finalizer;

  const Logger log(rank);
  if (cl.command == "generate") {
    generate_command(MPI_COMM_WORLD, cl.generate, log);
    return 0;
  }
  if (cl.command == "quantize") {
    quantize_command(MPI_COMM_WORLD, cl.quantize, log);
    return 0;
  }
  if (cl.command == "export") {
    export_command(MPI_COMM_WORLD, cl.exported, log);
    return 0;
  }
  if (cl.command == "eval") {
    evaluate_weights_command(MPI_COMM_WORLD, cl.weights, cl.data, cl.batch, log, cl.cache);
    return 0;
  }
  TrainConfig config;
  run_agreed(MPI_COMM_WORLD, log, [&] {
    config = TrainConfig::from(RawConfig::parse(cl.config_file, cl.overrides));
    int world_size = 0;
    TRELLIS_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    config.check_against_world(world_size);
  });
  if (rank == 0)
    for (const std::string& warning : config.warnings()) log.warn(warning);
  if (cl.command == "info") {
    print_info(MPI_COMM_WORLD, config, node, log);
    return 0;
  }
  Trainer trainer(config, MPI_COMM_WORLD, node, log);
  return static_cast<int>(trainer.run());
}

}  // namespace

int main(int argc, char** argv) {
  // Runs, checkpoints and models hold a project's data and weights: files 0640 and
  // directories 0750 at most (group-readable for a shared project directory, not world-
  // readable on a shared cluster), whatever the job's umask allows; a stricter umask stays.
  ::umask(::umask(0) | 027);
  // FUNNELED is all Trellis needs: every MPI call comes from the main thread (Kokkos' host
  // threads never call MPI, and the watchdog thread ends the process without MPI, see
  // train/watchdog.hpp). A library that gives less cannot run it correctly: say so and stop.
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "error: MPI_Init_thread failed\n");
    return 1;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < MPI_THREAD_FUNNELED) {
    std::fprintf(stderr,
                 "[rank %d] error: the MPI library provides thread support level %d, below "
                 "MPI_THREAD_FUNNELED (%d), which Trellis needs (MPI from the main thread while "
                 "other threads run); use an MPI build with thread support\n",
                 rank, provided, MPI_THREAD_FUNNELED);
    MPI_Finalize();
    return 1;
  }
  const trellis::Logger log(rank);
  int code = 0;
  try {
    // Before any thread of ours starts: they inherit the main thread's blocked stop signals
    // (train/stop_control.cpp says why no thread running oneDNN may take a signal).
    trellis::StopControl::install();
    code = trellis::run_or_abort(MPI_COMM_WORLD, log, [&] { return run(argc, argv, rank); });
  } catch (...) {
    code = trellis::exit_code_for(std::current_exception(), log);
  }
  MPI_Finalize();
  return code;
}
