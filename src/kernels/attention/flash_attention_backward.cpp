// The flash attention backward's team kernel (the host body is in flash_attention_host.cpp).
#include "trellis/kernels/attention/flash_attention.hpp"

#include "flash_attention_impl.hpp"
#include "flash_attention_team.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/fast_math.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/kernel_label.hpp"

#include <string>

namespace trellis::kernels {

using namespace flash;

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
  if (kHostKernels && D.hd <= flash::kHostMaxHeadDim) {
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

  // One team per (sequence, kv head): the dk/dv of its key tiles sum over the group's query
  // heads in scratch, so no other team writes them (header: why no atomics).
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::attn::flash_bwd"),
      team_policy(sequences * D.KVH, flash_backward_scratch_bytes(static_cast<int>(D.hd))),
      KOKKOS_LAMBDA(const Team& team) {
        const std::int64_t b = team.league_rank() / D.KVH, kv = team.league_rank() % D.KVH;
        const std::int64_t hd = D.hd, T = D.T;
        const std::int64_t h0 = kv * D.group;           // query heads h0 .. h0 + group - 1
        const std::int64_t seq_col = b * T * D.qkv_ld;  // row t: + t * qkv_ld
        const float* k_rows = qkv_data + seq_col + D.layout.k_col(kv);
        const float* v_rows = qkv_data + seq_col + D.layout.v_col(kv);
        float* dk_rows = dqkv_data + seq_col + D.layout.k_col(kv);
        float* dv_rows = dqkv_data + seq_col + D.layout.v_col(kv);
        Scratch kt(team.team_scratch(0), hd * kTileK);      // K^T [hd][kTileK]
        Scratch vt(team.team_scratch(0), hd * kTileK);      // V^T [hd][kTileK]
        Scratch p(team.team_scratch(0), kTileQ * kTileK);   // (dropped) probabilities
        Scratch ds(team.team_scratch(0), kTileQ * kTileK);  // dP, then dS (unscaled)
        Scratch dk(team.team_scratch(0), kTileK * hd);      // the key tile's dk, dv rows
        Scratch dv(team.team_scratch(0), kTileK * hd);
        for (std::int64_t h = h0; h < h0 + D.group; ++h) {
          float* dq_rows = dqkv_data + seq_col + D.layout.q_col(h);
          team_for(team, T, [&](const std::int64_t t) {
            vector_for(team, hd, [&](const std::int64_t c) { dq_rows[t * D.qkv_ld + c] = 0.0f; });
          });
        }
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
          for (std::int64_t h = h0; h < h0 + D.group; ++h) {
            const std::int64_t bh = b * D.H + h;
            const float* q_rows = qkv_data + seq_col + D.layout.q_col(h);
            float* dq_rows = dqkv_data + seq_col + D.layout.q_col(h);
            const float* dout_rows = dout_data + b * T * D.out_ld + h * hd;  // + t * out_ld
            const float* lse_bh = lse_data + bh * T;
            const float* delta_bh = delta_data + bh * T;
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
                    const float f =
                        dropout_keep(drop, row, static_cast<std::uint64_t>(k0 + j), cols)
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
