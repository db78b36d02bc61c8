#include "trellis/train/loop/stop_policy.hpp"

#include "trellis/comm/mpi_check.hpp"

#include <cstdio>

namespace trellis {

bool EarlyStopping::update(const EvalResult& result, const Logger& log) {
  const std::string& metric = config_.metric;
  if (metric == "none") return false;
  // Lower is better for the loss, higher for the accuracy; every rank sees the same values.
  const double value = metric == "test_loss" ? -result.loss : result.accuracy;
  if (!have_best_ || value > best_ + config_.min_delta) {
    have_best_ = true;
    best_ = value;
    without_gain_ = 0;
    return false;
  }
  if (++without_gain_ < config_.patience) return false;
  triggered_ = true;
  char delta[32];
  std::snprintf(delta, sizeof delta, "%g", config_.min_delta);
  log.info("early stop: " + metric + " has not improved by more than " + delta + " for " +
           std::to_string(without_gain_) + " evaluations");
  return true;
}

StopPolicy::StopPolicy(const TrainConfig& config, MPI_Comm world)
    : config_(config),
      world_(world),
      signals_and_time_(config.train.time_limit_s, config.ckpt.margin_s) {}

StepDecision StopPolicy::decide(double step_seconds, double cost_so_far) const {
  const BudgetConfig& budget = config_.budget;
  const bool over_budget =
      (budget.max_cost > 0 && cost_so_far >= budget.max_cost) ||
      (budget.max_hours > 0 && since_start_.seconds() >= 3600.0 * budget.max_hours);
  const bool clock_due = config_.ckpt.interval_minutes > 0 &&
                         since_checkpoint_.seconds() >= 60.0 * config_.ckpt.interval_minutes;
  int agree[3] = {static_cast<int>(signals_and_time_.local_reason(step_seconds)), clock_due ? 1 : 0,
                  over_budget ? 1 : 0};
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, agree, 3, MPI_INT, MPI_MAX, world_));
  StepDecision d;
  d.stop = static_cast<StopReason>(agree[0]);
  d.checkpoint_by_clock = agree[1] != 0;
  d.budget_spent = agree[2] != 0;
  return d;
}

}  // namespace trellis
