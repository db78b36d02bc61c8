// Gpt: a GPT-2-style decoder-only language model (nanoGPT's GPT), an nn::Model.
//
//   tokens [n * T] int32 in [0, vocab)                      n sequences of T = seq_len tokens
//   x0 = wte[tokens] + wpe[position]        [n*T, d]   wte "wte.weight" [vocab, d],
//                                                      wpe "wpe.weight" [T, d]
//   x  = drop(x0)                                      Dropout "drop"
//   x  = h.i(x) for i in [0, n_layer)                  Block "h.<i>" (nn/transformer.hpp)
//   hf = ln_f(x)                                       LayerNorm "ln_f"
//   logits = hf wte^T                       [n*T, vocab]  output head TIED to wte (no bias)
// backward:
//   dwte += dlogits^T hf  (the head's share)   dhf = dlogits wte
//   ... ln_f, blocks in reverse, drop, wpe ...  dwte += scatter of dx0 by token (embedding's
//   share, deterministic); parameter gradients accumulate (+=) as for every layer.
//
// Parameters (registration order as nanoGPT's named_parameters, optional name prefix):
//   wte.weight [V, d], wpe.weight [T, d], then per block i: h.i.ln_1.{weight,bias} [d],
//   h.i.attn.c_attn.{weight [3d, d], bias [3d]}, h.i.attn.c_proj.{weight [d, d], bias [d]},
//   h.i.ln_2.{weight,bias}, h.i.mlp.c_fc.{weight [4d, d], bias [4d]},
//   h.i.mlp.c_proj.{weight [d, 4d], bias [d]}; ln_f.{weight,bias} [d].
// Init as GPT-2/nanoGPT: weights N(0, 0.02^2), the residual projections (attn.c_proj,
// mlp.c_proj) N(0, (0.02 / sqrt(2 n_layer))^2), biases 0, LayerNorm weight 1 / bias 0.
// Weight decay: Linear weights only (not embeddings, LayerNorms, biases).
//
// Dropout (spec.dropout, all as GPT-2: embeddings, attention probabilities, both residual
// branches): counter-based masks indexed by the global token row, i.e. every layer sees
// StepContext{seed, step, first_sample * T, training} where first_sample is the caller's
// global SEQUENCE index of sequence 0. So a batch's masks do not depend on how it is split
// over ranks or micro-batches. training == false (or dropout 0) is deterministic.
//
// Tensor parallelism (spec.tp): blocks split heads and MLP columns (transformer.hpp); wte is
// vocabulary-parallel (embedding.hpp), so the tied head yields this rank's logit columns
// [r V/tp, (r+1) V/tp) — forward returns [n*T, V/tp] and the loss must be vocabulary-parallel
// (SoftmaxCrossEntropy with the tp group); backward all-reduces dhf over tp.
//
// Generation: forward(n = 1, training = false) on a full window of T tokens and read the
// logits row of the last position (causal: row t never depends on tokens after t).
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/dropout.hpp"
#include "trellis/nn/embedding.hpp"
#include "trellis/nn/layernorm.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/transformer.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trellis::nn {

struct GptSpec {
  int n_layer = 0;
  int n_head = 0;
  int d_model = 0;
  int seq_len = 0;  // T: tokens per sequence (context window)
  int vocab = 0;
  float dropout = 0.0f;
  int capacity = 0;   // most sequences per forward/backward call
  TensorParallel tp;  // none by default
};

// Throws ConfigError naming the first bad field (model.n_layer, model.n_head, model.d_model,
// model.seq_len, model.vocab, model.dropout, capacity).
void validate(const GptSpec& spec);

class Gpt : public Model {
 public:
  // Validates the spec (nothing is registered when it is bad) and registers every parameter
  // in `store`, which must be finalized before the first forward and outlive the model.
  Gpt(const GptSpec& spec, ParameterStore& store, const std::string& prefix = "");

  // tokens: [>= n * T], unchanged until backward. Returns logits [n * T, vocab], a window onto
  // the model's buffer valid until the next forward. A token id outside [0, vocab) throws
  // trellis::InputError naming the id and its position (token row of this call).
  ConstMatrix forward(kernels::ConstLabels tokens, int n, const StepContext& ctx);
  ConstMatrix forward(const ModelInput& input, int n, const StepContext& ctx) override {
    return forward(input.tokens, n, ctx);
  }
  // dlogits: [>= n * T, vocab].
  void backward(ConstMatrix dlogits, int n) override;

  int classes() const override { return spec_.vocab; }
  int local_classes() const override { return wte_.local_vocab(); }
  int class_offset() const override { return wte_.vocab_offset(); }
  int rows_per_sample() const override { return spec_.seq_len; }
  int capacity() const override { return spec_.capacity; }
  bool takes_tokens() const override { return true; }
  // Per sequence, forward + backward: 6 * N * T + 12 * n_layer * d * T^2 (the PaLM / nanoGPT
  // estimate: 6 FLOPs per parameter per token for the matmuls, plus the attention products
  // QK^T and AV counted over the full T x T square). N = num_matmul_params(): every parameter
  // except the position table wpe (a lookup, no matmul), as nanoGPT's estimate_mfu; wte counts
  // once, for the tied head's matmul.
  std::int64_t flops_per_sample() const override;
  std::int64_t num_matmul_params() const;
  std::string describe() const override;  // "gpt L4 H4 D128 T128 V256"

  const GptSpec& spec() const { return spec_; }
  const Embedding& wte() const { return wte_; }
  const Block& block(int i) const { return *blocks_.at(static_cast<std::size_t>(i)); }

 private:
  GptSpec spec_;
  ParameterStore* store_;
  Embedding wte_;
  PositionalEmbedding wpe_;
  Dropout drop_;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::unique_ptr<LayerNorm> ln_f_;  // built after the blocks: registration in forward order
  FloatView logits_;                 // [capacity * T * vocab]
  FloatView dhf_;                    // [capacity * T * d]
  int last_n_ = -1;
  std::size_t wpe_offset_ = 0, ln_f_offset_ = 0;  // flat offsets, for grads_final_from
  std::vector<std::size_t> block_offsets_;
};

}  // namespace trellis::nn
