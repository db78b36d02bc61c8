// A one-line progress bar for interactive runs (rank 0, stdout is a terminal): epoch, step,
// loss, throughput and ETA, redrawn in place. Batch jobs get the plain periodic log lines
// instead (log.progress = auto decides by isatty).
#pragma once

#include <cstdint>

namespace trellis {

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  // Redraws the line (at most ~10 times a second).
  void update(std::int64_t epoch, std::int64_t step, std::int64_t total_steps, double loss,
              double samples_per_sec, double eta_s);
  // Erases the line, so that a log message starts on a clean line.
  void clear();
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  bool drawn_ = false;
  double last_draw_ = -1.0;
};

// Whether log.progress ("auto" | "bar" | "lines") asks for a bar on this rank.
bool want_progress_bar(const char* mode, int rank);

}  // namespace trellis
