// Which gradient elements a rank counts in the global gradient norm, so that the norm over a
// tensor-parallel model equals the single-rank one: sharded parameters count on every rank
// (each holds different elements), replicated parameters (LayerNorms, row-parallel biases,
// position table) only on tp rank 0, padding nowhere. Sum the masked squares, all-reduce over
// tp (and dp when the gradients are sharded by ZeRO-1), take the root.
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <string>
#include <vector>

namespace trellis {

// [store.buffer_size()] of 1 and 0; parameters named in `copies` (a pipeline stage's copy of
// a tied parameter another stage counts) are 0. Setup-time only (allocates).
FloatView norm_mask(const nn::ParameterStore& store, int tp_rank,
                    const std::vector<std::string>& copies = {});

}  // namespace trellis
