#include "trellis/kernels/flash_attention.hpp"

#include "flash_attention_impl.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/fast_math.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/core/math.hpp"

#include <string>

namespace trellis::kernels {

namespace {

using TeamPolicy = Kokkos::TeamPolicy<ExecSpace>;
using Team = TeamPolicy::member_type;
using Scratch = Kokkos::View<float*, ExecSpace::scratch_memory_space, Unmanaged>;

// Tile sizes and team shape: see the header (L1/L2 on the host, 48 KiB shared memory on GPUs).
#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP)
constexpr int kTileQ = 32, kTileK = 32, kTeamSize = 8, kVectorLength = 32;
#else
constexpr int kTileQ = 64, kTileK = 64, kTeamSize = 1, kVectorLength = 1;
#endif

using flash::Dims;

Dims check_dims(const char* who, const ConstMatrix& qkv, const FlashAttentionShape& shape,
                std::size_t out_rows, std::size_t out_cols, std::size_t per_row_size,
                const DropoutMask& mask) {
  const std::size_t n = qkv.extent(0), width = qkv.extent(1);
  const std::size_t T = static_cast<std::size_t>(shape.seq_len > 0 ? shape.seq_len : 1);
  const std::size_t H = static_cast<std::size_t>(shape.n_head > 0 ? shape.n_head : 1);
  const bool ok = shape.seq_len > 0 && shape.n_head > 0 && width % 3 == 0 && (width / 3) % H == 0 &&
                  width > 0 && n % T == 0 && out_rows == n && out_cols == width / 3 &&
                  per_row_size == n * H && mask.p >= 0.0f && mask.p < 1.0f;
  if (!ok) {
    throw Error(std::string(who) + ": qkv " + extents_string(qkv) + ", output [" +
                std::to_string(out_rows) + ", " + std::to_string(out_cols) + "], per-row buffer " +
                std::to_string(per_row_size) + ", " + std::to_string(shape.n_head) +
                " heads, seq_len " + std::to_string(shape.seq_len) + ", dropout " +
                std::to_string(mask.p) +
                " (need qkv [n, 3d], output [n, d], n % seq_len == 0, d % heads == 0, "
                "per-row buffer n * heads, 0 <= dropout < 1)");
  }
  Dims dims{};
  dims.sequences = static_cast<std::int64_t>(n / T);
  dims.T = static_cast<std::int64_t>(T);
  dims.H = static_cast<std::int64_t>(H);
  dims.d = static_cast<std::int64_t>(width / 3);
  dims.hd = dims.d / dims.H;
  dims.qkv_ld = static_cast<std::int64_t>(width);
  dims.out_ld = dims.d;
  dims.scale = 1.0f / math::sqrt(static_cast<float>(dims.hd));
  dims.dropout = mask.p > 0.0f;
  dims.keep_scale = 1.0f / (1.0f - mask.p);
  return dims;
}

// Loops of a team. GPUs: rows over the team's threads, the contiguous index over vector
// lanes (consecutive addresses: coalesced). Host (team of one): plain unit-stride loops, which
// GCC vectorises; Kokkos 3.4's host ThreadVectorRange steps by a run-time increment, which
// defeats the vectoriser ("complicated access pattern").
template <class F>
KOKKOS_FORCEINLINE_FUNCTION void team_for(const Team& team, std::int64_t n, const F& f) {
#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP)
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), f);
#else
  (void)team;
  for (std::int64_t i = 0; i < n; ++i) f(i);
#endif
}

template <class F>
KOKKOS_FORCEINLINE_FUNCTION void vector_for(const Team& team, std::int64_t n, const F& f) {
#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP)
  Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, n), f);
#else
  (void)team;
  for (std::int64_t i = 0; i < n; ++i) f(i);
#endif
}

// max / sum of x[0, n). Host: 8 partial results, so the loop vectorises without reassociating
// a single running value (which GCC will not do without -ffast-math).
KOKKOS_INLINE_FUNCTION float vector_max(const Team& team, std::int64_t n, const float* x) {
  float result = x[0];
#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP)
  Kokkos::parallel_reduce(
      Kokkos::ThreadVectorRange(team, n),
      [&](const std::int64_t j, float& mx) { mx = x[j] > mx ? x[j] : mx; },
      Kokkos::Max<float>(result));
#else
  (void)team;
  float part[8] = {result, result, result, result, result, result, result, result};
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) part[l] = x[j + l] > part[l] ? x[j + l] : part[l];
  for (; j < n; ++j) result = x[j] > result ? x[j] : result;
  for (int l = 0; l < 8; ++l) result = part[l] > result ? part[l] : result;
