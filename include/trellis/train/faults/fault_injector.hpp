// fault.inject = rank:step:kind, a testing aid: makes one rank fail in a chosen way at a
// chosen step, so the tests can check that the job ends (or recovers) as documented.
//   throw               an Error before the step's forward pass
//   hang                the rank stops making progress (the watchdog must end the job)
//   nan                 the step's loss scale becomes NaN (non-finite skip/abort policy)
//   signal              SIGUSR1 to itself (a preemption notice, as from Slurm)
//   kill_in_checkpoint  SIGKILL when the first checkpoint at or after the step begins
//   freeze_in_checkpoint  SIGSTOP right after writing the first tensor of that checkpoint:
//                         the whole process (heartbeat thread included) stops, as on a node
//                         that hangs or loses its network mid-write; the peers' watchdogs
//                         must end the job and the partial step-N.tmp must be ignored
#pragma once

#include "trellis/core/log.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/files/tensor_file.hpp"

#include <cstdint>

namespace trellis {

class FaultInjector {
 public:
  FaultInjector(const FaultConfig& config, int world_rank, const Logger& log)
      : config_(config), rank_(world_rank), log_(log) {}

  // Before step `step` (1-based: the step about to run) does any work: throw, hang, signal.
  void before_step(std::int64_t step) const;
  // Whether step `step` should poison its loss scale with NaN.
  bool poison_step(std::int64_t step) const { return due(FaultKind::nan, step); }
  // While writing the checkpoint of step `step`: SIGKILL this process when asked.
  void in_checkpoint(std::int64_t step) const;
  // The write hook for the checkpoint of step `step` (empty when no fault is due in it).
  TensorWriteHook checkpoint_write_hook(std::int64_t step) const;

 private:
  bool due(FaultKind kind, std::int64_t step) const;

  FaultConfig config_;
  int rank_;
  Logger log_;
};

}  // namespace trellis
