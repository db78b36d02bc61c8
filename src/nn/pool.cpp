#include "trellis/nn/pool.hpp"

#include "trellis/core/error.hpp"

namespace trellis::nn {

namespace {

kernels::PoolGeometry checked_pool(const std::string& name, int channels, int height, int width,
                                   int kernel, int stride) {
  if (channels <= 0 || height <= 0 || width <= 0 || kernel <= 0 || stride <= 0 || kernel > height ||
      kernel > width) {
    throw Error("maxpool \"" + name + "\": kernel " + std::to_string(kernel) + ", stride " +
                std::to_string(stride) + " do not fit [C, H, W] = [" + std::to_string(channels) +
                ", " + std::to_string(height) + ", " + std::to_string(width) +
                "] (all positive, kernel <= H, W)");
  }
  kernels::PoolGeometry g;
  g.channels = channels;
  g.height = height;
  g.width = width;
  g.kernel = kernel;
  g.stride = stride;
  return g;
}

int pool_in(const kernels::PoolGeometry& g) { return g.channels * g.height * g.width; }
int pool_out(const kernels::PoolGeometry& g) { return g.channels * g.out_height() * g.out_width(); }

int checked_plane(const std::string& name, int channels, int height, int width) {
  if (channels <= 0 || height <= 0 || width <= 0) {
    throw Error("global_avgpool \"" + name + "\": [C, H, W] = [" + std::to_string(channels) + ", " +
                std::to_string(height) + ", " + std::to_string(width) + "] must be positive");
  }
  return height * width;
}

}  // namespace

MaxPool2d::MaxPool2d(const std::string& name, int channels, int height, int width, int kernel,
                     int stride, int capacity)
    : MaxPool2d(name, checked_pool(name, channels, height, width, kernel, stride), capacity) {}

MaxPool2d::MaxPool2d(const std::string& name, const kernels::PoolGeometry& g, int capacity)
    : Layer(name, pool_in(g), pool_out(g), capacity),
      geometry_(g),
      argmax_("trellis::nn::" + name + ".argmax",
              static_cast<std::size_t>(capacity) * static_cast<std::size_t>(pool_out(g))) {}

void MaxPool2d::forward(ConstMatrix input, int n, const StepContext&) {
  kernels::maxpool_forward(begin_forward(input, n), geometry_, output_rows(n), argmax_);
}

void MaxPool2d::backward(ConstMatrix output_grad, int n) {
  kernels::maxpool_backward(begin_backward(output_grad, n), argmax_, geometry_, input_grad_rows(n));
}

GlobalAvgPool::GlobalAvgPool(const std::string& name, int channels, int height, int width,
                             int capacity, int channel_block)
    : Layer(name, channels * checked_plane(name, channels, height, width), channels, capacity),
      plane_(height * width),
      channel_block_(channel_block) {
  kernels::ChannelLayout(plane_, channel_block)
      .require_fits(channels, ("pool \"" + name + "\"").c_str());
}

void GlobalAvgPool::forward(ConstMatrix input, int n, const StepContext&) {
  if (channels_last_)
    kernels::global_avgpool_forward_channels_last(begin_forward(input, n), plane_, output_rows(n));
  else
    kernels::global_avgpool_forward(begin_forward(input, n), {plane_, channel_block_},
                                    output_rows(n));
}

void GlobalAvgPool::backward(ConstMatrix output_grad, int n) {
  if (channels_last_)
    throw Error("layer \"" + name() + "\": channels-last pooling is for inference only");
  kernels::global_avgpool_backward(begin_backward(output_grad, n), {plane_, channel_block_},
                                   input_grad_rows(n));
}

}  // namespace trellis::nn
