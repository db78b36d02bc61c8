#include "trellis/train/loop/step_runner.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"
#include "trellis/core/timer.hpp"
#include "trellis/core/trace.hpp"
#include "trellis/optim/clip.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace trellis {

namespace {

// Micro-batch k of this rank's part of the global batch, for the pipeline engine. Every rank
// runs the same number of micro-batches, empty ones included (a partial last batch can leave
// a rank fewer samples, or none): layers that synchronise inside forward and backward
// (BatchNorm with model.sync_bn) need every rank in each collective.
class StepBatches : public MicroBatchProvider {
 public:
  StepBatches(const BatchBuffers& buffers, const LocalPart& part, std::int64_t micro,
              std::uint64_t seed, std::int64_t step)
      : buffers_(buffers), part_(part), micro_(micro), seed_(seed), step_(step) {}

  MicroBatch micro_batch(int k) const override {
    const std::int64_t first = std::min(k * micro_, part_.samples);
    const std::int64_t count = std::min(micro_, part_.samples - first);
    MicroBatch mb = buffers_.micro_batch(first, count);
    mb.ctx.seed = seed_;
    mb.ctx.step = step_;
    mb.ctx.first_sample = part_.first_position + first;
    mb.ctx.training = true;
    return mb;
  }

 private:
  const BatchBuffers& buffers_;
  const LocalPart& part_;
  std::int64_t micro_;
  std::uint64_t seed_;
  std::int64_t step_;
};

}  // namespace

StepRunner::StepRunner(const TrainConfig& config, const ProcessGrid& grid, TrainingModel& model,
                       TrainSource& data, BatchBuffers& buffers, const FaultInjector& faults,
                       Pruner& pruner, const Logger& log)
    : config_(config),
      grid_(grid),
      model_(model),
      data_(data),
      buffers_(buffers),
      faults_(faults),
      pruner_(pruner),
      log_(log) {}

// Sums over this rank's part of the batch, reduced over the grid into the global batch's.
struct StepRunner::BatchSums {
  double loss_sum = 0;  // from the last pipeline stage; 0 on the others
  double correct = 0;   // correct predictions, likewise
  double targets = 0;   // loss terms: samples x rows per sample
  double samples = 0;
};

StepRecord StepRunner::run(std::int64_t epoch, std::int64_t step_in_epoch) {
  // Spans over the same stretches as the phase times of the record (docs/monitoring.md).
  trace::Span step_span("step", "step", completed_ + 1, "step");
  Stopwatch whole;
  StepRecord record;
  record.epoch = epoch;
  record.step = completed_ + 1;
  record.lr = model_.schedule().lr(completed_);
  const StepCollectives issued_before = issued();

  Stopwatch phase;
  trace::Span data_span("io", "data");
  const LocalPart part = data_.load(epoch, step_in_epoch, completed_, buffers_);
  buffers_.upload(part.samples);
  record.times.data += phase.fenced_seconds();
  data_span.end();

  faults_.before_step(record.step);
  trace::Span compute_span("compute", "forward + backward");
  BatchSums sums = forward_backward(part, record);
  compute_span.end();
  phase.restart();
  trace::Span reduce_span("comm", "gradient reduction (exposed)");
  reduce_gradients(sums);
  record.times.comm += phase.seconds();
  reduce_span.end();

  const trace::Span optimizer_span("optimizer", "optimizer");
  phase.restart();
  record.loss_sum = sums.loss_sum;
  record.correct = sums.correct;
  record.targets = sums.targets;
  record.samples = sums.samples;
  const FloatView grads = model_.sync().update_grads();
  pruner_.mask_gradients(grads);  // pruned weights get no gradient, nor a share of the norm
  const double scaled_norm = global_norm(grads);
  record.grad_norm = scaled_norm / static_cast<double>(record.loss_scale);
  record.grad_wire_bytes = model_.sync().wire_bytes_per_step();
  record.grad_fp32_bytes = model_.sync().fp32_bytes_per_step();
  ++completed_;
  // A NaN or infinity anywhere reaches every rank through the reduced loss and the global
  // norm, so all ranks decide alike here, before anything is updated.
  const bool nonfinite = !std::isfinite(record.loss_sum) || !std::isfinite(scaled_norm);
  // The loss scaler takes an overflow while it can still back off; at its floor, or without
  // a dynamic scaler, a non-finite step is a divergence for fault.nonfinite.
  LossScaler& scaler = model_.loss_scaler();
  if (scaler.update(nonfinite)) {
    overflow_skip(record, scaler.scale());
  } else if (nonfinite) {
    skip(record);
  }
  record.overflow_steps = scaler.state().overflows;
  if (nonfinite) {
    // The masks follow the schedule even when its step is skipped (the end step included).
    if (pruner_.after_step(completed_)) {
      record.masks_changed = true;
      model_.parameters_loaded(completed_);  // ZeRO-3: the masked shard gathered again
    }
    record.times.optimizer += phase.seconds();
  } else {
    consecutive_skips_ = 0;
    update(record, grads, phase);
  }
  record.times.total = whole.seconds();
  const StepCollectives issued_after = issued();
  record.collectives = {issued_after.tp - issued_before.tp, issued_after.dp - issued_before.dp,
                        issued_after.pp - issued_before.pp,
                        issued_after.embedding - issued_before.embedding};
  last_collectives_ = record.collectives;
  return record;
}

