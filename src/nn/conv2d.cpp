#include "trellis/nn/conv2d.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/conv.hpp"
#include "trellis/kernels/gemm.hpp"

#include <algorithm>
#include <cmath>

namespace trellis::nn {

ConvImpl parse_conv_impl(const std::string& name) {
  if (name == "auto") return ConvImpl::automatic;
  if (name == "im2col") return ConvImpl::im2col;
  if (name == "onednn" || name == "cudnn") {
    if (name != vendor_conv_name()) {
      const std::string have = vendor_conv_name();
      throw ConfigError(
          "config key kernels.conv = " + name + ", but this build " +
          (have.empty() ? std::string("has no vendor convolution") : "has " + have + " instead") +
          " (expected auto, im2col" + (have.empty() ? "" : " or " + have) + ")");
    }
    return ConvImpl::vendor;
  }
  throw ConfigError("config key kernels.conv = \"" + name +
                    "\" (expected auto, onednn, cudnn or im2col)");
}

const char* vendor_conv_name() {
#if defined(TRELLIS_ENABLE_CUDNN)
  return "cudnn";
#elif TRELLIS_HAVE_ONEDNN
  return "onednn";
#else
  return "";
#endif
}

ConvLayout parse_conv_layout(const std::string& name) {
  if (name == "auto") return ConvLayout::automatic;
  if (name == "nchw") return ConvLayout::nchw;
  if (name == "blocked") return ConvLayout::blocked;
  throw ConfigError("config key kernels.conv_layout = \"" + name +
                    "\" (expected auto, nchw or blocked)");
}

namespace {

#if TRELLIS_HAVE_ONEDNN && !defined(TRELLIS_ENABLE_CUDNN)
// bf16 operands where autocast runs native kernels and oneDNN has a bf16 convolution of its own
// on this CPU; everywhere else the fp32 convolution on rounded operands.
bool onednn_half_operands(const Autocast& autocast) {
  return autocast.native && autocast.mode == Precision::bf16 &&
         kernels::OnednnConvolution::bf16_available();
}
#endif

kernels::ConvGeometry geometry_of(const Conv2dSpec& s) {
  kernels::ConvGeometry g;
  g.channels = s.in_channels;
  g.height = s.height;
  g.width = s.width;
  g.kernel = s.kernel;
  g.stride = s.stride;
  g.padding = s.padding;
  return g;
}

// Validates before the Layer base allocates anything; returns C*H*W.
int checked_in_features(const std::string& name, const Conv2dSpec& s) {
  geometry_of(s).validate("conv2d \"" + name + "\"");
  if (s.out_channels <= 0) {
    throw Error("conv2d \"" + name + "\": out_channels must be positive, got " +
                std::to_string(s.out_channels));
  }
  return static_cast<int>(geometry_of(s).image_size());
}

// Validates too: the order in which the Layer base's arguments are evaluated is unspecified.
int out_features_of(const std::string& name, const Conv2dSpec& s) {
  checked_in_features(name, s);
  const kernels::ConvGeometry g = geometry_of(s);
  return s.out_channels * g.out_height() * g.out_width();
}

Conv2dSpec make_spec(int in_channels, int out_channels, int kernel, int stride, int padding,
                     int height, int width, bool bias) {
  Conv2dSpec s;
  s.in_channels = in_channels;
  s.out_channels = out_channels;
  s.kernel = kernel;
  s.stride = stride;
  s.padding = padding;
  s.height = height;
  s.width = width;
  s.bias = bias;
  return s;
}

}  // namespace

int conv_channel_block(ConvLayout layout, ConvImpl impl, const ParameterStore& store) {
  if (layout == ConvLayout::nchw) return 1;
  int block = 1;
#if TRELLIS_HAVE_ONEDNN && !defined(TRELLIS_ENABLE_CUDNN)
  if (impl != ConvImpl::im2col) {
    block = kernels::OnednnConvolution::preferred_channel_block(
        onednn_half_operands(store.autocast()) ? Precision::bf16 : Precision::fp32);
  }
#else
  (void)impl, (void)store;
#endif
  if (layout == ConvLayout::blocked && block == 1) {
    const std::string why = std::string(vendor_conv_name()) != "onednn"
                                ? "this build has no oneDNN convolution"
                            : impl == ConvImpl::im2col ? "kernels.conv = im2col"
                                                       : "oneDNN keeps NCHW on this CPU";
    throw ConfigError(
        "config key kernels.conv_layout = blocked needs oneDNN convolutions in a "
        "channel-blocked layout, but " +
        why + " (expected auto or nchw)");
  }
  return block;
}

Conv2d::Conv2d(ParameterStore& store, const std::string& name, const Conv2dSpec& spec, int capacity)
    : Layer(name, checked_in_features(name, spec), out_features_of(name, spec), capacity),
      store_(&store),
      geometry_(geometry_of(spec)),
      out_channels_(spec.out_channels) {
  const std::int64_t fan_in = geometry_.col_rows();
  const double gain =
      1.0 / std::sqrt(3.0);  // PyTorch: kaiming_uniform_(a=sqrt(5)) => 1/sqrt(fan_in)
  weight_ =
      store.add(name + ".weight", {spec.out_channels, spec.in_channels, spec.kernel, spec.kernel},
                InitSpec::kaiming_uniform(fan_in, gain), true);
  if (spec.bias) {
    bias_ = store.add(name + ".bias", {spec.out_channels}, InitSpec::kaiming_uniform(fan_in, gain),
                      false);
  }
  if (spec.impl == ConvImpl::vendor && *vendor_conv_name() == '\0') {
    throw ConfigError("conv2d \"" + name +
                      "\": a vendor convolution was asked for, but this build has none");
  }
  const bool vendor = spec.impl != ConvImpl::im2col;
  in_block_ = spec.in_block;
  out_block_ = spec.out_block;
  input_layout().require_fits(spec.in_channels, ("conv2d \"" + name + "\" input").c_str());
  output_layout().require_fits(spec.out_channels, ("conv2d \"" + name + "\" output").c_str());
  if ((in_block_ > 1 || out_block_ > 1) && !(vendor && std::string(vendor_conv_name()) == "onednn"))
    throw ConfigError("conv2d \"" + name + "\": channel-blocked activations (blocks " +
                      std::to_string(in_block_) + " -> " + std::to_string(out_block_) +
                      ") need the oneDNN convolution, which this build or kernels.conv excludes");
#if defined(TRELLIS_ENABLE_CUDNN)
  if (vendor) {
    // cuDNN has bf16 and fp16 convolutions: native autocast takes them.
    const Autocast& autocast = store.autocast();
    half_operands_ = autocast.native && autocast.active();
    cudnn_ = std::make_unique<kernels::CudnnConvolution>(
        geometry_, out_channels_, capacity, half_operands_ ? autocast.mode : Precision::fp32);
  }
#elif TRELLIS_HAVE_ONEDNN
  if (vendor) {
    half_operands_ = onednn_half_operands(store.autocast());
    onednn_ = std::make_unique<kernels::OnednnConvolution>(
        geometry_, out_channels_, capacity, half_operands_ ? Precision::bf16 : Precision::fp32,
        kernels::ChannelBlocks{in_block_, out_block_});
  }
#else
  (void)vendor;
#endif
  if (!geometry_.is_pointwise() && !uses_vendor()) {
    const std::int64_t per_image = geometry_.col_rows() * geometry_.col_cols();
    const std::int64_t limit =
        spec.max_workspace_floats > 0 ? spec.max_workspace_floats : kWorkspaceFloats;
    block_ = static_cast<int>(std::clamp<std::int64_t>(limit / per_image, 1, capacity));
    // Own: forward uses it too, and a recomputed forward runs while the next block's input
    // gradient waits in a scratch pool.
    workspace_ = layer_buffer(BufferRole::own, "trellis::nn::" + name + ".im2col",
                              static_cast<std::size_t>(block_ * per_image));
  }
  // 16-bit operands convert inside the vendor convolution's reorders: no rounded copies here.
  if (half_operands_) return;
  const auto cap = static_cast<std::size_t>(capacity);
  // Otherwise the convolution takes fp32: emulated operands even with native kernels.
  x16_ = AutocastOperand(store.autocast(), name + ".x16",
                         cap * static_cast<std::size_t>(in_features()), BufferRole::saved,
                         /*emulated_only=*/true);
  dy16_ =
      AutocastOperand(store.autocast(), name + ".dy16",
                      cap * static_cast<std::size_t>(out_features()), BufferRole::scratch, true);
  if (store.autocast().native)
    weight16_ = FloatView(
        "trellis::nn::" + name + ".weight16",
        static_cast<std::size_t>(spec.out_channels) * spec.in_channels * spec.kernel * spec.kernel);
}

Conv2d::Conv2d(ParameterStore& store, const std::string& name, int in_channels, int out_channels,
               int kernel, int stride, int padding, int height, int width, int capacity, bool bias)
    : Conv2d(store, name,
             make_spec(in_channels, out_channels, kernel, stride, padding, height, width, bias),
             capacity) {}

kernels::ChannelLayout Conv2d::input_layout() const {
  return {geometry_.height * geometry_.width, in_block_};
}

kernels::ChannelLayout Conv2d::output_layout() const {
  return {geometry_.out_height() * geometry_.out_width(), out_block_};
}

int Conv2d::activation_reorders() const {
#if TRELLIS_HAVE_ONEDNN && !defined(TRELLIS_ENABLE_CUDNN)
  if (onednn_) return onednn_->activation_reorders();
#endif
  return 0;
}

bool Conv2d::uses_vendor() const {
#if defined(TRELLIS_ENABLE_CUDNN)
  return cudnn_ != nullptr;
#elif TRELLIS_HAVE_ONEDNN
  return onednn_ != nullptr;
#else
  return false;
#endif
}

ConstMatrix Conv2d::columns(const ConstMatrix& x, int first, int count) const {
  const std::size_t rows = static_cast<std::size_t>(count * geometry_.col_rows());
  const std::size_t cols = static_cast<std::size_t>(geometry_.col_cols());
  const float* images = x.data() + static_cast<std::size_t>(first) * x.extent(1);
  if (geometry_.is_pointwise()) return ConstMatrix(images, rows, cols);
  const Matrix ws(workspace_.data(), rows, cols);
  kernels::im2col(ConstMatrix(images, static_cast<std::size_t>(count), x.extent(1)), count,
                  geometry_, ws);
  return ws;
}

void Conv2d::forward(ConstMatrix input, int n, const StepContext&) {
#if defined(TRELLIS_ENABLE_CUDNN) || TRELLIS_HAVE_ONEDNN
  if (half_operands_) {
    const kernels::ConstHalfVector w = store_->compute_half(weight_);  // throws before finalize
    const Matrix y = output_rows(n);
    const ConstMatrix x = x16_.round_matrix(begin_forward(input, n));  // x16_: a no-op
#if defined(TRELLIS_ENABLE_CUDNN)
    if (n > 0) cudnn_->forward(x, n, w, y);
#else
    onednn_->forward(x, n, w, y);
#endif
    if (bias_) {
      kernels::channel_bias_add(y, store_->param_vector(*bias_), output_layout());
    }
    round_in_place(store_->autocast(), y);
    return;
  }
#endif
  // Parameters first: a store that is not finalized throws before the call is recorded.
  const kernels::ConstVector w = compute_weight();
  forward_operands(x16_.round_matrix(begin_forward(input, n)), w, n);
  round_in_place(store_->autocast(), output_rows(n));
}

void Conv2d::forward_operands(ConstMatrix x, kernels::ConstVector weight, int n) {
  const std::size_t cout = static_cast<std::size_t>(out_channels_);
  const std::size_t ckk = static_cast<std::size_t>(geometry_.col_rows());
  const std::size_t plane = static_cast<std::size_t>(geometry_.col_cols());
  const ConstMatrix w(weight.data(), cout, ckk);  // [C', C*k*k]
  const Matrix y = output_rows(n);                // [n, C'*H'*W']
#if defined(TRELLIS_ENABLE_CUDNN)
  if (cudnn_) {
    if (n > 0) cudnn_->forward(x, n, weight, y);
    if (bias_) kernels::channel_bias_add(y, store_->param_vector(*bias_), output_layout());
    return;
  }
#endif
#if TRELLIS_HAVE_ONEDNN
  if (onednn_) {
    onednn_->forward(x, n, weight, y);
    if (bias_) kernels::channel_bias_add(y, store_->param_vector(*bias_), output_layout());
    return;
  }
#endif
  for (int first = 0; first < n; first += block_) {
    const int count = std::min(block_, n - first);
    const ConstMatrix cols = columns(x, first, count);  // [count * C*k*k, H'*W']
    for (int j = 0; j < count; ++j) {
      const ConstMatrix cols_j(cols.data() + static_cast<std::size_t>(j) * ckk * plane, ckk, plane);
      const Matrix y_j(y.data() + static_cast<std::size_t>(first + j) * cout * plane, cout, plane);
      kernels::gemm(false, false, 1.0f, w, cols_j, 0.0f, y_j);  // [C', H'*W']
    }
  }
  if (bias_) kernels::channel_bias_add(y, store_->param_vector(*bias_), output_layout());
}

void Conv2d::backward(ConstMatrix output_grad, int n) {
  // x: as forward read it (rounded with autocast).
  backward_operands(dy16_.round_matrix(begin_backward(output_grad, n)), x16_.last_matrix(), n);
  if (input_grad_needed()) round_in_place(store_->autocast(), input_grad_rows(n));
}

// dy [n, C'*H'*W'], x [n, C*H*W].
void Conv2d::backward_operands(ConstMatrix dy, ConstMatrix x, int n) {
  const std::size_t cout = static_cast<std::size_t>(out_channels_);
  const std::size_t ckk = static_cast<std::size_t>(geometry_.col_rows());
  const std::size_t plane = static_cast<std::size_t>(geometry_.col_cols());
  const std::size_t image = static_cast<std::size_t>(geometry_.image_size());
#if defined(TRELLIS_ENABLE_CUDNN) || TRELLIS_HAVE_ONEDNN
  if (half_operands_) {  // the vendor convolution converts dy and x to 16 bits itself
    if (bias_) {
      kernels::channel_sum_accumulate(dy, store_->grad_vector(*bias_), output_layout());
    }
    const Matrix dx = input_grad_needed() ? input_grad_rows(n) : Matrix();
#if defined(TRELLIS_ENABLE_CUDNN)
    if (n > 0)
      cudnn_->backward(x, dy, n, store_->compute_half(weight_), store_->grad_vector(weight_), dx);
#else
    onednn_->backward(x, dy, n, store_->compute_half(weight_), store_->grad_vector(weight_), dx);
#endif
    return;
  }
#endif
  // [C', C*k*k]: the weights forward read (native kernels: converted there, this step).
  const float* weights =
      weight16_.size() > 0 ? weight16_.data() : store_->compute_vector(weight_).data();
  const ConstMatrix w(weights, cout, ckk);
  const Matrix dw(store_->grad_vector(weight_).data(), cout, ckk);
  const Matrix dx = input_grad_rows(n);  // [n, C*H*W]
  if (bias_) {
    kernels::channel_sum_accumulate(dy, store_->grad_vector(*bias_), output_layout());
  }

#if defined(TRELLIS_ENABLE_CUDNN)
  if (cudnn_) {
    if (n > 0) {
      cudnn_->backward(x, dy, n, kernels::ConstVector(w.data(), cout * ckk),
                       store_->grad_vector(weight_), input_grad_needed() ? dx : Matrix());
    }
    return;
  }
#endif
#if TRELLIS_HAVE_ONEDNN
  if (onednn_) {
    // An empty dx tells the vendor convolution to skip the backward-data pass.
    onednn_->backward(x, dy, n, kernels::ConstVector(w.data(), cout * ckk),
                      store_->grad_vector(weight_), input_grad_needed() ? dx : Matrix());
    return;
  }
#endif
  for (int first = 0; first < n; first += block_) {
    const int count = std::min(block_, n - first);
    const ConstMatrix cols = columns(x, first, count);
    for (int j = 0; j < count; ++j) {
      const ConstMatrix dy_j(dy.data() + static_cast<std::size_t>(first + j) * cout * plane, cout,
                             plane);
      const ConstMatrix cols_j(cols.data() + static_cast<std::size_t>(j) * ckk * plane, ckk, plane);
      kernels::gemm(false, true, 1.0f, dy_j, cols_j, 1.0f, dw);  // dW[C', C*k*k] += dy_j cols_j^T
    }
    if (!input_grad_needed()) continue;  // the model's input is data: nothing consumes dx
    // dcols_j = W^T dy_j [C*k*k, H'*W'], written over the cols (no longer needed), then col2im.
    // Pointwise: dcols_j is dx_j itself.
    float* dcols = geometry_.is_pointwise() ? dx.data() + static_cast<std::size_t>(first) * image
                                            : workspace_.data();
    for (int j = 0; j < count; ++j) {
      const ConstMatrix dy_j(dy.data() + static_cast<std::size_t>(first + j) * cout * plane, cout,
                             plane);
      const Matrix dcols_j(dcols + static_cast<std::size_t>(j) * ckk * plane, ckk, plane);
      kernels::gemm(true, false, 1.0f, w, dy_j, 0.0f, dcols_j);
    }
    if (!geometry_.is_pointwise()) {
      kernels::col2im(ConstMatrix(workspace_.data(), count * ckk, plane), count, geometry_,
                      Matrix(dx.data() + static_cast<std::size_t>(first) * image,
                             static_cast<std::size_t>(count), image));
    }
  }
}

kernels::ConstVector Conv2d::compute_weight() {
  if (weight16_.size() == 0) return store_->compute_vector(weight_);
  // Native kernels keep 16-bit weights: their exact fp32 values for the fp32 convolution.
  kernels::from_half(store_->autocast().mode, store_->compute_half(weight_), weight16_);
  return weight16_;
}

std::int64_t Conv2d::flops_per_sample() const {
  return 6 * static_cast<std::int64_t>(out_channels_) * geometry_.col_cols() * geometry_.col_rows();
}

}  // namespace trellis::nn
