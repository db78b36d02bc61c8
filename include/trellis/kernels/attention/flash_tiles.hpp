// The two products of a forward tile of the host flash attention (flash_attention.hpp), one
// version per instruction-set level (core/host_simd.hpp HostIsa): the attention calls the one
// host_isa() picks; tests call each level the CPU has and compare them.
#pragma once

#include "trellis/core/host_simd.hpp"

#include <cstdint>

namespace trellis::kernels::flash {

// The host bodies take head dimensions up to this (their tiles live on the stack: at 128,
// 96 KiB forward, 160 KiB backward); larger ones run the team kernels on the host too.
inline constexpr std::int64_t kHostMaxHeadDim = 128;
inline constexpr std::int64_t kHostTile = 64;  // query and key rows per tile (header: why)

// Whether the vector products take head dimension hd (whole vectors, at most
// kHostMaxHeadDim); else the attention's tile products are sgemm calls.
bool vector_tiles_fit(std::int64_t hd);

// s [qn][kHostTile] = scale q k^T; q rows [qn] (stride ldq), k rows [kn] (stride ldk).
// shift = q0 - k0 bounds the keys each query row sees (causal: row i sees keys j <= i + shift);
// of the columns past them only those up to the end of a vector may be written (the softmax
// masks them), and no row past qn.
void scores_tile(HostIsa isa, std::int64_t qn, std::int64_t kn, std::int64_t hd, std::int64_t shift,
                 float scale, const float* q, std::int64_t ldq, const float* k, std::int64_t ldk,
                 float* s);
// acc [qn][hd] += p [qn][kHostTile] v; v rows [kn] (stride ldv); p is 0 past each row's keys.
void accumulate_values(HostIsa isa, std::int64_t qn, std::int64_t kn, std::int64_t hd,
                       std::int64_t shift, const float* p, const float* v, std::int64_t ldv,
                       float* acc);

}  // namespace trellis::kernels::flash
