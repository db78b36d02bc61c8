// One optimizer step on every rank, the same way for every layout:
//
//   this dp rank's block of the global batch (HDF5 hyperslab reads) -> upload
//   pipeline engine over the micro-batches: forward, loss scaled 1/(global batch targets),
//     backward (grads +=; tp collectives inside the layers); during the last micro-batch the
//     dp buckets start reducing as backward fills them (GradientSync)
//   tied-table gradients summed over the embedding group -> wait for the dp buckets
//   loss/accuracy sums reduced over pp and dp -> global norm (masked, reduced over tp, pp
//     and, with ZeRO-1, dp) -> non-finite policy -> clip -> optimizer at lr(step)
//     -> ZeRO-1 all-gather -> the pruning masks when due -> the 16-bit compute copy of the
//     weights (autocast). Pruned weights' gradients are zeroed before the norm, the weights
//     after the optimizer (pruner.hpp).
//
// Loss scaling (precision.loss_scale, fp16): the backward starts from loss x S; the norm is
// reported unscaled; a non-finite step is an overflow for the scaler (skipped on every rank
// alike, the scale backs off) until the scale reaches its floor, and only then a divergence
// for fault.nonfinite; the optimizer reads gradients x clip / S.
//
// The learning rate is computed once per step, from the 0-based index of the step being
// taken, and reported in the StepRecord with the value the optimizer used.
#pragma once

#include "trellis/comm/process_grid.hpp"
#include "trellis/core/log.hpp"
#include "trellis/core/timer.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/faults/fault_injector.hpp"
#include "trellis/train/input/batch_buffers.hpp"
#include "trellis/train/input/data_source.hpp"
#include "trellis/train/loop/pruner.hpp"
#include "trellis/train/loop/training_model.hpp"
#include "trellis/train/monitoring/step_record.hpp"

#include <cstdint>

namespace trellis {

class StepRunner {
 public:
  // Every reference must outlive the runner.
  StepRunner(const TrainConfig& config, const ProcessGrid& grid, TrainingModel& model,
             TrainSource& data, BatchBuffers& buffers, const FaultInjector& faults, Pruner& pruner,
             const Logger& log);

  // Runs optimizer step `completed + 1` (global batch `step_in_epoch` of `epoch`) and counts
  // it in completed(). Throws (the same on every rank) when fault.nonfinite = abort or too
  // many steps in a row were skipped.
  StepRecord run(std::int64_t epoch, std::int64_t step_in_epoch);

  std::int64_t completed() const { return completed_; }
  std::int64_t skipped() const { return skipped_; }
  // What this rank issued over each axis in the last step run (empty before the first).
  const StepCollectives& last_collectives() const { return last_collectives_; }
  // After a resume: where the run continues.
  void restore(std::int64_t completed, std::int64_t skipped) {
    completed_ = completed;
    skipped_ = skipped;
    consecutive_skips_ = 0;
  }

 private:
  struct BatchSums;
  // Zeroes the gradients and runs forward and backward over the micro-batches (loss scaled
  // 1/targets x S); this rank's sums.
  BatchSums forward_backward(const LocalPart& part, StepRecord& record);
  // Tied tables, the dp buckets, the sums over pp and dp.
  void reduce_gradients(BatchSums& sums);
  double global_norm(const FloatView& grads) const;  // of the loss-scaled gradients
  // Optimizer, ZeRO-1 all-gather, pruning masks, the 16-bit compute copy.
  void update(StepRecord& record, const FloatView& grads, Stopwatch& phase);
  void skip(StepRecord& record);  // the fault.nonfinite policy
  // A loss-scaler overflow: skipped and counted, never against fault.max_skips.
  void overflow_skip(StepRecord& record, float new_scale);
  StepCollectives issued() const;  // the grid's tallies so far

  const TrainConfig& config_;
  const ProcessGrid& grid_;
  TrainingModel& model_;
  TrainSource& data_;
  BatchBuffers& buffers_;
  const FaultInjector& faults_;
  Pruner& pruner_;
  Logger log_;
  std::int64_t completed_ = 0;  // optimizer steps taken (skipped ones included)
  std::int64_t skipped_ = 0, consecutive_skips_ = 0;
  StepCollectives last_collectives_;
};

}  // namespace trellis
