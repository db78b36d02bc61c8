// A decoder block (nn/transformer.hpp: GPT-2's or Llama's) run as int8 inference: its four
// Linears (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) int8; the norms, the rotary turn of
// q and k, the attention core, SwiGLU's gate and the residual stream stay fp32.
//
// Chained (Int8Options::fuse, the default): no fp32 pass between the int8 Linears. Each
// LayerNorm writes its output quantized for the Linear after it, each residual add is in the
// epilogue of the projection before it, and the MLP's hidden layer goes through GELU and
// quantization in one pass:
//   h = x + attn.c_proj(q(attention(attn.c_attn(q(ln_1(x))))))
//   y = h + mlp.c_proj(q(gelu(mlp.c_fc(q(ln_2(h))))))    (SwiGLU: q(swiglu(...)), its gated
//                                                         [256, f] in a buffer of its own)
// in chunks of whole sequences of about 256 rows, so each step's output is still in L2 when
// the next reads it; c_fc's fp32 pre-activations go through a [256, 4d] buffer.
// Layer by layer (fuse = false): the same steps with fp32 tensors between them, each int8
// Linear quantizing its input and c_fc's GELU in its epilogue.
//
// Buffers (rows = capacity): qkv [rows * (H + 2 KVH) hd], yr [rows * d], lse [rows * H], h [rows *
// d], the four quantized inputs [rows * in] bytes; chained: hidden [256 * 4d]; layer by layer:
// hidden [rows * 4d] and a projection's output [rows * d].
#pragma once

#include "trellis/int8/layer_table.hpp"
#include "trellis/kernels/attention/flash_attention.hpp"
#include "trellis/kernels/int8.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/transformer.hpp"

#include <memory>

namespace trellis::int8 {

class Int8TransformerBlock : public nn::Layer {
 public:
  // Takes the block's four Linears from `layers`. `block` (its LayerNorms) and `store` must
  // outlive this block.
  Int8TransformerBlock(nn::Block& block, const nn::ParameterStore& store, Int8LayerTable& layers,
                       const Int8Options& options);

  // n rows, whole sequences; inference (ctx.training false).
  void forward(ConstMatrix input, int n, const nn::StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  bool chained() const { return chained_; }

 private:
  // One int8 Linear: its kernel and its quantized input [cap * in].
  struct Projection {
    std::unique_ptr<kernels::Int8Linear> kernel;
    kernels::ByteView input;
  };
  Projection projection(const nn::Linear& linear, Int8LayerTable& layers,
                        kernels::Activation activation, const Int8Options& options) const;

  void forward_chained(ConstMatrix x, int n);
  void forward_layer_by_layer(ConstMatrix x, int n, const nn::StepContext& ctx);
  // rows of ln(x) quantized into `to`'s input.
  void layernorm_into(const nn::LayerNorm& ln, ConstMatrix x, int rows, const Projection& to);
  // attention on qkv_ rows [0, rows) into yr_, from c_attn_'s filled input.
  ConstMatrix attend(int rows);
  // c_fc's pre-activations z [>= rows, hidden] through GELU or SwiGLU, quantized into out.
  void quantize_hidden(ConstMatrix z, int rows, kernels::ByteVector out);

  nn::Block& block_;
  const nn::ParameterStore& store_;
  bool chained_;
  int d_;
  kernels::FlashAttentionShape shape_;
  Projection c_attn_, attn_proj_, c_fc_, mlp_proj_;
  FloatView qkv_, yr_, lse_, h_;
  FloatView hidden_;    // chained: [256 * 4d]; layer by layer: [cap * 4d]
  FloatView proj_out_;  // layer by layer: [cap * d]
  FloatView gated_;     // SwiGLU: silu(gate) * up, [256 or cap * f]
};

}  // namespace trellis::int8
