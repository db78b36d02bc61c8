// Pruning during training: gradual magnitude pruning (prune.method = magnitude) and
// structured pruning of whole units (prune.method = structured).
//
// Targets: every weight of a Linear or Conv layer (parameters of two or more dimensions with
// weight decay); embeddings, norms and biases are never pruned. Each target has a 0/1 mask
// (1 = kept) in one flat buffer beside the parameters ([store.buffer_size()], ones outside
// the targets), so a mask is a logical tensor like its parameter: checkpoints store it as
// masks/<name> with the parameter's shard, and any layout reads it. With ZeRO-3 the masks
// exist only in update space, [update size] beside the parameter shard: no rank holds a whole
// stage's.
//
// When the schedule is due (optim/sparsity_schedule.hpp, after the step's update and the
// ZeRO-1 all-gather, so every rank holds its whole pieces; with ZeRO-3, before the gather, from
// each rank's ranges of the pieces in its shard), the k = round(s_t x n) smallest
// magnitudes are pruned, where n is a target's logical size (scope layer: per tensor,
// torch.nn.utils.prune.l1_unstructured) or the size of all targets together (scope global:
// global_unstructured with L1). The weights pruned before are zero, so they are the first
// pruned again: masks only grow while the schedule rises. The k-th smallest magnitude is
// found exactly, by a binary search over its bits (kernels/sparsity.hpp) with one reduction
// over the ranks that hold pieces of the tensor per probe (tp; pp for global; the ZeRO-3 shard
// group), so the mask
// is a function of the logical values only: the same on every layout. Every element whose
// magnitude equals the k-th smallest is pruned with it (PyTorch picks arbitrarily among such
// ties; with continuous weights there are none).
//
// Structured (torch.nn.utils.prune.ln_structured with n = 2, dim = 0): the model names its
// unit groups (nn::PrunableUnits: an MLP hidden layer's neurons, a CNN block's inner
// channels); each unit's L2 norm is the norm of its weight row (summed over the tp pieces
// as squares), and the k = round(s_t x units) of smallest norm, ties by index, are pruned
// with their followers (bias, BatchNorm gamma and beta): the unit's output is then exactly
// zero and `trellis export --prune` removes it (train/export.hpp).
//
// Pruned weights stay zero: their gradients are zeroed after the dp reduction (before the
// global norm and clipping see them), the optimizer state at newly pruned positions is zeroed
// when the masks change (momentum, Adam's moments: with zero gradients, zero weights and zero
// state every update rule leaves them at zero, weight decay included), and the weights are
// masked again after every optimizer step.
#pragma once

#include "trellis/comm/process_grid.hpp"
#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/param_window.hpp"
#include "trellis/optim/sparsity_schedule.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/files/tensor_piece.hpp"
#include "trellis/train/loop/checkpoint_part.hpp"
#include "trellis/train/loop/training_model.hpp"
#include "trellis/train/monitoring/metrics_sink.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

class Pruner : public CheckpointPart {
 public:
  // total_steps: the run's length (prune.end_step = 0 means it). The model must outlive this.
  Pruner(const PruneConfig& config, std::int64_t total_steps, const ProcessGrid& grid,
         TrainingModel& model);

  bool enabled() const { return enabled_; }
  const SparsitySchedule& schedule() const { return schedule_; }

  // After the dp reduction, before the global norm: the update gradients of pruned weights
  // become zero. update_grads is the sync's [update size] view.
  void mask_gradients(FloatView update_grads) const;
  // After the optimizer step, before the ZeRO-1 all-gather: pruned weights back to zero, in
  // the parameters the step updated (the sync's update_windows()).
  void mask_updated_params(const std::vector<ParamWindow>& windows) const;
  // After step `completed` is complete: recomputes the masks when the schedule is due, then
  // zeroes the pruned weights and their optimizer state. Collective over the world. Returns
  // whether the masks changed.
  bool after_step(std::int64_t completed);

  // Each target's sparsity (logical tensors, whole model), in the store's order; the same on
  // every rank. Collective over the world.
  std::vector<LayerSparsity> sparsity() const;

  // A checkpoint part (checkpoint_part.hpp): the masks as pieces masks/<name>, written once per
  // logical element and read by every rank that holds a piece, and the counter prune_masks
  // (1 magnitude, 2 structured). Masks of the other method are not loaded: a run that starts
  // pruning from a dense checkpoint, or changes prune.method, starts with none pruned; one
  // that stops pruning trains the zeros it has from there on.
  void save(std::vector<TensorPiece>& pieces, CheckpointInfo& info) override;
  std::string pieces_to_load(const std::string& dir, const CheckpointInfo& info,
                             std::vector<TensorPiece>& pieces) override;
  // The update-space copy of the masks and the pruned weights, after the masks were read.
  void loaded(const CheckpointInfo& info) override;
  std::vector<TensorPiece> mask_pieces() const;
  // Which masks it checkpoints (the counter prune_masks): 0 none, 1 magnitude, 2 structured.
  int checkpoint_kind() const { return !enabled_ ? 0 : structured_ ? 2 : 1; }

 private:
  struct Units {  // nn::PrunableUnits as store indices
    std::size_t weight;
    std::vector<std::size_t> followers;
  };

  // What this rank holds of parameter t and its mask: the whole piece, or with ZeRO-3 its
  // ranges of the piece in the shard ([begin, end) of the piece's elements).
  struct Held {
    kernels::Vector params;
    kernels::Vector mask;
    std::size_t begin = 0, end = 0;
  };
  std::vector<Held> held(std::size_t t) const;
  // Sums per-rank counts over every rank holding part of the tensors: tp, the stages
  // (over_stages), and with ZeRO-3 the shard group.
  void sum_over_holders(std::vector<long long>& counts, bool over_stages) const;

  void find_targets();
  void prune_magnitudes(double target);
  void prune_units(double target);
  // mask of parameter `info` from the units kept ([rows of its logical dim 0]).
  void set_unit_mask(const nn::ParamInfo& info, const std::vector<float>& keep);
  void refresh_update_mask();
  void zero_pruned();  // weights (all pieces) and optimizer state (update space)
  bool counts_here(std::size_t target) const;  // whether this rank counts the target's piece

  bool enabled_ = false;
  bool loading_ = false;  // between pieces_to_load() and loaded()
  bool structured_ = false;
  bool global_ = false;
  SparsitySchedule schedule_;
  const ProcessGrid& grid_;
  TrainingModel& model_;
  std::vector<std::size_t> targets_;  // store indices of the weights whose sparsity is reported
  std::vector<std::size_t> masked_;   // store indices of every masked parameter (checkpointed)
  std::vector<Units> units_;          // structured: this stage's unit groups
  FloatView masks_;                   // [store.buffer_size()]: 1 kept, 0 pruned (not ZeRO-3)
  FloatView update_mask_;             // [update size]: masks_ in update space (ZeRO shard)
};

}  // namespace trellis
