#include "trellis/train/faults/fault_injector.hpp"

#include "trellis/train/faults/stop_requests.hpp"

#include "trellis/core/error.hpp"

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

namespace trellis {

bool FaultInjector::due(FaultKind kind, std::int64_t step) const {
  return config_.inject_rank == rank_ && config_.inject_step == step && config_.inject_kind == kind;
}

void FaultInjector::before_step(std::int64_t step) const {
  if (due(FaultKind::throw_error, step))
    throw Error("fault.inject: injected failure on rank " + std::to_string(rank_) + " at step " +
                std::to_string(step));
  if (due(FaultKind::signal, step) && !StopRequests::signal_self(SIGUSR1))
    throw Error("fault injection: SIGUSR1 sent to this process did not arrive within 5 s");
  if (due(FaultKind::hang, step)) {
    log_.warn("fault.inject: rank " + std::to_string(rank_) + " hangs at step " +
              std::to_string(step));
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

void FaultInjector::in_checkpoint(std::int64_t step) const {
  if (config_.inject_kind != FaultKind::kill_in_checkpoint || config_.inject_rank != rank_ ||
      step < config_.inject_step)
    return;
  log_.warn("fault.inject: rank " + std::to_string(rank_) +
            " kills itself during the checkpoint write");
  std::raise(SIGKILL);
}

TensorWriteHook FaultInjector::checkpoint_write_hook(std::int64_t step) const {
  if (config_.inject_kind != FaultKind::freeze_in_checkpoint || config_.inject_rank != rank_ ||
      step < config_.inject_step)
    return {};
  return [log = log_, rank = rank_](std::size_t index, const std::string& name) {
    if (index != 0) return;
    log.warn("fault.inject: rank " + std::to_string(rank) + " freezes (SIGSTOP) after writing '" +
             name + "' of the checkpoint");
    std::raise(SIGSTOP);
  };
}

}  // namespace trellis
