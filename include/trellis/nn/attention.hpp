// CausalSelfAttention: GPT-2's masked multi-head self-attention (nanoGPT's module), and
// Llama's grouped-query attention with rotary positions (BlockSpec: n_kv_head, rope, bias).
//
// Rows are tokens: a call takes n rows = whole sequences of seq_len tokens (n % seq_len == 0),
// sequence b / position t in row b * T + t. H = n_head, hd = d / H, S = n / T sequences.
//
//   x [n, d]
//   c_attn "<name>.c_attn.weight" [3d, d], ".bias" [3d]      qkv = x W_attn^T + b   [n, 3d]
//   q, k, v = columns [0, d), [d, 2d), [2d, 3d) of qkv; head h = columns [h hd, (h+1) hd)
//             of each (PyTorch's q.view(S, T, H, hd).transpose(1, 2))
//   att = softmax(q k^T / sqrt(hd) with keys j > query t masked)      [S, H, T, T]  (never stored)
//   yr = attn_dropout(att) v, per head, in the rows layout              [n, d]
//   c_proj "<name>.c_proj.weight" [d, d], ".bias" [d]          z = yr W_proj^T + b  [n, d]
//   y = resid_dropout(z)                                              [n, d]
// Grouped-query attention (n_kv_head = KVH < H): c_attn is [(H + 2 KVH) hd, d] and its rows
//   come in kv groups, [q heads of the group | k | v] (kernels/qkv_layout.hpp), query head h
//   attending with kv head h / (H / KVH); KVH == H keeps GPT-2's [q | k | v] blocks.
// Rotary positions (spec.rope): after c_attn, kernels::rope_forward turns the q and k heads of
//   qkv in place (the flash kernels read the turned ones; the backward turns dq and dk back
//   before c_attn's backward). Position of a row: its index within its sequence.
// Biases (spec.bias false: Llama): neither Linear has one.
// backward (input grad =, parameter grads += through the two Linears (GPT-2 init)):
//   dz = resid_dropout(dy);  dyr = c_proj backward;  dqkv = flash backward(qkv, yr, dyr, lse);
//   dx = c_attn backward(dqkv)
// The attention core is kernels::flash_attention_{forward,backward} (kernels/flash_attention.hpp):
// tiled, online softmax, reading q/k/v straight from c_attn's output and writing yr and dqkv in
// the row layouts the Linears use, so no split/merge copies and no [S, H, T, T] buffers; the
// backward recomputes the probabilities from the saved per-row logsumexp lse [S, H, T].
// Causality: row t of the output depends on input rows <= t of its sequence only.
//
// Dropout (inverted, counter-based: kernels::dropout_keep), active when ctx.training and p > 0:
//   attn_dropout on the probabilities viewed as rows [S * H * T, T] (applied inside the flash
//     kernel, the keep decisions regenerated in the backward), stream
//     stream_mix(stream_from_name("<name>.attn_dropout"), step), first row
//     ctx.first_sample * H (ctx.first_sample counts token rows and is a multiple of T, so the
//     global row of (sequence s, head h, position t) is (s * H + h) * T + t), the same numbers
//     kernels::causal_dropout_apply draws on the materialised probabilities;
//   resid_dropout on z (kernels::dropout_apply), stream from "<name>.resid_dropout", first
//     row ctx.first_sample.
// So masks depend on the global token position only, never on how a batch is split.
//
// Tensor parallelism (tp): heads are split over the tp ranks, H/tp each (n_head % tp == 0;
// with grouped-query attention n_kv_head % tp == 0, so each rank holds whole kv groups).
// c_attn is column-parallel with its q, k and v blocks each split (rank r holds the rows of
// heads [r H/tp, (r+1) H/tp) of each; grouped: its KVH/tp groups, one equal piece), c_proj
// is row-parallel, so one all-reduce forward (in
// c_proj) and one backward (in c_attn) per layer. d and H in the buffer sizes above are then
// this rank's d/tp and H/tp; the attention dropout draws at the logical (sequence, head) rows.
//
// Mixed precision with native 16-bit kernels (nn/autocast.hpp): what backward reads is kept in
// 16 bits, as under PyTorch's autocast, where q, k, v and the attention output are bf16
// tensors: qkv16 [cap * (H + 2 KVH) hd] (after the rotary turn) and yr16 [cap * d] (c_proj
// reads it as its GEMM operand: no rounded copy). The fp32 qkv (c_attn's output, holding the
// 16-bit values) and yr that the flash kernels read are transient (nn/buffer_pool.hpp):
// written in forward, refilled from the 16-bit copies in backward, one pair for all blocks.
//
// Buffers, all sized at construction for capacity_rows: yr [cap * d], dz [cap * d],
// dqkv [cap * (H + 2 KVH) hd], lse and delta [cap * H] (per (sequence, head, position)): O(n H),
// where the materialised softmax needed [cap * H * T] floats several times over (GPT-2 small, T
// 1024, 8 sequences: 400 MB each per layer).
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/attention/flash_attention.hpp"
#include "trellis/kernels/attention/qkv_layout.hpp"
#include "trellis/kernels/dropout.hpp"
#include "trellis/nn/decoder_spec.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/linear.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/tensor_parallel.hpp"
#include "trellis/nn/transformer_init.hpp"

