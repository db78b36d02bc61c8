// Which gradient elements a rank counts in the global gradient norm, so that the norm over a
// parallel model equals the single-rank one. The rule is owns_piece (tensor_ownership.hpp)
// with DpCopies::distinct (the norm is reduced over dp only when ZeRO-1 left each dp rank a
// different shard); padding counts nowhere. Sum the masked squares, all-reduce over tp and pp
// (and dp when the gradients are sharded by ZeRO-1), take the root.
#pragma once

#include "trellis/comm/grid_layout.hpp"
#include "trellis/core/kokkos_types.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <string>
#include <vector>

namespace trellis {

// [store.buffer_size()] of 1 and 0; parameters named in `stage_copies` (a pipeline stage's
// copy of a tied parameter another stage counts) are 0. Setup-time only (allocates).
MaskView norm_mask(const nn::ParameterStore& store, const GridCoords& at,
                   const std::vector<std::string>& stage_copies = {});

}  // namespace trellis
