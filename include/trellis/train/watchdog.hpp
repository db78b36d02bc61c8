// Watchdog: ends the whole job when this rank makes no progress for `timeout` seconds, e.g.
// stuck in a collective that a dead or hung rank will never join (fault.timeout_s).
//
// The training loop calls beat() at every step boundary and inside long phases (evaluation
// batches, checkpoint writes); a background thread checks the time since the last beat twice
// per timeout. On expiry it prints which phase stalled, then calls MPI_Abort, which makes the
// launcher (mpirun, srun) end every rank with a non-zero exit. A timeout of 0 disables it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace trellis {

class Watchdog {
 public:
  Watchdog(double timeout_s, int rank);
  ~Watchdog();  // stops the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Progress: phase is a static string ("step", "evaluation", "checkpoint").
  void beat(const char* phase);
  // Stop watching (before teardown and final collectives that may legitimately wait).
  void pause();

 private:
  void watch();

  double timeout_s_;
  int rank_;
  std::atomic<double> last_beat_{0.0};  // monotonic seconds; 0: not armed
  std::atomic<const char*> phase_{"setup"};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace trellis
