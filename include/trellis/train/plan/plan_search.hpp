// The planner's search (`trellis plan`): every layout of a training configuration on every
// machine type of a cluster file — node count, dp x tp x pp with tp inside a node, micro-batch,
// ZeRO stage, recomputation, sequence parallelism, pipeline schedule — with its memory per
// rank from the memory plan (train/config/memory_plan.hpp: the code that sizes the
// allocations), its step time (step_time.hpp), the time to the target and its cost on demand
// and on spot (run_cost.hpp). The global batch, the model and the optimizer are the
// configuration's: a plan changes how a run is laid out, not what it computes.
#pragma once

#include "trellis/data/data_shape.hpp"
#include "trellis/train/config/memory_plan.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/plan/machine_type.hpp"
#include "trellis/train/plan/run_cost.hpp"
#include "trellis/train/plan/step_time.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

struct PlanRequest {
  TrainConfig config;  // as given (its parallel.*, memory.recompute, micro-batch are searched)
  DataShape data;
  double target_samples = 0;            // samples to train on (steps x global batch)
  double deadline_hours = 0;            // 0: none
  double budget_usd = 0;                // 0: none
  std::vector<std::string> precisions;  // searched; empty: the configuration's
  std::int64_t max_micro_batch = 64;
  // Headroom kept free on each device (allocator fragmentation, library workspaces, the
  // CUDA context): a plan fits when its memory is at most (1 - headroom) of the device's.
  double memory_headroom = 0.05;
};

struct Plan {
  const MachineType* machine = nullptr;
  PlanLayout layout;
  MemoryPlan memory;
  bool fits = false;
  std::string reason;  // why not, with what would help
  StepPrediction step;
  double steps = 0;
  double hours = 0;  // on demand, no interruption
  double cost_on_demand = 0;
  int begin_hour = -1;  // the cheaper start (price windows); -1: any
  double begin_saving = 0;
  bool spot = false;  // the machine offers spot
  SpotRun spot_run;
  double cost_spot = 0;
  double checkpoint_bytes = 0;
  bool pareto = false;  // no other plan is both faster and cheaper on demand
};

struct PlanResult {
  std::vector<Plan> plans;  // fitting plans cheapest first, then the ones that do not fit
  int cheapest = -1, fastest = -1;
  int chosen = -1;           // cheapest (on demand or spot) within the deadline and budget
  bool chosen_spot = false;  // chosen runs on spot
  std::string chosen_why;
};

// ConfigError for a request that cannot be planned (no machine type, a model that cannot be
// built). Layouts that do not fit or do not split are kept with their reason.
PlanResult search_plans(const PlanRequest& request, const std::vector<MachineType>& machines);

// Prices the fitting plans of `result` (steps to the target, hours, cost on demand with the
// cheapest start, spot with the Young/Daly interval; the checkpoint holds model_params fp32
// weights and state_buffers floats of optimizer state per parameter), marks the Pareto front,
// orders them cheapest first (the misfits after) and picks the cheapest, the fastest and the
// chosen one.
void price_and_rank(const PlanRequest& request, double model_params, int state_buffers,
                    PlanResult& result);

// The configuration of `plan`: request.config with the plan's keys set.
TrainConfig plan_config(const TrainConfig& config, const Plan& plan);
// "--parallel.tp=2 --train.micro_batch=4 ..." (only the keys the plan changes or sets).
std::vector<std::string> plan_overrides(const TrainConfig& config, const Plan& plan);

}  // namespace trellis
