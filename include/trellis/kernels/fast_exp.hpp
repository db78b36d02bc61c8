// A vectorisable expf for the attention softmax.
//
// libm's expf is an opaque call per element, so a loop around it never vectorises (GCC's
// libmvec variants need -ffast-math, which the build does not use). This is Cephes' expf:
// exp(x) = 2^n exp(r) with n = round(x / ln 2) (by the 1.5 * 2^23 rounding trick, no call),
// r = x - n ln 2 in two parts (exact to ~1e-11), exp(r) by a degree-7 polynomial on
// |r| <= ln 2 / 2, and 2^n built in the exponent bits. Straight-line code with selects only,
// so GCC vectorises loops around it. Accuracy: within 2 ulp of the correctly rounded result
// on the range the attention uses (tested in test_flash_attention.cpp).
// Domain: x < -87.33 (including -inf) gives exactly 0; x is clamped to 88 above (the
// attention only takes exponents <= ~0); NaN stays NaN.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>

namespace trellis::kernels {

KOKKOS_INLINE_FUNCTION float float_from_bits(std::int32_t bits) {
#if defined(__CUDA_ARCH__)
  return __int_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

KOKKOS_INLINE_FUNCTION float fast_exp(float x) {
  const bool underflow = x < -87.33654f;  // below: exp(x) < 2^-126, the smallest normal
  x = underflow ? -87.33654f : x;
  x = x > 88.0f ? 88.0f : x;
  const float rounder = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + rounder) - rounder;
  float r = x - n * 0.693359375f;  // ln 2 = 0.693359375 - 2.12194440e-4 (+ 1e-11)
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const float scale = float_from_bits((static_cast<std::int32_t>(n) + 127) << 23);  // 2^n
  return underflow ? 0.0f : y * scale;
}

}  // namespace trellis::kernels
