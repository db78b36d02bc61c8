// Gpt: the decoder-only language model family, an nn::Model: GPT-2 (nanoGPT's GPT, below) and,
// through GptSpec's options, Llama 2/3 (rotary positions instead of wpe, RMSNorm, SwiGLU,
// grouped-query attention, no biases, an untied lm_head "lm_head.weight" [V, d] initialised
// N(0, 0.02^2), residual projections not scaled down: Hugging Face's LlamaForCausalLM).
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
#include "trellis/nn/block_stack.hpp"
#include "trellis/nn/decoder_spec.hpp"
#include "trellis/nn/dropout.hpp"
#include "trellis/nn/embedding.hpp"
#include "trellis/nn/layernorm.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/tied_head.hpp"
#include "trellis/nn/transformer.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trellis::nn {

enum class Positions { learned, rope };

struct GptSpec {
  int n_layer = 0;
  int n_head = 0;
  int d_model = 0;
  int seq_len = 0;  // T: tokens per sequence (context window)
  int vocab = 0;
  float dropout = 0.0f;
  // The Llama-family options (GPT-2's by default); see nn/decoder_spec.hpp.
  int n_kv_head = 0;  // 0: n_head
  int d_ff = 0;       // 0: 4 d_model
  Positions positions = Positions::learned;
  kernels::RopeSpec rope;  // positions rope
  NormKind norm = NormKind::layernorm;
  float norm_eps = 1e-5f;
  MlpKind mlp = MlpKind::gelu;
  bool bias = true;
  bool tied_head = true;
  bool scaled_residual_init = true;  // GPT-2: c_proj weights N(0, (0.02 / sqrt(2 n_layer))^2)
  int capacity = 0;                  // most sequences per forward/backward call
  RecomputeSpec recompute;           // activation recomputation of the blocks (block_stack.hpp)
  TensorParallel tp;                 // none by default
  StageRange stage;  // units: 0 embeddings, 1 + i block h.i, n_layer + 1 ln_f and head
};

// Throws ConfigError naming the first bad field (model.n_layer, model.n_head, model.d_model,
// model.seq_len, model.vocab, model.dropout, capacity, stage).
void validate(const GptSpec& spec);

// Relative cost of each unit (per token), for balancing pipeline stages.
std::vector<double> gpt_unit_costs(const GptSpec& spec);

// The block every layer of the model is built from (rope: the tables it reads, or nullptr).
BlockSpec gpt_block_spec(const GptSpec& spec, const RotaryTables* rope);
// Parameters of one block, and of the whole logical model (wpe and lm_head included); long
// double, as the memory estimate sizes absurd configurations with them before refusing them.
long double gpt_block_params(const GptSpec& spec);
long double gpt_num_params(const GptSpec& spec);
// Training FLOPs of one sequence, Gpt::flops_per_sample() without building the model.
long double gpt_flops_per_sequence(const GptSpec& spec);

class Gpt : public Model {
 public:
  // Validates the spec (nothing is registered when it is bad) and registers every parameter
  // in `store`, which must be finalized before the first forward and outlive the model.
  Gpt(const GptSpec& spec, ParameterStore& store, const std::string& prefix = "");

  // input.tokens: [>= n * T] (first stage), unchanged until backward; later stages read
  // input.activations [>= n * T, d]. Returns logits [n * T, vocab/tp] (last stage) or the
  // activations [n * T, d] for the next stage, a window onto the model's buffers valid until
  // the next forward. A token id outside [0, vocab) throws trellis::InputError naming the id
  // and its position (token row of this call).
  ConstMatrix forward(const ModelInput& input, int n, const StepContext& ctx) override;
  ConstMatrix forward(kernels::ConstLabels tokens, int n, const StepContext& ctx) {
    ModelInput input;
    input.tokens = tokens;
    return forward(input, n, ctx);
  }
  // dout: [>= n * T, stage_output_width()] (dlogits on the last stage).
  void backward(ConstMatrix dout, int n) override;

  // Generation with key/value caches, on a whole model (one stage): caches for positions
  // [0, seq_len) of one sequence, then forward_cached on the prompt (prefill, first_position
  // 0) and on one token at a time after it: tokens [rows] at positions [first_position,
  // first_position + rows), first_position + rows <= seq_len. Returns their logits
  // [rows, vocab/tp], a window valid until the next forward. Each call computes only its own
  // rows: a decoded token costs one row's Linears plus attention over the cached positions,
  // where forward() recomputes the whole window.
  std::vector<KvCache> make_caches() const;
  ConstMatrix forward_cached(kernels::ConstLabels tokens, int rows, int first_position,
                             std::vector<KvCache>& caches);

