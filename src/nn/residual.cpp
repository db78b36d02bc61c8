#include "trellis/nn/residual.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/activation.hpp"
#include "trellis/kernels/vector_ops.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/buffer_pool.hpp"

#include <algorithm>

namespace trellis::nn {

namespace {

Conv2dSpec conv_spec(int in, int out, int kernel, int stride, int padding, int height, int width,
                     ConvImpl impl, int preferred_block) {
  Conv2dSpec s;
  s.impl = impl;
  s.in_block = kernels::channel_block_for(in, preferred_block);
  s.out_block = kernels::channel_block_for(out, preferred_block);
  s.in_channels = in;
  s.out_channels = out;
  s.kernel = kernel;
  s.stride = stride;
  s.padding = padding;
  s.height = height;
  s.width = width;
  s.bias = false;  // a BatchNorm follows: its beta is the bias
  return s;
}

// Validates before the Layer base allocates anything; returns C'*H'*W'.
int block_out_features(const std::string& name, int in_channels, int out_channels, int stride,
                       int height, int width) {
  if (in_channels <= 0 || out_channels <= 0 || stride <= 0 || height <= 0 || width <= 0) {
    throw Error("basic block \"" + name + "\": channels " + std::to_string(in_channels) + " -> " +
                std::to_string(out_channels) + ", stride " + std::to_string(stride) + ", image " +
                std::to_string(height) + "x" + std::to_string(width) + " must all be positive");
  }
  return out_channels * ((height - 1) / stride + 1) * ((width - 1) / stride + 1);
}

}  // namespace

BasicBlock::BasicBlock(ParameterStore& store, const std::string& name, int in_channels,
                       int out_channels, int stride, int height, int width, int capacity,
                       const MpiComm* sync, ConvImpl conv_impl, int mid_channels,
                       int preferred_block)
    : Layer(name, in_channels * height * width,
            block_out_features(name, in_channels, out_channels, stride, height, width), capacity,
            OwnBuffers{/*output=*/true, /*input_grad=*/false, BufferRole::saved}) {
  if (mid_channels <= 0) mid_channels = out_channels;
  const int mid_block = kernels::channel_block_for(mid_channels, preferred_block);
  const int out_block = kernels::channel_block_for(out_channels, preferred_block);
  // conv1's input gradient is the block's: the shortcut's is added into it in place.
  conv1_ = std::make_unique<Conv2d>(
      store, name + ".conv1",
      conv_spec(in_channels, mid_channels, 3, stride, 1, height, width, conv_impl, preferred_block),
      capacity);
  share_input_grad_of(*conv1_);
  const int ho = conv1_->out_height(), wo = conv1_->out_width();
  {
    const InputGradsFromOwner lent;  // the two buffers below
    bn1_ = std::make_unique<BatchNorm2d>(store, name + ".bn1", mid_channels, ho, wo, capacity, 0.1f,
                                         1e-5f, sync, mid_block, /*relu_after=*/true);
    conv2_ = std::make_unique<Conv2d>(
        store, name + ".conv2",
        conv_spec(mid_channels, out_channels, 3, 1, 1, ho, wo, conv_impl, preferred_block),
        capacity);
    bn2_ = std::make_unique<BatchNorm2d>(store, name + ".bn2", out_channels, ho, wo, capacity, 0.1f,
                                         1e-5f, sync, out_block);
    if (stride != 1 || in_channels != out_channels) {
      shortcut_conv_ =
          std::make_unique<Conv2d>(store, name + ".shortcut.conv",
                                   conv_spec(in_channels, out_channels, 1, stride, 0, height, width,
                                             conv_impl, preferred_block),
                                   capacity);
      shortcut_bn_ = std::make_unique<BatchNorm2d>(store, name + ".shortcut.bn", out_channels, ho,
                                                   wo, capacity, 0.1f, 1e-5f, sync, out_block);
    }
  }
  // Backward runs bn2, conv2, bn1, conv1, then shortcut bn, shortcut conv: each gradient is
  // dead once the next layer has read it, so the norms' go to one buffer and the inner
  // convolutions' to another.
  const auto cap = static_cast<std::size_t>(capacity);
  const int mid = mid_channels * ho * wo, out = out_features();
  const int b_features = shortcut_conv_ ? std::max(mid, in_features()) : mid;
  norm_grads_ = layer_buffer(BufferRole::scratch, "trellis::nn::" + name + ".norms.input_grad",
                             cap * static_cast<std::size_t>(std::max(mid, out)));
  conv_grads_ = layer_buffer(BufferRole::scratch, "trellis::nn::" + name + ".convs.input_grad",
                             cap * static_cast<std::size_t>(b_features));
  lend_input_grad_to(*bn1_, norm_grads_);
  lend_input_grad_to(*conv2_, conv_grads_);
  lend_input_grad_to(*bn2_, norm_grads_);
  if (shortcut_conv_) {
    lend_input_grad_to(*shortcut_conv_, conv_grads_);
    lend_input_grad_to(*shortcut_bn_, norm_grads_);
  }
}

void BasicBlock::forward(ConstMatrix input, int n, const StepContext& ctx) {
  const ConstMatrix x = begin_forward(input, n);
  conv1_->forward(x, n, ctx);
  bn1_->forward(conv1_->output(), n, ctx);  // relu1 inside
  conv2_->forward(bn1_->output(), n, ctx);
  bn2_->forward(conv2_->output(), n, ctx);
  const ConstMatrix m = bn2_->output();
  ConstMatrix shortcut = x;
  if (shortcut_conv_) {
    shortcut_conv_->forward(x, n, ctx);
    shortcut_bn_->forward(shortcut_conv_->output(), n, ctx);
    shortcut = kernels::first_rows(shortcut_bn_->output(), n);
  }
  kernels::add_relu_forward(kernels::first_rows(m, n), kernels::first_rows(shortcut, n),
                            output_rows(n));
}

void BasicBlock::backward(ConstMatrix output_grad, int n) {
  // dy is the gradient of y = relu(m + sc): both branches take it masked by [y > 0], the
  // norms inside their kernels, the identity shortcut in the final add.
  const ConstMatrix dy = begin_backward(output_grad, n);
  const ConstMatrix y = kernels::first_rows(output(), n);
  bn2_->backward_through_relu(dy, y, n);
  conv2_->backward(bn2_->input_grad(), n);
  bn1_->backward(conv2_->input_grad(), n);
  conv1_->backward(bn1_->input_grad(), n);  // writes dx
  const Matrix dx = input_grad_rows(n);
  if (shortcut_conv_) {
    shortcut_bn_->backward_through_relu(dy, y, n);
    shortcut_conv_->backward(shortcut_bn_->input_grad(), n);
    kernels::add(kernels::flat(dx),
                 kernels::flat(kernels::first_rows(shortcut_conv_->input_grad(), n)),
                 kernels::flat(dx));
  } else {
    kernels::relu_backward_add(y, dy, dx);
  }
}

std::int64_t BasicBlock::flops_per_sample() const {
  std::int64_t total = conv1_->flops_per_sample() + conv2_->flops_per_sample();
  if (shortcut_conv_) total += shortcut_conv_->flops_per_sample();
  return total;
}

void BasicBlock::for_each_part(const std::function<void(Layer&)>& f) {
  f(*conv1_);
  f(*bn1_);
  f(*conv2_);
  f(*bn2_);
  if (shortcut_conv_) f(*shortcut_conv_);
  if (shortcut_bn_) f(*shortcut_bn_);
}

std::vector<const BatchNorm2d*> BasicBlock::batchnorms() const {
  std::vector<const BatchNorm2d*> all{bn1_.get(), bn2_.get()};
  if (shortcut_bn_) all.push_back(shortcut_bn_.get());
  return all;
}

}  // namespace trellis::nn
