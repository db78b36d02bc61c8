// Pipeline parallelism, the arithmetic: which units each stage holds, and in which order a
// stage runs the forward and backward passes of the micro-batches of one optimizer step.
//
// Schedules (M micro-batches, p stages, stage s):
//   gpipe  all M forwards, then all M backwards (Huang et al. 2019). Every stage keeps M
//          micro-batches' activations.
//   1f1b   min(p - s - 1, M) warm-up forwards, then one forward and one backward alternately,
//          then the remaining backwards (PipeDream-flush / Megatron-LM's default): at most
//          p - s micro-batches in flight, so activation memory no longer grows with M.
// Both have the same bubble: (p - 1) / (M + p - 1) of a step is idle on each stage when every
// stage costs the same, and both give the same gradients (the sum over micro-batches).
#pragma once

#include <string>
#include <vector>

namespace trellis {

enum class PipelineSchedule { gpipe, one_f_one_b };

// "gpipe" | "1f1b"; ConfigError naming parallel.schedule otherwise.
PipelineSchedule parse_pipeline_schedule(const std::string& name);
const char* pipeline_schedule_name(PipelineSchedule schedule);

// Forwards a stage runs before its first backward.
int warmup_forwards(PipelineSchedule schedule, int stages, int stage, int micro_batches);
// Micro-batches a stage holds at once (activation copies it needs).
int in_flight(PipelineSchedule schedule, int stages, int stage, int micro_batches);
// (p - 1) / (M + p - 1): the idle fraction of an evenly balanced pipeline.
double bubble_fraction(int stages, int micro_batches);

// Contiguous split of units with the given costs over `stages`, each stage at least one unit,
// minimising the most expensive stage. Returns boundaries [stages + 1]: stage s holds units
// [b[s], b[s + 1]). ConfigError naming parallel.pp when there are fewer units than stages.
std::vector<int> balance_stages(const std::vector<double>& costs, int stages);

// parallel.stages = "2,1,1": units per stage, in order; must sum to `units` with `stages`
// positive entries (ConfigError naming parallel.stages otherwise). Empty: balance_stages.
std::vector<int> stage_boundaries(const std::string& sizes, const std::vector<double>& costs,
                                  int stages);

}  // namespace trellis
