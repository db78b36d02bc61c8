// Watchdog: ends the whole job when this rank makes no progress for `timeout` seconds, e.g.
// stuck in a collective that a dead or hung rank will never join (fault.timeout_s).
//
// The training loop calls beat() at every step boundary and inside long phases (evaluation
// batches, checkpoint writes); a background thread checks the time since the last beat twice
// per timeout. On expiry it prints which phase stalled and ends this process at once with
// _exit(kWatchdogExitCode), without calling MPI: MPI_Abort from a thread other than the main
// one is only legal under MPI_THREAD_MULTIPLE, which Trellis does not request (it initialises
// MPI_THREAD_FUNNELED: every MPI call comes from the main thread). A rank that exits without
// MPI_Finalize makes the launcher end the job: Open MPI 4.1's mpirun kills the other ranks
// ("N processes exited without calling finalize") and exits non-zero; srun ends the step with
// --kill-on-bad-exit, and without it every other rank stuck on the dead one expires its own
// watchdog within one more timeout. The message is written with write(2), not stdio, because
// the stuck main thread may hold the stdio lock. A timeout of 0 disables it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace trellis {

// The exit status of a rank ended by its watchdog (EXIT_FAILURE: a failure, see src/main.cpp).
constexpr int kWatchdogExitCode = 1;

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
