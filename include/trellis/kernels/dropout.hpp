// Inverted dropout with a counter-based mask: no mask buffer, and a mask that depends only on
// (seed, stream, global element position), never on how the batch was split.
#pragma once

#include "trellis/core/rng.hpp"
#include "trellis/kernels/views.hpp"

#include <cstdint>

namespace trellis::kernels {

struct DropoutMask {
  float p = 0.0f;               // drop probability, 0 <= p < 1
  std::uint64_t seed = 0;       // run seed
  std::uint64_t stream = 0;     // e.g. stream_mix(stream_from_name(layer), step)
  std::uint64_t first_row = 0;  // global row of row 0 of this call (first sample in the batch)
  // Tensor parallelism: a rank holding a slice of the logical [rows, cols] tensor draws the
  // numbers the whole tensor would at those elements.
  // Columns: the call's cols are [col_offset, col_offset + cols) of logical_cols (0: cols).
  std::uint64_t logical_cols = 0;
  std::uint64_t col_offset = 0;
  // Rows (attention heads split over ranks): the call's rows come in groups of group_rows
  // that sit at [group_offset, group_offset + group_rows) of logical groups of
  // logical_group_rows rows. group_rows == 0: rows map one to one.
  std::uint64_t group_rows = 0;
  std::uint64_t logical_group_rows = 0;
  std::uint64_t group_offset = 0;
};

// Element (r, j) of a [n, cols] call is kept iff
//   random_uniform(seed, stream, (first_row + R(r)) * C + col_offset + j) >= p,
// with C = logical_cols (or cols) and R the row map above (identity by default), so the
// probability of keeping is 1 - p (uniform draws are multiples of 2^-24 in [0, 1)).
KOKKOS_INLINE_FUNCTION bool dropout_keep(const DropoutMask& mask, std::uint64_t row,
                                         std::uint64_t col, std::uint64_t cols) {
  const std::uint64_t logical_row = mask.group_rows == 0
                                        ? row
                                        : (row / mask.group_rows) * mask.logical_group_rows +
                                              mask.group_offset + row % mask.group_rows;
  const std::uint64_t width = mask.logical_cols == 0 ? cols : mask.logical_cols;
  return random_uniform(mask.seed, mask.stream,
                        (mask.first_row + logical_row) * width + mask.col_offset + col) >= mask.p;
}

// out = in * keep / (1 - p). Forward (x -> y) and backward (dy -> dx) are the same map with the
// same mask, recomputed from the counters instead of stored. in, out: [n, cols]; may alias.
void dropout_apply(ConstMatrix in, Matrix out, const DropoutMask& mask);

}  // namespace trellis::kernels
