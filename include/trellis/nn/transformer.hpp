// The transformer block of GPT-2 (pre-LayerNorm, residual connections), nanoGPT's Block and MLP.
//
// Rows are tokens, n rows = whole sequences of seq_len tokens; all buffers are sized at
// construction for capacity_rows. Gradient rule as for every layer: parameter grads +=,
// input grad =.
//
// FeedForward (nanoGPT's MLP, or Llama's SwiGLU MLP: BlockSpec::mlp), d -> f -> d, f = d_ff
// (4d by default):
//   x [n, d]
//   c_fc   "<name>.c_fc.weight" [f, d], ".bias" [f]       u = x W_fc^T + b       [n, f]
//   g = gelu(u)   EXACT erf GELU (PyTorch nn.GELU() default, kernels::gelu), c_fc's fused
//                 epilogue (Linear::fuse_activation). GPT-2 itself used
//                 the tanh approximation; the two differ by < 1e-3 and the erf form is what the
//                 existing kernel and the PyTorch reference compute.
//   c_proj "<name>.c_proj.weight" [d, f], ".bias" [d]     z = g W_proj^T + b     [n, d]
// SwiGLU instead: c_fc "<name>.c_fc.weight" [2f, d] = [gate_proj; up_proj] (one GEMM), then
//   g = silu(gate) * up  [n, f] (kernels/swiglu.hpp; its own buffer), c_proj as above.
// Without biases (spec.bias false) neither Linear has one.
//   y = dropout(z): counter-based mask, stream "<name>.dropout" mixed with ctx.step, first
//       row ctx.first_sample (a token row index)
// backward: dz = dropout(dy); c_proj, c_fc (+ gelu) backward; dx = c_fc's input grad.
// Buffers: input_grad() IS c_fc's input gradient and, with dropout 0, output() IS c_proj's
// output (Layer::share_*_of), so no per-call copies. With native 16-bit autocast the GELU MLP
// keeps u and g in 16 bits (SwiGLU: gate, up and g) and c_proj reads g as it is (LinearBuffers,
// nn/linear.hpp), as PyTorch's autocast does: half the bytes of the block's largest
// activations, and no rounded copy of g.
//
// Block (norms: LayerNorm or RMSNorm, BlockSpec::norm, eps norm_eps):
//   x [n, d]
//   h = x + attn(ln_1(x))          ln_1 "<name>.ln_1", attn "<name>.attn" (CausalSelfAttention)
//   y = h + mlp(ln_2(h))           ln_2 "<name>.ln_2", mlp "<name>.mlp" (FeedForward)
// backward: dh = dy + ln_2^T(mlp^T(dy)),  dx = dh + ln_1^T(attn^T(dh))
//
// Tensor parallelism (tp): FeedForward's c_fc is column-parallel and c_proj row-parallel (the
// GELU works on this rank's f/tp columns; SwiGLU's c_fc splits its gate and up blocks each, so
// a rank's gate and up columns pair up); attention splits its heads (attention.hpp). The
// LayerNorms, residual adds and dropouts on [n, d] are replicated on every tp rank.
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/dropout.hpp"
#include "trellis/nn/attention.hpp"
#include "trellis/nn/decoder_spec.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/layernorm.hpp"
#include "trellis/nn/linear.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/transformer_init.hpp"

#include <cstdint>
#include <string>

namespace trellis::nn {

class FeedForward : public Layer {
 public:
  // Registers "<name>.c_fc.{weight,bias}" and "<name>.c_proj.{weight,bias}"; c_fc weight
  // ~ N(0, init.std^2), c_proj weight ~ N(0, init.proj_std^2), biases 0. Reads spec's
  // d_model, d_ff, mlp, bias and dropout.
  FeedForward(ParameterStore& store, const std::string& name, const BlockSpec& spec,
              int capacity_rows, const TransformerInit& init = TransformerInit{},
              TensorParallel tp = {});
  // GPT-2's MLP.
  FeedForward(ParameterStore& store, const std::string& name, int d_model, int capacity_rows,
              float dropout, const TransformerInit& init = TransformerInit{},
              TensorParallel tp = {})
      : FeedForward(store, name, BlockSpec::gpt2(d_model, 1, 1, dropout), capacity_rows, init, tp) {
  }

  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  std::int64_t flops_per_sample() const override;  // the 2 Linears' 6 * in * out per row
  void for_each_part(const std::function<void(Layer&)>& f) override {
    f(c_fc_);
    f(c_proj_);
  }

  float dropout() const { return p_; }
  MlpKind kind() const { return kind_; }
  // c_fc's autocast copy of its input again, after the input was recomputed (selective).
  void recompute_input_copy() { c_fc_.recompute_input_copy(); }
  // Sequence parallelism: partial output sums and input gradients; the block reduce-scatters.
  void defer_tp_reductions() {
    c_fc_.defer_tp_reduction();
    c_proj_.defer_tp_reduction();
  }

