// This run's memory plan (config/memory_plan.hpp) on its process grid: the largest rank's
// bytes by category, logged by rank 0 and refused (ConfigError on every rank) above
// memory.limit_gb. Collective over the grid (whether dp gradients go through node shared
// memory is asked of every rank).
#pragma once

#include "trellis/comm/process_grid.hpp"
#include "trellis/core/log.hpp"
#include "trellis/data/data_shape.hpp"
#include "trellis/train/config/memory_plan.hpp"
#include "trellis/train/config/train_config.hpp"

namespace trellis {

MemoryPlan plan_run_memory(const TrainConfig& config, const DataShape& shape,
                           const ProcessGrid& grid, const Logger& log);

}  // namespace trellis
