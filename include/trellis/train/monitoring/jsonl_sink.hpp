// metrics.jsonl and summary.json in the run directory (a MetricsSink, metrics_sink.hpp).
#pragma once

#include "trellis/train/monitoring/json_line.hpp"
#include "trellis/train/monitoring/metrics_sink.hpp"

#include <cstdint>
#include <cstdio>
#include <string>

namespace trellis {

// metrics.jsonl itself: one JSON object per logged step or evaluation, written by rank 0 only
// and flushed per line so that a killed job keeps everything logged so far.
class MetricsLog {
 public:
  // Opens `path` when `enabled`; otherwise every call is a no-op. resumed_step < 0: a new log
  // (truncated). Otherwise a resumed run continues the existing log: lines of steps after
  // resumed_step (written by the interrupted run after its last checkpoint) are dropped, so
  // the log reads as one uninterrupted run.
  MetricsLog(const std::string& path, bool enabled, std::int64_t resumed_step = -1);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const JsonLine& line);

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
};

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

}  // namespace trellis
