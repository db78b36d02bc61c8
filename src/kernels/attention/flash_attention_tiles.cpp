// The two products of a forward attention tile, register-blocked on GCC vectors of the CPU's
// register width (one version per instruction set: core/host_simd.hpp) in place of two sgemm
// calls: at T = 128 and head dimension 32 a tile
// product is 64 x 64 x 32, too small for a library call to pay for its checks and dispatch
// (profile: oneDNN's sgemm entry cost as much as the arithmetic; the header has the figures).
//
// scores_tile:        s[i][j] = scale * sum_c q[i][c] k[j][c]
//                     k is copied once as k^T [hd][B] (scaled, zero past kn), then each group of
//                     R query rows keeps R x 4 vectors of sums in registers over c.
// accumulate_values:  acc[i][:] += sum_j p[i][j] v[j][:]
//                     each group of R query rows keeps R x 4 vectors of its acc rows in
//                     registers over j.
// R = 4 with AVX-512 (32 registers), 2 with AVX2 or SSE (16). Every sum is over c (or j) in
// ascending order in one lane, so each version gives the same bits (FMA in both vector ones).
// Both stop at the causal frontier: query row i (t = q0 + i) sees keys j < i + shift + 1
// (shift = q0 - k0), so a row group reads and writes only the columns its last row sees.
#include "flash_attention_impl.hpp"

#include "trellis/core/host_simd.hpp"
#include "trellis/core/host_vector.hpp"

#include <cstring>

#include "trellis/core/error.hpp"

