// The one rule for "which rank writes, counts or reduces a logical tensor".
//
// A logical tensor (a parameter, one of its optimizer states, a model buffer) can be held
// identically by several ranks: replicated over the tensor-parallel group (LayerNorm weights,
// row-parallel biases, the position table), over the data-parallel ranks (every parameter
// without ZeRO-1), and — the GPT's tied token table — on the first and the last pipeline
// stage. Whoever sums, counts or writes such a tensor must take each distinct piece once:
//
//   - a piece split over tp (ShardSpec::sharded) is distinct on every tp rank; a replicated
//     one is owned by tp rank 0;
//   - a pipeline stage's copy of a tensor another stage owns (the tied table on the last
//     stage) is never owned;
//   - over dp: when the quantity is later summed or written across dp ranks that hold the
//     same values (checkpoint and model.h5 writers), dp rank 0 owns it; when every dp rank
//     holds a different part (ZeRO-1 shards) or the result is not combined over dp (the
//     gradient norm of replicated gradients, the parameter count), dp does not decide.
//
// Users: the checkpoint and weights writers, the gradient-norm mask, the parameter count.
#pragma once

#include "trellis/comm/grid_layout.hpp"

namespace trellis {

enum class DpCopies {
  identical,  // every dp rank holds the same values and the quantity is combined over dp
  distinct,   // dp ranks hold different parts, or nothing is combined over dp
};

// Whether the rank at `at` owns its piece of a tensor. sharded_over_tp: the piece is one of
// several tp pieces (nn::ShardSpec::sharded()); stage_copy: this stage holds a copy of a
// tensor another pipeline stage owns.
inline bool owns_piece(bool sharded_over_tp, bool stage_copy, DpCopies dp, const GridCoords& at) {
  if (stage_copy) return false;
  if (!sharded_over_tp && at.tp != 0) return false;
  return dp == DpCopies::distinct || at.dp == 0;
}

}  // namespace trellis
