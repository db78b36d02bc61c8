// monitor.trace: the ranks' recorded spans (core/trace) as one Chrome trace / Perfetto JSON
// file, one process per rank and one track per thread (main, loader, watchdog), opened by
// ui.perfetto.dev or chrome://tracing. TraceWindow turns recording on for the steps of
// monitor.trace_steps and writes the file once they are done (or the run ends first).
#pragma once

#include "trellis/comm/process_grid.hpp"
#include "trellis/train/config/train_config.hpp"

#include <cstdint>
#include <string>

namespace trellis {

class TraceWindow {
 public:
  // Checks monitor.trace_steps ("first:last", 1-based optimizer steps; ConfigError otherwise).
  // `steps_done`: the steps a resumed run has already made. Collective (a barrier lines up the
  // ranks' clocks) when monitor.trace is set.
  TraceWindow(const MonitorConfig& config, const ProcessGrid& grid, std::int64_t steps_done);

  // Before optimizer step `step` (1-based) starts: records while first <= step <= last;
  // writes the file once step passes last. Collective.
  void before_step(std::int64_t step);
  // The run is over: writes the file if the window opened and it is not written yet.
  // Collective.
  void finish();

  bool enabled() const { return !path_.empty(); }

 private:
  void write();

  std::string path_;  // the JSON file ("" = off)
  std::int64_t first_ = 0, last_ = 0;
  const ProcessGrid& grid_;
  bool opened_ = false, written_ = false;
};

// Parses "first:last" (1 <= first <= last); throws ConfigError naming the key otherwise.
void parse_trace_steps(const std::string& text, std::int64_t& first, std::int64_t& last);

}  // namespace trellis
