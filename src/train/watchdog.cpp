#include "trellis/train/watchdog.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace trellis {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
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

void Watchdog::beat(const char* phase) {
  phase_.store(phase);
  last_beat_.store(now_seconds());
}

void Watchdog::pause() { last_beat_.store(0.0); }

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto period = std::chrono::duration<double>(timeout_s_ / 2);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    const double last = last_beat_.load();
    if (last <= 0.0 || now_seconds() - last < timeout_s_) continue;
    char message[256];
    const int length = std::snprintf(
        message, sizeof message,
        "[rank %d] error: watchdog: no progress for %.0f s (fault.timeout_s) in phase '%s': "
        "another rank has probably died or hangs; aborting the job\n",
        rank_, now_seconds() - last, phase_.load());
    if (length > 0) {
      const auto size = static_cast<std::size_t>(length) < sizeof message
                            ? static_cast<std::size_t>(length)
                            : sizeof message - 1;
      // Best effort: the process ends next whether or not stderr takes the message.
      [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, message, size);
    }
    // From this thread on purpose (the main thread is the one that is stuck), and without MPI
    // (see watchdog.hpp): the launcher ends the other ranks when this one exits.
    ::_exit(kWatchdogExitCode);
  }
}

}  // namespace trellis
