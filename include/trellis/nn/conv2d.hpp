// Conv2d: 2-D cross-correlation with a square kernel, PyTorch's nn.Conv2d convention.
//
// Each sample is one NCHW image flattened into a row (kernels/conv.hpp), or on the oneDNN path
// one image in a channel-blocked layout (Conv2dSpec::in_block / out_block):
//   x  [n, C*H*W]                     in_features  = C*H*W
//   W  "<name>.weight" [C', C, k, k]  (weight decay; viewed as the matrix [C', C*k*k])
//   b  "<name>.bias"   [C']           (no decay; only when bias = true)
//   y  [n, C'*H'*W']                  out_features = C'*H'*W',  H' = (H + 2p - k) / s + 1
// Init (PyTorch's default): W, b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = C*k*k
// (kaiming_uniform with gain 1/sqrt(3)).
//
// forward, per image i:   cols_i = im2col(x_i)                 [C*k*k, H'*W']
//                         y_i    = W cols_i (+ b per channel)  [C', H'*W']   one GEMM
// backward, per image i:  dW    += dy_i cols_i^T               (cols recomputed from x)
//                         db    += sum over i, pixels of dy    (parameter grads +=)
//                         dcols  = W^T dy_i;  dx_i = col2im(dcols)   (input grad =)
// im2col works on blocks of images into one workspace [block * C*k*k, H'*W'] allocated at
// construction (block = as many images as fit Conv2dSpec::max_workspace_floats, default
// kWorkspaceFloats, at least one, at most capacity); nothing is allocated per call. A 1x1,
// stride-1, unpadded conv skips im2col and reads its input directly.
//
// Which path runs (Conv2dSpec::impl, config model.conv_impl): the vendor library where the build
// has one — kernels::CudnnConvolution on CUDA builds with TRELLIS_ENABLE_CUDNN (deterministic
// FMA-math algorithms), kernels::OnednnConvolution on host builds with oneDNN — and otherwise
// this im2col + GEMM path (device GEMMs through KokkosBlas/cuBLAS), which stays the portable
// fallback and the tests' reference. The vendor paths allocate no im2col workspace; the bias
// steps are shared.
//
// Mixed precision (autocast.hpp, from the store): x and dy rounded into x16 / dy16, the
// weight's rounded compute copy, y and dx rounded in place; dW and db stay fp32. With native
// kernels, the vendor convolution reads 16-bit operands itself (half_operands()): oneDNN in
// bf16 where the CPU has AVX512-BF16 or AMX, x and dy converted in its layout reorders
// (kernels/conv_onednn.hpp); cuDNN in bf16 or fp16 (kernels/conv_cudnn.hpp, its weight
// gradient 16-bit per call as PyTorch's). The weights are the store's 16-bit compute copy, and
// x16 / dy16 / weight16 are not allocated.
#pragma once

#include "trellis/kernels/conv.hpp"
#include "trellis/kernels/conv_cudnn.hpp"
#include "trellis/kernels/conv_onednn.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace trellis::nn {

// automatic: the vendor convolution when the build has one, else im2col; vendor: the vendor
// convolution or a ConfigError; im2col: always the portable path.
enum class ConvImpl { automatic, vendor, im2col };
ConvImpl parse_conv_impl(const std::string& name);  // "auto" | "onednn" | "cudnn" | "im2col"
// The vendor convolution this build has: "cudnn", "onednn" or "" (none).
const char* vendor_conv_name();

// How a CNN holds its activations between convolutions (config kernels.conv_layout):
// automatic: in the channel-blocked layout oneDNN's convolutions choose here, where they run
// on oneDNN and it chooses one, else NCHW; nchw; blocked: channel-blocked or a ConfigError.
enum class ConvLayout { automatic, nchw, blocked };
ConvLayout parse_conv_layout(const std::string& name);  // "auto" | "nchw" | "blocked"
// The channel block (kernels/channel_layout.hpp; 1 = NCHW) that convolutions built with `impl`
// on `store` (its precision decides the operands) want their activations in, under `layout`.
int conv_channel_block(ConvLayout layout, ConvImpl impl, const ParameterStore& store);

