// What flash_attention.cpp (dispatch, the Kokkos team kernels) and flash_attention_host.cpp
// (the host bodies) share; private to src/kernels.
#pragma once

#include "trellis/kernels/attention/flash_attention.hpp"
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

// The host bodies take head dimensions up to this (their tiles live on the stack: at 128,
// 96 KiB forward, 160 KiB backward); larger ones run the team kernels on the host too.
inline constexpr std::int64_t kHostMaxHeadDim = 128;
inline constexpr std::int64_t kHostTile = 64;  // query and key rows per tile (header: why)

// The forward tile products on 16-float vectors (flash_attention_tiles.cpp), for head dimensions
// vector_tiles_fit takes (whole vectors, at most kHostMaxHeadDim); shift = q0 - k0 bounds the
// keys each query row sees (causal), and nothing past them is read or written.
bool vector_tiles_fit(std::int64_t hd);
// s [qn][kHostTile] = scale q k^T; q rows [qn] (stride ldq), k rows [kn] (stride ldk).
void scores_tile(std::int64_t qn, std::int64_t kn, std::int64_t hd, std::int64_t shift, float scale,
                 const float* q, std::int64_t ldq, const float* k, std::int64_t ldk, float* s);
// acc [qn][hd] += p [qn][kHostTile] v; v rows [kn] (stride ldv); p is 0 past each row's keys.
void accumulate_values(std::int64_t qn, std::int64_t kn, std::int64_t hd, std::int64_t shift,
                       const float* p, const float* v, std::int64_t ldv, float* acc);

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
