// Causal multi-head attention without the [T, T] matrices (FlashAttention's algorithm,
// Dao et al. 2022, with FlashAttention-2's loop order), reading and writing the row layouts
// of the Linears around it, so no split/merge copies either. Grouped-query attention (GQA;
// multi-query at one kv head): KVH kv heads, each serving g = H / KVH query heads.
//
// Layouts (rows = tokens, sequence b / position t in row b * T + t; H query heads and KVH kv
// heads of hd columns, d = H * hd, kvd = KVH * hd; head h = columns [h * hd, (h + 1) * hd) of
// its block):
//   qkv   [n, d + 2 kvd]  c_attn's output, heads placed as kernels/qkv_layout.hpp says:
//                  KVH = H (multi-head, qkv [n, 3d]): q = columns [0, d), k = [d, 2d),
//                  v = [2d, 3d); KVH < H: per kv group j, [q heads jg .. jg+g-1 | k_j | v_j].
//                  Query head h reads kv head h / g (Hugging Face's repeat_kv order: kv head j
//                  serves query heads [j g, (j + 1) g)) in place, no per-head copies.
//   out   [n, d]   softmax(q k^T / sqrt(hd), keys j > t masked) v, per (sequence, query head);
//                  what c_proj consumes
//   lse   [n / T * H * T]  per (sequence b, query head h, position t) at (b * H + h) * T + t:
//                  the row's logsumexp of the scaled scores (saved for the backward)
//   dqkv  [n, d + 2 kvd]  gradient of qkv (dq, dk, dv where q, k, v sit in qkv); a kv
//                  head's dk/dv sum over the g query heads it serves
// Memory: O(n H) beyond the inputs and outputs (lse, delta), instead of the O(n H T)
// probabilities; k/v are never expanded to H heads.
//
// Forward: one work item (a team on devices) per (sequence, head, query tile). It walks the key
// tiles from 0 to the diagonal (tiles entirely above it are skipped) keeping per row the running
// max m, the running sum l of exp(s - m) and the unnormalised output acc; each new tile rescales l
// and acc by exp(m_old - m_new) (online softmax); at the end out = acc / l and lse = m + log l.
// Backward: P is recomputed tile by tile as exp(s - lse), with D_t = rowsum(dout_t * out_t)
// (precomputed, the softmax backward's row dot sum_j P_tj dP_tj), dS = P (dP - D), dq += dS k,
// dk += dS^T q, dv += P^T dout. Race-free scheme: one item/team per (sequence, kv head), key
// tiles in the outer loop, then the g query heads of the kv head, then their query tiles; dk
// and dv of a key tile accumulate over all g heads in scratch (stack on the host) and are
// written once; dq accumulates in place in dqkv, whose rows of these query heads no other item
// touches. (An item per query head would need atomics or a reduction over g copies of dk/dv.)
// Backward parallelism is n / T * KVH teams (>= 32 for the GPT configs, which have KVH = H); on
// a GPU that grid is coarser than FlashAttention-2's, and coarser still with few kv heads: the
// price of needing no atomics.
//
// Dropout on the probabilities (p > 0): supported inside the kernel. The keep decision of
// probability (b, h, t, j) is kernels::dropout_keep(mask, (b * H + h) * T + t, j, T),
// regenerated in forward and backward from the counters, so the result equals the
// materialised path (causal_dropout_apply on the [n/T * H * T, T] probabilities) up to
// rounding. With dropout, l and lse still sum the undropped probabilities, and
// D_t = rowsum(dout * out) still equals sum_j P_tj dP_tj (out contains the mask).
//
// Host (src/kernels/flash_attention_host.cpp; head dims up to 128): kTile = 64 query and 64
// key rows per tile. The tile products are sgemm calls (oneDNN's, JIT for the host's ISA;
// the BLAS without oneDNN) straight on the strided q/k/v/dout rows (leading dimension d + 2 kvd or
// d), so nothing is copied; forward: S = q k^T, acc += P v; backward: S, dP = dout v^T,
// dq += dS k (into dqkv), dk += dS^T q, dv += P^T dout (into per-tile stack accumulators).
// The per-row work between them (mask, max, exp, sums, dropout, rescale) is a vectorised loop
// over the tile row in AVX-512/AVX2/baseline clones, with math::fast_exp (core/fast_math.hpp;
// libm's expf does not vectorise). Why sgemm and not hand loops: one 64 x 64 score tile from the
// strided rows, measured on this host (Xeon with AVX-512, shared and loaded; best of 7 x 2000
// calls): hd 32: dnnl_sgemm 12-21 us, the rank-1-update loop nest (score row over 64 keys, K^T tile
// in L1, -O3 -march=native) 29-74 us, OpenBLAS 74-95 us; hd 64: 30-38, 77-123, 147-167 us.
// Why 64: the stack tiles of one item (S 16 KiB, acc or dK/dV 32 KiB each at hd 64-128) sit
// in L1/L2 (48 KiB / 2 MiB per core here), and 64 keys amortise the per-tile max/rescale and
// the sgemm call overhead over 64 x 64 x hd multiply-adds. Work items (sequence, head, query
// tile) forward and (sequence, kv head) backward run one after another: one rank per core.
// Head dims above 128 (and devices) run the team kernels below.
// CUDA (compiles; not run here): TeamPolicy with the tile buffers in team scratch, rows over
// TeamThreadRange and the contiguous hd/key index over ThreadVectorRange (coalesced loads of
// the q/k/v rows), 32 x 32 tiles so a team's scratch stays within the 48 KiB of shared memory.
#pragma once

#include "trellis/kernels/dropout.hpp"
#include "trellis/kernels/views.hpp"

namespace trellis::kernels {

struct FlashAttentionShape {
  int n_head = 0;     // query heads (this rank's heads under tensor parallelism)
  int seq_len = 0;    // T; qkv's rows are whole sequences
  int n_kv_head = 0;  // kv heads; 0: n_head (multi-head attention); must divide n_head
};

// Scratch bytes one forward / backward team uses at head dimension hd (for the docs/tests).
std::size_t flash_forward_scratch_bytes(int head_dim);
std::size_t flash_backward_scratch_bytes(int head_dim);

// out and lse from qkv (layouts above). dropout.p == 0: no dropout (the other fields unused).
// Throws when the shapes do not fit (qkv [n, (H + 2 KVH) hd], out [n, H hd], lse [n * H],
// n % T == 0, H % KVH == 0).
void flash_attention_forward(ConstMatrix qkv, const FlashAttentionShape& shape, Matrix out,
                             Vector lse, const DropoutMask& dropout);

// dqkv (overwritten) from dout [n, d] = gradient of out, with qkv, out and lse of the forward
// and the same dropout mask. delta [n * H]: workspace for D (overwritten).
void flash_attention_backward(ConstMatrix qkv, ConstMatrix out, ConstMatrix dout, ConstVector lse,
                              const FlashAttentionShape& shape, Vector delta, Matrix dqkv,
                              const DropoutMask& dropout);

}  // namespace trellis::kernels
