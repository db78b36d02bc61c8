// The 16-bit floating-point formats of mixed precision, as storage types of our own: under
// Kokkos 3.4 (and host-only 4.x builds) Kokkos::Experimental::half_t is plain float and bhalf_t
// does not exist, so neither can be relied on for storage or for rounding.
//
//   bf16: 1 sign, 8 exponent, 7 mantissa bits: fp32's range, 8 significant bits
//   fp16: 1 sign, 5 exponent, 10 mantissa bits: max 65504, subnormals below 2^-14
//
// Conversions round to nearest, ties to even (IEEE-754's default and what cuBLAS, oneDNN and
// PyTorch do), NaN stays NaN (quiet), overflow goes to infinity: fp16's small range is why fp16
// training needs loss scaling. Stochastic rounding (round_stochastic) rounds up with probability
// equal to the distance from the lower neighbour, so the expected value is exact (llm.c's
// weight updates); its random word comes from the counter RNG, so it is layout-independent.
// Everything here is device-callable and bit-exact across host and device.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace trellis {

// precision.mode / parallel.grad_dtype.
enum class Precision { fp32, bf16, fp16 };
// The names, the one list (the config table and the messages read it).
const std::vector<std::pair<const char*, Precision>>& precision_names();
// "fp32" | "bf16" | "fp16"; anything else throws ConfigError naming `key`.
Precision parse_precision(const std::string& name, const char* key);
const char* precision_name(Precision p);
// Bytes per element.
inline std::size_t precision_bytes(Precision p) { return p == Precision::fp32 ? 4 : 2; }

struct bf16 {
  std::uint16_t bits;
};
struct fp16 {
  std::uint16_t bits;
};

namespace half_detail {

KOKKOS_INLINE_FUNCTION std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
KOKKOS_INLINE_FUNCTION float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace half_detail

KOKKOS_INLINE_FUNCTION std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t u = half_detail::float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);  // ties to even
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}
KOKKOS_INLINE_FUNCTION float bf16_bits_to_float(std::uint16_t h) {
  return half_detail::bits_float(static_cast<std::uint32_t>(h) << 16);
}

// Float -> fp16 by float arithmetic (Maratyszcza's FP16 library): scaling by 2^112 then 2^-110
// lets the FPU round the mantissa at the right bit, subnormals included; needs IEEE float
// arithmetic (no -ffast-math), which every target of Trellis has.
KOKKOS_INLINE_FUNCTION std::uint16_t float_to_fp16_bits(float f) {
  const float scale_to_inf = half_detail::bits_float(0x77800000u);   // 2^112
  const float scale_to_zero = half_detail::bits_float(0x08800000u);  // 2^-110
  const float magnitude = f < 0.0f ? -f : f;
  float base = (magnitude * scale_to_inf) * scale_to_zero;
  const std::uint32_t w = half_detail::float_bits(f);
  const std::uint32_t shl1_w = w + w;
  const std::uint32_t sign = w & 0x80000000u;
  std::uint32_t bias = shl1_w & 0xff000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = half_detail::bits_float((bias >> 1) + 0x07800000u) + base;
  const std::uint32_t bits = half_detail::float_bits(base);
  const std::uint32_t exp_bits = (bits >> 13) & 0x00007c00u;
  const std::uint32_t mantissa_bits = bits & 0x00000fffu;
  const std::uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<std::uint16_t>((sign >> 16) | (shl1_w > 0xff000000u ? 0x7e00u : nonsign));
}
KOKKOS_INLINE_FUNCTION float fp16_bits_to_float(std::uint16_t h) {
  const std::uint32_t w = static_cast<std::uint32_t>(h) << 16;
  const std::uint32_t sign = w & 0x80000000u;
  const std::uint32_t two_w = w + w;
  const std::uint32_t exp_offset = 0xe0u << 23;
  const float exp_scale = half_detail::bits_float(0x07800000u);  // 2^-112
  const float normalized = half_detail::bits_float((two_w >> 4) + exp_offset) * exp_scale;
  const std::uint32_t magic_mask = 126u << 23;
  const float magic_bias = 0.5f;
  const float denormalized = half_detail::bits_float((two_w >> 17) | magic_mask) - magic_bias;
  const std::uint32_t denormalized_cutoff = 1u << 27;
  const std::uint32_t result =
      sign | (two_w < denormalized_cutoff ? half_detail::float_bits(denormalized)
                                          : half_detail::float_bits(normalized));
  return half_detail::bits_float(result);
}

KOKKOS_INLINE_FUNCTION std::uint16_t to_half_bits(Precision p, float f) {
  return p == Precision::bf16 ? float_to_bf16_bits(f) : float_to_fp16_bits(f);
}
KOKKOS_INLINE_FUNCTION float half_bits_to_float(Precision p, std::uint16_t h) {
  return p == Precision::bf16 ? bf16_bits_to_float(h) : fp16_bits_to_float(h);
}
// f rounded to the nearest value of format p (fp32: f itself), as a float.
KOKKOS_INLINE_FUNCTION float round_to(Precision p, float f) {
  return p == Precision::fp32 ? f : half_bits_to_float(p, to_half_bits(p, f));
}

// Stochastic rounding of a finite f to format p with the 32-bit random word `word`: with
// a <= f <= b the two neighbours in p, b is chosen with probability (f - a) / (b - a). Values
// that round to infinity, NaN and exact values round to nearest.
KOKKOS_INLINE_FUNCTION std::uint16_t to_half_bits_stochastic(Precision p, float f,
                                                             std::uint32_t word) {
  const std::uint16_t nearest = to_half_bits(p, f);
  const float r = half_bits_to_float(p, nearest);
  const std::uint16_t magnitude_mask = 0x7fffu;
  const std::uint16_t inf_bits = p == Precision::bf16 ? 0x7f80u : 0x7c00u;
  if (r == f || !(f == f) || (nearest & magnitude_mask) >= inf_bits) return nearest;
  // The neighbour on f's other side: one step in bits away from or towards zero.
  const bool away_from_zero = (r < f) == (f > 0.0f);
  const std::uint16_t other =
      static_cast<std::uint16_t>((nearest & magnitude_mask) == 0 && !away_from_zero
                                     ? nearest
                                     : (away_from_zero ? nearest + 1 : nearest - 1));
  const float o = half_bits_to_float(p, other);
  if (((other & magnitude_mask) >= inf_bits)) return nearest;
  // Probability of the other neighbour: |f - r| / |o - r|, compared against word in [0, 1).
  const float gap = o > r ? o - r : r - o;
  const float distance = f > r ? f - r : r - f;
  const float u = static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
  return u * gap < distance ? other : nearest;
}

}  // namespace trellis
