// Causal multi-head attention without the [T, T] matrices (FlashAttention's algorithm,
// Dao et al. 2022, with FlashAttention-2's loop order), reading and writing the row layouts
// of the Linears around it, so no split/merge copies either.
//
// Layouts (rows = tokens, sequence b / position t in row b * T + t; H heads of hd columns,
// d = H * hd; head h = columns [h * hd, (h + 1) * hd) of a d-wide block):
//   qkv   [n, 3d]  c_attn's output: q = columns [0, d), k = [d, 2d), v = [2d, 3d)
//   out   [n, d]   softmax(q k^T / sqrt(hd), keys j > t masked) v, per (sequence, head);
//                  what c_proj consumes
//   lse   [n / T * H * T]  per (sequence b, head h, position t) at (b * H + h) * T + t: the
//                  row's logsumexp of the scaled scores (saved for the backward)
//   dqkv  [n, 3d]  gradient of qkv (dq, dk, dv in the q/k/v column blocks)
// Memory: O(n H) beyond the inputs and outputs, instead of the O(n H T) probabilities.
//
// Forward: one team per (sequence, head, query tile of kTileQ rows). It walks the key tiles
// from 0 to the diagonal (tiles entirely above it are skipped) keeping per row the running max
// m, the running sum l of exp(s - m) and the unnormalised output acc; each new tile rescales
// l and acc by exp(m_old - m_new) (online softmax); at the end out = acc / l and
// lse = m + log l.
// Backward: P is recomputed tile by tile as exp(s - lse), with D_t = rowsum(dout_t * out_t)
// (precomputed, the softmax backward's row dot sum_j P_tj dP_tj), dS = P (dP - D), dq += dS k,
// dk += dS^T q, dv += P^T dout. Race-free scheme: one team per (sequence, head), key tiles
// in the outer loop; dk and dv of a key tile accumulate in team scratch and are written once,
// dq accumulates in place in dqkv, whose rows of this (sequence, head) no other team touches.
// Parallelism is n / T * H teams (>= 32 for the GPT configs), enough for host threads; on a
// GPU the per-(b, h) grid is coarser than FlashAttention-2's, the price of needing no atomics.
//
// Dropout on the probabilities (p > 0): supported inside the kernel. The keep decision of
// probability (b, h, t, j) is kernels::dropout_keep(mask, (b * H + h) * T + t, j, T),
// regenerated in forward and backward from the counters, so the result equals the
// materialised path (causal_dropout_apply on the [n/T * H * T, T] probabilities) up to
// rounding. With dropout, l and lse still sum the undropped probabilities, and
// D_t = rowsum(dout * out) still equals sum_j P_tj dP_tj (out contains the mask).
//
// Host: the loops are ordered so the innermost runs over contiguous memory without a
// reduction (GCC does not vectorise float reductions without -ffast-math): scores as
// S[i][:] += q[i][c] * K^T[c][:] with the key tile transposed into scratch, and the products
// with v, k, q, dout as axpys over hd. Exponentials go through kernels::fast_exp (vectorises;
// libm's expf does not). Tiles: kTileQ = kTileK = 64 on the host: the scratch of one team
// (K^T, S, acc at hd = 64: 3 x 16 KiB forward; K^T, V^T, S, dS, dK, dV: 6 x 16 KiB backward)
// sits in L2 (1-2 MiB per core here) with the working rows (one S row, one acc row, a K^T
// column block) in L1, and 64 keys amortise the per-tile max/rescale over 64 hd-long axpys.
// Why loops, not sgemm calls: a head's q/k/v columns have a row stride of 3d, which
// kernels::gemm (LayoutRight views) cannot take without a tile copy, the per-tile products
// are tiny (64 x 64 x hd, ~0.5 MFLOP: call overhead and packing dominate), and the masking,
// exp and rescaling would need a separate pass over S anyway (measured: docs in the commit).
// CUDA (compiles; not run here): TeamPolicy with the tile buffers in team scratch, rows over
// TeamThreadRange and the contiguous hd/key index over ThreadVectorRange (coalesced loads of
// the q/k/v rows), 32 x 32 tiles so a team's scratch stays within the 48 KiB of shared memory.
#pragma once

#include "trellis/kernels/dropout.hpp"
#include "trellis/kernels/views.hpp"

namespace trellis::kernels {

struct FlashAttentionShape {
  int n_head = 0;   // heads in the d-wide blocks (this rank's heads under tensor parallelism)
  int seq_len = 0;  // T; qkv's rows are whole sequences
};

// Scratch bytes one forward / backward team uses at head dimension hd (for the docs/tests).
std::size_t flash_forward_scratch_bytes(int head_dim);
std::size_t flash_backward_scratch_bytes(int head_dim);

// out and lse from qkv (layouts above). dropout.p == 0: no dropout (the other fields unused).
// Throws when the shapes do not fit (qkv [n, 3d], out [n, d], lse [n * H], n % T == 0,
// d % H == 0).
void flash_attention_forward(ConstMatrix qkv, const FlashAttentionShape& shape, Matrix out,
                             Vector lse, const DropoutMask& dropout);

// dqkv (overwritten) from dout [n, d] = gradient of out, with qkv, out and lse of the forward
// and the same dropout mask. delta [n * H]: workspace for D (overwritten).
void flash_attention_backward(ConstMatrix qkv, ConstMatrix out, ConstMatrix dout, ConstVector lse,
                              const FlashAttentionShape& shape, Vector delta, Matrix dqkv,
                              const DropoutMask& dropout);

}  // namespace trellis::kernels