StepCollectives StepRunner::issued() const {
  return {grid_.tally(Axis::tp), grid_.tally(Axis::dp), grid_.tally(Axis::pp),
          grid_.embedding_tally()};
}

StepRunner::BatchSums StepRunner::forward_backward(const LocalPart& part, StepRecord& record) {
  const nn::Model& model = model_.model();
  model_.store().zero_grads();
  const std::int64_t rows_per_sample = model.rows_per_sample();
  // Mean over the global batch's targets: every rank scales by the same 1/(b x rows per
  // sample), so the dp sum of gradients is the global mean.
  float scale = 1.0f / static_cast<float>(part.global_samples * rows_per_sample);
  // Loss scaling (fp16): every gradient carries the factor S until the optimizer divides it
  // out; bit-exact for power-of-two S.
  const LossScaler& scaler = model_.loss_scaler();
  record.loss_scale = scaler.scale();
  if (scaler.enabled()) scale *= record.loss_scale;
  if (faults_.poison_step(record.step)) scale = std::numeric_limits<float>::quiet_NaN();
  const StepBatches batches(buffers_, part, config_.micro_batch(), config_.train.seed, completed_);
  StageTimes stage_times;
  Communicator& tp = grid_.communicator(Axis::tp);
  const double tp_blocked_before = tp.blocked_seconds();
  GradientSync& sync = model_.sync();
  sync.set_step(completed_);
  const StageSums stage_sums = model_.engine().train(
      batches, static_cast<int>(config_.accumulation_steps(grid_.dp().size())), scale, sync,
      stage_times);
  // The tp all-reduces run inside the layers, so inside the engine's compute time: move them.
  const double tp_comm = tp.blocked_seconds() - tp_blocked_before;
  record.times.compute += stage_times.compute - tp_comm;
  record.times.tp_comm += tp_comm;
  record.times.pipeline += stage_times.p2p;
  BatchSums sums;
  sums.loss_sum = stage_sums.loss_sum;
  sums.correct = stage_sums.correct;
  sums.targets = static_cast<double>(part.samples * rows_per_sample);
  sums.samples = static_cast<double>(part.samples);
  return sums;
}

// Exposed communication: what the overlap with backward did not hide.
void StepRunner::reduce_gradients(BatchSums& sums) {
  nn::ParameterStore& store = model_.store();
  for (const std::string& name : model_.tied()) {  // the GPT's token table, first + last stage
    const kernels::Vector grad = store.grad_vector(store.index(name));
    grid_.embedding_group()->all_reduce(grad.data(), grad.extent(0), ReduceOp::sum);
  }
  model_.sync().finish_reduction();
  // Loss and correct predictions come from the last stage (sum over pp), then all four over dp.
  double packed[4] = {sums.loss_sum, sums.correct, sums.targets, sums.samples};
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, packed, 2, MPI_DOUBLE, MPI_SUM, grid_.pp().get()));
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, packed, 4, MPI_DOUBLE, MPI_SUM, grid_.dp().get()));
  sums = BatchSums{packed[0], packed[1], packed[2], packed[3]};
}

