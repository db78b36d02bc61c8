// Sixteen floats as one GCC vector, for host loops whose shape GCC's auto-vectoriser does not
// take on its own: row maxima and sums over short rows, masked exponentials (softmax rows of
// attention tiles and of the cross-entropy). One Floats16 is one AVX-512 register in the
// x86-64-v4 clone of a TRELLIS_HOST_CLONES function, two AVX2 registers in the v3 clone and
// four SSE registers in the baseline one: the code is written once and never assumes the build
// host's instruction set. Every helper is always-inline, so it takes the clone's ISA.
//
// Results are deterministic: reductions combine the lanes in a fixed pairwise order.
#pragma once

#include "trellis/core/host_simd.hpp"

#include <cstdint>
#include <cstring>

// GCC's vector extensions (GCC and Clang); not in nvcc's host pass, whose CUDA builds run the
// device kernels instead: code using this header keeps a scalar path for TRELLIS_HOST_VECTORS 0.
// (-DTRELLIS_HOST_VECTORS=0 builds the scalar paths on any compiler.)
#ifndef TRELLIS_HOST_VECTORS
#if defined(__GNUC__) && !defined(__CUDACC__)
#define TRELLIS_HOST_VECTORS 1
#else
#define TRELLIS_HOST_VECTORS 0
#endif
#endif

#if TRELLIS_HOST_VECTORS

// GCC warns (-Wpsabi) wherever a 64-byte vector is passed or returned in a function compiled
// without AVX-512 (the baseline and AVX2 clones), because the calling convention would differ
// from an AVX-512 build's. Every helper here is always-inline, so no such call is left; the
// warning is off for the rest of the translation unit that includes this header, since GCC
// reports it where the helpers are inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace trellis::simd {

inline constexpr int kWidth = 16;
using Floats16 = float __attribute__((vector_size(kWidth * sizeof(float))));
using Ints16 = std::int32_t __attribute__((vector_size(kWidth * sizeof(std::int32_t))));

TRELLIS_HOST_INLINE Floats16 load(const float* p) {
  Floats16 v;
  std::memcpy(&v, p, sizeof v);  // unaligned load
  return v;
}

TRELLIS_HOST_INLINE void store(float* p, Floats16 v) { std::memcpy(p, &v, sizeof v); }

TRELLIS_HOST_INLINE Floats16 splat(float x) { return Floats16{} + x; }

// 0, 1, ..., 15: column indices within a vector, for masks such as "column < visible".
TRELLIS_HOST_INLINE Ints16 lane_index() {
  return Ints16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
}

TRELLIS_HOST_INLINE Floats16 max(Floats16 a, Floats16 b) { return a > b ? a : b; }
TRELLIS_HOST_INLINE Floats16 min(Floats16 a, Floats16 b) { return a < b ? a : b; }

// Lanes l + width of v moved to lane l (the rest: don't care), for the reductions below.
template <int Width>
TRELLIS_HOST_INLINE Floats16 upper_half(Floats16 v) {
  constexpr int w = Width;
#if defined(__clang__)
  return __builtin_shufflevector(v, v, (0 + w) % 16, (1 + w) % 16, (2 + w) % 16, (3 + w) % 16,
                                 (4 + w) % 16, (5 + w) % 16, (6 + w) % 16, (7 + w) % 16,
                                 (8 + w) % 16, (9 + w) % 16, (10 + w) % 16, (11 + w) % 16,
                                 (12 + w) % 16, (13 + w) % 16, (14 + w) % 16, (15 + w) % 16);
#else
  return __builtin_shuffle(
      v, Ints16{(0 + w) % 16, (1 + w) % 16, (2 + w) % 16, (3 + w) % 16, (4 + w) % 16, (5 + w) % 16,
                (6 + w) % 16, (7 + w) % 16, (8 + w) % 16, (9 + w) % 16, (10 + w) % 16,
                (11 + w) % 16, (12 + w) % 16, (13 + w) % 16, (14 + w) % 16, (15 + w) % 16});
#endif
}

// Horizontal reductions in registers, halving pairwise (lane l with lane l + width).
TRELLIS_HOST_INLINE float hmax(Floats16 v) {
  v = max(v, upper_half<8>(v));
  v = max(v, upper_half<4>(v));
  v = max(v, upper_half<2>(v));
  v = max(v, upper_half<1>(v));
  return v[0];
}

TRELLIS_HOST_INLINE float hmin(Floats16 v) {
  v = min(v, upper_half<8>(v));
  v = min(v, upper_half<4>(v));
  v = min(v, upper_half<2>(v));
  v = min(v, upper_half<1>(v));
  return v[0];
}

TRELLIS_HOST_INLINE float hsum(Floats16 v) {
  v += upper_half<8>(v);
  v += upper_half<4>(v);
  v += upper_half<2>(v);
  v += upper_half<1>(v);
  return v[0];
}

// math::fast_exp on sixteen lanes: the same range reduction and polynomial (core/fast_math.hpp,
// relative error < 3e-7 on [-87, 88], clamped below to exp(-87.3) rather than a denormal).
TRELLIS_HOST_INLINE Floats16 fast_exp(Floats16 x) {
  x = x < -87.3f ? splat(-87.3f) : x;
  x = x > 88.3f ? splat(88.3f) : x;
  const Floats16 n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const Floats16 r = x - n * 0.693359375f + n * 2.12194440e-4f;
  Floats16 p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const Floats16 er = p * r * r + r + 1.0f;
  // 2^n: the float with exponent field n + 127 (n in [-126, 127] after the clamp).
  const Ints16 bits = (__builtin_convertvector(n, Ints16) + 127) << 23;
  Floats16 scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return er * scale;
}

}  // namespace trellis::simd

#endif  // TRELLIS_HOST_VECTORS
