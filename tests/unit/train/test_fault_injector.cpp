// FaultInjector: each kind fires only on its rank and step. freeze_in_checkpoint is checked
// in a forked child, whose stop (SIGSTOP) is the thing under test.
#include "catch.hpp"

#include "trellis/train/faults/fault_injector.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

using namespace trellis;

namespace {

FaultConfig inject(int rank, std::int64_t step, FaultKind kind) {
  FaultConfig config;
  config.inject_rank = rank;
  config.inject_step = step;
  config.inject_kind = kind;
  return config;
}

}  // namespace

TEST_CASE("freeze_in_checkpoint hooks only its rank's checkpoints from its step on", "[fault]") {
  const FaultInjector on_rank_2(inject(2, 250, FaultKind::freeze_in_checkpoint), 2, Logger(2));
  CHECK_FALSE(on_rank_2.checkpoint_write_hook(200));
  CHECK(on_rank_2.checkpoint_write_hook(250));
  CHECK(on_rank_2.checkpoint_write_hook(300));
  const FaultInjector on_rank_1(inject(2, 250, FaultKind::freeze_in_checkpoint), 1, Logger(1));
  CHECK_FALSE(on_rank_1.checkpoint_write_hook(250));
  const FaultInjector other_kind(inject(2, 250, FaultKind::kill_in_checkpoint), 2, Logger(2));
  CHECK_FALSE(other_kind.checkpoint_write_hook(250));
}

TEST_CASE("freeze_in_checkpoint stops the process after the first tensor, not before", "[fault]") {
  const FaultInjector faults(inject(0, 1, FaultKind::freeze_in_checkpoint), 0, Logger(0));
  const TensorWriteHook hook = faults.checkpoint_write_hook(1);
  REQUIRE(hook);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    hook(1, "params/later");  // any tensor but the first: no effect
    hook(0, "params/first");
    std::_Exit(0);  // reached only when the stop was resumed
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, WUNTRACED) == child);
  CHECK(WIFSTOPPED(status));
  if (WIFSTOPPED(status)) CHECK(WSTOPSIG(status) == SIGSTOP);
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
}
