// Bias kernels of a Linear layer: broadcast over rows forward, column sums backward.
#pragma once

#include "trellis/kernels/views.hpp"

namespace trellis::kernels {

// y[r, j] += bias[j].   y: [n, cols]   bias: [cols]
void bias_add(Matrix y, ConstVector bias);

// grad[j] += sum_r dy[r, j].   dy: [n, cols]   grad: [cols]
// Accumulates (+=) because parameter gradients accumulate over micro-batches. Each column is
// summed in row order 0..n-1 by one thread, so the result is bitwise reproducible.
void column_sum_accumulate(ConstMatrix dy, Vector grad);

}  // namespace trellis::kernels
