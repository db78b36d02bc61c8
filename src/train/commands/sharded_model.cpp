#include "trellis/train/commands/sharded_model.hpp"

#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"
#include "trellis/train/config/raw_config.hpp"
#include "trellis/train/files/int8_weights.hpp"
#include "trellis/train/files/weights_file.hpp"
#include "trellis/train/loop/memory_planning.hpp"
#include "trellis/train/loop/model_pieces.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace trellis {

TrainConfig layout_config(const std::string& path, const ModelLayout& layout, int world_size,
                          std::int64_t capacity) {
  if (is_int8_weights(path))
    throw ConfigError(path +
                      " is an int8 model: it runs whole on each rank (leave out --tp, "
                      "--pp, --zero and --memory-limit-gb)");
  const int model_ranks = std::max(layout.tp, 1) * std::max(layout.pp, 1);
  if (world_size % model_ranks != 0)
    throw ConfigError(format_text("--tp %d x --pp %d = %d does not divide the %d ranks", layout.tp,
                                  layout.pp, model_ranks, world_size));
  const std::int64_t dp = world_size / model_ranks;
  const std::string to = "--";
  // The stored run's keys, with what a forward-only model on this layout needs: the
  // validation a run gets (ConfigError naming the key) applies to the result.
  const std::vector<std::string> overrides = {
      to + "parallel.tp=" + std::to_string(layout.tp),
      to + "parallel.pp=" + std::to_string(layout.pp),
      to + "parallel.zero=" + std::to_string(layout.zero),
      to + "parallel.zero_shard_ranks=0",
      to + "parallel.sequence_parallel=false",
      to + "parallel.stages=",
      to + "parallel.powersgd_rank=0",
      to + "parallel.grad_exchange=auto",
      to + "optim.type=sgd",
      to + "optim.momentum=0",
      to + "optim.nesterov=false",
      to + "precision.mode=fp32",
      to + "precision.loss_scale=auto",
      to + "memory.recompute=none",
      to + "memory.limit_gb=" + format_text("%.17g", layout.memory_limit_gb),
      to + "prune.method=none",
      to + "fault.inject=",
      to + "init.weights=",
      to + "ckpt.resume=none",
      to + "train.micro_batch=" + std::to_string(capacity),
      to + "train.global_batch=" + std::to_string(capacity * dp),
  };
  return TrainConfig::from(RawConfig::parse_text(
      read_weights_config(path), "the config stored in " + path + " (with the layout options)",
      overrides));
}

ShardedModel::ShardedModel(const ProcessGrid& grid, const std::string& path, const DataShape& shape,
                           std::int64_t capacity, const ModelLayout& layout, const Logger& log) {
  const MPI_Comm world = grid.world().get();
  run_agreed(world, log, [&] {
    config_ = layout_config(path, layout, grid.layout().world_size(), capacity);
    config_.resolve_batch(grid.size(Axis::dp));
    if (model_registration(config_.model.type).data == DataKind::tokens)
      config_.resolve_vocab(shape.classes);
  });
  if (layout.memory_limit_gb > 0)
    run_agreed(world, log, [&] {
      // The plan of what this model allocates (a run's, with plain SGD: it counts gradients
      // and backward workspace the forward does not touch, so it errs on the safe side).
      TrainConfig unlimited = config_;
      unlimited.memory.limit_gb = 0;
      const MemoryPlan plan = plan_run_memory(unlimited, shape, grid, log);
      const double limit = layout.memory_limit_gb * 1024.0 * 1024.0 * 1024.0;
      if (static_cast<double>(plan.total()) > limit)
        throw ConfigError(
            format_text("--memory-limit-gb %g: a rank needs ", layout.memory_limit_gb) +
            format_bytes(static_cast<double>(plan.total())) + " by the memory plan (" +
            describe_memory_plan(plan) +
            "), more than the limit; would help: --zero 3 over more ranks, --tp "
            "or --pp > 1 (the model split over more ranks), a smaller --batch");
    });
  run_agreed(world, log,
             [&] { model_ = std::make_unique<TrainingModel>(config_, shape, grid, capacity, 1); });
  read_weights_pieces(path, model_pieces(*model_, grid, false), world);
  model_->parameters_loaded(0);
}

}  // namespace trellis
