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
//
// With heartbeats attached (train/peer_heartbeats.hpp), the thread also rewrites this rank's
// heartbeat every timeout / 4, and on expiry names the peers whose heartbeat has stopped:
// after a node is lost, the message on every survivor says which ranks and hosts are gone,
// their hosts go into <heartbeats>/lost-by-rank-<r> (for job scripts), and the exit status
// is kPeerLostExitCode.
#pragma once

#include "trellis/train/faults/peer_heartbeats.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

namespace trellis {

// The exit status of a rank ended by its watchdog (EXIT_FAILURE: a failure, see src/main.cpp),
// and of one whose watchdog saw peers' heartbeats stop (ExitCode::peer_lost).
constexpr int kWatchdogExitCode = 1;
constexpr int kPeerLostExitCode = 76;

class Watchdog {
 public:
  Watchdog(double timeout_s, int rank);
  ~Watchdog();  // stops the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Progress: phase is a static string ("step", "evaluation", "checkpoint"); step the
  // optimizer step the rank is at (for the heartbeat), -1 to keep the last one.
  void beat(const char* phase, std::int64_t step = -1);
  // Starts writing heartbeats and naming lost peers on expiry (nothing when the watchdog is
  // off). Once, after the run directory exists.
  void attach(std::unique_ptr<PeerHeartbeats> heartbeats);
  // Stop watching (before teardown and final collectives that may legitimately wait).
  void pause();

 private:
  void watch();

  double timeout_s_;
  int rank_;
  std::atomic<double> last_beat_{0.0};  // monotonic seconds; 0: not armed
  std::atomic<const char*> phase_{"setup"};
  std::atomic<std::int64_t> step_{0};
  std::unique_ptr<PeerHeartbeats> heartbeats_;  // guarded by mutex_
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace trellis
