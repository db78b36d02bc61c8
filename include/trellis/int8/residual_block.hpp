// A ResNet BasicBlock (nn/residual.hpp) run as int8 inference, channels-last (NHWC) in and
// out, every BatchNorm folded into its convolution (quantize_layer.hpp):
//   a = relu(conv1(x))                 relu1 in conv1's epilogue; a [cap, M*H'*W'] buffer
//   y = shortcut(x)                    x copied, or the projection convolution written into y
//   y = relu(conv2(a) + y)             conv2 accumulates into y with the final ReLU after the sum
// so the block's output is made in place, without the separate add and ReLU passes.
#pragma once

#include "trellis/int8/layer_table.hpp"
#include "trellis/kernels/int8_conv.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/residual.hpp"

#include <memory>

namespace trellis::int8 {

class Int8BasicBlock : public nn::Layer {
 public:
  // Takes the block's convolutions from `layers`; each must have its BatchNorm folded in
  // (Error naming the convolution when not).
  Int8BasicBlock(const nn::BasicBlock& block, Int8LayerTable& layers, kernels::Int8Backend backend);

  void forward(ConstMatrix input, int n, const nn::StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;

 private:
  std::unique_ptr<kernels::Int8Conv2d> conv1_, conv2_, shortcut_;  // shortcut_: null, identity
  FloatView inner_;  // [cap * M*H'*W']: relu(conv1(x)), channels-last
};

}  // namespace trellis::int8
