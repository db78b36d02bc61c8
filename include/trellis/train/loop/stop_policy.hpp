// The run loop's one stop policy: at every step boundary all ranks agree, in one
// MPI_Allreduce (MAX), on
//   - a stop request (SIGUSR1/SIGTERM) or a time limit close (StopRequests): checkpoint, then
//     exit 75 so the job can be resubmitted;
//   - a checkpoint due by the clock (ckpt.interval_minutes);
//   - a budget used up (budget.max_cost, budget.max_hours): checkpoint, finish normally;
// and after each evaluation, on early stopping (the evaluation results are already reduced,
// so every rank decides alike without communication).
// Each rank's clock differs a little; the MAX makes it one decision.
#pragma once

#include "trellis/core/log.hpp"
#include "trellis/core/timer.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/faults/stop_requests.hpp"
#include "trellis/train/loop/evaluate.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>

namespace trellis {

// early_stop.*: stop when the metric has not improved by more than min_delta for `patience`
// evaluations in a row.
class EarlyStopping {
 public:
  explicit EarlyStopping(const EarlyStopConfig& config) : config_(config) {}
  // Returns true when the run should stop now (logs why).
  bool update(const EvalResult& result, const Logger& log);
  bool triggered() const { return triggered_; }

 private:
  EarlyStopConfig config_;
  double best_ = 0;
  std::int64_t without_gain_ = 0;
  bool have_best_ = false, triggered_ = false;
};

struct StepDecision {
  StopReason stop = StopReason::none;  // signal / time limit: checkpoint and exit 75
  bool budget_spent = false;           // checkpoint and finish ("budget")
  bool checkpoint_by_clock = false;    // ckpt.interval_minutes has passed
};

class StopPolicy {
 public:
  StopPolicy(const TrainConfig& config, MPI_Comm world);

  // Collective over the world: one agreed decision. step_seconds: the last step's duration
  // (the next one must fit before a time limit too); cost_so_far: on-demand cost of the run.
  StepDecision decide(double step_seconds, double cost_so_far) const;
  // A checkpoint was just written: the clock interval restarts.
  void checkpoint_written() { since_checkpoint_.restart(); }

 private:
  const TrainConfig& config_;
  MPI_Comm world_;
  StopRequests signals_and_time_;
  Stopwatch since_start_;
  Stopwatch since_checkpoint_;
};

}  // namespace trellis
