// Stop requests: a signal sets the flag the training loop polls; time limits (train.time_limit
// and Slurm's SLURM_JOB_END_TIME) ask to stop one margin plus one step before the end.
#include "catch.hpp"

#include "trellis/kernels/gemm.hpp"
#include "trellis/train/faults/stop_requests.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

using namespace trellis;

TEST_CASE("SIGTERM and SIGUSR1 only set the stop flag", "[stop]") {
  unsetenv("SLURM_JOB_END_TIME");
  const StopRequests control(0.0, 60.0);
  StopRequests::raise_flag(0);
  CHECK(control.local_reason(1.0) == StopReason::none);
  CHECK(StopRequests::signal_self(SIGTERM));  // the installed handler: the process goes on
  CHECK(StopRequests::received_signal() == SIGTERM);
  CHECK(control.local_reason(1.0) == StopReason::signal);
  CHECK(StopRequests::signal_self(SIGUSR1));
  CHECK(StopRequests::received_signal() == SIGUSR1);
  StopRequests::raise_flag(0);
}

TEST_CASE("time limits leave a margin and one step", "[stop]") {
  unsetenv("SLURM_JOB_END_TIME");
  StopRequests::raise_flag(0);
  const StopRequests limited(100.0, 30.0);
  CHECK(limited.seconds_left() <= 100.0);
  CHECK(limited.local_reason(10.0) == StopReason::none);        // 100 > 30 + 10
  CHECK(limited.local_reason(75.0) == StopReason::time_limit);  // 100 < 30 + 75
  // Slurm's end time, when sooner, wins.
  const std::string soon = std::to_string(static_cast<long long>(std::time(nullptr)) + 50);
  setenv("SLURM_JOB_END_TIME", soon.c_str(), 1);
  const StopRequests slurm(1000.0, 30.0);
  CHECK(slurm.seconds_left() <= 50.0);
  CHECK(slurm.local_reason(25.0) == StopReason::time_limit);
  CHECK(slurm.local_reason(1.0) == StopReason::none);
  unsetenv("SLURM_JOB_END_TIME");
  const StopRequests unlimited(0.0, 30.0);
  CHECK(unlimited.local_reason(1e6) == StopReason::none);
}

TEST_CASE("repeated stop signals never reach the default action", "[stop]") {
  // As when a second SIGUSR1/SIGTERM arrives while the checkpoint is being written: the
  // handler stays installed (a default action would kill the rank mid-write).
  const StopRequests control(0.0, 60.0);
  StopRequests::raise_flag(0);
  for (int round = 0; round < 3; ++round) {
    for (const int signum : {SIGUSR1, SIGTERM}) {
      CHECK(StopRequests::signal_self(signum));
      CHECK(StopRequests::received_signal() == signum);
    }
  }
  for (const int signum : {SIGUSR1, SIGTERM}) {
    struct sigaction current {};
    REQUIRE(sigaction(signum, nullptr, &current) == 0);
    CHECK(current.sa_handler != SIG_DFL);
    CHECK(current.sa_handler != SIG_IGN);
    CHECK((current.sa_flags & SA_RESTART) != 0);
    CHECK((current.sa_flags & SA_RESETHAND) == 0);
    CHECK(sigismember(&current.sa_mask, SIGUSR1) == 1);
    CHECK(sigismember(&current.sa_mask, SIGTERM) == 1);
  }
  CHECK(control.local_reason(1.0) == StopReason::signal);
  StopRequests::raise_flag(0);
}

namespace {
// Whether the calling thread blocks both stop signals.
bool blocks_stop_signals() {
  sigset_t mask;
  sigemptyset(&mask);
  if (pthread_sigmask(SIG_BLOCK, nullptr, &mask) != 0) return false;
  return sigismember(&mask, SIGUSR1) == 1 && sigismember(&mask, SIGTERM) == 1;
}
}  // namespace

TEST_CASE("stop signals never interrupt the threads that run the step", "[stop]") {
  const StopRequests control(0.0, 60.0);
  // The installing thread, and every thread it starts afterwards, block them.
  CHECK(blocks_stop_signals());
  bool child_blocks = false;
  std::thread([&] { child_blocks = blocks_stop_signals(); }).join();
  CHECK(child_blocks);
  StopRequests::raise_flag(0);
}

TEST_CASE("a storm of stop signals during oneDNN GEMMs leaves the heap intact", "[stop]") {
  // Regression: oneDNN 2.6's JIT GEMM kernels point RSP into a heap workspace, so a signal
  // frame pushed onto the thread inside one corrupted malloc's metadata (an abort in the next
  // free()). Signals keep arriving while this thread multiplies; it must never take one.
  const StopRequests control(0.0, 60.0);
  StopRequests::raise_flag(0);
  const int n = 384;
  FloatView a("a", std::size_t{n} * n), b("b", std::size_t{n} * n), c("c", std::size_t{n} * n);
  Kokkos::deep_copy(a, 0.5f);
  Kokkos::deep_copy(b, 0.25f);
  std::atomic<bool> done{false};
  std::thread sender([&] {
    for (int i = 0; i < 2000 && !done; ++i) {
      kill(getpid(), SIGUSR1);  // (not SIGTERM: Catch2 resets its handler after each case)
      std::this_thread::sleep_for(std::chrono::microseconds(250));
    }
  });
  for (int i = 0; i < 300; ++i) {
    kernels::gemm(false, false, 1.0f, as_const_matrix(a, n, n), as_const_matrix(b, n, n), 0.0f,
                  as_matrix(c, n, n));
    std::vector<float> churn(static_cast<std::size_t>(1000 + i));  // malloc and free in between
    churn.back() = 1.0f;
  }
  done = true;
  sender.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the last ones are taken
  CHECK(StopRequests::received_signal() == SIGUSR1);           // the catcher thread took them
  // Every element is 384 * 0.5 * 0.25 = 48: the products themselves came out right.
  std::vector<float> host(c.extent(0));
  Kokkos::deep_copy(Kokkos::View<float*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                        host.data(), host.size()),
                    c);
  CHECK(std::all_of(host.begin(), host.end(), [](float v) { return v == 48.0f; }));
  StopRequests::raise_flag(0);
}
