#include "trellis/kernels/attention/flash_attention.hpp"

#include "flash_attention_impl.hpp"
#include "flash_attention_team.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/fast_math.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/core/math.hpp"

#include <string>

namespace trellis::kernels {

namespace flash {

Dims check_dims(const char* who, const ConstMatrix& qkv, const FlashAttentionShape& shape,
                std::size_t out_rows, std::size_t out_cols, std::size_t per_row_size,
                const DropoutMask& mask) {
  const std::size_t n = qkv.extent(0), width = qkv.extent(1);
  const std::size_t T = static_cast<std::size_t>(shape.seq_len > 0 ? shape.seq_len : 1);
  const std::size_t H = static_cast<std::size_t>(shape.n_head > 0 ? shape.n_head : 1);
  const int kv_heads = shape.n_kv_head == 0 ? shape.n_head : shape.n_kv_head;
  const std::size_t KVH = static_cast<std::size_t>(kv_heads > 0 ? kv_heads : 1);
  const std::size_t hd = width / (H + 2 * KVH);
  const bool ok = shape.seq_len > 0 && shape.n_head > 0 && kv_heads > 0 && H % KVH == 0 &&
                  width % (H + 2 * KVH) == 0 && width > 0 && n % T == 0 && out_rows == n &&
                  out_cols == H * hd && per_row_size == n * H && mask.p >= 0.0f && mask.p < 1.0f;
  if (!ok) {
    throw Error(std::string(who) + ": qkv " + extents_string(qkv) + ", output [" +
                std::to_string(out_rows) + ", " + std::to_string(out_cols) + "], per-row buffer " +
                std::to_string(per_row_size) + ", " + std::to_string(shape.n_head) + " heads, " +
                std::to_string(shape.n_kv_head) + " kv heads (n_kv_head; 0: as many as heads)" +
                ", seq_len " + std::to_string(shape.seq_len) + ", dropout " +
                std::to_string(mask.p) +
                " (need qkv [n, (heads + 2 kv heads) hd], output [n, heads hd], heads % kv heads "
                "== 0, n % seq_len == 0, per-row buffer n * heads, 0 <= dropout < 1)");
  }
  Dims dims{};
  dims.sequences = static_cast<std::int64_t>(n / T);
  dims.T = static_cast<std::int64_t>(T);
  dims.H = static_cast<std::int64_t>(H);
  dims.KVH = static_cast<std::int64_t>(KVH);
  dims.group = dims.H / dims.KVH;
  dims.hd = static_cast<std::int64_t>(hd);
  dims.d = dims.H * dims.hd;
  dims.layout = QkvLayout{dims.H, dims.KVH, dims.hd};
  dims.qkv_ld = static_cast<std::int64_t>(width);
  dims.out_ld = dims.d;
  dims.scale = 1.0f / math::sqrt(static_cast<float>(dims.hd));
  dims.dropout = mask.p > 0.0f;
  dims.keep_scale = 1.0f / (1.0f - mask.p);
  return dims;
}

}  // namespace flash

using namespace flash;

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
  if (kHostKernels && D.hd <= flash::kHostMaxHeadDim) {
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
        const float* seq_rows = qkv_data + b * D.T * D.qkv_ld;  // row t: + t * qkv_ld
        const float* q_rows = seq_rows + D.layout.q_col(h);
        const float* k_rows = seq_rows + D.layout.k_col(h / D.group);  // the kv head's columns
        const float* v_rows = seq_rows + D.layout.v_col(h / D.group);
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

}  // namespace trellis::kernels
