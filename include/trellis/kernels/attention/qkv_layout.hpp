// Where the query, key and value heads sit in the columns of a fused q|k|v row (the output of
// an attention's c_attn Linear), for multi-head and grouped-query attention.
//
// H query heads, KVH key/value heads (H % KVH == 0), g = H / KVH query heads per kv head, hd
// columns per head; a row is (H + 2 KVH) hd wide. Query head h attends with kv head h / g
// (Hugging Face's repeat_kv: kv head j serves query heads [j g, (j + 1) g)).
//
//   KVH == H (multi-head, GPT-2):   [ q_0 .. q_{H-1} | k_0 .. k_{H-1} | v_0 .. v_{H-1} ]
//   KVH <  H (grouped, Megatron):   per kv group j: [ q_{jg} .. q_{jg+g-1} | k_j | v_j ]
//
// Why two layouts: tensor parallelism splits c_attn's rows into equal pieces (ShardSpec). The
// multi-head layout splits as three equal sections (q, k and v each give every rank H/tp
// heads), and keeps GPT-2 checkpoints as they were; the grouped layout splits whole kv groups
// (KVH/tp each) with no sections at all, where three sections would be unequal. Hugging Face's
// separate q_proj/k_proj/v_proj are permuted into either by the checkpoint converters.
#pragma once

#include "trellis/core/kokkos_types.hpp"

#include <cstdint>

namespace trellis::kernels {

struct QkvLayout {
  std::int64_t n_head = 0, n_kv_head = 0, head_dim = 0;

  KOKKOS_INLINE_FUNCTION bool grouped() const { return n_kv_head != n_head; }
  KOKKOS_INLINE_FUNCTION std::int64_t group_size() const { return n_head / n_kv_head; }
  KOKKOS_INLINE_FUNCTION std::int64_t width() const { return (n_head + 2 * n_kv_head) * head_dim; }
  // First column of query head h, and of key / value head j.
  KOKKOS_INLINE_FUNCTION std::int64_t q_col(std::int64_t h) const {
    if (!grouped()) return h * head_dim;
    const std::int64_t g = group_size();
    return ((h / g) * (g + 2) + h % g) * head_dim;
  }
  KOKKOS_INLINE_FUNCTION std::int64_t k_col(std::int64_t j) const {
    if (!grouped()) return (n_head + j) * head_dim;
    const std::int64_t g = group_size();
    return (j * (g + 2) + g) * head_dim;
  }
  KOKKOS_INLINE_FUNCTION std::int64_t v_col(std::int64_t j) const {
    if (!grouped()) return (n_head + n_kv_head + j) * head_dim;
    const std::int64_t g = group_size();
    return (j * (g + 2) + g + 1) * head_dim;
  }
  // Whether head slot s (columns [s hd, (s + 1) hd)) holds a query or a key (what RoPE turns).
  KOKKOS_INLINE_FUNCTION bool rotated_slot(std::int64_t s) const {
    if (!grouped()) return s < n_head + n_kv_head;
    return s % (group_size() + 2) <= group_size();
  }
  // The kv head of query head h.
  KOKKOS_INLINE_FUNCTION std::int64_t kv_head_of(std::int64_t h) const { return h / group_size(); }
};

}  // namespace trellis::kernels
