// metrics.jsonl in the run directory: one JSON object per logged step or evaluation, written
// by rank 0 only and flushed per line so that a killed job keeps everything logged so far.
#pragma once

#include "trellis/train/json_line.hpp"

#include <cstdint>
#include <cstdio>
#include <string>

namespace trellis {

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

}  // namespace trellis
