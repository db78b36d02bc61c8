// What flash_attention.cpp (dispatch, the Kokkos team kernels) and flash_attention_host.cpp
// (the host bodies) share; private to src/kernels.
#pragma once

#include "trellis/kernels/attention/flash_attention.hpp"
#include "trellis/kernels/attention/flash_tiles.hpp"
#include "trellis/kernels/attention/qkv_layout.hpp"
#include "trellis/kernels/dropout.hpp"

#include <cstdint>

namespace trellis::kernels::flash {

// Index constants of one call (layouts in kernels/flash_attention.hpp).
struct Dims {
  std::int64_t sequences, T, H, hd, d, qkv_ld, out_ld;  // out_ld = d: out/dout are [n, d]
  std::int64_t KVH, group;  // kv heads; query heads per kv head (query head h: kv head h / group)
  QkvLayout layout;         // where each head's columns sit in a qkv row
  float scale;              // 1 / sqrt(hd)
  float keep_scale;         // 1 / (1 - p)
  bool dropout;
};

// The forward tile products (kernels/attention/flash_tiles.hpp) in host_isa()'s version.
inline void scores_tile(std::int64_t qn, std::int64_t kn, std::int64_t hd, std::int64_t shift,
                        float scale, const float* q, std::int64_t ldq, const float* k,
                        std::int64_t ldk, float* s) {
  scores_tile(host_isa(), qn, kn, hd, shift, scale, q, ldq, k, ldk, s);
}
inline void accumulate_values(std::int64_t qn, std::int64_t kn, std::int64_t hd, std::int64_t shift,
                              const float* p, const float* v, std::int64_t ldv, float* acc) {
  accumulate_values(host_isa(), qn, kn, hd, shift, p, v, ldv, acc);
}

// Checks a call's shapes (Error naming `who` and every extent otherwise) and returns its
// index constants. out_rows/out_cols: the [n, d] output; per_row_size: lse's length.
Dims check_dims(const char* who, const ConstMatrix& qkv, const FlashAttentionShape& shape,
                std::size_t out_rows, std::size_t out_cols, std::size_t per_row_size,
                const DropoutMask& mask);

// Plain loops over raw pointers, parallel over the host execution space's threads.
void host_forward(const Dims& dims, const float* qkv, float* out, float* lse,
                  const DropoutMask& mask);
// delta: [sequences * H * T], written (D = rowsum(dout * out)); dqkv: written. Items per
// (sequence, kv head).
void host_backward(const Dims& dims, const float* qkv, const float* out, const float* dout,
                   const float* lse, float* delta, float* dqkv, const DropoutMask& mask);

}  // namespace trellis::kernels::flash
