// Bias kernels of a Linear layer: broadcast over rows forward, column sums backward.
//
// Loop order. Host: rows outer, columns inner, so the inner loop is contiguous in y / dy and in
// the bias, and vectorises (src/kernels/host_simd.hpp); the column sums keep a 256-wide tile of
// partial sums while whole rows stream past, instead of walking each column with a stride of
// `cols` floats (one cache line per element). CUDA: bias_add gives each row a team whose vector
// lanes take consecutive columns; column sums give each thread a column, so a warp reads 32
// consecutive floats of one row per step. Neither divides an index.
#pragma once

#include "trellis/kernels/views.hpp"

namespace trellis::kernels {

// y[r, j] += bias[j].   y: [n, cols]   bias: [cols]
void bias_add(Matrix y, ConstVector bias);

// grad[j] += sum_r dy[r, j].   dy: [n, cols]   grad: [cols]
// Accumulates (+=) because parameter gradients accumulate over micro-batches. Each column is
// summed in row order 0..n-1 and then added, on both paths, so the result is bitwise
// reproducible and the same on host and device.
void column_sum_accumulate(ConstMatrix dy, Vector grad);

}  // namespace trellis::kernels
