// The transformer block of GPT-2 (pre-LayerNorm, residual connections), nanoGPT's Block and MLP.
//
// Rows are tokens, n rows = whole sequences of seq_len tokens; all buffers are sized at
// construction for capacity_rows. Gradient rule as for every layer: parameter grads +=,
// input grad =.
//
// FeedForward (nanoGPT's MLP), d -> 4d -> d:
//   x [n, d]
//   c_fc   "<name>.c_fc.weight" [4d, d], ".bias" [4d]     u = x W_fc^T + b       [n, 4d]
//   g = gelu(u)   EXACT erf GELU (PyTorch nn.GELU() default, kernels::gelu), c_fc's fused
//                 epilogue (Linear::fuse_activation). GPT-2 itself used
//                 the tanh approximation; the two differ by < 1e-3 and the erf form is what the
//                 existing kernel and the PyTorch reference compute.
//   c_proj "<name>.c_proj.weight" [d, 4d], ".bias" [d]    z = g W_proj^T + b     [n, d]
//   y = dropout(z): counter-based mask, stream "<name>.dropout" mixed with ctx.step, first
//       row ctx.first_sample (a token row index)
// backward: dz = dropout(dy); c_proj, c_fc (+ gelu) backward; dx = c_fc's input grad.
// Buffers: input_grad() IS c_fc's input gradient and, with dropout 0, output() IS c_proj's
// output (Layer::share_*_of), so no per-call copies.
//
// Block:
//   x [n, d]
//   h = x + attn(ln_1(x))          ln_1 "<name>.ln_1", attn "<name>.attn" (CausalSelfAttention)
//   y = h + mlp(ln_2(h))           ln_2 "<name>.ln_2", mlp "<name>.mlp" (FeedForward)
// backward: dh = dy + ln_2^T(mlp^T(dy)),  dx = dh + ln_1^T(attn^T(dh))
//
// Tensor parallelism (tp): FeedForward's c_fc is column-parallel and c_proj row-parallel (the
// GELU works on this rank's 4d/tp columns); attention splits its heads (attention.hpp). The
// LayerNorms, residual adds and dropouts on [n, d] are replicated on every tp rank.
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/dropout.hpp"
#include "trellis/nn/attention.hpp"
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
  // ~ N(0, init.std^2), c_proj weight ~ N(0, init.proj_std^2), biases 0.
  FeedForward(ParameterStore& store, const std::string& name, int d_model, int capacity_rows,
              float dropout, const TransformerInit& init = TransformerInit{},
              TensorParallel tp = {});

  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  std::int64_t flops_per_sample() const override;  // 2 Linears: 6 * (d * 4d) * 2 per row
  void for_each_part(const std::function<void(Layer&)>& f) override {
    f(c_fc_);
    f(c_proj_);
  }

  float dropout() const { return p_; }

  const Linear& c_fc() const { return c_fc_; }
  const Linear& c_proj() const { return c_proj_; }

 private:
  Linear c_fc_;  // with the GELU as its epilogue (Linear::fuse_activation)
  Linear c_proj_;
  float p_;
  std::uint64_t stream_;  // stream_from_name("<name>.dropout")
  kernels::DropoutMask mask_;
  bool dropout_active_ = false;
  FloatView dz_;  // [cap * d]
};

class Block : public Layer {
 public:
  Block(ParameterStore& store, const std::string& name, int d_model, int n_head, int seq_len,
        int capacity_rows, float dropout, const TransformerInit& init = TransformerInit{},
        TensorParallel tp = {});

  // ctx.first_sample counts token rows (see CausalSelfAttention).
  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  std::int64_t flops_per_sample() const override;  // attn + mlp
  void for_each_part(const std::function<void(Layer&)>& f) override {
    f(ln_1_);
    f(attn_);
    f(ln_2_);
    f(mlp_);
  }

  const LayerNorm& ln_1() const { return ln_1_; }
  const CausalSelfAttention& attn() const { return attn_; }
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
  FloatView h_;   // [cap * d]: x + attn(ln_1(x))
  FloatView dh_;  // [cap * d]
};

}  // namespace trellis::nn
