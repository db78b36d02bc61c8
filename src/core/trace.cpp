#include "trellis/core/trace.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#if defined(TRELLIS_ENABLE_CUDA)
#include <nvtx3/nvToolsExt.h>
#endif

namespace trellis::trace {

namespace {

using Clock = std::chrono::steady_clock;

// One per thread that has marked a span: only its own thread appends, under its own mutex
// (uncontended but for take_events), so threads never wait on each other while recording.
struct ThreadBuffer {
  std::mutex mutex;
  std::vector<Event> events;
  std::string name;
  int index = 0;
};

struct Registry {
  std::atomic<bool> recording{false};
  std::atomic<std::int64_t> epoch_ns{Clock::now().time_since_epoch().count()};
  std::atomic<std::int64_t> next_async_id{1};
  std::mutex mutex;  // guards buffers
  std::vector<std::unique_ptr<ThreadBuffer>> buffers;
};

Registry& registry() {
  static Registry r;  // the process's timeline, as NVTX's: not state of the process grid
  return r;
}

ThreadBuffer& this_thread_buffer() {
  thread_local ThreadBuffer* buffer = nullptr;
  if (buffer == nullptr) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.buffers.push_back(std::make_unique<ThreadBuffer>());
    buffer = r.buffers.back().get();
    buffer->index = static_cast<int>(r.buffers.size()) - 1;
    buffer->name = "thread " + std::to_string(buffer->index);
  }
  return *buffer;
}

void record(const char* category, const char* name, double begin_us, double end_us,
            std::int64_t arg, const char* arg_name, std::int64_t async_id = 0) {
  ThreadBuffer& buffer = this_thread_buffer();
  std::lock_guard<std::mutex> lock(buffer.mutex);
  buffer.events.push_back(
      {category, name, begin_us, end_us - begin_us, arg, arg_name, buffer.index, async_id});
}

}  // namespace

void set_recording(bool on) { registry().recording.store(on, std::memory_order_relaxed); }
bool recording() { return registry().recording.load(std::memory_order_relaxed); }

void set_epoch() {
  registry().epoch_ns.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

double now_us() {
  const std::int64_t ns =
      Clock::now().time_since_epoch().count() - registry().epoch_ns.load(std::memory_order_relaxed);
  return static_cast<double>(ns) * 1e-3;
}

void name_thread(const char* name) {
  ThreadBuffer& buffer = this_thread_buffer();
  std::lock_guard<std::mutex> lock(buffer.mutex);
  buffer.name = name;
#if defined(TRELLIS_ENABLE_CUDA)
  nvtxNameOsThreadA(0, name);  // 0: the calling thread, as NVTX documents for OS thread ids
#endif
}

Span::Span(const char* category, const char* name, std::int64_t arg, const char* arg_name)
    : category_(category), name_(name), arg_(arg), arg_name_(arg_name) {
#if defined(TRELLIS_ENABLE_CUDA)
  nvtxRangePushA(name);
#endif
  if (recording()) begin_us_ = now_us();
}

Span::~Span() { end(); }

void Span::end() {
  if (!open_) return;
  open_ = false;
#if defined(TRELLIS_ENABLE_CUDA)
  nvtxRangePop();
#endif
  if (begin_us_ >= 0) record(category_, name_, begin_us_, now_us(), arg_, arg_name_);
}

void complete_async(const char* category, const char* name, double begin_us, std::int64_t arg,
                    const char* arg_name) {
  if (!recording() || begin_us < 0) return;
  const std::int64_t id = registry().next_async_id.fetch_add(1, std::memory_order_relaxed);
  record(category, name, begin_us, now_us(), arg, arg_name, id);
}

std::vector<Event> take_events() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<Event> all;
  for (auto& buffer : r.buffers) {
    std::lock_guard<std::mutex> buffer_lock(buffer->mutex);
    all.insert(all.end(), buffer->events.begin(), buffer->events.end());
    buffer->events.clear();
  }
  return all;
}

std::vector<std::string> thread_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (auto& buffer : r.buffers) {
    std::lock_guard<std::mutex> buffer_lock(buffer->mutex);
    names.push_back(buffer->name);
  }
  return names;
}

}  // namespace trellis::trace
