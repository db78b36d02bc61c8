// A Linear or a convolution of a trained model, run as int8 inference (a layer of an int8
// model, int8_model.hpp). Inference only: no input gradient, backward throws.
//
// Int8LinearLayer:  x [n, in] fp32 -> xq [cap * in] (x quantized with the layer's input
//                   quantization) -> kernels::Int8Linear -> y [n, out] = f(x W^T + b) fp32
//   The bias is the fp32 Linear's (copied from the store into the kernel), f its fused
//   activation; the GPT's tied head has neither.
// Int8ConvLayer:    x [n, C*H*W] -> kernels::Int8Conv2d -> y [n, C'*H'*W'] (the quantization of
//   x happens inside the kernel); the bias (with a folded BatchNorm's) and f in the
//   epilogue. Layouts NCHW or channels-last (NHWC) as the model asks (set_channels_last).
#pragma once

#include "trellis/int8/layer_table.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/linear.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/tied_head.hpp"

#include <memory>

namespace trellis::int8 {

class Int8LinearLayer : public nn::Layer {
 public:
  // `q` must fit the Linear; Error naming it when not, or when it is split over tp ranks.
  Int8LinearLayer(const Int8Layer& q, const nn::Linear& linear, kernels::Int8Backend backend);
  Int8LinearLayer(const Int8Layer& q, const nn::TiedHead& head, kernels::Int8Backend backend);

  void forward(ConstMatrix input, int n, const nn::StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;

  // The quantized input [cap * in]: forward fills it; a caller that quantizes x itself (a
  // LayerNorm writing its output quantized) fills it and calls forward_quantized_input.
  kernels::ByteView quantized_input() const { return xq_; }
  const kernels::ActivationQuant& input_quantization() const { return kernel_->input(); }
  void forward_quantized_input(int n);  // output() rows [0, n)

 private:
  std::unique_ptr<kernels::Int8Linear> kernel_;
  kernels::ByteView xq_;  // [cap * in]
};

class Int8ConvLayer : public nn::Layer {
 public:
  // `q` must fit the convolution (its BatchNorm folded in, if any: q.folded_norm).
  Int8ConvLayer(const Int8Layer& q, const nn::Conv2d& conv, kernels::Activation activation,
                kernels::Int8Backend backend);

  void forward(ConstMatrix input, int n, const nn::StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;

  kernels::Int8Conv2d& kernel() { return *kernel_; }

 private:
  std::unique_ptr<kernels::Int8Conv2d> kernel_;
};

}  // namespace trellis::int8
