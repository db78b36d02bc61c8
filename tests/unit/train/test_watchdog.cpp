// Watchdog: on expiry it ends the process itself, from its own thread and without MPI (an
// MPI_Abort from a helper thread is illegal below MPI_THREAD_MULTIPLE), with exit status
// 1 and a message naming the stalled phase (and, with heartbeats, the ranks that are gone).
// Run in a forked child, whose end is the thing under test.
#include "catch.hpp"

#include "trellis/train/faults/watchdog.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
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

namespace {

// A fresh directory under the system's temporary directory, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("trellis-heartbeats-" + std::to_string(::getpid()) + "-" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// Sets a file's modification time `seconds` into the past.
void age_file(const std::string& file, double seconds) {
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  timespec times[2];
  times[0] = st.st_atim;
  times[1] = st.st_mtim;
  times[1].tv_sec -= static_cast<time_t>(seconds);
  REQUIRE(::utimensat(AT_FDCWD, file.c_str(), times, 0) == 0);
}

}  // namespace

TEST_CASE("heartbeats name the peers that stopped, not those that only wait", "[watchdog]") {
  TempDir dir;
  const std::string d = dir.path.string();
  const mode_t old_umask = ::umask(022);
  std::string lost;
  {
    PeerHeartbeats me(d, 0, 4, "tnode1");
    PeerHeartbeats alive(d, 1, 4, "tnode1");
    auto stopped = std::make_unique<PeerHeartbeats>(d, 2, 4, "tnode2");
    stopped->write(201, "step");
    // rank 3 never wrote a file (its node was gone before the first heartbeat)
    struct stat st {};
    REQUIRE(::stat(PeerHeartbeats::file_of(d, 0).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0640);
    age_file(PeerHeartbeats::file_of(d, 2), 30);
    me.write(205, "step");
    alive.write(205, "step");
    lost = me.describe_lost(5.0);
    INFO(lost);
    CHECK(lost.find("rank 2 on tnode2: no heartbeat for 3") != std::string::npos);
    CHECK(lost.find("last at step 201, phase step") != std::string::npos);
    CHECK(lost.find("rank 3: no heartbeat file") != std::string::npos);
    CHECK(lost.find("rank 1") == std::string::npos);
    CHECK(lost.find("rank 0") == std::string::npos);
    stopped->write(206, "step");  // back: current again
    CHECK(me.describe_lost(5.0).find("rank 2") == std::string::npos);
    CHECK(me.describe_lost(5.0, 0).find("... and 1 more ranks without heartbeat") !=
          std::string::npos);
  }
  ::umask(old_umask);
  CHECK(std::filesystem::is_empty(dir.path));  // a finished rank removes its file
}

TEST_CASE("an expired watchdog with heartbeats names the lost ranks and hosts, exit 76",
          "[watchdog]") {
  TempDir dir;
  const std::string d = dir.path.string();
  // What a killed rank leaves: its last record, not rewritten for a minute.
  std::ofstream(PeerHeartbeats::file_of(d, 1)) << "1 tnode2 40 step\n";
  age_file(PeerHeartbeats::file_of(d, 1), 60);
  const ChildResult child = run_in_child([&] {
    Watchdog watchdog(0.4, 0);
    watchdog.attach(std::make_unique<PeerHeartbeats>(d, 0, 2, "tnode1"));
    watchdog.beat("step", 41);
    std::this_thread::sleep_for(std::chrono::seconds(10));  // stuck waiting for rank 1
  });
  INFO(child.err);
  REQUIRE(WIFEXITED(child.status));
  CHECK(WEXITSTATUS(child.status) == kPeerLostExitCode);
  CHECK(child.err.find("in phase 'step' at step 41") != std::string::npos);
  std::ifstream hosts(d + "/lost-by-rank-0");
  std::string host;
  CHECK(std::getline(hosts, host));
  CHECK(host == "tnode2");  // for the job script: which nodes are gone
  CHECK(child.err.find("ranks lost (heartbeats stopped):") != std::string::npos);
  CHECK(child.err.find("rank 1 on tnode2: no heartbeat for") != std::string::npos);
}
