// `trellis train` (command.hpp): the run configuration, then the Trainer.
#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/train/commands/command.hpp"
#include "trellis/train/config/raw_config.hpp"
#include "trellis/train/loop/trainer.hpp"

#include <filesystem>

namespace trellis {

namespace {

namespace fs = std::filesystem;

// --resume RUN_DIR (a directory with the config.ini of a run): the run's own configuration
// (unless --config is given), run.dir = RUN_DIR and --resume auto, then the other overrides;
// the user need not repeat the command. --resume auto and --resume STEP_DIR (a checkpoint,
// with state.h5) pass as they are; any other directory is a ConfigError naming what it lacks.
struct RunSource {
  std::string config_file;
  std::vector<std::string> overrides;
};

RunSource resolve_resume(const CommandArgs& args) {
  RunSource source{args.config_file(), args.overrides()};
  std::string resume;
  for (const std::string& o : args.overrides())
    if (o.rfind("--ckpt.resume=", 0) == 0) resume = o.substr(14);
  if (resume.empty() || resume == "auto" || resume == "none") return source;
  std::error_code ec;
  if (fs::exists(fs::path(resume) / "state.h5", ec)) return source;  // a checkpoint
  if (!fs::exists(fs::path(resume) / "config.ini", ec))
    throw ConfigError("--resume " + resume +
                      ": neither a run directory (no config.ini there) nor a checkpoint (no "
                      "state.h5); give a run.dir, a checkpoint's step directory, or auto");
  if (source.config_file.empty()) source.config_file = resume + "/config.ini";
  source.overrides.clear();
  source.overrides.push_back("--run.dir=" + resume);
  for (const std::string& o : args.overrides())
    source.overrides.push_back(o.rfind("--ckpt.resume=", 0) == 0 ? "--ckpt.resume=auto" : o);
  return source;
}

}  // namespace

TrainConfig agreed_run_config(const CommandContext& context, const CommandArgs& args) {
  TrainConfig config;
  run_agreed(context.world, context.log, [&] {
    const RunSource source = resolve_resume(args);
    config = TrainConfig::from(RawConfig::parse(source.config_file, source.overrides));
    int world_size = 0;
    TRELLIS_MPI(MPI_Comm_size(context.world, &world_size));
    config.check_against_world(world_size);
  });
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(context.world, &rank));
  if (rank == 0)
    for (const std::string& warning : config.warnings()) context.log.warn(warning);
  return config;
}

int run_train_command(const CommandContext& context, const CommandArgs& args) {
  const TrainConfig config = agreed_run_config(context, args);
  Trainer trainer(config, context.world, context.node, context.log, args.flag("--dry-run"));
  return static_cast<int>(trainer.run());
}

}  // namespace trellis
