// Linear: y = x W^T + b, PyTorch's nn.Linear convention (bias optional: nn.Linear(bias=False)).
//
//   x  [n, in]     W "<name>.weight" [out, in] (weight decay)     b "<name>.bias" [out] (no decay)
//   y  [n, out]
// forward:   y = x W^T + b                      one GEMM (A, B^T) + bias kernel
// backward:  dW += dy^T x    db += colsum(dy)   parameter grads accumulate (+=)
//            dx  = dy W                          input grad written (=)
// All three GEMMs use the row-major buffers as they are: no transposed copies.
//
// Activation epilogue (fuse_activation): y = f(x W^T + b) with f = relu | gelu, the layer
// standing for Linear + activation layer, with the same parameters (names, shapes) and the same
// gradients. The bias add and f run in one pass over the GEMM output; backward computes
// dz = dy * f'(z) and the bias gradient colsum(dz) in one pass over dy, then the two GEMMs
// take dz. Buffers: gelu keeps z [cap, out] for backward (relu needs only y: [z > 0] == [y > 0]);
// dz [cap, out]. The same memory as the separate activation layer's output / input gradient.
//
// Mixed precision (autocast.hpp, from the store): x and dz are rounded into the layer's own
// operand buffers x16 [cap, in] and dz16 [cap, out] (kept between forward and backward), the
// GEMMs read W's rounded compute copy, and y and dx are rounded in place; db and dW stay fp32.
// With native 16-bit kernels a Linear can also keep its output in 16 bits and take a 16-bit
// input (LinearBuffers::half_output / half_input), as two Linears in a row do under PyTorch's
// autocast (nn/transformer.hpp's MLP): then
//   forward   z = x W^T into an fp32 gemm_out [cap, out] (transient: shared by all blocks), the
//             16-bit epilogue (kernels/bias_activation_half.hpp) writes y16 [cap, out] and,
//             for GELU, z16 [cap, out]: half the bytes of y and z, and no fp32 dz buffer
//   backward  dz16 straight from the epilogue's backward; db from the fp32 dz
//   input     the 16-bit x [n, in] is the GEMMs' operand as it is: no x16 copy.
//
// set_input_grad_needed(false) (Layer): for the first layer of a model, whose input is data:
// backward leaves dx (one of its three GEMMs) out, and input_grad() must not be read.
//
// Tensor parallelism (nn/tensor_parallel.hpp), in and out are the LOGICAL sizes:
//   Split::column  W [out/tp, in], b [out/tp] (pieces of dim 0; with sections = 3 a fused
//                  q|k|v weight gives each rank its piece of each of the 3 blocks)
//                  x [n, in] -> y [n, out/tp];  backward: dx all-reduced over tp
//   Split::row     W [out, in/tp], b [out] replicated
//                  x [n, in/tp] -> y [n, out] = all-reduce(x W^T) + b;  backward: local
// in_features()/out_features() are this rank's (local) sizes.
#pragma once

