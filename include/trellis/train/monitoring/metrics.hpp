// Metrics: turns the step records into the reports every sink receives (metrics_sink.hpp).
// It sums the records of each log interval (log.interval steps, and the run's last step),
// adds throughput, FLOP/s, MFU, memory, cost and ETA from the performance model, and hands
// the same report to each sink. Sinks exist on world rank 0 only; the other ranks keep the
// books (the budget needs the cost everywhere) and emit nothing.
#pragma once

#include "trellis/core/timer.hpp"
#include "trellis/train/monitoring/gpu_telemetry.hpp"
#include "trellis/train/monitoring/metrics_sink.hpp"
#include "trellis/train/monitoring/performance_model.hpp"
#include "trellis/train/monitoring/step_record.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace trellis {

class Metrics {
 public:
  // first_step: where this run starts (a resumed run: its checkpoint's step); tokens_per_sample:
  // rows per sample of a language model, 0 for classifiers.
  Metrics(const PerformanceModel& performance, std::int64_t log_interval, std::int64_t first_step,
          std::int64_t total_steps, std::int64_t tokens_per_sample, int device);

  void add_sink(std::unique_ptr<MetricsSink> sink) { sinks_.push_back(std::move(sink)); }

  // After every step: the progress bar, and an interval report when one is due.
  void step(const StepRecord& record, std::int64_t skipped_total);
  void evaluation(const EvalReport& report);
  void checkpoint(const CheckpointReport& report);  // its time counts in the totals
  void sparsity(const SparsityReport& report);
  // Fills in the whole run's throughput, FLOP/s, MFU, time per step and cost.
  void summary(RunSummary& summary) const;
  void before_message();

  // The run's wall time and cost so far (the budget), on every rank.
  double elapsed_seconds() const { return run_watch_.seconds(); }
  CostEstimate cost_so_far() const;
  const GpuTelemetry& gpu() const { return gpu_; }

 private:
  const PerformanceModel& performance_;
  std::int64_t log_interval_, first_step_, total_steps_, tokens_per_sample_;
  std::int64_t last_step_ = 0;
  std::vector<std::unique_ptr<MetricsSink>> sinks_;
  GpuTelemetry gpu_;
  Stopwatch run_watch_;
  Stopwatch since_first_step_;  // throughput leaves out the first step's one-time costs
  std::int64_t samples_after_first_ = 0;
  StepRecord interval_;  // sums since the last report (times, loss terms, samples)
  std::int64_t interval_steps_ = 0;
  double interval_targets_ = 0;  // loss terms of the interval's finite steps
  StepTimes totals_;             // the whole run
  std::int64_t total_steps_run_ = 0;
};

}  // namespace trellis
