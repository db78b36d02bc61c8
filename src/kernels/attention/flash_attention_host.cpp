// Host bodies of the flash attention kernels (algorithm, layouts and tile choice in
// kernels/flash_attention.hpp). The forward tile products (S = q k^T, acc += P v) are the
// register-blocked vector loops of flash_attention_tiles.cpp where the head dimension is whole
// 16-float vectors, else sgemm calls; the backward ones (S, dP = dout v^T, dq += dS k,
// dk += dS^T q, dv += P^T dout) are sgemm calls on the strided
// q/k/v/dout rows themselves (leading dimension d + 2 KVH hd, or d: no tile copies); the per-row
// work between them (mask, max, exp, sums, dropout, rescale) is a loop over a whole tile row of
// kHostTile columns, compiled in AVX-512 / AVX2 / baseline clones (TRELLIS_HOST_CLONES), with
// reductions in 16 explicit lanes so they vectorise without -ffast-math. Tiles live on the
// stack (no allocation). Work items run one after another: Trellis runs one rank per core.
#include "flash_attention_impl.hpp"

#include "trellis/core/fast_math.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/host_vector.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/core/math.hpp"

#include "trellis/core/error.hpp"

#if TRELLIS_HAVE_ONEDNN
#include <dnnl.h>
#endif

#include <string>

#ifndef TRELLIS_HOST_BLAS
#define TRELLIS_HOST_BLAS 0
#endif
// The Fortran BLAS entry point (as in gemm.cpp), for builds without oneDNN.
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c, const int* ldc);

