// BasicBlock: the two-convolution residual block of ResNet-18/34 (He et al. 2016), as a Layer
// composed of Conv2d, BatchNorm2d and ReLU layers plus an add.
//
//   x [n, C*H*W] -> y [n, C'*H'*W'],  H' = (H - 1) / s + 1 (3x3 convs, padding 1)
//   main:      a = relu(bn1(conv1(x)))       conv1: 3x3, stride s, C -> M, no bias
//              m = bn2(conv2(a))             conv2: 3x3, stride 1, M -> C', no bias
//   M, the inner width, is C' unless given smaller (a channel-pruned block: its conv1 output
//   channels are the block's prunable units, nn/model.hpp PrunableUnits).
//   shortcut:  sc = x                                 when s == 1 and C == C' (identity)
//              sc = bn_sc(conv_sc(x))                 otherwise (1x1 conv, stride s, no bias)
//   y = relu(m + sc)   (one pass; backward takes the ReLU's mask from y)
// Parameters "<name>.conv1.weight", "<name>.bn1.weight|bias", "<name>.conv2.weight",
// "<name>.bn2.weight|bias" and, with a projection, "<name>.shortcut.conv.weight",
// "<name>.shortcut.bn.weight|bias".
// backward: ds = dy * [y > 0] (never written out: bn2, the shortcut's bn and the final add
// mask dy themselves); ds flows back through bn2, conv2, relu, bn1, conv1 and through the
// shortcut, and the two input gradients are added:
//   dx = dx_main + (projection ? dx_shortcut : ds)     (=); parameter gradients +=.
// Buffers: dx is conv1's input gradient; the norms' input gradients share one scratch buffer
// and conv2's and the shortcut conv's another (each is dead once the next layer read it), so
// backward needs three [capacity, max(features)] buffers, not eight.
// The BatchNorms follow ctx.training and synchronise over `sync` when given (batchnorm.hpp).
// preferred_block: the channel block the convolutions want (kernels/channel_layout.hpp); every
// tensor whose channel count it divides (x, the inner and the output activations) is held in
// that layout, the others NCHW. x and y are rows in those layouts: the block does not reorder.
#pragma once

#include "trellis/comm/mpi_comm.hpp"
#include "trellis/nn/batchnorm.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trellis::nn {

class BasicBlock : public Layer {
 public:
  BasicBlock(ParameterStore& store, const std::string& name, int in_channels, int out_channels,
             int stride, int height, int width, int capacity, const MpiComm* sync = nullptr,
             ConvImpl conv_impl = ConvImpl::automatic, int mid_channels = 0,
             int preferred_block = 1);

  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  // Sum of the convolutions' FLOPs (BatchNorm, ReLU and the add are not counted).
  std::int64_t flops_per_sample() const override;
  void for_each_part(const std::function<void(Layer&)>& f) override;

  bool has_projection() const { return shortcut_conv_ != nullptr; }
  int out_channels() const { return conv2_->out_channels(); }
  int out_height() const { return conv2_->out_height(); }
  int out_width() const { return conv2_->out_width(); }
  int mid_channels() const { return conv1_->out_channels(); }
  // The block's BatchNorms (for their running statistics), in forward order.
  std::vector<const BatchNorm2d*> batchnorms() const;
  // The parts (int8 inference builds its own block from them, int8/residual_block.hpp);
  // shortcut_conv() is null for an identity shortcut.
  const Conv2d& conv1() const { return *conv1_; }
  const Conv2d& conv2() const { return *conv2_; }
  const Conv2d* shortcut_conv() const { return shortcut_conv_.get(); }

 private:
  std::unique_ptr<Conv2d> conv1_;
  std::unique_ptr<BatchNorm2d> bn1_;
  std::unique_ptr<Conv2d> conv2_;
  std::unique_ptr<BatchNorm2d> bn2_;
  std::unique_ptr<Conv2d> shortcut_conv_;     // null: identity shortcut
  std::unique_ptr<BatchNorm2d> shortcut_bn_;  // null: identity shortcut
  FloatView norm_grads_;  // [capacity * max(mid, out) features]: bn1, bn2, shortcut bn's dx
  FloatView conv_grads_;  // [capacity * max(mid, in) features]: conv2, shortcut conv's dx
};

}  // namespace trellis::nn