struct Conv2dSpec {
  int in_channels = 0, out_channels = 0;
  int kernel = 3, stride = 1, padding = 0;
  int height = 0, width = 0;  // input image size
  bool bias = true;
  // Upper bound on the im2col workspace in floats; 0: Conv2d::kWorkspaceFloats.
  std::int64_t max_workspace_floats = 0;
  ConvImpl impl = ConvImpl::automatic;
  // Channel blocks of the input and output rows (kernels/channel_layout.hpp): 1 = NCHW; more
  // only on the oneDNN path (a CNN's activations in the convolutions' own layout).
  int in_block = 1, out_block = 1;
};

class Conv2d : public Layer {
 public:
  // Upper bound on the im2col workspace of one layer, in floats (4 MiB), unless one image
  // alone needs more.
  static constexpr std::int64_t kWorkspaceFloats = std::int64_t{1} << 20;

  // Registers "<name>.weight" (and "<name>.bias") in `store` (before store.finalize()); the
  // store must outlive the layer. Throws trellis::Error for a geometry that does not fit.
  Conv2d(ParameterStore& store, const std::string& name, const Conv2dSpec& spec, int capacity);
  Conv2d(ParameterStore& store, const std::string& name, int in_channels, int out_channels,
         int kernel, int stride, int padding, int height, int width, int capacity,
         bool bias = true);

  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  // 2 * MACs forward, twice that backward (dW and dx): 6 * C' * H'*W' * C*k*k; bias ignored.
  std::int64_t flops_per_sample() const override;

  const kernels::ConvGeometry& geometry() const { return geometry_; }
  int out_channels() const { return out_channels_; }
  int out_height() const { return geometry_.out_height(); }
  int out_width() const { return geometry_.out_width(); }
  int block() const { return block_; }  // images per im2col workspace fill
  bool uses_vendor() const;             // the cuDNN / oneDNN path rather than im2col
  bool half_operands() const { return half_operands_; }  // the vendor path reads bf16 (above)
  // The channel layouts of x and y (Conv2dSpec::in_block / out_block).
  kernels::ChannelLayout input_layout() const;
  kernels::ChannelLayout output_layout() const;
  // Reorders of x, y, dy or dx a full batch's step runs around the oneDNN convolution (0 where
  // the layouts are the convolution's own; 0 off the oneDNN path).
  int activation_reorders() const;
  std::size_t weight_index() const { return weight_; }
  std::optional<std::size_t> bias_index() const { return bias_; }

 private:
  // The convolution proper, on the operands autocast chose (rounded or not).
  void forward_operands(ConstMatrix x, kernels::ConstVector weight, int n);
  void backward_operands(ConstMatrix dy, ConstMatrix x, int n);
  // The weights the convolution reads: the compute copy, as fp32 values.
  kernels::ConstVector compute_weight();
  // cols of images [first, first + count) of x, in the workspace (or x itself when pointwise).
  ConstMatrix columns(const ConstMatrix& x, int first, int count) const;

  ParameterStore* store_;
  kernels::ConvGeometry geometry_;
  int out_channels_;
  std::size_t weight_;
  std::optional<std::size_t> bias_;
  int block_ = 1;
  int in_block_ = 1, out_block_ = 1;
  bool half_operands_ = false;
  FloatView workspace_;   // [block * C*k*k * H'*W'] (empty when pointwise)
  AutocastOperand x16_;   // [cap * C*H*W] autocast: x rounded
  AutocastOperand dy16_;  // [cap * C'*H'*W'] autocast: dy rounded
  FloatView weight16_;    // [C' * C*k*k] native kernels: the 16-bit weights as fp32
#if defined(TRELLIS_ENABLE_CUDNN)
  std::unique_ptr<kernels::CudnnConvolution> cudnn_;
#endif
#if TRELLIS_HAVE_ONEDNN
  std::unique_ptr<kernels::OnednnConvolution> onednn_;
#endif
};

}  // namespace trellis::nn