#include "trellis/kernels/bias.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/tensor_parallel.hpp"

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace trellis::nn {

enum class LinearInit {
  kaiming,  // PyTorch nn.Linear default: W, b ~ U(-1/sqrt(in), 1/sqrt(in))
            // (kaiming_uniform with a = sqrt(5), i.e. gain 1/sqrt(3))
  xavier,   // W ~ xavier_uniform(in, out, gain 1), b = 0
};

// "kaiming" | "xavier"; anything else throws ConfigError.
LinearInit parse_linear_init(const std::string& name);

// How a Linear keeps its buffers (roles: nn/buffer_pool.hpp).
struct LinearBuffers {
  // cheap: the output of a fused GELU, recomputable from the kept pre-activation
  // (Linear::recompute_activation).
  BufferRole output = BufferRole::saved;
  // cheap: the input's autocast copy, when the input itself is recomputed
  // (Linear::recompute_input_copy).
  BufferRole input_copy = BufferRole::saved;
  // With native 16-bit autocast only (ignored otherwise: fp32 buffers as always). half_output:
  // output() is empty and output_half() holds y; not for a row-parallel Linear. half_input:
  // forward_half() takes the input, forward() refuses.
  bool half_output = false;
  bool half_input = false;
};

class Linear : public Layer {
 public:
  // Registers "<name>.weight" and "<name>.bias" in `store` (before store.finalize()); the store
  // must outlive the layer and be finalized before the first forward.
  Linear(ParameterStore& store, const std::string& name, int in_features, int out_features,
         int capacity, LinearInit init = LinearInit::kaiming, Split split = Split::none,
         TensorParallel tp = {});
  // The same with explicit initialisations (e.g. GPT-2's normal(0.02) weights, zero bias);
  // bias_init std::nullopt: no bias (Llama's projections), y = x W^T.
  Linear(ParameterStore& store, const std::string& name, int in_features, int out_features,
         int capacity, const InitSpec& weight_init, const std::optional<InitSpec>& bias_init,
         Split split = Split::none, TensorParallel tp = {}, int sections = 1,
         const LinearBuffers& buffers = {});

  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  // input: [>= n, in] 16-bit words of the autocast's format (another Linear's output_half()),
  // left unchanged until backward. For a Linear built with half_input (reads_half_input()).
  void forward_half(const kernels::GemmOperand& input, int n, const StepContext& ctx);
  void backward(ConstMatrix output_grad, int n) override;
  // 2*in*out forward, 4*in*out backward (dW and dx GEMMs) on this rank's sizes; bias ignored.
  std::int64_t flops_per_sample() const override;

  // Makes this layer y = f(x W^T + b); allocates the epilogue's buffers. Call at model build
  // time, before the first forward.
  void fuse_activation(kernels::Activation f);
  kernels::Activation activation() const { return activation_; }
  // Rewrites output() rows [0, n) of the last forward(n) from the kept pre-activation, bit for
  // bit as forward wrote them (selective recomputation). Needs a fused GELU and
  // allow_recompute_activation() at build time.
  void allow_recompute_activation();
  void recompute_activation(int n);
  // The autocast copy of the last forward's input again, after that input was recomputed in
  // place (selective recomputation); nothing without autocast.
  void recompute_input_copy();

  // Whether the 16-bit buffers of LinearBuffers are in use (native autocast).
  bool stores_half_output() const { return half_output_; }
  bool reads_half_input() const { return half_input_; }
  // [capacity, out] 16-bit words of y, stores_half_output() only.
  kernels::GemmOperand output_half() const;

  std::size_t weight_index() const { return weight_; }
  std::optional<std::size_t> bias_index() const { return bias_; }  // none: no bias
  // The bias [out], or zeros for a layer without one (int8 inference reads it either way).
  kernels::ConstVector bias_vector() const;
  Split split() const { return split_; }
  // Sequence parallelism: leave the tp reduction to the caller, who reduce-scatters over rows
  // instead. Row-parallel: forward writes this rank's partial sum, the bias added by tp rank 0
  // only; column-parallel: backward writes this rank's partial input gradient.
  void defer_tp_reduction() { defer_tp_ = true; }

 private:
  ParameterStore* store_;
  Split split_;
  bool defer_tp_ = false;
  TensorParallel tp_;
  std::size_t weight_;  // index in store_
  std::optional<std::size_t> bias_;
  FloatView zero_bias_;   // [out] zeros, without a bias only
  FloatView minus_zero_;  // [out] -0.0: x + (-0.0) == x exactly (recompute_activation)
  FloatView db_discard_;  // [out] the fused epilogue's bias gradient, without a bias only
  kernels::Activation activation_ = kernels::Activation::none;
  FloatView pre_activation_;  // [cap * out] z = x W^T + b, gelu only
  FloatView dz_;              // [cap * out] dy * f'(z), with an activation only
  AutocastOperand x16_;       // [cap * in] x rounded, autocast with an fp32 input only
  AutocastOperand dz16_;      // [cap * out] dz rounded, autocast only
  bool half_output_ = false, half_input_ = false;  // LinearBuffers, where native
  kernels::HalfView y16_;                          // [cap * out] y, half_output
  kernels::HalfView z16_;                          // [cap * out] z, half_output with GELU
  FloatView gemm_out_;                             // [cap * out] scratch, half_output
  kernels::GemmOperand half_x_;                    // [n, in] the last forward_half's input

  void forward_from(const kernels::GemmOperand& x, int n);  // the GEMM and the epilogue
  // dW += dz^T x, and dx = dz W where wanted (tp-reduced, rounded).
  void backward_gemms(const kernels::GemmOperand& dz, const kernels::GemmOperand& x, int n);
};

}  // namespace trellis::nn
