// Host bodies of the flash attention kernels (algorithm, layouts and tile choice in
// kernels/flash_attention.hpp). Each work item is a plain loop nest over raw pointers whose
// innermost loops run over a whole tile row of kHostTile keys (scores, probabilities) or over
// hd (axpys into an accumulator row), with compile-time trip counts for hd = 32 and 64 so GCC
// keeps a tile row or an accumulator row in vector registers; TRELLIS_HOST_CLONES compiles
// them for AVX-512 / AVX2 / baseline. Reductions (row max, row sum) go through 16 explicit
// lanes so they vectorise without -ffast-math. Tiles live on the stack (no allocation).
#include "flash_attention_impl.hpp"
#include "host_simd.hpp"

#include "trellis/core/fast_math.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/core/math.hpp"

#include <Kokkos_Core.hpp>

namespace trellis::kernels::flash {

namespace {

constexpr std::int64_t B = kHostTile;
constexpr std::int64_t kMaxHd = kHostMaxHeadDim;
constexpr float kMinusHuge = -3.0e38f;  // initial running max: exp(m_old - m_new) is then ~0
using HostRange = Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>;

#if defined(__GNUC__)
#define TRELLIS_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define TRELLIS_ALWAYS_INLINE inline
#endif

// Keys k0 .. min(t, k0 + kn - 1) of a tile are visible to query t.
inline std::int64_t visible_keys(std::int64_t t, std::int64_t k0, std::int64_t kn) {
  const std::int64_t v = t - k0 + 1;
  return v < 0 ? 0 : (v > kn ? kn : v);
}

// dst [hd][B] = rows k0 .. k0 + kn - 1 of src (row stride ld) transposed, zero past kn, so
// the score loops always run over B columns.
TRELLIS_ALWAYS_INLINE void load_transposed(const float* __restrict src, std::int64_t ld,
                                           std::int64_t kn, std::int64_t hd,
                                           float* __restrict dst) {
  for (std::int64_t j = 0; j < kn; ++j)
    for (std::int64_t c = 0; c < hd; ++c) dst[c * B + j] = src[j * ld + c];
  for (std::int64_t c = 0; c < hd; ++c)
    for (std::int64_t j = kn; j < B; ++j) dst[c * B + j] = 0.0f;
}

// s[0:B] = scale * q . K^T[:, 0:B]: B accumulators (4 AVX-512 registers), hd rank-1 updates.
TRELLIS_ALWAYS_INLINE void score_row(const float* __restrict q, const float* __restrict kt,
                                     std::int64_t hd, float scale, float* __restrict s) {
  for (std::int64_t j = 0; j < B; ++j) s[j] = 0.0f;
  for (std::int64_t c = 0; c < hd; ++c) {
    const float qc = q[c] * scale;
    for (std::int64_t j = 0; j < B; ++j) s[j] += qc * kt[c * B + j];
  }
}

TRELLIS_ALWAYS_INLINE float masked_max(const float* __restrict s, std::int64_t vis) {
  constexpr int kLanes = 16;
  float lanes[kLanes];
  for (int l = 0; l < kLanes; ++l) lanes[l] = kMinusHuge;
  for (std::int64_t j = 0; j < B; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float x = j + l < vis ? s[j + l] : kMinusHuge;
      lanes[l] = x > lanes[l] ? x : lanes[l];
    }
  float mx = lanes[0];
  for (int l = 1; l < kLanes; ++l) mx = lanes[l] > mx ? lanes[l] : mx;
  return mx;
}

// Forward of one (sequence b, head h, query tile q0) work item.
template <int HD>
TRELLIS_ALWAYS_INLINE void forward_item(const Dims& D, const float* __restrict qkv,
                                        float* __restrict out, float* __restrict lse,
                                        const DropoutMask& mask, std::int64_t bh, std::int64_t q0) {
  const std::int64_t hd = HD > 0 ? HD : D.hd, T = D.T, ld = D.qkv_ld;
  const std::int64_t b = bh / D.H, h = bh % D.H;
  const std::int64_t qn = T - q0 < B ? T - q0 : B;
  const float* q_rows = qkv + b * T * ld + h * hd;  // row t: + t * ld
  const float* k_rows = q_rows + D.d;
  const float* v_rows = q_rows + 2 * D.d;
  alignas(64) float kt[kMaxHd * B];   // K^T of the key tile [hd][B]
  alignas(64) float acc[B * kMaxHd];  // unnormalised output rows [qn][hd]
  alignas(64) float s[B];             // one row's scores, then probabilities
  float m[B], l[B];                   // running max and sum of exp(s - m) per row
  for (std::int64_t i = 0; i < qn * hd; ++i) acc[i] = 0.0f;
  for (std::int64_t i = 0; i < qn; ++i) {
    m[i] = kMinusHuge;
    l[i] = 0.0f;
  }
  const std::int64_t last_tile = (q0 + qn - 1) / B;  // tiles above the diagonal: skipped
  for (std::int64_t k0 = 0; k0 <= last_tile * B; k0 += B) {
    const std::int64_t kn = T - k0 < B ? T - k0 : B;
    load_transposed(k_rows + k0 * ld, ld, kn, hd, kt);
    for (std::int64_t i = 0; i < qn; ++i) {
      const std::int64_t t = q0 + i, vis = visible_keys(t, k0, kn);
      if (vis == 0) continue;
      score_row(q_rows + t * ld, kt, hd, D.scale, s);
      const float tile_max = masked_max(s, vis);
      const float m_new = m[i] > tile_max ? m[i] : tile_max;
      const float correction = math::fast_exp(m[i] - m_new);
      for (std::int64_t j = 0; j < B; ++j) s[j] = j < vis ? math::fast_exp(s[j] - m_new) : 0.0f;
      l[i] = l[i] * correction + lane_sum(B, [&](std::int64_t j) { return s[j]; });
      m[i] = m_new;
      if (D.dropout) {
        const auto row = static_cast<std::uint64_t>(bh * T + t);
        for (std::int64_t j = 0; j < vis; ++j) {
          const bool keep = dropout_keep(mask, row, static_cast<std::uint64_t>(k0 + j),
                                         static_cast<std::uint64_t>(T));
          s[j] = keep ? s[j] * D.keep_scale : 0.0f;
        }
      }
      float* __restrict acc_row = acc + i * hd;
      for (std::int64_t c = 0; c < hd; ++c) acc_row[c] *= correction;
      for (std::int64_t j = 0; j < vis; ++j) {
        const float p = s[j];
        const float* __restrict v_row = v_rows + (k0 + j) * ld;
        for (std::int64_t c = 0; c < hd; ++c) acc_row[c] += p * v_row[c];
      }
    }
  }
  for (std::int64_t i = 0; i < qn; ++i) {
    const std::int64_t t = q0 + i;
    const float inv = 1.0f / l[i];
    float* __restrict out_row = out + (b * T + t) * D.out_ld + h * hd;
    for (std::int64_t c = 0; c < hd; ++c) out_row[c] = acc[i * hd + c] * inv;
    lse[bh * T + t] = m[i] + math::log(l[i]);
  }
}

// Backward of one (sequence b, head h): key tiles outer, so the tile's dk/dv rows accumulate
// on the stack and are written once; dq rows of this (b, h) belong to this item alone.
template <int HD>
TRELLIS_ALWAYS_INLINE void backward_item(const Dims& D, const float* __restrict qkv,
                                         const float* __restrict out, const float* __restrict dout,
                                         const float* __restrict lse, float* __restrict delta,
                                         float* __restrict dqkv, const DropoutMask& mask,
                                         std::int64_t bh) {
  const std::int64_t hd = HD > 0 ? HD : D.hd, T = D.T, ld = D.qkv_ld, old = D.out_ld;
  const std::int64_t b = bh / D.H, h = bh % D.H;
  const std::int64_t head_col = b * T * ld + h * hd;
  const float* q_rows = qkv + head_col;
  const float* k_rows = q_rows + D.d;
  const float* v_rows = q_rows + 2 * D.d;
  float* dq_rows = dqkv + head_col;
  float* dk_rows = dq_rows + D.d;
  float* dv_rows = dq_rows + 2 * D.d;
  const float* dout_rows = dout + b * T * old + h * hd;
  const float* out_rows = out + b * T * old + h * hd;
  const float* lse_bh = lse + bh * T;
  float* delta_bh = delta + bh * T;
  alignas(64) float kt[kMaxHd * B], vt[kMaxHd * B];  // K^T, V^T of the key tile [hd][B]
  alignas(64) float p[B * B], ds[B * B];  // (dropped) probabilities, dS (unscaled) [qn][B]
  alignas(64) float dk[B * kMaxHd], dv[B * kMaxHd];  // the key tile's gradients [kn][hd]
  for (std::int64_t t = 0; t < T; ++t) {             // D_t = dout_t . out_t; dq_t = 0
    const float* __restrict o = out_rows + t * old;
    const float* __restrict g = dout_rows + t * old;
    float dot = 0.0f;  // T * hd per item: not worth lanes
    for (std::int64_t c = 0; c < hd; ++c) dot += o[c] * g[c];
    delta_bh[t] = dot;
    for (std::int64_t c = 0; c < hd; ++c) dq_rows[t * ld + c] = 0.0f;
  }
  for (std::int64_t k0 = 0; k0 < T; k0 += B) {
    const std::int64_t kn = T - k0 < B ? T - k0 : B;
    load_transposed(k_rows + k0 * ld, ld, kn, hd, kt);
    load_transposed(v_rows + k0 * ld, ld, kn, hd, vt);
    for (std::int64_t j = 0; j < kn; ++j)
      for (std::int64_t c = 0; c < hd; ++c) dk[j * hd + c] = dv[j * hd + c] = 0.0f;
    for (std::int64_t q0 = k0; q0 < T; q0 += B) {  // query tiles at and below the diagonal
      const std::int64_t qn = T - q0 < B ? T - q0 : B;
      for (std::int64_t i = 0; i < qn; ++i) {
        const std::int64_t t = q0 + i, vis = visible_keys(t, k0, kn);
        float* __restrict prow = p + i * B;
        float* __restrict dsrow = ds + i * B;
        alignas(64) float dp[B];
        score_row(q_rows + t * ld, kt, hd, D.scale, prow);  // s
        score_row(dout_rows + t * old, vt, hd, 1.0f, dp);   // dP = dout_t . v_j
        const float lse_t = lse_bh[t], delta_t = delta_bh[t];
        for (std::int64_t j = 0; j < B; ++j) {
          const float prob = j < vis ? math::fast_exp(prow[j] - lse_t) : 0.0f;
          dsrow[j] = prob * (dp[j] - delta_t);
          prow[j] = prob;
        }
        if (D.dropout) {  // P' = P f, dS = P (dP f - D) with f = keep / (1 - p)
          const auto row = static_cast<std::uint64_t>(bh * T + t);
          for (std::int64_t j = 0; j < vis; ++j) {
            const float f = dropout_keep(mask, row, static_cast<std::uint64_t>(k0 + j),
                                         static_cast<std::uint64_t>(T))
                                ? D.keep_scale
                                : 0.0f;
            dsrow[j] = prow[j] * (dp[j] * f - delta_t);
            prow[j] *= f;
          }
        }
        float* __restrict dq_row = dq_rows + t * ld;  // dq_t += scale sum_j dS_tj k_j
        for (std::int64_t j = 0; j < vis; ++j) {
          const float g = dsrow[j] * D.scale;
          const float* __restrict k_row = k_rows + (k0 + j) * ld;
          for (std::int64_t c = 0; c < hd; ++c) dq_row[c] += g * k_row[c];
        }
      }
      // dv_j += sum_i P_ij dout_i, dk_j += scale sum_i dS_ij q_i (rows i >= key j only).
      for (std::int64_t j = 0; j < kn; ++j) {
        const std::int64_t first = k0 + j - q0 > 0 ? k0 + j - q0 : 0;
        float* __restrict dk_row = dk + j * hd;
        float* __restrict dv_row = dv + j * hd;
        for (std::int64_t i = first; i < qn; ++i) {
          const float pij = p[i * B + j], g = ds[i * B + j] * D.scale;
          const float* __restrict q_row = q_rows + (q0 + i) * ld;
          const float* __restrict g_row = dout_rows + (q0 + i) * old;
          for (std::int64_t c = 0; c < hd; ++c) {
            dv_row[c] += pij * g_row[c];
            dk_row[c] += g * q_row[c];
          }
        }
      }
    }
    for (std::int64_t j = 0; j < kn; ++j)
      for (std::int64_t c = 0; c < hd; ++c) {
        dk_rows[(k0 + j) * ld + c] = dk[j * hd + c];
        dv_rows[(k0 + j) * ld + c] = dv[j * hd + c];
      }
  }
}

// One clone set per head-dimension specialisation (target_clones on plain functions only).
#define TRELLIS_FLASH_HOST_ITEMS(HD)                                                               \
  TRELLIS_HOST_CLONES void forward_item_##HD(const Dims& D, const float* qkv, float* out,          \
                                             float* lse, const DropoutMask& mask, std::int64_t bh, \
                                             std::int64_t q0) {                                    \
    forward_item<HD>(D, qkv, out, lse, mask, bh, q0);                                              \
  }                                                                                                \
  TRELLIS_HOST_CLONES void backward_item_##HD(                                                     \
      const Dims& D, const float* qkv, const float* out, const float* dout, const float* lse,      \
      float* delta, float* dqkv, const DropoutMask& mask, std::int64_t bh) {                       \
    backward_item<HD>(D, qkv, out, dout, lse, delta, dqkv, mask, bh);                              \
  }
