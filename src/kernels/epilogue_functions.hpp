// The element functions of a Linear's fused epilogue, shared by the fp32 kernels
// (kernels/bias.cpp) and the 16-bit-output ones (kernels/bias_activation_half.cpp).
#pragma once

#include "trellis/core/precision.hpp"
#include "trellis/kernels/activation.hpp"
#include "trellis/kernels/bias.hpp"

#include <cstdint>

namespace trellis::kernels::epilogue {

// f(v).
template <Activation F>
KOKKOS_INLINE_FUNCTION float activate(float v) {
  if constexpr (F == Activation::relu) return v > 0.0f ? v : 0.0f;
  if constexpr (F == Activation::gelu) return gelu(v);
  if constexpr (F == Activation::gelu_tanh) return gelu_tanh(v);
  return v;
}
// dy * f'(s), s the saved pre-activation (or, for relu, the output).
template <Activation F>
KOKKOS_INLINE_FUNCTION float activation_backward(float saved, float dy) {
  if constexpr (F == Activation::relu) return saved > 0.0f ? dy : 0.0f;
  if constexpr (F == Activation::gelu) return dy * gelu_grad(saved);
  if constexpr (F == Activation::gelu_tanh) return dy * gelu_tanh_grad(saved);
  return dy;
}

// Rounding to and widening from a 16-bit format fixed at compile time (host loops, so that
// the format test is not inside them).
template <Precision P>
KOKKOS_INLINE_FUNCTION std::uint16_t half_bits(float f) {
  if constexpr (P == Precision::bf16) return float_to_bf16_bits(f);
  return float_to_fp16_bits(f);
}
template <Precision P>
KOKKOS_INLINE_FUNCTION float widen(std::uint16_t h) {
  if constexpr (P == Precision::bf16) return bf16_bits_to_float(h);
  return fp16_bits_to_float(h);
}

}  // namespace trellis::kernels::epilogue