// The global norm of the (loss-scaled) gradients: each rank's masked share, summed over the tp
// group and the pipeline stages, and over dp when ZeRO-1 left each dp rank a shard (otherwise
// the reduced gradients are equal over dp).
double StepRunner::global_norm(const FloatView& grads) const {
  double sum_of_squares = model_.norm_mask().sum_of_squares(grads);
  TRELLIS_MPI(
      MPI_Allreduce(MPI_IN_PLACE, &sum_of_squares, 1, MPI_DOUBLE, MPI_SUM, grid_.tp().get()));
  TRELLIS_MPI(
      MPI_Allreduce(MPI_IN_PLACE, &sum_of_squares, 1, MPI_DOUBLE, MPI_SUM, grid_.pp().get()));
  if (model_.sync().sharded())
    TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, &sum_of_squares, 1, MPI_DOUBLE, MPI_SUM,
                              model_.shard_group().get()));
  return std::sqrt(sum_of_squares);
}

// Clipping and unscaling ride in the update pass: the optimizer multiplies each gradient by
// clip / S as it reads it (1 when neither applies), the same floats as clipping in place.
void StepRunner::update(StepRecord& record, const FloatView& grads, Stopwatch& phase) {
  GradientSync& sync = model_.sync();
  float multiplier = clip_coefficient(record.grad_norm, config_.optim.clip_norm);
  if (model_.loss_scaler().enabled()) multiplier *= 1.0f / record.loss_scale;
  model_.optimizer().step(sync.update_windows(), grads, record.lr, multiplier);
  pruner_.mask_updated_params(sync.update_windows());
  record.times.optimizer += phase.fenced_seconds();
  phase.restart();
  // The pruner sees whole pieces after ZeRO-1/2's all-gather; ZeRO-3's masks are made from
  // the shard before the outer ranges are gathered from it.
  const bool sharded_params = sync.params_sharded();
  if (sharded_params) record.masks_changed = pruner_.after_step(completed_);
  sync.finish_update();  // ZeRO-1: all-gather the updated shards
  record.times.comm += phase.seconds();
  phase.restart();
  if (!sharded_params) record.masks_changed = pruner_.after_step(completed_);
  model_.parameters_changed(completed_);  // the 16-bit compute copy, with autocast
  record.times.optimizer += phase.fenced_seconds();
}

void StepRunner::overflow_skip(StepRecord& record, float new_scale) {
  ++skipped_;
  record.skipped = true;
  const std::int64_t overflows = model_.loss_scaler().state().overflows;
  if (grid_.rank() == 0)
    log_.info("step " + std::to_string(record.step) + ": gradients overflowed at loss scale " +
              format_text("%g", record.loss_scale) + ", step skipped; scale now " +
              format_text("%g", new_scale) + " (" + std::to_string(overflows) +
              " overflow steps so far)");
}

void StepRunner::skip(StepRecord& record) {
  ++skipped_;
  ++consecutive_skips_;
  const std::string message = std::string("non-finite ") +
                              (std::isfinite(record.loss_sum) ? "gradients" : "loss") +
                              " at step " + std::to_string(record.step);
  if (!config_.fault.skip_nonfinite)
    throw Error(message + " (fault.nonfinite = abort; lower optim.lr or set optim.clip_norm)");
  if (consecutive_skips_ > config_.fault.max_skips)
    throw Error(
        message + ": " + std::to_string(consecutive_skips_) +
        " steps in a row, more than fault.max_skips = " + std::to_string(config_.fault.max_skips) +
        " (lower optim.lr or set optim.clip_norm)");
  if (grid_.rank() == 0)
    log_.warn(message + ": step skipped, parameters unchanged (" +
              std::to_string(consecutive_skips_) + " in a row, " + std::to_string(skipped_) +
              " in total)");
  record.skipped = true;
}

}  // namespace trellis
