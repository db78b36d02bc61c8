// Where the numbers of a run go. One record per logged interval, evaluation, checkpoint and
// run end, built once by Metrics (metrics.hpp) from the step records, and handed to every
// sink: metrics.jsonl + summary.json (JsonlSink), TensorBoard (TensorBoardSink), the console
// (ConsoleSink). A sink only formats; it computes nothing, so all outputs agree.
#pragma once

#include "trellis/core/memory_ledger.hpp"
#include "trellis/train/monitoring/eval_result.hpp"
#include "trellis/train/monitoring/gpu_telemetry.hpp"
#include "trellis/train/monitoring/memory_report.hpp"
#include "trellis/train/monitoring/step_record.hpp"
#include "trellis/train/monitoring/utilisation.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trellis {

// The steps since the previous report.
struct IntervalReport {
  std::int64_t step = 0, epoch = 0, total_steps = 0;  // epoch 1-based
  std::int64_t steps = 0;                             // steps in the interval
  double loss = 0;       // mean over the interval's targets (skipped steps left out)
  double accuracy = 0;   // the same for correct predictions
  double lr = 0;         // the last step's
  double grad_norm = 0;  // the last step's
  double samples_per_sec = 0, tokens_per_sec = 0;
  double step_time_s = 0;  // mean wall time per step
  StepTimes per_step;      // mean seconds per step of each phase
  double tflops = 0, mfu = 0;
  std::int64_t host_rss_bytes = 0;
  std::int64_t skipped_steps = 0;   // over the whole run
  double loss_scale = 1;            // the last step's (1: no loss scaling)
  std::int64_t overflow_steps = 0;  // steps the loss scaler skipped, over the whole run
  double grad_wire_bytes = 0;       // dp gradient bytes sent per step (the last step's)
  double grad_compression = 1;      // fp32 bytes / wire bytes (1: uncompressed or no dp)
  CostEstimate cost;
  double eta_s = 0;
  std::optional<std::int64_t> device_memory_used_bytes;  // CUDA builds
  MemorySnapshot memory;                                 // the writing rank's ledger
  GpuSample gpu;                                         // valid: NVML read this rank's GPU
  bool show_cost = false;                                // prices were set
};

// What the progress bar redraws after every step.
struct ProgressReport {
  std::int64_t epoch = 0, step = 0, total_steps = 0;
  double loss = 0, samples_per_sec = 0, eta_s = 0;
};

struct EvalReport {
  std::int64_t step = 0, epoch = 0;  // epoch 1-based
  EvalResult result;
  double seconds = 0;
  bool tokens = false;  // a language model: bits per token instead of accuracy
};

struct CheckpointReport {
  std::int64_t step = 0;
  std::string dir;
  double seconds = 0;
};

// After the pruning masks changed (train/pruner.hpp): the sparsity of each pruned tensor.
struct LayerSparsity {
  std::string name;           // the parameter, e.g. "fc1.weight"
  std::int64_t pruned = 0;    // zeros in its mask, over the whole logical tensor
  std::int64_t elements = 0;  // its logical size
};
struct SparsityReport {
  std::int64_t step = 0;
  double target = 0;                  // the schedule's sparsity for this step
  double sparsity = 0;                // pruned / elements over all pruned tensors of the model
  std::vector<LayerSparsity> layers;  // this pipeline stage's (rank 0: stage 0)
};

// The whole run, for summary.json and the closing console lines.
struct RunSummary {
  std::int64_t steps = 0;       // the run's, resumed segments included
  std::int64_t first_step = 0;  // where this segment started (a resumed run: its checkpoint)
  // completed | budget | early stop | stopped on a signal | stopped on a time limit
  std::string finish;
  int ranks = 1;
  double wall_time_s = 0, samples_per_sec = 0, tokens_per_sec = 0;
  std::int64_t parameters = 0, parameters_per_rank = 0, optimizer_state_floats_per_rank = 0;
  double pipeline_bubble_fraction = 0;
  double flops_per_sample = 0, tflops = 0, peak_tflops_per_device = 0, mfu = 0;
  std::string peak_source;
  StepTimes per_step;  // mean seconds per step of each phase (checkpoints included)
  StepCollectives collectives_per_step;  // rank 0's, in the last step
  double step_time_s = 0;
  std::int64_t skipped_steps = 0, host_rss_bytes = 0;
  std::string precision;  // "fp32", or e.g. "bf16 (emulated kernels)"
  std::int64_t overflow_steps = 0;
  double loss_scale = 1;  // at the end
  CostEstimate cost;
  double price_per_device_hour = 0, spot_price_per_device_hour = 0;
  std::optional<EvalResult> last_eval;
  std::string weights_path;
  MemoryPeaks memory;         // over the ranks
  MemoryBytes memory_plan{};  // the plan's bytes of the rank that needs the most (memory_plan.hpp)
};

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  virtual void interval(const IntervalReport&) {}
  virtual void progress(const ProgressReport&) {}
  virtual void evaluation(const EvalReport&) {}
  virtual void checkpoint(const CheckpointReport&) {}
  virtual void sparsity(const SparsityReport&) {}
  virtual void summary(const RunSummary&) {}
  // Before a message is printed by someone else (clears a progress bar).
  virtual void before_message() {}
};

}  // namespace trellis
