// exp and erf for float as straight-line code (polynomials, no table, no branch), so that a
// loop calling them vectorises on the host (libm's expf/erff are opaque calls that stop GCC) and
// runs without divergence on CUDA. Accuracy, checked by tests/unit/test_fast_math.cpp against
// the double-precision functions over dense grids:
//   fast_exp: Cephes' expf (range reduction by ln 2 in two parts, degree-5 polynomial), relative
//             error < 3e-7 on [-87, 88]; below -87.3 it returns exp(-87.3) ~ 1.2e-38, not a
//             denormal (GELU and softmax multiply it by something or add it to >= 1).
//   fast_erf: the odd/even rational approximation Eigen uses for float erf, input clamped to
//             [-4, 4] (erf(4) rounds to 1 in float), absolute error < 5e-7.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>

namespace trellis::math {

KOKKOS_INLINE_FUNCTION float fast_exp(float x) {
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  // x = n ln2 + r with |r| <= ln2 / 2; ln2 split in two so n * ln2 is exact enough. n is
  // rounded to nearest by adding and subtracting 1.5 * 2^23 (exact in float without
  // -ffast-math): no branch and no float-to-int conversion, so the loop vectorises.
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  // 2^n by building the float's exponent field (n is in [-126, 127] after the clamp).
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return er * scale;
}

KOKKOS_INLINE_FUNCTION float fast_erf(float x) {
  x = x < -4.0f ? -4.0f : x;
  x = x > 4.0f ? 4.0f : x;
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 - 2.10102402082508e-06f;
  p = p * x2 - 5.69250639462346e-05f;
  p = p * x2 - 7.34990630326855e-04f;
  p = p * x2 - 2.95459980854025e-03f;
  p = p * x2 - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 - 2.13374055278905e-04f;
  q = q * x2 - 1.68282697438203e-03f;
  q = q * x2 - 7.37332916720468e-03f;
  q = q * x2 - 1.42647390514189e-02f;
  return x * p / q;
}

}  // namespace trellis::math
