// Element-wise activations, forward and backward. All matrices of one call have one shape
// [n, features]; the input x is what the forward saw (backward recomputes from it).
#pragma once

#include "trellis/core/fast_math.hpp"
#include "trellis/kernels/views.hpp"

namespace trellis::kernels {

// Exact GELU, as PyTorch's default (approximate='none'): x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)),
// with erf and exp from core/fast_math.hpp (vectorisable; within 5e-7 of the exact functions).
KOKKOS_INLINE_FUNCTION float gelu(float x) {
  return 0.5f * x * (1.0f + math::fast_erf(x * 0.70710678118654752f));
}
// d gelu / dx = Phi(x) + x * phi(x), phi the standard normal density.
KOKKOS_INLINE_FUNCTION float gelu_grad(float x) {
  const float cdf = 0.5f * (1.0f + math::fast_erf(x * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * math::fast_exp(-0.5f * x * x);
  return cdf + x * pdf;
}

// GELU's tanh approximation (PyTorch approximate='tanh'; GPT-2's "gelu_new"):
// 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as x * sigmoid(2u) (the
// same function: 0.5 (1 + tanh u) = 1 / (1 + e^-2u)), which needs one exp and no cancellation.
KOKKOS_INLINE_FUNCTION float gelu_tanh(float x) {
  const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
  return x / (1.0f + math::fast_exp(-2.0f * u));
}
// d/dx = s + x s (1 - s) 2 u', s = sigmoid(2u), u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
KOKKOS_INLINE_FUNCTION float gelu_tanh_grad(float x) {
  const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
  const float s = 1.0f / (1.0f + math::fast_exp(-2.0f * u));
  const float du = 0.79788456080286536f * (1.0f + 0.134145f * x * x);
  return s + 2.0f * x * s * (1.0f - s) * du;
}

// y = max(x, 0)
void relu_forward(ConstMatrix x, Matrix y);
// dx = dy * [x > 0]  (subgradient 0 at x == 0, as PyTorch). x may be the ReLU's output
// instead of its input: y > 0 exactly where x > 0.
void relu_backward(ConstMatrix x, ConstMatrix dy, Matrix dx);
// y = max(a + b, 0): a residual add and the ReLU after it in one pass. The sum is not kept:
// relu_backward(y, dy, dx) has the mask.
void add_relu_forward(ConstMatrix a, ConstMatrix b, Matrix y);
// dx += dy * [y > 0]: relu_backward's result added where the gradient meets another branch
// (a residual block's identity shortcut), without writing it out first.
void relu_backward_add(ConstMatrix y, ConstMatrix dy, Matrix dx);
// y = gelu(x)
void gelu_forward(ConstMatrix x, Matrix y);
// dx = dy * gelu'(x)
void gelu_backward(ConstMatrix x, ConstMatrix dy, Matrix dx);

}  // namespace trellis::kernels
