// Bias kernels of a Linear layer: broadcast over rows forward, column sums backward, and the
// same two fused with the activation that follows the Linear (its epilogue).
//
// Loop order. Host: rows outer, columns inner, so the inner loop is contiguous in y / dy and in
// the bias, and vectorises (core/host_simd.hpp); the column sums keep a 256-wide tile of
// partial sums while whole rows stream past, instead of walking each column with a stride of
// `cols` floats (one cache line per element). CUDA: bias_add gives each row a team whose vector
// lanes take consecutive columns; column sums give each thread a column, so a warp reads 32
// consecutive floats of one row per step. Neither divides an index.
//
// Fusion. bias_activation_forward adds the bias and applies the activation in the pass that
// reads the GEMM's output once; bias_activation_backward computes dz = dy * f'(z) and adds
// dz's column sums into the bias gradient in the one pass over dy that the column sums need
// anyway (same tile and row order as column_sum_accumulate, so the bias gradient is bitwise
// what the unfused pair activation backward + column_sum_accumulate gives).
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

// The activation applied after a Linear's bias (its epilogue). gelu is the exact (erf) GELU,
// gelu_tanh its tanh approximation (kernels/activation.hpp).
enum class Activation { none, relu, gelu, gelu_tanh };
// Whether backward needs the pre-activation z kept apart from y (relu's output serves).
constexpr bool keeps_pre_activation(Activation f) {
  return f == Activation::gelu || f == Activation::gelu_tanh;
}

// z[r, j] += bias[j];  y[r, j] = f(z[r, j]).   z, y: [n, cols]   bias: [cols]
// z and y may be the same matrix (then only f(z + b) is kept; enough for relu's backward).
void bias_activation_forward(Matrix z, ConstVector bias, Activation f, Matrix y);

// dz[r, j] = dy[r, j] * f'(z[r, j]);  grad[j] += sum_r dz[r, j].
//   saved: [n, cols] the pre-activation z; for relu the output f(z) serves too ([z > 0] ==
//   [f(z) > 0]).  dy, dz: [n, cols]  grad: [cols]. f must not be none.
void bias_activation_backward(ConstMatrix saved, ConstMatrix dy, Activation f, Matrix dz,
                              Vector grad);

}  // namespace trellis::kernels
