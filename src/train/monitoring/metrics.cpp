#include "trellis/train/monitoring/metrics.hpp"

#include <algorithm>
#include <cmath>

#ifdef TRELLIS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace trellis {

namespace {

std::optional<std::int64_t> device_memory_used() {
#ifdef TRELLIS_ENABLE_CUDA
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
    return static_cast<std::int64_t>(total_bytes - free_bytes);
#endif
  return std::nullopt;
}

StepTimes per_step(StepTimes t, std::int64_t steps) {
  const double n = static_cast<double>(std::max<std::int64_t>(steps, 1));
  t.data /= n, t.compute /= n, t.tp_comm /= n, t.pipeline /= n, t.comm /= n;
  t.optimizer /= n, t.checkpoint /= n, t.total /= n;
  return t;
}

}  // namespace

Metrics::Metrics(const PerformanceModel& performance, std::int64_t log_interval,
                 std::int64_t first_step, std::int64_t total_steps, std::int64_t tokens_per_sample,
                 int device)
    : performance_(performance),
      log_interval_(std::max<std::int64_t>(log_interval, 1)),
      first_step_(first_step),
      total_steps_(total_steps),
      tokens_per_sample_(tokens_per_sample),
      last_step_(first_step),
      gpu_(device) {}

CostEstimate Metrics::cost_so_far() const {
  return performance_.cost(run_watch_.seconds(), last_step_ - first_step_,
                           total_steps_ - first_step_);
}

void Metrics::step(const StepRecord& record, std::int64_t skipped_total) {
  last_step_ = record.step;
  if (record.step == first_step_ + 1)
    since_first_step_.restart();
  else
    samples_after_first_ += static_cast<std::int64_t>(record.samples);
  totals_ += record.times;
  ++total_steps_run_;
  interval_.times += record.times;
  interval_.samples += record.samples;
  ++interval_steps_;
  if (!record.skipped) {  // a skipped step's loss is not a number worth averaging
    interval_.loss_sum += record.loss_sum;
    interval_.correct += record.correct;
    interval_targets_ += record.targets;
  }
  const double interval_rate = interval_.samples / std::max(interval_.times.total, 1e-9);
  const double mean_step = interval_.times.total / static_cast<double>(interval_steps_);
  const double eta = mean_step * static_cast<double>(total_steps_ - record.step);
  for (auto& sink : sinks_)
    sink->progress(
        {record.epoch + 1, record.step, total_steps_, record.loss(), interval_rate, eta});
  if (record.step % log_interval_ != 0 && record.step != total_steps_) return;

  IntervalReport r;
  r.step = record.step;
  r.epoch = record.epoch + 1;
  r.total_steps = total_steps_;
  r.steps = interval_steps_;
  r.loss = interval_targets_ > 0 ? interval_.loss_sum / interval_targets_ : record.loss();
  r.accuracy = interval_targets_ > 0 ? interval_.correct / interval_targets_ : 0.0;
  r.lr = record.lr;
  r.grad_norm = record.grad_norm;
  r.samples_per_sec = interval_.times.total > 0 ? interval_rate : 0.0;
  r.tokens_per_sec = r.samples_per_sec * static_cast<double>(tokens_per_sample_);
  r.step_time_s = mean_step;
  r.per_step = per_step(interval_.times, interval_steps_);
  r.tflops = performance_.tflops(r.samples_per_sec);
  r.mfu = performance_.mfu(r.samples_per_sec);
  r.host_rss_bytes = resident_bytes();
  r.skipped_steps = skipped_total;
  r.loss_scale = record.loss_scale;
  r.overflow_steps = record.overflow_steps;
  r.grad_wire_bytes = record.grad_wire_bytes;
  r.grad_compression =
      record.grad_wire_bytes > 0 ? record.grad_fp32_bytes / record.grad_wire_bytes : 1.0;
  r.cost = cost_so_far();
  r.eta_s = eta;
  r.device_memory_used_bytes = device_memory_used();
  r.memory = process_memory_ledger().snapshot();
  if (!sinks_.empty()) r.gpu = gpu_.sample();  // the writing rank's GPU
  r.show_cost = performance_.price_per_device_hour() > 0;
  for (auto& sink : sinks_) sink->interval(r);
  interval_ = StepRecord{};
  interval_steps_ = 0;
  interval_targets_ = 0;
}

void Metrics::evaluation(const EvalReport& report) {
  for (auto& sink : sinks_) sink->evaluation(report);
}

void Metrics::checkpoint(const CheckpointReport& report) {
  interval_.times.checkpoint += report.seconds;
  totals_.checkpoint += report.seconds;
  for (auto& sink : sinks_) sink->checkpoint(report);
}

void Metrics::sparsity(const SparsityReport& report) {
  for (auto& sink : sinks_) sink->sparsity(report);
}

void Metrics::before_message() {
  for (auto& sink : sinks_) sink->before_message();
}

void Metrics::summary(RunSummary& s) const {
  const double seconds = run_watch_.seconds();
  const double throughput =
      static_cast<double>(samples_after_first_) / std::max(since_first_step_.seconds(), 1e-9);
  s.ranks = performance_.devices();
  s.first_step = first_step_;
  s.wall_time_s = seconds;
  s.samples_per_sec = throughput;
  s.tokens_per_sec = throughput * static_cast<double>(tokens_per_sample_);
  s.flops_per_sample = performance_.flops_per_sample();
  s.tflops = performance_.tflops(throughput);
  s.peak_tflops_per_device = performance_.peak_tflops();
  s.peak_source = performance_.peak_source();
  s.mfu = performance_.mfu(throughput);
  s.per_step = per_step(totals_, total_steps_run_);
  s.step_time_s = s.per_step.total;
  s.host_rss_bytes = resident_bytes();
  // The run's wall time as reported (not a later clock reading), so the figures agree.
  s.cost = performance_.cost(seconds, 1, 1);
  s.price_per_device_hour = performance_.price_per_device_hour();
  s.spot_price_per_device_hour = performance_.spot_price_per_device_hour();
  for (const auto& sink : sinks_) sink->summary(s);
}

}  // namespace trellis