  int classes() const override { return spec_.vocab; }
  int local_classes() const override;
  int class_offset() const override;
  static int num_units(const GptSpec& spec) { return spec.n_layer + 2; }
  bool first_stage() const override { return first_unit_ == 0; }
  bool last_stage() const override { return end_unit_ == num_units(spec_); }
  int stage_input_width() const override { return first_stage() ? 0 : spec_.d_model; }
  int stage_output_width() const override;
  ConstMatrix stage_input_grad() const override { return input_grad_; }
  std::vector<std::string> tied_parameters() const override;
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
  std::string describe() const override;  // "gpt L4 H4 D128 T128 V256" (+ Llama options)
  // The position table, the blocks (with their LayerNorms, attention and MLP Linears) and
  // ln_f and the tied head (lm_head); the token table is not a Layer.
  void for_each_layer(const std::function<void(Layer&)>& f) override {
    if (wpe_) visit_layers(*wpe_, f);  // learned positions only
    if (drop_) visit_layers(*drop_, f);
    for (auto& block : blocks_) visit_layers(*block, f);
    if (ln_f_) visit_layers(*ln_f_, f);
    if (head_) visit_layers(*head_, f);
  }
  const GptSpec& spec() const { return spec_; }
  const Embedding& wte() const { return *wte_; }  // first stage only
  const Block& block(int i) const { return *blocks_.at(static_cast<std::size_t>(i)); }

  // The parts, for int8 inference (int8/gpt.hpp) to run around its own blocks and head:
  // the embeddings on the first stage, ln_f and the head on the last.
  Embedding& wte() { return *wte_; }
  PositionalEmbedding* wpe() { return wpe_.get(); }  // nullptr with rotary positions
  const RotaryTables* rope() const { return rope_.get(); }
  Dropout& drop() { return *drop_; }
  Block& block(int i) { return *blocks_.at(static_cast<std::size_t>(i)); }
  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  LayerNorm& ln_f() { return *ln_f_; }
  const TiedHead& head() const { return *head_; }

 private:
  GptSpec spec_;
  ParameterStore* store_;
  int first_unit_ = 0, end_unit_ = 0;         // the units this model (stage) holds
  std::unique_ptr<Embedding> wte_;            // first stage
  std::unique_ptr<PositionalEmbedding> wpe_;  // learned positions
  std::unique_ptr<RotaryTables> rope_;        // rotary positions, on stages with blocks
  std::unique_ptr<Dropout> drop_;
  std::size_t wte_index_ = 0;          // the token table: the embedding's, or the last stage's copy
  std::unique_ptr<BlockStack> stack_;  // runs blocks_; owns their shared buffers (outlives them)
  std::vector<std::unique_ptr<Block>> blocks_;
  std::unique_ptr<LayerNorm> ln_f_;  // last stage, built after the blocks (forward order)
  std::unique_ptr<TiedHead> head_;   // last stage: logits [capacity * T, vocab/tp]
  ConstMatrix input_grad_;           // non-first stages: [capacity * T, d] of the last backward
  int last_n_ = -1;
  std::size_t wpe_offset_ = 0, ln_f_offset_ = 0;  // flat offsets, for grads_final_from
  std::size_t head_offset_ = 0;                   // an untied head's weight
  std::vector<std::size_t> block_offsets_;
  // Sequence parallelism (tensor_parallel.hpp): the blocks run on this tp rank's rows
  // [rank * rows / tp, ...) of the stage's input; their output and input gradient are
  // all-gathered back into all rows for what follows (ln_f and the head, the next stage, the
  // embeddings).
  bool sequence_ = false;
  FloatView stack_output_;      // [capacity * T, d]: the blocks' output, all rows
  FloatView stack_input_grad_;  // [capacity * T, d]: the blocks' input gradient, all rows
  ConstMatrix own_rows(ConstMatrix all, int rows) const;
  ConstMatrix all_rows(ConstMatrix own, int rows, const FloatView& into) const;
};

}  // namespace trellis::nn
