// Causal attention of new query rows against a key/value cache: the incremental inference of
// generation (nn/attention.hpp's forward_cached). The flash kernels (flash_attention.hpp)
// take whole sequences whose keys are their own rows; here the keys of earlier positions were
// computed by earlier calls and live in the cache.
//
//   qkv     [rows, (H + 2 KVH) hd]  c_attn's output for the tokens at positions
//                                   [first_position, first_position + rows) of one sequence,
//                                   q and k already turned (rotary); heads per QkvLayout
//   k_cache, v_cache [>= first_position + rows, KVH hd]  key / value rows by position, the
//                                   new rows' already appended; kv head j = columns
//                                   [j hd, (j + 1) hd) (grouped kv heads stored once)
//   out     [rows, H hd]            softmax(q k^T / sqrt(hd)) v over keys at positions
//                                   <= the query's own, query head h with kv head h / (H / KVH)
//
// One work item per (row, query head): a pass over its keys for the maximum score, a second
// for the exponentials, their sum and the weighted values accumulated into the output row,
// then a division: no scratch, so the same body runs on the host and on a device. Cost
// O(rows H (first_position + rows) hd): one decoded token reads the cache once per head.
#pragma once

#include "trellis/kernels/attention/qkv_layout.hpp"
#include "trellis/kernels/views.hpp"

namespace trellis::kernels {

// Throws Error when the shapes do not fit (naming every extent).
void cached_attention(ConstMatrix qkv, const QkvLayout& layout, ConstMatrix k_cache,
                      ConstMatrix v_cache, int first_position, Matrix out);

// Copies the new rows' keys and values out of qkv [rows, width] into the caches' rows
// [first_position, first_position + rows).
void append_kv_cache(ConstMatrix qkv, const QkvLayout& layout, int first_position, Matrix k_cache,
                     Matrix v_cache);

}  // namespace trellis::kernels