TRELLIS_FLASH_HOST_ITEMS(32)
TRELLIS_FLASH_HOST_ITEMS(64)
TRELLIS_FLASH_HOST_ITEMS(0)
#undef TRELLIS_FLASH_HOST_ITEMS

}  // namespace

void host_forward(const Dims& D, const float* qkv, float* out, float* lse,
                  const DropoutMask& mask) {
  const std::int64_t q_tiles = (D.T + B - 1) / B;
  auto* item = D.hd == 32 ? forward_item_32 : D.hd == 64 ? forward_item_64 : forward_item_0;
  Kokkos::parallel_for(TRELLIS_KERNEL_LABEL("trellis::attn::flash_fwd_host"),
                       HostRange(0, D.sequences * D.H * q_tiles), [=](const std::int64_t u) {
                         item(D, qkv, out, lse, mask, u / q_tiles, (u % q_tiles) * B);
                       });
}

void host_backward(const Dims& D, const float* qkv, const float* out, const float* dout,
                   const float* lse, float* delta, float* dqkv, const DropoutMask& mask) {
  auto* item = D.hd == 32 ? backward_item_32 : D.hd == 64 ? backward_item_64 : backward_item_0;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::attn::flash_bwd_host"), HostRange(0, D.sequences * D.H),
      [=](const std::int64_t bh) { item(D, qkv, out, dout, lse, delta, dqkv, mask, bh); });
}

}  // namespace trellis::kernels::flash
