// Stop requests: a signal sets the flag the training loop polls; time limits (train.time_limit
// and Slurm's SLURM_JOB_END_TIME) ask to stop one margin plus one step before the end.
#include "catch.hpp"

#include "trellis/train/stop_control.hpp"

#include <csignal>
#include <cstdlib>
#include <ctime>
#include <string>

using namespace trellis;

TEST_CASE("SIGTERM and SIGUSR1 only set the stop flag", "[stop]") {
  unsetenv("SLURM_JOB_END_TIME");
  const StopControl control(0.0, 60.0);
  StopControl::raise_flag(0);
  CHECK(control.local_reason(1.0) == StopReason::none);
  std::raise(SIGTERM);  // the installed handler: the process goes on
  CHECK(StopControl::received_signal() == SIGTERM);
  CHECK(control.local_reason(1.0) == StopReason::signal);
  std::raise(SIGUSR1);
  CHECK(StopControl::received_signal() == SIGUSR1);
  StopControl::raise_flag(0);
}

TEST_CASE("time limits leave a margin and one step", "[stop]") {
  unsetenv("SLURM_JOB_END_TIME");
  StopControl::raise_flag(0);
  const StopControl limited(100.0, 30.0);
  CHECK(limited.seconds_left() <= 100.0);
  CHECK(limited.local_reason(10.0) == StopReason::none);        // 100 > 30 + 10
  CHECK(limited.local_reason(75.0) == StopReason::time_limit);  // 100 < 30 + 75
  // Slurm's end time, when sooner, wins.
  const std::string soon = std::to_string(static_cast<long long>(std::time(nullptr)) + 50);
  setenv("SLURM_JOB_END_TIME", soon.c_str(), 1);
  const StopControl slurm(1000.0, 30.0);
  CHECK(slurm.seconds_left() <= 50.0);
  CHECK(slurm.local_reason(25.0) == StopReason::time_limit);
  CHECK(slurm.local_reason(1.0) == StopReason::none);
  unsetenv("SLURM_JOB_END_TIME");
  const StopControl unlimited(0.0, 30.0);
  CHECK(unlimited.local_reason(1e6) == StopReason::none);
}

TEST_CASE("repeated stop signals never reach the default action", "[stop]") {
  // As when a second SIGUSR1/SIGTERM arrives while the checkpoint is being written: the
  // handler stays installed (a default action would kill the rank mid-write).
  const StopControl control(0.0, 60.0);
  StopControl::raise_flag(0);
  for (int round = 0; round < 3; ++round) {
    for (const int signum : {SIGUSR1, SIGTERM}) {
      std::raise(signum);
      CHECK(StopControl::received_signal() == signum);
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
  StopControl::raise_flag(0);
}
