// Building blocks of causal multi-head self-attention (nn/attention.hpp assembles them).
//
// Two layouts of the same activations:
//   rows   [n * T, W]       one row per token: sequence b, position t is row b * T + t
//   heads  [n, H, T, hd]    a stack of n * H contiguous row-major [T, hd] matrices, one per
//                           (sequence, head), i.e. PyTorch's x.view(n, T, H, hd).transpose(1, 2):
//                           head h holds columns [h * hd, (h + 1) * hd) of a d = H * hd block.
// A per-head matrix inside the rows layout has a row stride of W, not hd, so it is no
// LayoutRight matrix that kernels::gemm could take; split_heads/merge_heads rearrange once per
// call instead, and the per-head products run as stacked (batched) GEMMs.
#pragma once

#include "trellis/kernels/dropout.hpp"
#include "trellis/kernels/views.hpp"

namespace trellis::kernels {

// heads[b, h, t, i] = rows[b * T + t, col0 + h * hd + i]  for the d = n_head * hd columns
// starting at col0.  rows: [n * T, >= col0 + d]   heads: [n * T * d] (written)
void split_heads(ConstMatrix rows, int col0, int d, int n_head, int seq_len, Vector heads);

// rows[b * T + t, col0 + h * hd + i] = heads[b, h, t, i]; other columns are left alone.
void merge_heads(ConstVector heads, int d, int n_head, int seq_len, Matrix rows, int col0);

// C_i = alpha op(A_i) op(B_i) + beta C_i for i in [0, batch): X_i is row block i of the
// stacked matrix X ([batch * rows_x, cols_x], blocks of rows_x = extent(0) / batch rows).
// Loops kernels::gemm over the blocks (no copies; cuBLAS's strided-batched GEMM is the device
// upgrade). Throws when a stack does not divide into `batch` blocks or the blocks do not fit.
void gemm_batched(bool trans_a, bool trans_b, float alpha, ConstMatrix a, ConstMatrix b, float beta,
                  Matrix c, int batch);

// Causal softmax, in place, over the rows of a stack of [T, T] score matrices: s [m * T, T]
// (T = s.extent(1)); row r is query position t = r % T of its matrix. Columns j <= t get
// softmax over j' <= t (max-subtracted, so stable); columns j > t get exactly 0.
void causal_softmax_forward(Matrix scores_to_probs);

// kernels::dropout_apply restricted to the causal lower triangle of a stack of [T, T]
// matrices (in, out: [m * T, T], may alias): entry (r, j) with j <= r % T is kept iff
// dropout_keep(mask, r, j, T), exactly the mask dropout_apply would use; entries above the
// diagonal (zero probabilities) are written 0 without drawing a random number, which halves
// the cost of GPT-2's attention dropout.
void causal_dropout_apply(ConstMatrix in, Matrix out, const DropoutMask& mask);

// Softmax backward, in place over the gradient: with p = the forward's probabilities,
//   ds_j = p_j (dp_j - sum_k p_k dp_k)   (masked columns: p_j = 0, so ds_j = 0).
// probs, dprobs_to_dscores: [m * T, T].
void causal_softmax_backward(ConstMatrix probs, Matrix dprobs_to_dscores);

}  // namespace trellis::kernels
