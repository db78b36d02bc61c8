// `trellis train` (command.hpp): the run configuration, then the Trainer.
#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/train/commands/command.hpp"
#include "trellis/train/config/raw_config.hpp"
#include "trellis/train/loop/trainer.hpp"

namespace trellis {

TrainConfig agreed_run_config(const CommandContext& context, const CommandArgs& args) {
  TrainConfig config;
  run_agreed(context.world, context.log, [&] {
    config = TrainConfig::from(RawConfig::parse(args.config_file(), args.overrides()));
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
  Trainer trainer(config, context.world, context.node, context.log);
  return static_cast<int>(trainer.run());
}

}  // namespace trellis
