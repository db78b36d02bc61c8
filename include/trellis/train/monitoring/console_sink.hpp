// The console (a MetricsSink, metrics_sink.hpp): periodic lines or a progress bar, and the
// closing summary.
#pragma once

#include "trellis/core/log.hpp"
#include "trellis/train/monitoring/metrics_sink.hpp"
#include "trellis/train/monitoring/progress.hpp"

#include <cstdint>
#include <string>

namespace trellis {
// The console: a log line per interval (or a progress bar redrawn every step), evaluation and
// checkpoint lines, the closing summary.
class ConsoleSink : public MetricsSink {
 public:
  ConsoleSink(const Logger& log, bool progress_bar) : log_(log), bar_(progress_bar) {}
  void interval(const IntervalReport& r) override;
  void progress(const ProgressReport& r) override;
  void evaluation(const EvalReport& r) override;
  void checkpoint(const CheckpointReport& r) override;
  void sparsity(const SparsityReport& r) override;
  void summary(const RunSummary& r) override;
  void before_message() override { bar_.clear(); }

 private:
  Logger log_;
  ProgressBar bar_;
};

}  // namespace trellis
