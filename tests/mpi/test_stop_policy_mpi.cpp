// StopPolicy (train/loop/stop_policy.hpp) over the world: a reason seen by one rank only (a
// signal, a time limit, the budget, the checkpoint clock) becomes every rank's decision.
// Tagged [ckpt_mpi] too, so it runs where tests/mpi/tests.cmake registers that tag.
#include "catch.hpp"

#include "trellis/train/loop/stop_policy.hpp"

#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace trellis;

namespace {

int rank_of_world() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int size_of_world() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

TrainConfig config_with(const std::vector<std::string>& overrides) {
  unsetenv("SLURM_JOB_END_TIME");
  StopRequests::raise_flag(0);
  return TrainConfig::from(RawConfig::parse("", overrides));
}

}  // namespace

TEST_CASE("stop policy: what one rank sees, every rank decides", "[stop_mpi]") {
  const int rank = rank_of_world(), last = size_of_world() - 1;
  // A budget of 5, a time limit of 100 s with a 30 s margin; the clock only on rank 0 (its
  // clock runs ahead: the others must follow it).
  std::vector<std::string> keys = {"--budget.max_cost=5", "--cost.price_per_device_hour=1",
                                   "--train.time_limit=100", "--ckpt.margin_s=30"};
  if (rank == 0) keys.push_back("--ckpt.interval_minutes=0.0083333333333333332");  // 0.5 s
  const TrainConfig config = config_with(keys);
  StopPolicy policy(config, MPI_COMM_WORLD);

  StepDecision d = policy.decide(1.0, 0.0);
  CHECK(d.stop == StopReason::none);
  CHECK_FALSE(d.budget_spent);
  CHECK_FALSE(d.checkpoint_by_clock);

  if (rank == last) StopRequests::raise_flag(SIGUSR1);  // the signal reached one rank
  d = policy.decide(1.0, 0.0);
  CHECK(d.stop == StopReason::signal);
  CHECK_FALSE(d.budget_spent);
  StopRequests::raise_flag(0);

  d = policy.decide(rank == last ? 80.0 : 1.0, 0.0);  // one rank's step no longer fits
  CHECK(d.stop == StopReason::time_limit);

  d = policy.decide(1.0, rank == 0 ? 5.0 : 4.0);  // one rank's cost reached the budget
  CHECK(d.stop == StopReason::none);
  CHECK(d.budget_spent);

  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  d = policy.decide(1.0, 0.0);
  CHECK(d.checkpoint_by_clock);
  CHECK(d.stop == StopReason::none);
  policy.checkpoint_written();
  CHECK_FALSE(policy.decide(1.0, 0.0).checkpoint_by_clock);
}
