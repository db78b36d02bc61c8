// The three metrics sinks (metrics_sink.hpp): metrics.jsonl and summary.json, TensorBoard
// event files, and the console (periodic lines or a progress bar, and the closing summary).
#pragma once

#include "trellis/core/log.hpp"
#include "trellis/train/metrics_log.hpp"
#include "trellis/train/metrics_sink.hpp"
#include "trellis/train/progress.hpp"
#include "trellis/train/tensorboard.hpp"

#include <cstdint>
#include <string>

namespace trellis {

// metrics.jsonl (one JSON object per interval, evaluation, checkpoint and change of the
// pruning masks) and summary.json.
class JsonlSink : public MetricsSink {
 public:
  // resumed_step >= 0: continue the log of a resumed run (MetricsLog).
  JsonlSink(const std::string& run_dir, std::int64_t resumed_step);
  void interval(const IntervalReport& r) override;
  void evaluation(const EvalReport& r) override;
  void checkpoint(const CheckpointReport& r) override;
  void sparsity(const SparsityReport& r) override;
  void summary(const RunSummary& r) override;

 private:
  std::string run_dir_;
  MetricsLog log_;
};

// events.out.tfevents.* in run.dir. A fresh (not resumed) run first moves the event files of
// an earlier run in the same directory into run.dir/previous-runs/<n>/, so TensorBoard shows
// that run separately instead of overlaying the two.
class TensorBoardSink : public MetricsSink {
 public:
  TensorBoardSink(const std::string& run_dir, bool resumed, const std::string& config_ini,
                  std::int64_t step, const Logger& log);
  void interval(const IntervalReport& r) override;
  void evaluation(const EvalReport& r) override;
  void sparsity(const SparsityReport& r) override;

 private:
  TensorBoardWriter writer_;
};

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