namespace trellis::kernels::flash {

#if TRELLIS_HOST_VECTORS
namespace {

constexpr std::int64_t B = kHostTile;

// W-float GCC vectors: W = 16 in the AVX-512 version, 8 in the AVX2 one, 4 in the baseline, so
// every vector is one register of the version's instruction set.
// (A typedef: GCC drops the attribute from the equivalent alias-declaration.)
template <int W>
struct Vec {
  typedef float type __attribute__((vector_size(W * sizeof(float))));
  static_assert(sizeof(type) == W * sizeof(float), "a vector of W floats");
};
template <int W>
using FloatsW = typename Vec<W>::type;

template <int W>
TRELLIS_HOST_INLINE FloatsW<W> load(const float* p) {
  FloatsW<W> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <int W>
TRELLIS_HOST_INLINE void store(float* p, FloatsW<W> v) {
  std::memcpy(p, &v, sizeof v);
}
template <int W>
TRELLIS_HOST_INLINE FloatsW<W> splat(float x) {
  return FloatsW<W>{} + x;
}

// Keys of the tile the last of rows [i0, i0 + rows) sees.
inline std::int64_t group_keys(std::int64_t i0, std::int64_t rows, std::int64_t kn,
                               std::int64_t shift) {
  const std::int64_t v = i0 + rows + shift;
  return v < 0 ? 0 : (v > kn ? kn : v);
}

// s rows [i0, i0 + R), vectors [v0, v0 + C) of each, from kt [hd][B]: R x C sums in registers.
template <int W, int R, int C>
TRELLIS_HOST_INLINE void scores_group(std::int64_t i0, std::int64_t v0, std::int64_t hd,
                                      const float* __restrict q, std::int64_t ldq,
                                      const float* __restrict kt, float* __restrict s) {
  FloatsW<W> sum[R][C] = {};
  for (std::int64_t c = 0; c < hd; ++c) {
    FloatsW<W> qv[R];
    for (int r = 0; r < R; ++r) qv[r] = splat<W>(q[(i0 + r) * ldq + c]);
    for (int v = 0; v < C; ++v) {
      const FloatsW<W> kv = load<W>(kt + c * B + (v0 + v) * W);
      for (int r = 0; r < R; ++r) sum[r][v] += qv[r] * kv;
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < C; ++v) store<W>(s + (i0 + r) * B + (v0 + v) * W, sum[r][v]);
}

// Vectors [0, live) of rows [i0, i0 + R), C at a time (the last chunk shorter).
template <int W, int R, int C>
TRELLIS_HOST_INLINE void scores_rows(std::int64_t live, std::int64_t i0, std::int64_t hd,
                                     const float* q, std::int64_t ldq, const float* kt, float* s) {
  static_assert(C == 4, "one case per chunk length");
  for (std::int64_t v0 = 0; v0 < live; v0 += C) {
    switch (live - v0) {
      case 1:
        scores_group<W, R, 1>(i0, v0, hd, q, ldq, kt, s);
        break;
      case 2:
        scores_group<W, R, 2>(i0, v0, hd, q, ldq, kt, s);
        break;
      case 3:
        scores_group<W, R, 3>(i0, v0, hd, q, ldq, kt, s);
        break;
      default:
        scores_group<W, R, 4>(i0, v0, hd, q, ldq, kt, s);
        break;
    }
  }
}

// R rows per register block: 4 x 4 sums in AVX-512's 32 registers, 2 x 4 in 16.
template <int W>
constexpr int kRows = W == 16 ? 4 : 2;

template <int W>
TRELLIS_HOST_INLINE void scores_tile_w(std::int64_t qn, std::int64_t kn, std::int64_t hd,
                                       std::int64_t shift, float scale, const float* __restrict q,
                                       std::int64_t ldq, const float* __restrict k,
                                       std::int64_t ldk, float* __restrict s) {
  static_assert(B % W == 0, "a tile row is whole vectors");
  constexpr int R = kRows<W>;
  alignas(64) float kt[kHostMaxHeadDim * B];  // scale k^T [hd][B], 0 past kn
  // Row by row: k's rows are read contiguously, the strided writes stay in L1 (8 KiB at hd 32).
  for (std::int64_t j = 0; j < kn; ++j)
    for (std::int64_t c = 0; c < hd; ++c) kt[c * B + j] = scale * k[j * ldk + c];
  for (std::int64_t c = 0; c < hd; ++c)
    for (std::int64_t j = kn; j < B; ++j) kt[c * B + j] = 0.0f;
  auto live = [&](std::int64_t i0, std::int64_t rows) {
    return (group_keys(i0, rows, kn, shift) + W - 1) / W;
  };
  std::int64_t i0 = 0;
  for (; i0 + R <= qn; i0 += R) scores_rows<W, R, 4>(live(i0, R), i0, hd, q, ldq, kt, s);
  for (; i0 < qn; ++i0) scores_rows<W, 1, 4>(live(i0, 1), i0, hd, q, ldq, kt, s);
}

// acc rows [i0, i0 + R), vectors [h0, h0 + C) of each, += p rows [i0, i0 + R) columns
// [0, keys) times v: R x C sums in registers over j.
template <int W, int R, int C>
TRELLIS_HOST_INLINE void values_group(std::int64_t i0, std::int64_t h0, std::int64_t hd,
                                      std::int64_t keys, const float* __restrict p,
                                      const float* __restrict v, std::int64_t ldv,
                                      float* __restrict acc) {
  FloatsW<W> sum[R][C];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < C; ++h) sum[r][h] = load<W>(acc + (i0 + r) * hd + (h0 + h) * W);
  for (std::int64_t j = 0; j < keys; ++j) {
    FloatsW<W> pv[R];
    for (int r = 0; r < R; ++r) pv[r] = splat<W>(p[(i0 + r) * B + j]);
    for (int h = 0; h < C; ++h) {
      const FloatsW<W> vv = load<W>(v + j * ldv + (h0 + h) * W);
      for (int r = 0; r < R; ++r) sum[r][h] += pv[r] * vv;
    }
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < C; ++h) store<W>(acc + (i0 + r) * hd + (h0 + h) * W, sum[r][h]);
}

// Head vectors [0, hd / W) of rows [i0, i0 + R), 4 at a time (the last chunk shorter).
template <int W, int R>
TRELLIS_HOST_INLINE void values_rows(std::int64_t i0, std::int64_t hd, std::int64_t keys,
                                     const float* p, const float* v, std::int64_t ldv, float* acc) {
  const std::int64_t vectors = hd / W;
  for (std::int64_t h0 = 0; h0 < vectors; h0 += 4) {
    switch (vectors - h0) {
      case 1:
        values_group<W, R, 1>(i0, h0, hd, keys, p, v, ldv, acc);
        break;
      case 2:
        values_group<W, R, 2>(i0, h0, hd, keys, p, v, ldv, acc);
        break;
      case 3:
        values_group<W, R, 3>(i0, h0, hd, keys, p, v, ldv, acc);
        break;
      default:
        values_group<W, R, 4>(i0, h0, hd, keys, p, v, ldv, acc);
        break;
    }
  }
}

template <int W>
TRELLIS_HOST_INLINE void accumulate_values_w(std::int64_t qn, std::int64_t kn, std::int64_t hd,
                                             std::int64_t shift, const float* __restrict p,
                                             const float* __restrict v, std::int64_t ldv,
                                             float* __restrict acc) {
  constexpr int R = kRows<W>;
  std::int64_t i0 = 0;
  for (; i0 + R <= qn; i0 += R)
    values_rows<W, R>(i0, hd, group_keys(i0, R, kn, shift), p, v, ldv, acc);
  for (; i0 < qn; ++i0) values_rows<W, 1>(i0, hd, group_keys(i0, 1, kn, shift), p, v, ldv, acc);
}

#if TRELLIS_HOST_ISA_VERSIONS
TRELLIS_TARGET_X86_64_V4 void scores_tile_v4(std::int64_t qn, std::int64_t kn, std::int64_t hd,
                                             std::int64_t shift, float scale, const float* q,
                                             std::int64_t ldq, const float* k, std::int64_t ldk,
                                             float* s) {
  scores_tile_w<16>(qn, kn, hd, shift, scale, q, ldq, k, ldk, s);
}
TRELLIS_TARGET_X86_64_V3 void scores_tile_v3(std::int64_t qn, std::int64_t kn, std::int64_t hd,
                                             std::int64_t shift, float scale, const float* q,
                                             std::int64_t ldq, const float* k, std::int64_t ldk,
                                             float* s) {
  scores_tile_w<8>(qn, kn, hd, shift, scale, q, ldq, k, ldk, s);
}
TRELLIS_TARGET_X86_64_V4 void accumulate_values_v4(std::int64_t qn, std::int64_t kn,
                                                   std::int64_t hd, std::int64_t shift,
                                                   const float* p, const float* v, std::int64_t ldv,
                                                   float* acc) {
  accumulate_values_w<16>(qn, kn, hd, shift, p, v, ldv, acc);
}
TRELLIS_TARGET_X86_64_V3 void accumulate_values_v3(std::int64_t qn, std::int64_t kn,
                                                   std::int64_t hd, std::int64_t shift,
                                                   const float* p, const float* v, std::int64_t ldv,
                                                   float* acc) {
  accumulate_values_w<8>(qn, kn, hd, shift, p, v, ldv, acc);
}
// The baseline (SSE2: four floats a register).
constexpr int kBaselineWidth = 4;
#elif defined(__AVX512F__)
constexpr int kBaselineWidth = 16;  // the build's -march has AVX-512
#elif defined(__AVX__)
constexpr int kBaselineWidth = 8;
#else
constexpr int kBaselineWidth = 4;
#endif

}  // namespace

bool vector_tiles_fit(std::int64_t hd) { return hd > 0 && hd % 16 == 0 && hd <= kHostMaxHeadDim; }

void scores_tile(HostIsa isa, std::int64_t qn, std::int64_t kn, std::int64_t hd, std::int64_t shift,
                 float scale, const float* q, std::int64_t ldq, const float* k, std::int64_t ldk,
                 float* s) {
#if TRELLIS_HOST_ISA_VERSIONS
  switch (isa) {
    case HostIsa::x86_64_v4:
      return scores_tile_v4(qn, kn, hd, shift, scale, q, ldq, k, ldk, s);
    case HostIsa::x86_64_v3:
      return scores_tile_v3(qn, kn, hd, shift, scale, q, ldq, k, ldk, s);
    case HostIsa::baseline:
      break;
  }
#else
  (void)isa;
#endif
  scores_tile_w<kBaselineWidth>(qn, kn, hd, shift, scale, q, ldq, k, ldk, s);
}

void accumulate_values(HostIsa isa, std::int64_t qn, std::int64_t kn, std::int64_t hd,
                       std::int64_t shift, const float* p, const float* v, std::int64_t ldv,
                       float* acc) {
#if TRELLIS_HOST_ISA_VERSIONS
  switch (isa) {
    case HostIsa::x86_64_v4:
      return accumulate_values_v4(qn, kn, hd, shift, p, v, ldv, acc);
    case HostIsa::x86_64_v3:
      return accumulate_values_v3(qn, kn, hd, shift, p, v, ldv, acc);
    case HostIsa::baseline:
      break;
  }
#else
  (void)isa;
#endif
  accumulate_values_w<kBaselineWidth>(qn, kn, hd, shift, p, v, ldv, acc);
}

#else
// Without GCC vectors the forward tile products are sgemm calls (flash_attention_host.cpp).
bool vector_tiles_fit(std::int64_t) { return false; }

void scores_tile(HostIsa, std::int64_t, std::int64_t, std::int64_t, std::int64_t, float,
                 const float*, std::int64_t, const float*, std::int64_t, float*) {
  throw Error("flash attention: this build has no vector tile products");
}

void accumulate_values(HostIsa, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                       const float*, const float*, std::int64_t, float*) {
  throw Error("flash attention: this build has no vector tile products");
}
#endif

}  // namespace trellis::kernels::flash
