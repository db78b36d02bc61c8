// Checkpoints of a training run, and its final weights: what goes into one, when a resumed
// run loads one, and which rank writes which piece (tensor_ownership.hpp).
//
// Everything is stored by logical tensor (checkpoint_file.hpp writes and reads the file), so
// a checkpoint loads on any dp x tp x pp layout:
//   params/<name>              each parameter, every piece written once (owns_piece)
//   optim/<state>/<name>       each optimizer state buffer (exp_avg, exp_avg_sq,
//                              momentum_buffer, square_avg) per parameter; with ZeRO-1 each dp
//                              rank writes and reads the ranges of its own shard
//   buffers/<name>             BatchNorm running statistics
// plus the step, the optimizer's step count, the skipped steps, the global batch, the resolved
// config and the build. Parts with state of their own add theirs the same way
// (checkpoint_part.hpp): the pruner its masks/<name>, PowerSGD its powersgd/state
// (checkpoint_parts.hpp), the loss scaler its counters. Randomness needs no state: every draw is
// keyed by (seed, step, position). model.h5 holds params/ and buffers/ in the weights format.
#pragma once

#include "trellis/comm/process_grid.hpp"
#include "trellis/core/log.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/faults/fault_injector.hpp"
#include "trellis/train/files/checkpoint_file.hpp"
#include "trellis/train/loop/checkpoint_parts.hpp"
#include "trellis/train/loop/pruner.hpp"
#include "trellis/train/loop/training_model.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trellis {

// Where a resumed run continues.
struct ResumePoint {
  std::string dir;
  std::int64_t step = 0;
  std::int64_t skipped_steps = 0;
  TrainConfig stored;               // the configuration the checkpoint was written under
  std::int64_t schedule_steps = 0;  // the schedule's length then (0: an older checkpoint)
};

class CheckpointManager {
 public:
  // Every reference must outlive the manager.
  CheckpointManager(const TrainConfig& config, const ProcessGrid& grid, TrainingModel& model,
                    const FaultInjector& faults, Pruner& pruner, const Logger& log);

  // Collective over the world: writes the checkpoint of `step` (ckpt.dir/step-NNNNNNN) and
  // returns its directory.
  std::string save(std::int64_t step, std::int64_t skipped_steps);

  // ckpt.resume: none -> nothing; auto -> the newest checkpoint that verifies, falling back to
  // older ones with a warning; a directory -> that one. Loads parameters, optimizer state and
  // buffers. Collective. When no checkpoint is usable, a named one cannot be read, or one
  // belongs to another model, every rank throws AgreedFailure with ExitCode::bad_input (each
  // has printed the message; unwinding is safe), before anything in run.dir is touched.
  std::optional<ResumePoint> resume_if_asked();
  // resume_if_asked(), and when it resumed nothing, init.weights' parameters (if set) for a
  // new run (initial_weights.hpp): ConfigError naming the model.* key when the file holds
  // another model, InputError naming the file and tensor when it cannot be read; every rank
  // throws alike. Collective.
  std::optional<ResumePoint> resume_or_start();

  // Collective: the parameters and buffers as run.dir/model.h5; returns its path.
  std::string write_weights() const;

 private:
  // Every tensor a checkpoint (with_optimizer) or model.h5 holds, as this rank's pieces.
  std::vector<TensorPiece> pieces(bool with_optimizer) const;
  void load(const std::string& dir, const CheckpointInfo& info);
  // Prints `message` and throws it as an agreed bad-input failure: only for failures every
  // rank meets alike.
  [[noreturn]] void fail_agreed(const std::string& message) const;

  const TrainConfig& config_;
  const ProcessGrid& grid_;
  TrainingModel& model_;
  const FaultInjector& faults_;
  Logger log_;
  PowerSgdCheckpoint powersgd_;
  LossScalerCheckpoint loss_scaler_;
  // The parts with state of their own (checkpoint_part.hpp), in the order their tensors are
  // written: PowerSGD, the pruner's masks, the loss scaler.
  std::vector<CheckpointPart*> parts_;
};

}  // namespace trellis
