// The two products of a forward attention tile, register-blocked on 16-float vectors
// (core/host_vector.hpp) in place of two sgemm calls: at T = 128 and head dimension 32 a tile
// product is 64 x 64 x 32, too small for a library call to pay for its checks and dispatch
// (profile: oneDNN's sgemm entry cost as much as the arithmetic; the header has the figures).
//
// scores_tile:        s[i][j] = scale * sum_c q[i][c] k[j][c]
//                     k is copied once as k^T [hd][B] (scaled, zero past kn), then each group of
//                     4 query rows keeps its 4 x (B / 16) sums in registers over c.
// accumulate_values:  acc[i][:] += sum_j p[i][j] v[j][:]
//                     each group of query rows keeps its rows of acc (hd / 16 vectors) in
//                     registers over j.
// Both stop at the causal frontier: query row i (t = q0 + i) sees keys j < i + shift + 1
// (shift = q0 - k0), so a row group reads and writes only the columns its last row sees.
#include "flash_attention_impl.hpp"

#include "trellis/core/host_vector.hpp"

#include "trellis/core/error.hpp"

namespace trellis::kernels::flash {

#if TRELLIS_HOST_VECTORS
namespace {

using simd::Floats16;
constexpr std::int64_t B = kHostTile;
constexpr int kTileVectors = static_cast<int>(B / simd::kWidth);
static_assert(B % simd::kWidth == 0, "a tile row is whole vectors");

// Keys of the tile the last of rows [i0, i0 + rows) sees.
inline std::int64_t group_keys(std::int64_t i0, std::int64_t rows, std::int64_t kn,
                               std::int64_t shift) {
  const std::int64_t v = i0 + rows + shift;
  return v < 0 ? 0 : (v > kn ? kn : v);
}

// s rows [i0, i0 + R), vectors [0, Live) of each, from kt [hd][B].
template <int R, int Live>
TRELLIS_HOST_INLINE void scores_group(std::int64_t i0, std::int64_t hd, const float* __restrict q,
                                      std::int64_t ldq, const float* __restrict kt,
                                      float* __restrict s) {
  Floats16 sum[R][Live] = {};
  for (std::int64_t c = 0; c < hd; ++c) {
    Floats16 kv[Live];
    for (int v = 0; v < Live; ++v) kv[v] = simd::load(kt + c * B + v * simd::kWidth);
    for (int r = 0; r < R; ++r) {
      const Floats16 qv = simd::splat(q[(i0 + r) * ldq + c]);
      for (int v = 0; v < Live; ++v) sum[r][v] += qv * kv[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < Live; ++v) simd::store(s + (i0 + r) * B + v * simd::kWidth, sum[r][v]);
}

template <int R>
TRELLIS_HOST_INLINE void scores_rows(int live, std::int64_t i0, std::int64_t hd, const float* q,
                                     std::int64_t ldq, const float* kt, float* s) {
  static_assert(kTileVectors == 4, "one case per live vector count");
  switch (live) {
    case 1:
      scores_group<R, 1>(i0, hd, q, ldq, kt, s);
      break;
    case 2:
      scores_group<R, 2>(i0, hd, q, ldq, kt, s);
      break;
    case 3:
      scores_group<R, 3>(i0, hd, q, ldq, kt, s);
      break;
    default:
      scores_group<R, 4>(i0, hd, q, ldq, kt, s);
      break;
  }
}

// acc rows [i0, i0 + R) (HV vectors each) += p rows [i0, i0 + R) columns [0, keys) times v.
template <int HV, int R>
TRELLIS_HOST_INLINE void values_group(std::int64_t i0, std::int64_t keys, const float* __restrict p,
                                      const float* __restrict v, std::int64_t ldv,
                                      float* __restrict acc) {
  constexpr std::int64_t hd = HV * simd::kWidth;
  Floats16 sum[R][HV];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < HV; ++h) sum[r][h] = simd::load(acc + (i0 + r) * hd + h * simd::kWidth);
  for (std::int64_t j = 0; j < keys; ++j) {
    Floats16 vv[HV];
    for (int h = 0; h < HV; ++h) vv[h] = simd::load(v + j * ldv + h * simd::kWidth);
    for (int r = 0; r < R; ++r) {
      const Floats16 pv = simd::splat(p[(i0 + r) * B + j]);
      for (int h = 0; h < HV; ++h) sum[r][h] += pv * vv[h];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < HV; ++h) simd::store(acc + (i0 + r) * hd + h * simd::kWidth, sum[r][h]);
}

// All row groups at head dimension HV * 16: groups of R rows keep R x HV sums in registers
// (at most 16 of the 32 AVX-512 registers), then one row at a time.
template <int HV>
TRELLIS_HOST_INLINE void values_rows(std::int64_t qn, std::int64_t kn, std::int64_t shift,
                                     const float* p, const float* v, std::int64_t ldv, float* acc) {
  constexpr int R = HV <= 4 ? 4 : 2;
  std::int64_t i0 = 0;
  for (; i0 + R <= qn; i0 += R)
    values_group<HV, R>(i0, group_keys(i0, R, kn, shift), p, v, ldv, acc);
  for (; i0 < qn; ++i0) values_group<HV, 1>(i0, group_keys(i0, 1, kn, shift), p, v, ldv, acc);
}

}  // namespace

bool vector_tiles_fit(std::int64_t hd) {
  return hd > 0 && hd % simd::kWidth == 0 && hd <= kHostMaxHeadDim;
}

TRELLIS_HOST_CLONES
void scores_tile(std::int64_t qn, std::int64_t kn, std::int64_t hd, std::int64_t shift, float scale,
                 const float* __restrict q, std::int64_t ldq, const float* __restrict k,
                 std::int64_t ldk, float* __restrict s) {
  alignas(64) float kt[kHostMaxHeadDim * B];  // scale k^T [hd][B], 0 past kn
  // Row by row: k's rows are read contiguously, the strided writes stay in L1 (8 KiB at hd 32).
  for (std::int64_t j = 0; j < kn; ++j)
    for (std::int64_t c = 0; c < hd; ++c) kt[c * B + j] = scale * k[j * ldk + c];
  for (std::int64_t c = 0; c < hd; ++c)
    for (std::int64_t j = kn; j < B; ++j) kt[c * B + j] = 0.0f;
  auto live = [&](std::int64_t i0, std::int64_t rows) {
    return static_cast<int>((group_keys(i0, rows, kn, shift) + simd::kWidth - 1) / simd::kWidth);
  };
  std::int64_t i0 = 0;
  for (; i0 + 4 <= qn; i0 += 4)
    if (live(i0, 4) > 0) scores_rows<4>(live(i0, 4), i0, hd, q, ldq, kt, s);
  for (; i0 < qn; ++i0)
    if (live(i0, 1) > 0) scores_rows<1>(live(i0, 1), i0, hd, q, ldq, kt, s);
}

TRELLIS_HOST_CLONES
void accumulate_values(std::int64_t qn, std::int64_t kn, std::int64_t hd, std::int64_t shift,
                       const float* __restrict p, const float* __restrict v, std::int64_t ldv,
                       float* __restrict acc) {
  switch (hd / simd::kWidth) {
    case 1:
      values_rows<1>(qn, kn, shift, p, v, ldv, acc);
      break;
    case 2:
      values_rows<2>(qn, kn, shift, p, v, ldv, acc);
      break;
    case 3:
      values_rows<3>(qn, kn, shift, p, v, ldv, acc);
      break;
    case 4:
      values_rows<4>(qn, kn, shift, p, v, ldv, acc);
      break;
    case 5:
      values_rows<5>(qn, kn, shift, p, v, ldv, acc);
      break;
    case 6:
      values_rows<6>(qn, kn, shift, p, v, ldv, acc);
      break;
    case 7:
      values_rows<7>(qn, kn, shift, p, v, ldv, acc);
      break;
    default:
      values_rows<8>(qn, kn, shift, p, v, ldv, acc);
      break;
  }
}

#else
// Without GCC vectors the forward tile products are sgemm calls (flash_attention_host.cpp).
bool vector_tiles_fit(std::int64_t) { return false; }

void scores_tile(std::int64_t, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                 std::int64_t, const float*, std::int64_t, float*) {
  throw Error("flash attention: this build has no vector tile products");
}

void accumulate_values(std::int64_t, std::int64_t, std::int64_t, std::int64_t, const float*,
                       const float*, std::int64_t, float*) {
  throw Error("flash attention: this build has no vector tile products");
}
#endif

}  // namespace trellis::kernels::flash
