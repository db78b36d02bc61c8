#include "trellis/kernels/bias.hpp"

#include "host_simd.hpp"
#include "trellis/core/kernel_label.hpp"

#include <algorithm>

namespace trellis::kernels {

namespace {

using Index = std::int64_t;

TRELLIS_HOST_CLONES
void host_bias_add(float* __restrict y, const float* __restrict bias, Index rows, Index cols) {
  for (Index r = 0; r < rows; ++r) {
    float* __restrict row = y + r * cols;
    for (Index j = 0; j < cols; ++j) row[j] += bias[j];
  }
}

// Columns summed per pass: an accumulator of this many floats stays in registers / L1 while
// the rows stream through.
constexpr Index kColumnTile = 256;

TRELLIS_HOST_CLONES
void host_column_sum(const float* __restrict dy, float* __restrict grad, Index rows, Index cols) {
  for (Index j0 = 0; j0 < cols; j0 += kColumnTile) {
    const Index width = std::min(kColumnTile, cols - j0);
    float sum[kColumnTile] = {};
    for (Index r = 0; r < rows; ++r) {
      const float* __restrict row = dy + r * cols + j0;
      for (Index j = 0; j < width; ++j) sum[j] += row[j];
    }
    for (Index j = 0; j < width; ++j) grad[j0 + j] += sum[j];
  }
}

}  // namespace

void bias_add(Matrix y, ConstVector bias) {
  TRELLIS_REQUIRE(bias.extent(0) == y.extent(1),
                  "bias_add: bias " + extents_string(bias) + " for rows " + extents_string(y));
  const Index rows = static_cast<Index>(y.extent(0)), cols = static_cast<Index>(y.extent(1));
  float* yp = y.data();
  const float* bp = bias.data();
  if constexpr (kHostMemory) {
    host_bias_add(yp, bp, rows, cols);
  } else {
    Kokkos::parallel_for(
        TRELLIS_KERNEL_LABEL("trellis::linear::bias_fwd"), RowTeams(rows, Kokkos::AUTO),
        KOKKOS_LAMBDA(const RowTeams::member_type& team) {
          float* row = yp + static_cast<Index>(team.league_rank()) * cols;
          Kokkos::parallel_for(Kokkos::TeamVectorRange(team, cols),
                               [&](const Index j) { row[j] += bp[j]; });
        });
  }
}

void column_sum_accumulate(ConstMatrix dy, Vector grad) {
  TRELLIS_REQUIRE(
      grad.extent(0) == dy.extent(1),
      "column_sum_accumulate: grad " + extents_string(grad) + " for rows " + extents_string(dy));
  const Index rows = static_cast<Index>(dy.extent(0)), cols = static_cast<Index>(dy.extent(1));
  const float* dyp = dy.data();
  float* gp = grad.data();
  if constexpr (kHostMemory) {
    host_column_sum(dyp, gp, rows, cols);
  } else {
    // One thread per column walking down the rows: a warp reads 32 consecutive floats of a row.
    Kokkos::parallel_for(
        TRELLIS_KERNEL_LABEL("trellis::linear::bias_bwd"), Range(0, cols),
        KOKKOS_LAMBDA(const Index j) {
          float sum = 0.0f;
          for (Index r = 0; r < rows; ++r) sum += dyp[r * cols + j];
          gp[j] += sum;
        });
  }
}

}  // namespace trellis::kernels
