#include "trellis/train/faults/watchdog.hpp"

#include "trellis/core/trace.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

namespace trellis {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best effort: the process ends next whether or not stderr takes the message.
void write_stderr(const char* text, int length, std::size_t capacity) {
  if (length <= 0) return;
  const auto size =
      static_cast<std::size_t>(length) < capacity ? static_cast<std::size_t>(length) : capacity - 1;
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, text, size);
}

}  // namespace

Watchdog::Watchdog(double timeout_s, int rank) : timeout_s_(timeout_s), rank_(rank) {
  if (timeout_s_ > 0) thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::beat(const char* phase, std::int64_t step) {
  phase_.store(phase);
  if (step >= 0) step_.store(step);
  last_beat_.store(now_seconds());
}

void Watchdog::attach(std::unique_ptr<PeerHeartbeats> heartbeats) {
  if (timeout_s_ <= 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    heartbeats_ = std::move(heartbeats);
  }
  wake_.notify_all();
}

void Watchdog::pause() { last_beat_.store(0.0); }

void Watchdog::watch() {
  trace::name_thread("watchdog");
  std::unique_lock<std::mutex> lock(mutex_);
  // With heartbeats: wake 4 times per timeout, so a record is never older than a quarter of
  // it while this process lives; a peer is called lost after 3 missed records.
  const double heartbeat_period = std::max(timeout_s_ / 4, 0.25);
  for (;;) {
    const double period = heartbeats_ ? std::min(heartbeat_period, timeout_s_ / 2) : timeout_s_ / 2;
    if (wake_.wait_for(lock, std::chrono::duration<double>(period), [this] { return stopping_; }))
      return;
    if (heartbeats_) heartbeats_->write(step_.load(), phase_.load());
    const double last = last_beat_.load();
    if (last <= 0.0 || now_seconds() - last < timeout_s_) continue;
    char message[256];
    const int length = std::snprintf(
        message, sizeof message,
        "[rank %d] error: watchdog: no progress for %.0f s (fault.timeout_s) in phase '%s' at "
        "step %lld: another rank has probably died or hangs; aborting the job\n",
        rank_, now_seconds() - last, phase_.load(), static_cast<long long>(step_.load()));
    write_stderr(message, length, sizeof message);
    int status = kWatchdogExitCode;
    if (heartbeats_) {
      const double stale_s = 3 * heartbeat_period + 0.5;
      const std::string lost = heartbeats_->describe_lost(stale_s);
      std::string text = "[rank " + std::to_string(rank_) + "] watchdog: " +
                         (lost.empty() ? std::string("every peer's heartbeat is current: a "
                                                     "rank hangs rather than died")
                                       : "ranks lost (heartbeats stopped):\n" + lost) +
                         "\n";
      write_stderr(text.data(), static_cast<int>(text.size()), text.size() + 1);
      if (heartbeats_->record_lost(stale_s)) status = kPeerLostExitCode;
    }
    // From this thread on purpose (the main thread is the one that is stuck), and without MPI
    // (see watchdog.hpp): the launcher ends the other ranks when this one exits.
    ::_exit(status);
  }
}

}  // namespace trellis