#endif
  return result;
}

KOKKOS_INLINE_FUNCTION float vector_sum(const Team& team, std::int64_t n, const float* x) {
  float result = 0.0f;
#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP)
  Kokkos::parallel_reduce(
      Kokkos::ThreadVectorRange(team, n), [&](const std::int64_t j, float& sum) { sum += x[j]; },
      result);
#else
  (void)team;
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) part[l] += x[j + l];
  for (; j < n; ++j) result += x[j];
  for (int l = 0; l < 8; ++l) result += part[l];
#endif
  return result;
}

KOKKOS_INLINE_FUNCTION std::int64_t visible_keys(std::int64_t t, std::int64_t k0, std::int64_t kn) {
  const std::int64_t v = t - k0 + 1;  // keys k0 .. t of this tile
  return v < 0 ? 0 : (v > kn ? kn : v);
}

TeamPolicy team_policy(std::int64_t league, std::size_t scratch_bytes) {
  TeamPolicy policy(static_cast<int>(league), kTeamSize, kVectorLength);
  policy.set_scratch_size(0, Kokkos::PerTeam(scratch_bytes));
  return policy;
}

}  // namespace

// Each Scratch view is carved out of the team's scratch separately (and aligned), so the
// sizes add per view.
std::size_t flash_forward_scratch_bytes(int head_dim) {
  const std::size_t hd = static_cast<std::size_t>(head_dim);
  return Scratch::shmem_size(hd * kTileK) + Scratch::shmem_size(kTileQ * kTileK) +
         Scratch::shmem_size(kTileQ * hd) + 2 * Scratch::shmem_size(kTileQ);
}

std::size_t flash_backward_scratch_bytes(int head_dim) {
  const std::size_t hd = static_cast<std::size_t>(head_dim);
  return 2 * Scratch::shmem_size(hd * kTileK) + 2 * Scratch::shmem_size(kTileQ * kTileK) +
         2 * Scratch::shmem_size(kTileK * hd);
}