  const Linear& c_fc() const { return c_fc_; }
  const Linear& c_proj() const { return c_proj_; }

 private:
  MlpKind kind_;
  Linear c_fc_;  // gelu: with the GELU as its epilogue (Linear::fuse_activation)
  Linear c_proj_;
  FloatView swiglu_;            // [cap * f/tp] silu(gate) * up, c_proj's input (swiglu only)
  kernels::HalfView swiglu16_;  // the same in 16 bits, where c_fc's output is 16-bit
  FloatView dgate_up_;          // [cap * 2f/tp] (swiglu only)
  float p_;
  std::uint64_t stream_;  // stream_from_name("<name>.dropout")
  kernels::DropoutMask mask_;
  bool dropout_active_ = false;
  FloatView dz_;  // [cap * d]
  bool recompute_cheap_;

  // c_proj's input (GELU's or SwiGLU's output) again from what c_fc kept.
  void recompute_cheap(int n);
  void swiglu_forward(int n);                     // swiglu_ or swiglu16_ from c_fc's output
  kernels::GemmOperand swiglu_half(int n) const;  // [n, f/tp] swiglu16_
};

class Block : public Layer {
 public:
  Block(ParameterStore& store, const std::string& name, const BlockSpec& spec, int capacity_rows,
        const TransformerInit& init = TransformerInit{}, TensorParallel tp = {});
  // GPT-2's block.
  Block(ParameterStore& store, const std::string& name, int d_model, int n_head, int seq_len,
        int capacity_rows, float dropout, const TransformerInit& init = TransformerInit{},
        TensorParallel tp = {})
      : Block(store, name, BlockSpec::gpt2(d_model, n_head, seq_len, dropout), capacity_rows, init,
              tp) {}

  // ctx.first_sample counts token rows (see CausalSelfAttention). With sequence parallelism
  // (tp.sequence, tensor_parallel.hpp) input, output and their gradients are this tp rank's
  // n = rows / tp rows of the residual stream, its capacity() capacity_rows / tp; the attention
  // and the MLP see all rows, and ctx.first_sample is still the first of all of them.
  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  // Generation: forward with the attention's key/value cache (CausalSelfAttention::
  // forward_cached), rows consecutive tokens at positions [first_position, ...).
  void forward_cached(ConstMatrix x, int rows, int first_position, KvCache& cache);
  std::int64_t flops_per_sample() const override;  // attn + mlp
  void for_each_part(const std::function<void(Layer&)>& f) override {
    f(ln_1_);
    f(attn_);
    f(ln_2_);
    f(mlp_);
  }

  const LayerNorm& ln_1() const { return ln_1_; }
  const CausalSelfAttention& attn() const { return attn_; }
  CausalSelfAttention& attn() { return attn_; }
  const LayerNorm& ln_2() const { return ln_2_; }
  const FeedForward& mlp() const { return mlp_; }

  // The LayerNorms, run on their own by int8 inference (int8/transformer_block.hpp).
  LayerNorm& ln_1() { return ln_1_; }
  LayerNorm& ln_2() { return ln_2_; }

 private:
  LayerNorm ln_1_;
  CausalSelfAttention attn_;
  LayerNorm ln_2_;
  FeedForward mlp_;
  FloatView h_;           // [cap * d]: x + attn(ln_1(x))
  FloatView dh_;          // [cap * d]
  bool recompute_cheap_;  // BlockSpec::recompute_cheap

  // Sequence parallelism (transformer_sequence.cpp); cap = this rank's capacity, tp * cap all.
  void forward_sequence(ConstMatrix x, int n, const StepContext& ctx);
  void backward_sequence(ConstMatrix dy, int n);
  // The n local rows of `rows` from every tp rank, into `all` [tp * n, d].
  Matrix gather_rows(ConstMatrix rows, int n, const FloatView& all) const;
  // This rank's n rows of the sum over tp of the partial sums `partial` [tp * n, d].
  void scatter_rows(ConstMatrix partial, int n, Matrix out) const;
  static int sequence_rows(const std::string& name, int capacity_rows, const TensorParallel& tp);
  void init_sequence(const std::string& name, int d_model, std::size_t capacity_rows);
  // norm.backward(dx, n) with its parameter gradients (from this rank's rows) summed over tp.
  void norm_backward(LayerNorm& norm, ConstMatrix dx, int n);
  TensorParallel tp_;
  ParameterStore* store_;
  bool sequence_ = false;  // tp_.sequence with tp > 1
  FloatView gathered_;     // [tp * cap * d] scratch: a norm's output, all rows
  FloatView dgathered_;    // [tp * cap * d] scratch: an output gradient, all rows
  FloatView dnorm_;        // [cap * d] scratch: a norm's output gradient, this rank's rows
  FloatView norm_grads_;   // [2 * d] the norm's gradients before this call, while tp sums
};

}  // namespace trellis::nn
