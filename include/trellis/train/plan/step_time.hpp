// The predicted time of one optimizer step of a layout on a machine type, from the model's work
// (train/model/model_work.hpp) and the machine's calibrated rates (machine_type.hpp):
//  - compute: each unit's GEMMs at the efficiency of their smallest dimension, attention and
//    convolutions at theirs, element-wise passes at the memory bandwidth, the tensor-parallel
//    collectives the layers issue; memory.recompute = full reruns the blocks' forward in
//    backward, selective the attention core's;
//  - the pipeline: the stages (stage_boundaries(), as training splits them) run the schedule's
//    forward/backward order (warmup_forwards(), as the engine does) with the activations sent
//    between them, simulated micro-batch by micro-batch, so imbalance and the bubble come out
//    of it rather than out of (p - 1) / (M + p - 1);
//    CPU ranks that outnumber the node's CPUs (MachineType::cpus_per_node) take turns on
//    them, so there a pipeline step takes the larger of the ranks' mean busy time and the
//    simulated schedule shortened by the ranks' share of a CPU;
//  - the data-parallel exchange: the collectives the layout issues (plan_collectives.hpp), or
//    the node shared-memory exchange of CPU ranks, the part the machine's comm_overlap does
//    not hide of what runs during backward;
//  - the optimizer: its state read and written once at the memory bandwidth, over this
//    rank's shard with ZeRO.
// Collectives follow the alpha-beta model: ring all-reduce 2 (p - 1) alpha + 2 (p - 1) / p
// bytes / beta, reduce-scatter and all-gather half that, a send alpha + bytes / beta, over the
// node's links when the group fits in a node (tp always; dp and pp by the grid's rank order,
// comm/grid_layout.hpp) and the inter-node link otherwise.
#pragma once

#include "trellis/parallel/pipeline_schedule.hpp"
#include "trellis/train/model/model_work.hpp"
#include "trellis/train/monitoring/step_record.hpp"
#include "trellis/train/plan/machine_type.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

struct PlanLayout {
  int nodes = 1;
  int dp = 1, tp = 1, pp = 1;
  std::int64_t micro_batch = 1;
  int zero = 0;
  std::string recompute = "none";  // none | selective | full
  std::string precision = "fp32";  // fp32 | bf16 | fp16
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  bool sequence_parallel = false;
  int devices() const { return dp * tp * pp; }
};

struct StepInputs {
  std::int64_t global_batch = 0;
  std::vector<int> stage_bounds;     // [pp + 1] units per stage (stage_boundaries())
  int optimizer_state_buffers = 2;   // floats of state per parameter (optim/optimizer.hpp)
  double grad_wire_bytes = 4;        // parallel.grad_dtype: 4 fp32, 2 bf16 / fp16
  bool cpu_shared_exchange = false;  // dp gradients summed in node shared memory (CPU ranks)
  double gather_wire_bytes = 4;      // parallel.zero_gather_dtype: ZeRO-3's parameter gathers
  double bucket_bytes = 25 << 20;    // parallel.bucket_mb
};

struct StepPrediction {
  double compute_s = 0;   // forward + backward on the slowest stage, all micro-batches
  double tp_comm_s = 0;   // of which tensor-parallel collectives
  double pipeline_s = 0;  // pipeline idle time and transfers on top of the stage's compute
  double dp_comm_s = 0;   // exposed data-parallel exchange
  double optimizer_s = 0;
  double total_s = 0;
  int micro_batches = 0;
  StepCollectives collectives;  // what the first stage's rank issues (plan_collectives.hpp)
};

// ConfigError when the batch does not split (global_batch not a multiple of dp x micro_batch).
StepPrediction predict_step(const ModelWork& work, const PlanLayout& layout,
                            const StepInputs& inputs, const MachineType& machine);

// Alpha-beta times, in seconds, of one collective of `bytes` (the whole tensor) over `ranks`.
// tally_seconds: every collective of a tally (calls x alpha + bytes x beta).
double tally_seconds(const CollectiveTally& tally, int ranks, const LinkSpec& link);
double all_reduce_seconds(double bytes, int ranks, const LinkSpec& link);
double all_gather_seconds(double bytes, int ranks, const LinkSpec& link);  // = reduce-scatter
double send_seconds(double bytes, const LinkSpec& link);

// The makespan of one step of a pipeline: stage s runs each micro-batch's forward in forward[s]
// and backward in backward[s] seconds, in the schedule's order; a transfer takes `transfer`.
double pipeline_makespan(PipelineSchedule schedule, const std::vector<double>& forward,
                         const std::vector<double>& backward, int micro_batches, double transfer);

}  // namespace trellis
