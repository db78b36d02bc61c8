// Watchdog: on expiry it ends the process itself, from its own thread and without MPI (an
// MPI_Abort from a helper thread is illegal below MPI_THREAD_MULTIPLE), with exit status
// 1 and a message naming the stalled phase. Run in a forked child, whose end
// is the thing under test.
#include "catch.hpp"

#include "trellis/train/watchdog.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

using namespace trellis;

namespace {

struct ChildResult {
  int status = 0;
  std::string err;  // everything the child wrote to stderr
};

// Runs body in a forked child with stderr into a pipe; the child exits 0 when body returns.
template <class Body>
ChildResult run_in_child(Body body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    body();
    ::_exit(0);
  }
  ::close(fds[1]);
  ChildResult result;
  char buffer[512];
  ssize_t n = 0;
  while ((n = ::read(fds[0], buffer, sizeof buffer)) > 0)
    result.err.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  REQUIRE(::waitpid(pid, &result.status, 0) == pid);
  return result;
}

}  // namespace

TEST_CASE("an expired watchdog ends the process without MPI, exit 1, naming the phase",
          "[watchdog]") {
  const ChildResult child = run_in_child([] {
    Watchdog watchdog(0.2, 7);
    watchdog.beat("evaluation");
    std::this_thread::sleep_for(std::chrono::seconds(10));  // "hangs"
  });
  INFO(child.err);
  REQUIRE(WIFEXITED(child.status));
  CHECK(WEXITSTATUS(child.status) == kWatchdogExitCode);
  CHECK(child.err.find("[rank 7] error: watchdog: no progress") != std::string::npos);
  CHECK(child.err.find("phase 'evaluation'") != std::string::npos);
  CHECK(child.err.find("MPI_ABORT") == std::string::npos);
}

TEST_CASE("a beating or paused watchdog lets the process go on", "[watchdog]") {
  const ChildResult child = run_in_child([] {
    Watchdog watchdog(0.3, 0);
    for (int i = 0; i < 10; ++i) {
      watchdog.beat("step");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    watchdog.pause();
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
  });
  INFO(child.err);
  REQUIRE(WIFEXITED(child.status));
  CHECK(WEXITSTATUS(child.status) == 0);
  CHECK(child.err.empty());
}
