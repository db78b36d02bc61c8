#include "trellis/train/faults/stop_requests.hpp"

#include "trellis/core/error.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

#include <pthread.h>
#include <unistd.h>

namespace trellis {

namespace {

volatile std::sig_atomic_t g_signal = 0;  // the handler's only lasting side effect
// Set while a run trains (StopRequests exists): the first Ctrl-C then stops at the next step
// boundary with a checkpoint instead of ending the process.
volatile std::sig_atomic_t g_graceful_interrupt = 0;

void say(const char* text, std::size_t length) { (void)!write(STDERR_FILENO, text, length); }

// Async-signal-safe: a flag, write(2) and _exit(2) only.
extern "C" void on_stop_signal(int signum) {
  if (signum == SIGINT) {
    if (!g_graceful_interrupt || g_signal == SIGINT) {
      static const char now[] = "\ninterrupted: exiting now (exit code 130), no checkpoint\n";
      say(now, sizeof(now) - 1);
      _exit(130);
    }
    static const char later[] =
        "\ninterrupted: stopping at the next step with a checkpoint (exit code 75); "
        "Ctrl-C again to quit at once\n";
    say(later, sizeof(later) - 1);
  }
  g_signal = signum;
}

// The handler stays installed for the rest of the process (no SA_RESETHAND, nothing ever
// re-arms SIG_DFL): a second or third signal, e.g. while the checkpoint is being written, only
// sets the flag again and can never take the default action, which would kill the rank
// mid-write. SA_RESTART: a signal during a write or an MPI call does not fail it. Both stop
// signals are blocked while the handler runs, so they never nest.
//
// The signals are never delivered to the thread that installs the handler (the main thread,
// which runs the step), nor to threads it starts afterwards: it blocks them, and a catcher
// thread of its own, with them unblocked, takes them. oneDNN's JIT GEMM kernels (Debian's 2.6;
// fixed upstream in oneDNN PR #4855) point RSP into a heap workspace while they run, so a
// signal frame pushed onto a thread inside one writes into the heap: a SIGUSR1 mid-step
// corrupted malloc's metadata ("corrupted size vs. prev_size", abort in dnnl_sgemm's free)
// in about a third of the preemption runs of e2e.slurm_cluster; the "storm" test in
// tests/unit/test_stop_requests.cpp is the regression test.
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

void catch_signals_forever() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  for (;;) pause();  // the handler runs here; the thread ends with the process
}

void install_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  action.sa_mask = stop_signals();
  action.sa_flags = SA_RESTART;
  for (const int signum : {SIGUSR1, SIGTERM, SIGINT})
    if (sigaction(signum, &action, nullptr) != 0)
      throw Error(std::string("cannot install the handler for ") + strsignal(signum) + ": " +
                  std::strerror(errno));
  static std::once_flag started;
  std::call_once(started, [] {
    const sigset_t set = stop_signals();
    const int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr);
    if (rc != 0) throw Error(std::string("cannot block the stop signals: ") + std::strerror(rc));
    std::thread(catch_signals_forever).detach();
  });
}

double slurm_end_time() {
  const char* value = std::getenv("SLURM_JOB_END_TIME");
  if (value == nullptr || *value == '\0') return 0.0;
  char* end = nullptr;
  const double t = std::strtod(value, &end);
  return (end != value && t > 0) ? t : 0.0;
}

}  // namespace

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::signal:
      return "signal";
    case StopReason::time_limit:
      return "time limit";
    case StopReason::none:
      break;
  }
  return "none";
}

StopRequests::StopRequests(double time_limit_s, double margin_s)
    : time_limit_s_(time_limit_s), margin_s_(margin_s), slurm_end_(slurm_end_time()) {
  install_handlers();
  g_graceful_interrupt = 1;
}

void StopRequests::install() { install_handlers(); }

int StopRequests::received_signal() { return static_cast<int>(g_signal); }

void StopRequests::raise_flag(int signum) { g_signal = signum; }

bool StopRequests::signal_self(int signum) {
  g_signal = 0;
  if (kill(getpid(), signum) != 0) return false;
  for (int i = 0; i < 5000 && g_signal != signum; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return g_signal == signum;
}

double StopRequests::seconds_left() const {
  double left = std::numeric_limits<double>::infinity();
  if (time_limit_s_ > 0) left = time_limit_s_ - since_start_.seconds();
  if (slurm_end_ > 0) {
    const double to_end = slurm_end_ - static_cast<double>(std::time(nullptr));
    if (to_end < left) left = to_end;
  }
  return left;
}

StopReason StopRequests::local_reason(double step_seconds) const {
  if (g_signal != 0) return StopReason::signal;
  if (seconds_left() < margin_s_ + step_seconds) return StopReason::time_limit;
  return StopReason::none;
}

}  // namespace trellis
