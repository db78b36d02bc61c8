// A part of a run with state of its own to checkpoint, beside the parameters, buffers and
// optimizer state the CheckpointManager writes itself: the pruning masks (Pruner), PowerSGD's
// error feedback and Q (PowerSgdCheckpoint), the loss scaler (LossScalerCheckpoint). The
// manager asks each part the same three things, in the order the parts were handed to it.
#pragma once

#include "trellis/train/files/checkpoint_file.hpp"
#include "trellis/train/files/tensor_piece.hpp"

#include <string>
#include <vector>

namespace trellis {

class CheckpointPart {
 public:
  virtual ~CheckpointPart() = default;
  // Saving (collective over the world): appends its tensors, filled, and records its counters
  // in the checkpoint's root.
  virtual void save(std::vector<TensorPiece>& pieces, CheckpointInfo& info) = 0;
  // Resuming from `dir`, whose root says `info` (collective): appends the tensors to read for
  // it, none when the checkpoint holds no state of its own that fits this run. Returns a
  // warning for the log when that loses something ("" otherwise).
  virtual std::string pieces_to_load(const std::string& dir, const CheckpointInfo& info,
                                     std::vector<TensorPiece>& pieces) = 0;
  // After every tensor was read and the parameters are in place: takes in what was read.
  // InputError when the checkpoint's state is unusable.
  virtual void loaded(const CheckpointInfo& info) = 0;
};

}  // namespace trellis
