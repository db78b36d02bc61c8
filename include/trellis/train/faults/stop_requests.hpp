// When to stop early, agreed by every rank at a step boundary.
//
// Preemption: SIGUSR1 (Slurm's `--signal=B:USR1@<s>` warning before a time limit or spot
// reclaim, forwarded by slurm/preemptible.sbatch) and SIGTERM (scancel, node shutdown) only set
// a flag in the handler, which runs on a catcher thread of its own (see install()).
// Interrupt: once a StopRequests exists (a run trains), the first SIGINT (Ctrl-C on a process
// run without mpirun, or forwarded by srun) does the same, saying so on stderr, and a second
// ends the process at once with exit code 130; before that, and in the other commands, the
// first SIGINT ends it at once. (mpirun does not forward SIGINT: on Ctrl-C it sends its ranks
// SIGTERM, then SIGKILL after odls_base_sigkill_timeout seconds, and exits 1.) Time:
// train.time_limit (seconds; 0 = none) from the start of the run, or Slurm's SLURM_JOB_END_TIME
// (Unix seconds), whichever comes first, minus a margin that leaves room for one more step and a
// checkpoint. A second signal while a checkpoint is being written changes nothing: the flag is only
// read between steps, and files are only renamed into place once complete.
//
// The trainer reduces local_reason() over the world (one MPI_Allreduce of a few ints per step),
// so every rank takes the same decision at the same step and nobody is left in a collective.
#pragma once

#include "trellis/core/timer.hpp"

#include <string>

namespace trellis {

enum class StopReason : int { none = 0, signal = 1, time_limit = 2 };
const char* stop_reason_name(StopReason reason);

class StopRequests {
 public:
  // Installs the SIGUSR1/SIGTERM handlers (install()). time_limit_s <= 0: no limit of its
  // own. margin_s: stop this long before the end.
  StopRequests(double time_limit_s, double margin_s);

  // Installs the handlers (re-installing is harmless) and, once per process, blocks the stop
  // signals in the calling thread, so in every thread it starts afterwards, and starts a
  // catcher thread that takes them instead: no signal frame is ever pushed onto a thread that
  // runs the step (oneDNN's JIT GEMMs point RSP into the heap). Call it early in the main
  // thread, before other threads start (main() does).
  static void install();

  // This rank's reason to stop now (no communication; the caller reduces it over the world
  // with MPI_MAX, together with whatever else it agrees on per step). step_seconds: the last
  // step's duration, added to the margin (the next step must fit before the end too).
  StopReason local_reason(double step_seconds) const;

  // Seconds left before the (earliest) end, or a large number without one. Local.
  double seconds_left() const;
  // The signal number that arrived, or 0.
  static int received_signal();
  // For tests: as if `signum` had arrived.
  static void raise_flag(int signum);
  // For tests and fault injection: sends `signum` to this process, as a scheduler would (the
  // catcher thread takes it; std::raise would leave it pending on the blocked calling thread),
  // and returns once the flag shows it (false if it did not within 5 s).
  static bool signal_self(int signum);

 private:
  Stopwatch since_start_;
  double time_limit_s_;
  double margin_s_;
  double slurm_end_;  // Unix seconds, 0 when SLURM_JOB_END_TIME is unset
};

}  // namespace trellis
