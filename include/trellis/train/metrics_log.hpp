// metrics.jsonl in the run directory: one JSON object per logged step or evaluation, written
// by rank 0 only and flushed per line so that a killed job keeps everything logged so far.
#pragma once

#include "trellis/train/json_line.hpp"

#include <cstdio>
#include <string>

namespace trellis {

class MetricsLog {
 public:
  // Opens (truncates) `path` when `enabled`; otherwise every call is a no-op.
  MetricsLog(const std::string& path, bool enabled);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const JsonLine& line);

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
};

}  // namespace trellis
