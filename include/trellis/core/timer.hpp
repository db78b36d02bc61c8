// Wall-clock timing of phases. fence() first so that asynchronous device work is charged to
// the phase that launched it (a no-op on the host backends).
#pragma once

#include <Kokkos_Core.hpp>

#include <chrono>

namespace trellis {

class Stopwatch {
 public:
  Stopwatch() : start_(Clock::now()) {}
  void restart() { start_ = Clock::now(); }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  // Seconds since start after all device work launched so far has finished.
  double fenced_seconds() const {
    Kokkos::fence();
    return seconds();
  }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
};

}  // namespace trellis