void flash_attention_forward(ConstMatrix qkv, const FlashAttentionShape& shape, Matrix out,
                             Vector lse, const DropoutMask& mask) {
  const Dims D = check_dims("flash_attention_forward", qkv, shape, out.extent(0), out.extent(1),
                            lse.extent(0), mask);
  if (kHostMemory && D.hd <= flash::kHostMaxHeadDim) {
    flash::host_forward(D, qkv.data(), out.data(), lse.data(), mask);
    return;
  }
  const std::int64_t sequences = D.sequences;
  const std::int64_t q_tiles = (D.T + kTileQ - 1) / kTileQ;
  const float* qkv_data = qkv.data();
  float* out_data = out.data();
  float* lse_data = lse.data();
  const DropoutMask drop = mask;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::attn::flash_fwd"),
      team_policy(sequences * D.H * q_tiles, flash_forward_scratch_bytes(static_cast<int>(D.hd))),
      KOKKOS_LAMBDA(const Team& team) {
        const std::int64_t bh = team.league_rank() / q_tiles;  // b * H + h
        const std::int64_t q0 = (team.league_rank() % q_tiles) * kTileQ;
        const std::int64_t b = bh / D.H, h = bh % D.H, hd = D.hd;
        const std::int64_t qn = D.T - q0 < kTileQ ? D.T - q0 : kTileQ;
        const float* q_rows = qkv_data + b * D.T * D.qkv_ld + h * hd;  // row t: + t * qkv_ld
        const float* k_rows = q_rows + D.d;
        const float* v_rows = q_rows + 2 * D.d;
        Scratch kt(team.team_scratch(0), hd * kTileK);     // K^T of the tile [hd][kTileK]
        Scratch s(team.team_scratch(0), kTileQ * kTileK);  // scores, then probabilities
        Scratch acc(team.team_scratch(0), kTileQ * hd);    // unnormalised output rows
        Scratch m(team.team_scratch(0), kTileQ), l(team.team_scratch(0), kTileQ);
        team_for(team, qn, [&](const std::int64_t i) {
          vector_for(team, hd, [&](const std::int64_t c) { acc(i * hd + c) = 0.0f; });
          Kokkos::single(Kokkos::PerThread(team), [&]() {
            m(i) = -3.0e38f;  // exp(m_old - m_new) is then 0 at the first tile
            l(i) = 0.0f;
          });
        });
        const std::int64_t last_tile = (q0 + qn - 1) / kTileK;  // tiles above the diagonal: none
        for (std::int64_t tile = 0; tile <= last_tile; ++tile) {
          const std::int64_t k0 = tile * kTileK;
          const std::int64_t kn = D.T - k0 < kTileK ? D.T - k0 : kTileK;
          team.team_barrier();  // the previous tile's K^T is no longer read
          team_for(team, kn, [&](const std::int64_t j) {
            const float* k_row = k_rows + (k0 + j) * D.qkv_ld;
            vector_for(team, hd, [&](const std::int64_t c) { kt(c * kTileK + j) = k_row[c]; });
          });
          team.team_barrier();
          team_for(team, qn, [&](const std::int64_t i) {
            const std::int64_t t = q0 + i;
            const std::int64_t vis = visible_keys(t, k0, kn);
            if (vis == 0) return;
            float* srow = &s(i * kTileK);
            const float* q_row = q_rows + t * D.qkv_ld;
            vector_for(team, vis, [&](const std::int64_t j) { srow[j] = 0.0f; });
            for (std::int64_t c = 0; c < hd; ++c) {
              const float qc = q_row[c] * D.scale;
              const float* kt_row = &kt(c * kTileK);
              vector_for(team, vis, [&](const std::int64_t j) { srow[j] += qc * kt_row[j]; });
            }
            const float tile_max = vector_max(team, vis, srow);
            const float m_old = m(i);
            const float m_new = tile_max > m_old ? tile_max : m_old;
            const float correction = math::fast_exp(m_old - m_new);
            vector_for(team, vis,
                       [&](const std::int64_t j) { srow[j] = math::fast_exp(srow[j] - m_new); });
            const float tile_sum = vector_sum(team, vis, srow);
            if (D.dropout) {
              const auto row = static_cast<std::uint64_t>(bh * D.T + t);
              const auto cols = static_cast<std::uint64_t>(D.T);
              vector_for(team, vis, [&](const std::int64_t j) {
                const bool keep = dropout_keep(drop, row, static_cast<std::uint64_t>(k0 + j), cols);
                srow[j] = keep ? srow[j] * D.keep_scale : 0.0f;
              });
            }
            float* acc_row = &acc(i * hd);
            vector_for(team, hd, [&](const std::int64_t c) { acc_row[c] *= correction; });
            for (std::int64_t j = 0; j < vis; ++j) {
              const float p = srow[j];
              const float* v_row = v_rows + (k0 + j) * D.qkv_ld;
              vector_for(team, hd, [&](const std::int64_t c) { acc_row[c] += p * v_row[c]; });
            }
            Kokkos::single(Kokkos::PerThread(team), [&]() {
              l(i) = l(i) * correction + tile_sum;
              m(i) = m_new;
            });
          });
        }
        team.team_barrier();
        team_for(team, qn, [&](const std::int64_t i) {
          const std::int64_t t = q0 + i;
          const float inv = 1.0f / l(i);
          float* out_row = out_data + (b * D.T + t) * D.out_ld + h * hd;
          vector_for(team, hd, [&](const std::int64_t c) { out_row[c] = acc(i * hd + c) * inv; });
          Kokkos::single(Kokkos::PerThread(team),
                         [&]() { lse_data[bh * D.T + t] = m(i) + math::log(l(i)); });
        });
      });
}

