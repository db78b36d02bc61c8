// The checkpoint parts (checkpoint_part.hpp) of the step's numerics: PowerSGD's per-rank state
// and the loss scaler's. (The pruner is a part of its own, pruner.hpp.)
#pragma once

#include "trellis/comm/process_grid.hpp"
#include "trellis/optim/loss_scaler.hpp"
#include "trellis/parallel/gradient_sync.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/loop/checkpoint_part.hpp"

namespace trellis {

// powersgd/state [world, L]: row r is rank r's PowerSGD Q and error feedback, zero-padded to
// the longest rank's L; counters powersgd_world, _tp, _pp, _rank, _min_compression_x1000 say
// the layout it belongs to. Loaded only on that same layout, else restarted (with a warning).
class PowerSgdCheckpoint : public CheckpointPart {
 public:
  // Every reference must outlive the part.
  PowerSgdCheckpoint(const TrainConfig& config, const ProcessGrid& grid, GradientSync& sync)
      : config_(config), grid_(grid), sync_(sync) {}
  void save(std::vector<TensorPiece>& pieces, CheckpointInfo& info) override;
  std::string pieces_to_load(const std::string& dir, const CheckpointInfo& info,
                             std::vector<TensorPiece>& pieces) override;
  void loaded(const CheckpointInfo& info) override;

 private:
  // This rank's piece over staging_ (sized here). Collective: L is the world's maximum.
  TensorPiece state_piece();
  bool fits(const CheckpointInfo& info) const;  // the same world, layout and rank

  const TrainConfig& config_;
  const ProcessGrid& grid_;
  GradientSync& sync_;
  FloatView staging_;  // [L]: this rank's row of powersgd/state
  bool loading_ = false;
};

// The dynamic loss scaler's state as counters (loss_scale_bits: the float's bits, so it
// resumes bit-exact); a checkpoint without them (fp32, bf16) leaves the scaler at its start.
class LossScalerCheckpoint : public CheckpointPart {
 public:
  explicit LossScalerCheckpoint(LossScaler& scaler) : scaler_(scaler) {}
  void save(std::vector<TensorPiece>& pieces, CheckpointInfo& info) override;
  std::string pieces_to_load(const std::string&, const CheckpointInfo&,
                             std::vector<TensorPiece>&) override {
    return "";
  }
  void loaded(const CheckpointInfo& info) override;

 private:
  LossScaler& scaler_;
};

}  // namespace trellis
