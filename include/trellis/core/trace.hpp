// Timeline spans for a Chrome trace / Perfetto JSON (monitor.trace, written by
// train/monitoring/trace_writer) and, on CUDA builds, NVTX ranges that Nsight Systems shows.
//
// Process-wide, as NVTX itself is: any layer marks a span without a recorder threaded through
// its calls. Recording is off unless the trainer turns it on for the steps of
// monitor.trace_steps; a span then costs one relaxed atomic load (plus an NVTX push/pop on
// CUDA builds, which are no-ops without a tool attached). Names and categories must be string
// literals: events keep the pointers, so recording allocates only when a thread's buffer grows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trellis::trace {

struct Event {
  const char* category;  // e.g. "step", "compute", "comm", "io"
  const char* name;
  double begin_us;  // since the epoch (set_epoch)
  double duration_us;
  std::int64_t arg;       // micro-batch, bucket or step index; -1: none
  const char* arg_name;   // what arg is ("micro_batch", "bucket", "step"), or nullptr
  int thread;             // index into thread_names()
  std::int64_t async_id;  // > 0: an asynchronous span (its own row, may overlap others)
};

// Starts or stops recording (the trainer, at step boundaries).
void set_recording(bool on);
bool recording();
// Time zero of this process's events; the trainer sets it right after a barrier, so that the
// ranks' timelines line up to within the barrier's skew.
void set_epoch();
double now_us();
// Names the calling thread's track ("main", "loader", "watchdog").
void name_thread(const char* name);

// A span over a scope.
class Span {
 public:
  Span(const char* category, const char* name, std::int64_t arg = -1,
       const char* arg_name = nullptr);
  ~Span();
  // Ends the span before the scope does (for phases that follow one another in one scope).
  void end();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  const char* category_;
  const char* name_;
  std::int64_t arg_;
  const char* arg_name_;
  double begin_us_ = -1;  // -1: not recording when it began
  bool open_ = true;
};

// An asynchronous span whose start was taken earlier with now_us() (a gradient bucket's
// reduction, from launch to completion, overlapping backward and other buckets): drawn on a
// row of its own. begin_us < 0 (taken while not recording): nothing.
void complete_async(const char* category, const char* name, double begin_us, std::int64_t arg,
                    const char* arg_name);

// Every thread's recorded events (then cleared), and the track names by thread index.
std::vector<Event> take_events();
std::vector<std::string> thread_names();

}  // namespace trellis::trace