void flash_attention_backward(ConstMatrix qkv, ConstMatrix out, ConstMatrix dout, ConstVector lse,
                              const FlashAttentionShape& shape, Vector delta, Matrix dqkv,
                              const DropoutMask& mask) {
  const Dims D = check_dims("flash_attention_backward", qkv, shape, out.extent(0), out.extent(1),
                            lse.extent(0), mask);
  require_same_shape(out, dout, "flash_attention_backward");
  require_same_shape(qkv, dqkv, "flash_attention_backward");
  TRELLIS_REQUIRE(delta.extent(0) == lse.extent(0), "flash_attention_backward: delta " +
                                                        extents_string(delta) + " and lse " +
                                                        extents_string(lse) + " differ");
  if (kHostMemory && D.hd <= flash::kHostMaxHeadDim) {
    flash::host_backward(D, qkv.data(), out.data(), dout.data(), lse.data(), delta.data(),
                         dqkv.data(), mask);
    return;
  }
  const std::int64_t rows = static_cast<std::int64_t>(qkv.extent(0));
  const std::int64_t sequences = D.sequences;
  const float* qkv_data = qkv.data();
  const float* out_data = out.data();
  const float* dout_data = dout.data();
  const float* lse_data = lse.data();
  float* delta_data = delta.data();
  float* dqkv_data = dqkv.data();
  const DropoutMask drop = mask;

  // D[(b, h, t)] = dout_t . out_t over the head's hd columns; one thread per (row, head).
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::attn::flash_delta"), Range(0, rows * D.H),
      KOKKOS_LAMBDA(const std::int64_t u) {
        const std::int64_t row = u / D.H, h = u % D.H;
        const std::int64_t b = row / D.T, t = row % D.T;
        const float* o = out_data + row * D.out_ld + h * D.hd;
        const float* g = dout_data + row * D.out_ld + h * D.hd;
        float dot = 0.0f;
        for (std::int64_t c = 0; c < D.hd; ++c) dot += o[c] * g[c];
        delta_data[(b * D.H + h) * D.T + t] = dot;
      });

  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::attn::flash_bwd"),
      team_policy(sequences * D.H, flash_backward_scratch_bytes(static_cast<int>(D.hd))),
      KOKKOS_LAMBDA(const Team& team) {
        const std::int64_t bh = team.league_rank();
        const std::int64_t b = bh / D.H, h = bh % D.H, hd = D.hd, T = D.T;
        const std::int64_t head_col = b * T * D.qkv_ld + h * hd;
        const float* q_rows = qkv_data + head_col;  // row t: + t * qkv_ld
        const float* k_rows = q_rows + D.d;
        const float* v_rows = q_rows + 2 * D.d;
        float* dq_rows = dqkv_data + head_col;
        float* dk_rows = dq_rows + D.d;
        float* dv_rows = dq_rows + 2 * D.d;
        const float* dout_rows = dout_data + b * T * D.out_ld + h * hd;  // row t: + t * out_ld
        const float* lse_bh = lse_data + bh * T;
        const float* delta_bh = delta_data + bh * T;
        Scratch kt(team.team_scratch(0), hd * kTileK);      // K^T [hd][kTileK]
        Scratch vt(team.team_scratch(0), hd * kTileK);      // V^T [hd][kTileK]
        Scratch p(team.team_scratch(0), kTileQ * kTileK);   // (dropped) probabilities
        Scratch ds(team.team_scratch(0), kTileQ * kTileK);  // dP, then dS (unscaled)
        Scratch dk(team.team_scratch(0), kTileK * hd);      // the key tile's dk, dv rows
        Scratch dv(team.team_scratch(0), kTileK * hd);
        team_for(team, T, [&](const std::int64_t t) {
          vector_for(team, hd, [&](const std::int64_t c) { dq_rows[t * D.qkv_ld + c] = 0.0f; });
        });
        for (std::int64_t k0 = 0; k0 < T; k0 += kTileK) {
          const std::int64_t kn = T - k0 < kTileK ? T - k0 : kTileK;
          team.team_barrier();  // dq zeroed / the previous tile's scratch written out
          team_for(team, kn, [&](const std::int64_t j) {
            const float* k_row = k_rows + (k0 + j) * D.qkv_ld;
            const float* v_row = v_rows + (k0 + j) * D.qkv_ld;
            vector_for(team, hd, [&](const std::int64_t c) {
              kt(c * kTileK + j) = k_row[c];
              vt(c * kTileK + j) = v_row[c];
              dk(j * hd + c) = 0.0f;
              dv(j * hd + c) = 0.0f;
            });
          });
          // Query tiles from the one holding row k0 (rows above see none of these keys).
          for (std::int64_t q0 = k0 / kTileQ * kTileQ; q0 < T; q0 += kTileQ) {
            const std::int64_t qn = T - q0 < kTileQ ? T - q0 : kTileQ;
            team.team_barrier();
            team_for(team, qn, [&](const std::int64_t i) {
              const std::int64_t t = q0 + i;
              const std::int64_t vis = visible_keys(t, k0, kn);
              float* prow = &p(i * kTileK);
              float* dsrow = &ds(i * kTileK);
              vector_for(team, kn, [&](const std::int64_t j) {
                prow[j] = 0.0f;
                dsrow[j] = 0.0f;
              });
              if (vis == 0) return;
              const float* q_row = q_rows + t * D.qkv_ld;
              const float* dout_row = dout_rows + t * D.out_ld;
              for (std::int64_t c = 0; c < hd; ++c) {
                const float qc = q_row[c] * D.scale, gc = dout_row[c];
                const float* kt_row = &kt(c * kTileK);
                const float* vt_row = &vt(c * kTileK);
                vector_for(team, vis, [&](const std::int64_t j) {
                  prow[j] += qc * kt_row[j];   // s
                  dsrow[j] += gc * vt_row[j];  // dP (of the dropped P)
                });
              }
              const float lse_t = lse_bh[t], delta_t = delta_bh[t];
              if (D.dropout) {
                const auto row = static_cast<std::uint64_t>(bh * T + t);
                const auto cols = static_cast<std::uint64_t>(T);
                vector_for(team, vis, [&](const std::int64_t j) {
                  const float prob = math::fast_exp(prow[j] - lse_t);
                  const float f = dropout_keep(drop, row, static_cast<std::uint64_t>(k0 + j), cols)
                                      ? D.keep_scale
                                      : 0.0f;
                  dsrow[j] = prob * (dsrow[j] * f - delta_t);
                  prow[j] = prob * f;
                });
              } else {
                vector_for(team, vis, [&](const std::int64_t j) {
                  const float prob = math::fast_exp(prow[j] - lse_t);
                  dsrow[j] = prob * (dsrow[j] - delta_t);
                  prow[j] = prob;
                });
              }
              float* dq_row = dq_rows + t * D.qkv_ld;  // dq_t += scale sum_j dS_tj k_j
              for (std::int64_t j = 0; j < vis; ++j) {
                const float g = dsrow[j] * D.scale;
                const float* k_row = k_rows + (k0 + j) * D.qkv_ld;
                vector_for(team, hd, [&](const std::int64_t c) { dq_row[c] += g * k_row[c]; });
              }
            });
            team.team_barrier();
            // dv_j += sum_i P_ij dout_i, dk_j += scale sum_i dS_ij q_i (rows i >= key j only).
            team_for(team, kn, [&](const std::int64_t j) {
              const std::int64_t first = k0 + j - q0 > 0 ? k0 + j - q0 : 0;
              float* dk_row = &dk(j * hd);
              float* dv_row = &dv(j * hd);
              for (std::int64_t i = first; i < qn; ++i) {
                const float pij = p(i * kTileK + j), g = ds(i * kTileK + j) * D.scale;
                const float* q_row = q_rows + (q0 + i) * D.qkv_ld;
                const float* dout_row = dout_rows + (q0 + i) * D.out_ld;
                vector_for(team, hd, [&](const std::int64_t c) {
                  dv_row[c] += pij * dout_row[c];
                  dk_row[c] += g * q_row[c];
                });
              }
            });
          }
          team.team_barrier();
          team_for(team, kn, [&](const std::int64_t j) {
            float* dk_out = dk_rows + (k0 + j) * D.qkv_ld;
            float* dv_out = dv_rows + (k0 + j) * D.qkv_ld;
            vector_for(team, hd, [&](const std::int64_t c) {
              dk_out[c] = dk(j * hd + c);
              dv_out[c] = dv(j * hd + c);
            });
          });
        }
      });
}

}  // namespace trellis::kernels
