// Pooling layers on NCHW images flattened into rows (kernels/pool.hpp). No parameters.
//
// MaxPool2d(kernel k, stride s), no padding, PyTorch's nn.MaxPool2d(k, s):
//   x [n, C*H*W] -> y [n, C*H'*W'],  H' = (H - k) / s + 1
//   forward remembers the argmax of every window (ties -> first in row-major window order) in
//   an index buffer [capacity * C*H'*W'] allocated at construction;
//   backward: dx = dy routed to the argmax positions (=), summed where windows overlap.
// GlobalAvgPool:
//   x [n, C*H*W] -> y [n, C],  y = mean over H*W;  backward: dx = dy / (H*W) broadcast (=).
//   x in NCHW or channel-blocked (kernels/channel_layout.hpp), or channels-last for inference.
#pragma once

#include "trellis/kernels/pool.hpp"
#include "trellis/nn/layer.hpp"

#include <string>

namespace trellis::nn {

class MaxPool2d : public Layer {
 public:
  MaxPool2d(const std::string& name, int channels, int height, int width, int kernel, int stride,
            int capacity);
  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;

  const kernels::PoolGeometry& geometry() const { return geometry_; }
  int out_height() const { return geometry_.out_height(); }
  int out_width() const { return geometry_.out_width(); }
  // Argmax (h*W + w within its plane) of every output element of the last forward.
  kernels::ConstIntVector argmax() const { return argmax_; }

 private:
  MaxPool2d(const std::string& name, const kernels::PoolGeometry& checked, int capacity);

  kernels::PoolGeometry geometry_;
  IntView argmax_;  // [capacity * C*H'*W']
};

class GlobalAvgPool : public Layer {
 public:
  // channel_block: the layout of x (kernels/channel_layout.hpp; 1 = NCHW).
  GlobalAvgPool(const std::string& name, int channels, int height, int width, int capacity,
                int channel_block = 1);
  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;

  int channels() const { return out_features(); }
  int plane() const { return plane_; }
  // Inference on channels-last (NHWC) rows: the int8 CNN's layout (int8/classifiers.hpp);
  // backward then throws.
  void set_channels_last(bool channels_last) { channels_last_ = channels_last; }

 private:
  int plane_;  // H*W
  int channel_block_;
  bool channels_last_ = false;
};

}  // namespace trellis::nn
