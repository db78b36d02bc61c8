#include "trellis/train/loop/memory_planning.hpp"

#include "trellis/core/format.hpp"
#include "trellis/train/loop/training_model.hpp"

namespace trellis {

MemoryPlan plan_run_memory(const TrainConfig& config, const DataShape& shape,
                           const ProcessGrid& grid, const Logger& log) {
  PlannedGrid planned;
  planned.dp = grid.size(Axis::dp);
  planned.tp = grid.size(Axis::tp);
  planned.pp = grid.size(Axis::pp);
  planned.shared_exchange = TrainingModel::use_shared_exchange(config.parallel, grid);
  const MemoryPlan plan = plan_memory(config, shape, planned);
  log.info("memory plan: " + format_bytes(static_cast<double>(plan.total())) + " per rank" +
           (planned.pp > 1 ? " (pipeline stage " + std::to_string(plan.stage) + ")" : "") + ": " +
           describe_memory_plan(plan));
  check_memory_limit(config, plan, planned);
  return plan;
}

}  // namespace trellis