#include <cstdint>
#include <string>

namespace trellis::nn {

// One attention layer's keys and values for generation, rows by position, each kv head once:
// k, v [positions, KVH hd] (this rank's kv heads; KVH hd = the c_attn k block's width).
struct KvCache {
  FloatView k, v;
  int positions = 0;
};

class CausalSelfAttention : public Layer {
 public:
  // Registers "<name>.c_attn.{weight,bias}" and "<name>.c_proj.{weight,bias}" (no biases when
  // !spec.bias). Reads spec's d_model, n_head, n_kv_head, seq_len, bias, dropout and rope.
  CausalSelfAttention(ParameterStore& store, const std::string& name, const BlockSpec& spec,
                      int capacity_rows, const TransformerInit& init = TransformerInit{},
                      TensorParallel tp = {});
  // GPT-2's attention.
  CausalSelfAttention(ParameterStore& store, const std::string& name, int d_model, int n_head,
                      int seq_len, int capacity_rows, float dropout,
                      const TransformerInit& init = TransformerInit{}, TensorParallel tp = {})
      : CausalSelfAttention(store, name, BlockSpec::gpt2(d_model, n_head, seq_len, dropout),
                            capacity_rows, init, tp) {}

  // n rows (a multiple of seq_len); ctx.first_sample is the global index of row 0 in token
  // rows (sequence index * seq_len).
  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  // Generation (inference, no dropout, no backward): x [rows, d] are consecutive tokens of one
  // sequence at positions [first_position, first_position + rows); their keys and values go
  // into the cache's rows at those positions, their queries attend to every cached position up
  // to their own (kernels/cached_attention.hpp). Writes output() rows [0, rows). A prompt runs
  // in one call (prefill), then one token per call.
  void forward_cached(ConstMatrix x, int rows, int first_position, KvCache& cache);
  KvCache make_cache(int positions) const;  // zeroed, for positions [0, positions)
  // Per row (token): the two Linears (6 * 4 d^2) plus QK^T and AV, 2 * 2 T d forward each
  // counted over the full T x T square (the usual model-FLOP count; the flash kernel skips the
  // tiles above the diagonal), x3 for fwd + bwd.
  std::int64_t flops_per_sample() const override;

  int n_head() const { return n_head_; }                                 // this rank's heads
  int n_kv_head() const { return static_cast<int>(layout_.n_kv_head); }  // this rank's
  const kernels::QkvLayout& layout() const { return layout_; }           // this rank's qkv rows
  const RotaryTables* rope() const { return rope_; }
  int seq_len() const { return seq_len_; }
  float dropout() const { return p_; }
  // The last forward's logsumexp of each softmax row: [n / T * H * T], (b * H + h) * T + t.
  kernels::ConstVector logsumexp() const;
  void for_each_part(const std::function<void(Layer&)>& f) override {
    f(c_attn_);
    f(c_proj_);
  }
  const Linear& c_attn() const { return c_attn_; }
  // c_attn's autocast copy of its input again, after the input was recomputed (selective).
  void recompute_input_copy() { c_attn_.recompute_input_copy(); }
  // Sequence parallelism: partial output sums and input gradients; the block reduce-scatters.
  void defer_tp_reductions() {
    c_attn_.defer_tp_reduction();
    c_proj_.defer_tp_reduction();
  }
  const Linear& c_proj() const { return c_proj_; }

 private:
  Linear c_attn_, c_proj_;
  int d_, n_head_;                   // this rank's width and heads (d/tp, H/tp)
  kernels::QkvLayout layout_;        // this rank's c_attn output columns
  const RotaryTables* rope_;         // not owned; nullptr: no rotary positions
  int logical_heads_, head_offset_;  // H, and the first of this rank's heads
  int head_dim_, seq_len_;
  float p_;
  std::uint64_t attn_stream_, resid_stream_;  // stream_from_name of the two dropouts
  kernels::DropoutMask attn_mask_, resid_mask_;
  bool dropout_active_ = false;
  int last_rows_ = 0;
  FloatView yr_;             // [cap * d/tp]: attention output, c_proj's input
  bool half_saved_ = false;  // native autocast: qkv16_ and yr16_ below
  Autocast autocast_;
  kernels::HalfView qkv16_;  // [cap * layout_.width()] c_attn's output, turned, 16-bit
  kernels::HalfView yr16_;   // [cap * d/tp] yr, 16-bit
  FloatView lse_, delta_;    // [cap * H/tp]: softmax logsumexp, backward's rowsum(dyr * yr)
  FloatView dz_;             // [cap * d]
  FloatView dqkv_;           // [cap * layout_.width()]

  kernels::FlashAttentionShape shape() const;
  kernels::Vector lse_rows(int n) const;          // lse_ for n token rows
  kernels::DropoutMask active_attn_mask() const;  // p = 0 when the dropout is off
};

}  // namespace trellis::nn