namespace trellis::kernels::flash {

namespace {

constexpr std::int64_t B = kHostTile;
constexpr std::int64_t kMaxHd = kHostMaxHeadDim;
constexpr float kMinusHuge = -3.0e38f;  // initial running max: exp(m_old - m_new) is then ~0

// Keys k0 .. min(t, k0 + kn - 1) of a tile are visible to query t.
inline std::int64_t visible_keys(std::int64_t t, std::int64_t k0, std::int64_t kn) {
  const std::int64_t v = t - k0 + 1;
  return v < 0 ? 0 : (v > kn ? kn : v);
}

// Row-major C = alpha op(A) op(B) + beta C on strided operands (the q/k/v column blocks have
// row stride d + 2 KVH hd), so no tile is copied: oneDNN's sgemm (JIT for the host's ISA) or the
// BLAS.
void tile_gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
               float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
               float beta, float* c, std::int64_t ldc) {
#if TRELLIS_HAVE_ONEDNN
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha,
                                          a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) {
    throw Error("flash attention: dnnl_sgemm failed with status " +
                std::to_string(static_cast<int>(status)) + " for m = " + std::to_string(m) +
                ", n = " + std::to_string(n) + ", k = " + std::to_string(k));
  }
#elif !TRELLIS_HOST_BLAS
  (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
  (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
  throw Error("flash attention: this build has no host BLAS (CUDA builds run on the device)");
#else
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
  const char op_a = trans_a ? 'T' : 'N', op_b = trans_b ? 'T' : 'N';
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const int lda_i = static_cast<int>(lda), ldb_i = static_cast<int>(ldb),
            ldc_i = static_cast<int>(ldc);
  sgemm_(&op_b, &op_a, &ni, &mi, &ki, &alpha, b, &ldb_i, a, &lda_i, &beta, c, &ldc_i);
#endif
}

#if TRELLIS_HOST_VECTORS
// The largest of a tile row's first vis scores (vis >= 1 columns of kHostTile), on vectors.
TRELLIS_HOST_INLINE float visible_max(const float* __restrict srow, std::int64_t vis) {
  const simd::Ints16 lane = simd::lane_index();
  const simd::Floats16 minus_huge = simd::splat(kMinusHuge);
  simd::Floats16 row_max = minus_huge;
  for (std::int64_t v = 0; v * simd::kWidth < vis; ++v) {
    const auto visible = lane < static_cast<std::int32_t>(vis - v * simd::kWidth);
    row_max = simd::max(row_max, visible ? simd::load(srow + v * simd::kWidth) : minus_huge);
  }
  return simd::hmax(row_max);
}

// srow[j] = exp(srow[j] - m) for j < vis, 0 for the other columns of the tile row; returns
// the sum. Vectors wholly past vis are set to 0 without an exponential.
TRELLIS_HOST_INLINE float exp_row(float* __restrict srow, std::int64_t vis, float m) {
  constexpr std::int64_t kVectors = B / simd::kWidth;
  static_assert(B % simd::kWidth == 0, "a tile row is whole vectors");
  const simd::Ints16 lane = simd::lane_index();
  const simd::Floats16 zero = simd::splat(0.0f);
  simd::Floats16 row_sum = zero;
  std::int64_t v = 0;
  for (; v * simd::kWidth < vis; ++v) {
    const auto visible = lane < static_cast<std::int32_t>(vis - v * simd::kWidth);
    const simd::Floats16 e =
        visible ? simd::fast_exp(simd::load(srow + v * simd::kWidth) - m) : zero;
    row_sum += e;
    simd::store(srow + v * simd::kWidth, e);
  }
  for (; v < kVectors; ++v) simd::store(srow + v * simd::kWidth, zero);
  return simd::hsum(row_sum);
}
#else
// The same in scalar loops (builds without GCC vectors, such as nvcc's host pass).
inline float visible_max(const float* srow, std::int64_t vis) {
  float mx = kMinusHuge;
  for (std::int64_t j = 0; j < vis; ++j) mx = srow[j] > mx ? srow[j] : mx;
  return mx;
}

inline float exp_row(float* srow, std::int64_t vis, float m) {
  for (std::int64_t j = 0; j < B; ++j) srow[j] = j < vis ? math::fast_exp(srow[j] - m) : 0.0f;
  return lane_sum(vis, [&](std::int64_t j) { return srow[j]; });
}
#endif

// Online-softmax step of a forward tile: scores s [qn][B] (columns past kn: not written by the
// products, never read) become the (dropped) probabilities exp(s - m_new) (0 above the
// diagonal and past kn, over all B columns), the running max m and sum l are updated, and the
// accumulator rows acc [qn][hd] rescaled by exp(m_old - m_new).
TRELLIS_HOST_CLONES
void online_softmax_tile(const Dims& D, const DropoutMask& mask, std::int64_t bh, std::int64_t q0,
                         std::int64_t qn, std::int64_t k0, std::int64_t kn, float* __restrict s,
                         float* __restrict m, float* __restrict l, float* __restrict acc) {
  const std::int64_t hd = D.hd;
  for (std::int64_t i = 0; i < qn; ++i) {
    const std::int64_t t = q0 + i, vis = visible_keys(t, k0, kn);
    float* __restrict srow = s + i * B;
    const float tile_max = vis > 0 ? visible_max(srow, vis) : kMinusHuge;
    const float m_new = m[i] > tile_max ? m[i] : tile_max;
    const float correction = math::fast_exp(m[i] - m_new);
    l[i] = l[i] * correction + exp_row(srow, vis, m_new);
    m[i] = m_new;
    if (D.dropout) {
      const auto row = static_cast<std::uint64_t>(bh * D.T + t);
      for (std::int64_t j = 0; j < vis; ++j) {
        const bool keep = dropout_keep(mask, row, static_cast<std::uint64_t>(k0 + j),
                                       static_cast<std::uint64_t>(D.T));
        srow[j] = keep ? srow[j] * D.keep_scale : 0.0f;
      }
    }
    if (correction != 1.0f) {
      float* __restrict acc_row = acc + i * hd;
      for (std::int64_t c = 0; c < hd; ++c) acc_row[c] *= correction;
    }
  }
}

// Backward tile: p [qn][B] holds the scaled scores, ds [qn][B] dP = dout v^T; they become
// P' = P f and dS = P (dP f - D) (f = keep / (1 - p), or 1), 0 above the diagonal;
// columns past kn are neither read nor written.
TRELLIS_HOST_CLONES
void probabilities_tile(const Dims& D, const DropoutMask& mask, std::int64_t bh, std::int64_t q0,
                        std::int64_t qn, std::int64_t k0, std::int64_t kn,
                        const float* __restrict lse_bh, const float* __restrict delta_bh,
                        float* __restrict p, float* __restrict ds) {
  for (std::int64_t i = 0; i < qn; ++i) {
    const std::int64_t t = q0 + i, vis = visible_keys(t, k0, kn);
    float* __restrict prow = p + i * B;
    float* __restrict dsrow = ds + i * B;
    const float lse_t = lse_bh[t], delta_t = delta_bh[t];
    if (!D.dropout) {
      for (std::int64_t j = 0; j < kn; ++j) {
        const float prob = j < vis ? math::fast_exp(prow[j] - lse_t) : 0.0f;
        dsrow[j] = prob * (dsrow[j] - delta_t);
        prow[j] = prob;
      }
      continue;
    }
    const auto row = static_cast<std::uint64_t>(bh * D.T + t);
    for (std::int64_t j = 0; j < kn; ++j) {
      const float prob = j < vis ? math::fast_exp(prow[j] - lse_t) : 0.0f;
      const float f = j < vis && dropout_keep(mask, row, static_cast<std::uint64_t>(k0 + j),
                                              static_cast<std::uint64_t>(D.T))
                          ? D.keep_scale
                          : 0.0f;
      dsrow[j] = prob * (dsrow[j] * f - delta_t);
      prow[j] = prob * f;
    }
  }
}

// Forward of one (sequence b, head h, query tile q0) work item.
void forward_item(const Dims& D, const float* qkv, float* out, float* lse, const DropoutMask& mask,
                  std::int64_t bh, std::int64_t q0) {
  const std::int64_t hd = D.hd, T = D.T, ld = D.qkv_ld;
  const std::int64_t b = bh / D.H, h = bh % D.H;
  const std::int64_t qn = T - q0 < B ? T - q0 : B;
  const float* seq_rows = qkv + b * T * ld;  // row t: + t * ld
  const float* q_rows = seq_rows + D.layout.q_col(h);
  const float* k_rows = seq_rows + D.layout.k_col(h / D.group);  // the kv head's columns
  const float* v_rows = seq_rows + D.layout.v_col(h / D.group);
  alignas(64) float s[B * B];         // scores, then probabilities [qn][B]
  alignas(64) float acc[B * kMaxHd];  // unnormalised output rows [qn][hd]
  float m[B], l[B];                   // running max and sum of exp(s - m) per row
  for (std::int64_t i = 0; i < qn * hd; ++i) acc[i] = 0.0f;
  for (std::int64_t i = 0; i < qn; ++i) {
    m[i] = kMinusHuge;
    l[i] = 0.0f;
  }
  const std::int64_t last_tile = (q0 + qn - 1) / B;  // tiles above the diagonal: skipped
  const bool vectors = vector_tiles_fit(hd);         // else the products are sgemm calls
  for (std::int64_t k0 = 0; k0 <= last_tile * B; k0 += B) {
    const std::int64_t kn = T - k0 < B ? T - k0 : B;
    if (vectors) {
      scores_tile(qn, kn, hd, q0 - k0, D.scale, q_rows + q0 * ld, ld, k_rows + k0 * ld, ld, s);
    } else {
      tile_gemm(false, true, qn, kn, hd, D.scale, q_rows + q0 * ld, ld, k_rows + k0 * ld, ld, 0.0f,
                s, B);  // s = q k^T / sqrt(hd)
    }
    online_softmax_tile(D, mask, bh, q0, qn, k0, kn, s, m, l, acc);
    if (vectors) {
      accumulate_values(qn, kn, hd, q0 - k0, s, v_rows + k0 * ld, ld, acc);
    } else {
      tile_gemm(false, false, qn, hd, kn, 1.0f, s, B, v_rows + k0 * ld, ld, 1.0f, acc, hd);
    }
  }
  for (std::int64_t i = 0; i < qn; ++i) {
    const std::int64_t t = q0 + i;
    const float inv = 1.0f / l[i];
    float* out_row = out + (b * T + t) * D.out_ld + h * hd;
    for (std::int64_t c = 0; c < hd; ++c) out_row[c] = acc[i * hd + c] * inv;
    lse[bh * T + t] = m[i] + math::log(l[i]);
  }
}

// Backward of one (sequence b, kv head kv): key tiles outer, so the tile's dk/dv rows
// accumulate on the stack over the group's query heads and are written once; the dq rows of
// those query heads belong to this item alone.
void backward_item(const Dims& D, const float* qkv, const float* out, const float* dout,
                   const float* lse, float* delta, float* dqkv, const DropoutMask& mask,
                   std::int64_t b, std::int64_t kv) {
  const std::int64_t hd = D.hd, T = D.T, ld = D.qkv_ld, old = D.out_ld;
  const std::int64_t h0 = kv * D.group, h1 = h0 + D.group;  // the query heads of kv
  const std::int64_t seq_col = b * T * ld;
  const float* k_rows = qkv + seq_col + D.layout.k_col(kv);  // row t: + t * ld
  const float* v_rows = qkv + seq_col + D.layout.v_col(kv);
  float* dk_rows = dqkv + seq_col + D.layout.k_col(kv);
  float* dv_rows = dqkv + seq_col + D.layout.v_col(kv);
  alignas(64) float p[B * B], ds[B * B];             // scores -> P', dP -> dS [qn][B]
  alignas(64) float dk[B * kMaxHd], dv[B * kMaxHd];  // the key tile's gradients [kn][hd]
  for (std::int64_t h = h0; h < h1; ++h) {           // D_t = dout_t . out_t; dq_t = 0
    const float* dout_rows = dout + b * T * old + h * hd;
    const float* out_rows = out + b * T * old + h * hd;
    float* delta_bh = delta + (b * D.H + h) * T;
    float* dq_rows = dqkv + seq_col + D.layout.q_col(h);
    for (std::int64_t t = 0; t < T; ++t) {
      float dot = 0.0f;  // T * hd per head: not worth lanes
      for (std::int64_t c = 0; c < hd; ++c) dot += out_rows[t * old + c] * dout_rows[t * old + c];
      delta_bh[t] = dot;
      for (std::int64_t c = 0; c < hd; ++c) dq_rows[t * ld + c] = 0.0f;
    }
  }
  for (std::int64_t k0 = 0; k0 < T; k0 += B) {
    const std::int64_t kn = T - k0 < B ? T - k0 : B;
    for (std::int64_t j = 0; j < kn; ++j)  // only the rows the sgemms accumulate into
      for (std::int64_t c = 0; c < hd; ++c) dk[j * hd + c] = dv[j * hd + c] = 0.0f;
    const float* k_tile = k_rows + k0 * ld;
    const float* v_tile = v_rows + k0 * ld;
    for (std::int64_t h = h0; h < h1; ++h) {
      const std::int64_t bh = b * D.H + h;
      const float* q_rows = qkv + seq_col + D.layout.q_col(h);
      float* dq_rows = dqkv + seq_col + D.layout.q_col(h);
      const float* dout_rows = dout + b * T * old + h * hd;
      for (std::int64_t q0 = k0; q0 < T; q0 += B) {  // query tiles at and below the diagonal
        const std::int64_t qn = T - q0 < B ? T - q0 : B;
        const float* q_tile = q_rows + q0 * ld;
        const float* dout_tile = dout_rows + q0 * old;
        tile_gemm(false, true, qn, kn, hd, D.scale, q_tile, ld, k_tile, ld, 0.0f, p, B);    // s
        tile_gemm(false, true, qn, kn, hd, 1.0f, dout_tile, old, v_tile, ld, 0.0f, ds, B);  // dP
        probabilities_tile(D, mask, bh, q0, qn, k0, kn, lse + bh * T, delta + bh * T, p, ds);
        // dq += scale dS k;  dk += scale dS^T q;  dv += P'^T dout.
        tile_gemm(false, false, qn, hd, kn, D.scale, ds, B, k_tile, ld, 1.0f, dq_rows + q0 * ld,
                  ld);
        tile_gemm(true, false, kn, hd, qn, D.scale, ds, B, q_tile, ld, 1.0f, dk, hd);
        tile_gemm(true, false, kn, hd, qn, 1.0f, p, B, dout_tile, old, 1.0f, dv, hd);
      }
    }
    for (std::int64_t j = 0; j < kn; ++j)
      for (std::int64_t c = 0; c < hd; ++c) {
        dk_rows[(k0 + j) * ld + c] = dk[j * hd + c];
        dv_rows[(k0 + j) * ld + c] = dv[j * hd + c];
      }
  }
}

}  // namespace

void host_forward(const Dims& D, const float* qkv, float* out, float* lse,
                  const DropoutMask& mask) {
  const std::int64_t q_tiles = (D.T + B - 1) / B;
  for (std::int64_t bh = 0; bh < D.sequences * D.H; ++bh)
    for (std::int64_t tile = 0; tile < q_tiles; ++tile)
      forward_item(D, qkv, out, lse, mask, bh, tile * B);
}

void host_backward(const Dims& D, const float* qkv, const float* out, const float* dout,
                   const float* lse, float* delta, float* dqkv, const DropoutMask& mask) {
  for (std::int64_t b = 0; b < D.sequences; ++b)
    for (std::int64_t kv = 0; kv < D.KVH; ++kv)
      backward_item(D, qkv, out, dout, lse, delta, dqkv, mask, b, kv);
}

}  // namespace trellis::kernels::flash
