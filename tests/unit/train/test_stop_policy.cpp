// StopPolicy and EarlyStopping (train/loop/stop_policy.hpp): each stop reason alone and together,
// and early stopping's patience and min_delta, measured against the best value so far.
#include "catch.hpp"

#include "trellis/train/loop/stop_policy.hpp"

#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace trellis;

namespace {

// The configuration from these overrides of the defaults (no time limit, budget, clock
// checkpoints or early stopping), with no signal raised and no Slurm end time.
TrainConfig config_with(const std::vector<std::string>& overrides) {
  unsetenv("SLURM_JOB_END_TIME");  // StopRequests reads it when the policy is built
  StopRequests::raise_flag(0);
  return TrainConfig::from(RawConfig::parse("", overrides));
}

// "--key=value" with every digit of a double.
std::string key(const char* name, double value) {
  char text[64];
  std::snprintf(text, sizeof text, "--%s=%.17g", name, value);
  return text;
}

void sleep_seconds(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

bool nothing(const StepDecision& d) {
  return d.stop == StopReason::none && !d.budget_spent && !d.checkpoint_by_clock;
}

EvalResult eval(double loss, double accuracy) {
  EvalResult r;
  r.loss = loss;
  r.accuracy = accuracy;
  r.samples = 100;
  r.targets = 100;
  return r;
}

// Feeds the results in order; the 1-based evaluations after which update() said stop.
std::vector<int> stops(EarlyStopping& early, const std::vector<EvalResult>& results) {
  const Logger log(1);  // not rank 0: the reason is not printed
  std::vector<int> at;
  for (std::size_t i = 0; i < results.size(); ++i)
    if (early.update(results[i], log)) at.push_back(static_cast<int>(i) + 1);
  return at;
}

EarlyStopConfig early_config(const char* metric, std::int64_t patience, double min_delta) {
  return config_with({"--data.test=test.h5", std::string("--early_stop.metric=") + metric,
                      "--early_stop.patience=" + std::to_string(patience),
                      key("early_stop.min_delta", min_delta)})
      .early_stop;
}

}  // namespace

TEST_CASE("without stop reasons configured the policy never stops", "[stop_policy]") {
  const TrainConfig config = config_with({});
  const StopPolicy policy(config, MPI_COMM_WORLD);
  CHECK(nothing(policy.decide(0.0, 0.0)));
  CHECK(nothing(policy.decide(1e6, 1e12)));  // a long step, a large cost: no limit, no budget
}

TEST_CASE("a stop signal (SIGUSR1 or SIGTERM) stops at the next step boundary", "[stop_policy]") {
  const TrainConfig config = config_with({});
  const StopPolicy policy(config, MPI_COMM_WORLD);
  CHECK(nothing(policy.decide(1.0, 0.0)));
  for (const int signum : {SIGUSR1, SIGTERM}) {
    StopRequests::raise_flag(signum);
    const StepDecision d = policy.decide(1.0, 0.0);
    CHECK(d.stop == StopReason::signal);
    CHECK_FALSE(d.budget_spent);
    CHECK_FALSE(d.checkpoint_by_clock);
    StopRequests::raise_flag(0);
    CHECK(nothing(policy.decide(1.0, 0.0)));
  }
}

TEST_CASE("the time limit stops one margin plus one step before the end", "[stop_policy]") {
  const TrainConfig config = config_with({"--train.time_limit=100", "--ckpt.margin_s=30"});
  const StopPolicy policy(config, MPI_COMM_WORLD);
  CHECK(policy.decide(10.0, 0.0).stop == StopReason::none);  // ~100 s left > 30 + 10
  const StepDecision d = policy.decide(75.0, 0.0);           // 100 < 30 + 75
  CHECK(d.stop == StopReason::time_limit);
  CHECK_FALSE(d.budget_spent);
  CHECK_FALSE(d.checkpoint_by_clock);
  // A signal as well: the signal is the reason reported.
  StopRequests::raise_flag(SIGUSR1);
  CHECK(policy.decide(75.0, 0.0).stop == StopReason::signal);
  StopRequests::raise_flag(0);
}

TEST_CASE("budget.max_cost is spent when the cost reaches it; not a stop signal", "[stop_policy]") {
  const TrainConfig config = config_with({"--budget.max_cost=5", "--cost.price_per_device_hour=1"});
  const StopPolicy policy(config, MPI_COMM_WORLD);
  CHECK(nothing(policy.decide(1.0, 4.99)));
  StepDecision d = policy.decide(1.0, 5.0);
  CHECK(d.budget_spent);
  CHECK(d.stop == StopReason::none);  // checkpoint and finish normally, not exit 75
  CHECK_FALSE(d.checkpoint_by_clock);
  d = policy.decide(1.0, 7.5);
  CHECK(d.budget_spent);
}

TEST_CASE("budget.max_hours counts wall time from the policy's start", "[stop_policy]") {
  const TrainConfig config = config_with({key("budget.max_hours", 0.5 / 3600)});  // 0.5 s
  const StopPolicy policy(config, MPI_COMM_WORLD);
  CHECK_FALSE(policy.decide(0.0, 0.0).budget_spent);
  sleep_seconds(0.6);
  const StepDecision d = policy.decide(0.0, 0.0);
  CHECK(d.budget_spent);
  CHECK(d.stop == StopReason::none);
  // Writing a checkpoint restarts the checkpoint clock, not the budget's.
  StopPolicy second(config, MPI_COMM_WORLD);
  sleep_seconds(0.6);
  second.checkpoint_written();
  CHECK(second.decide(0.0, 0.0).budget_spent);
}

TEST_CASE("a checkpoint is due by the clock until one is written", "[stop_policy]") {
  const TrainConfig config = config_with({key("ckpt.interval_minutes", 0.5 / 60)});  // 0.5 s
  StopPolicy policy(config, MPI_COMM_WORLD);
  CHECK_FALSE(policy.decide(0.0, 0.0).checkpoint_by_clock);
  sleep_seconds(0.6);
  StepDecision d = policy.decide(0.0, 0.0);
  CHECK(d.checkpoint_by_clock);
  CHECK(d.stop == StopReason::none);
  CHECK_FALSE(d.budget_spent);
  CHECK(policy.decide(0.0, 0.0).checkpoint_by_clock);  // still due: none written yet
  policy.checkpoint_written();
  CHECK_FALSE(policy.decide(0.0, 0.0).checkpoint_by_clock);  // the interval restarted
  sleep_seconds(0.6);
  CHECK(policy.decide(0.0, 0.0).checkpoint_by_clock);
}

TEST_CASE("signal, budget and clock together are all reported in one decision", "[stop_policy]") {
  const TrainConfig config = config_with({"--budget.max_cost=1", "--cost.price_per_device_hour=1",
                                          key("ckpt.interval_minutes", 0.5 / 60)});
  const StopPolicy policy(config, MPI_COMM_WORLD);
  sleep_seconds(0.6);
  // The clock came due first, then the budget and a signal: the decision holds all three.
  StopRequests::raise_flag(SIGTERM);
  StepDecision d = policy.decide(1.0, 2.0);
  CHECK(d.stop == StopReason::signal);
  CHECK(d.budget_spent);
  CHECK(d.checkpoint_by_clock);
  StopRequests::raise_flag(0);
  d = policy.decide(1.0, 2.0);
  CHECK(d.stop == StopReason::none);
  CHECK(d.budget_spent);
  CHECK(d.checkpoint_by_clock);
  // A signal without the budget spent: the budget is not reported with it.
  StopRequests::raise_flag(SIGUSR1);
  d = policy.decide(1.0, 0.5);
  CHECK(d.stop == StopReason::signal);
  CHECK_FALSE(d.budget_spent);
  StopRequests::raise_flag(0);
}

TEST_CASE("early_stop.metric = none never stops", "[stop_policy]") {
  EarlyStopping early(early_config("none", 1, 0.0));
  CHECK(stops(early, {eval(1, 0.5), eval(2, 0.4), eval(3, 0.3), eval(4, 0.2)}).empty());
  CHECK_FALSE(early.triggered());
}

TEST_CASE("test_loss: patience counts evaluations in a row without a gain over the best",
          "[stop_policy]") {
  // Lower is better. Exact binary fractions: no rounding in the comparisons.
  EarlyStopping early(early_config("test_loss", 2, 0.0));
  // 1.0 best; 0.5 better; 0.75 and 0.5 (equal is no gain) -> the second in a row stops.
  CHECK(stops(early, {eval(1.0, 0), eval(0.5, 0), eval(0.75, 0), eval(0.5, 0)}) ==
        std::vector<int>{4});
  CHECK(early.triggered());

  EarlyStopping reset(early_config("test_loss", 2, 0.0));
  // A gain between two misses resets the count.
  CHECK(stops(reset, {eval(1.0, 0), eval(2.0, 0), eval(0.875, 0), eval(1.0, 0)}).empty());
  CHECK_FALSE(reset.triggered());
}

TEST_CASE("min_delta: only a gain of more than min_delta over the best counts", "[stop_policy]") {
  EarlyStopping early(early_config("test_loss", 2, 0.25));
  // 1.0 best; 0.75 gains exactly 0.25 (no gain: 1 in a row); 0.625 gains 0.375 over the best
  // 1.0 (a gain, though only 0.125 over 0.75): the new best, the count resets; 0.5 (0.125) and
  // 0.375 (exactly 0.25): two in a row, stop after the fifth.
  CHECK(stops(early, {eval(1.0, 0), eval(0.75, 0), eval(0.625, 0), eval(0.5, 0), eval(0.375, 0)}) ==
        std::vector<int>{5});
  CHECK(early.triggered());
}

TEST_CASE("test_accuracy: higher is better; patience 1 stops at the first miss", "[stop_policy]") {
  EarlyStopping early(early_config("test_accuracy", 1, 0.0625));
  // The loss is ignored. 0.5; 0.625 (+0.125, gain); 0.6875 (+0.0625 = min_delta: no gain).
  CHECK(stops(early, {eval(9, 0.5), eval(0.1, 0.625), eval(0.01, 0.6875)}) == std::vector<int>{3});
  CHECK(early.triggered());
  // The first evaluation only sets the best, even with patience 1.
  EarlyStopping first(early_config("test_accuracy", 1, 0.0));
  CHECK(stops(first, {eval(1, 0.0)}).empty());
  CHECK_FALSE(first.triggered());
}
