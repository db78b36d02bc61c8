// Int8 convolution for inference (a CNN quantized by trellis quantize; kernels/int8.hpp has the
// quantization rules):
//
//   x [n, C*H*W] fp32 rows  ->  y [n, C'*H'*W'] fp32 rows, each NCHW or channels-last (NHWC)
//   (set_channels_last: a CNN whose convolutions are all int8 keeps its activations NHWC,
//   the layout the int8 convolutions read and write, so no transposing reorder runs)
//   y[i, o, p] = f(s_x s_w[o] sum_{c, kh, kw} (q_x - z) q_w[o, c, kh, kw] + b[o])
//   q_w s8 [C', C, k, k], symmetric per output channel; b fp32 [C'] (a folded BatchNorm's)
//
// oneDNN (host builds): one reorder quantizes the fp32 NCHW input and lays it out as the
// convolution wants it (scale 1/s_x, zero point z, saturation), the convolution runs on
// VNNI/AMX-INT8 with the dequantization (per-channel output scales), the bias (binary post-op)
// and f fused, and a last reorder writes NCHW fp32 rows. Primitives and their buffers are made
// per batch size at first use; the weights are packed once per primitive.
// Reference (everywhere else, and the tests' yardstick): quantize() + a direct Kokkos
// convolution over the quantized NCHW input, s32 sums.
#pragma once

#include "trellis/kernels/bias.hpp"
#include "trellis/kernels/conv.hpp"
#include "trellis/kernels/int8.hpp"
#include "trellis/kernels/views.hpp"

#include <memory>
#include <string>

namespace trellis::kernels {

class Int8Conv2d {
 public:
  // weights [C' * C * k * k], weight_scales [C'], bias [C'] (copied in). capacity: the most
  // images per forward (the reference path's byte buffer).
  Int8Conv2d(const std::string& name, const ConvGeometry& geometry, int out_channels,
             ConstInt8Vector weights, ConstVector weight_scales, ConstVector bias,
             const ActivationQuant& input, Activation f, int capacity,
             Int8Backend backend = Int8Backend::automatic);
  ~Int8Conv2d();
  Int8Conv2d(const Int8Conv2d&) = delete;
  Int8Conv2d& operator=(const Int8Conv2d&) = delete;

  // The layouts of x and y (default NCHW both), and the epilogue's activation (a ReLU that
  // followed the convolution and its folded BatchNorm). Before the first forward.
  void set_channels_last(bool input, bool output);
  void set_activation(Activation f);
  // y = f(conv(x) + b + y): the result is added to what y holds (a residual block's shortcut)
  // before the activation. Channels-last output only (y is then the convolution's own layout).
  void set_accumulate(bool accumulate);
  Activation activation() const { return activation_; }
  // x [>= n, C*H*W], y [n, C'*H'*W'] (fp32 both; the input is quantized here).
  void forward(ConstMatrix x, int n, Matrix y);
  bool uses_onednn() const { return onednn_ != nullptr; }
  const ConvGeometry& geometry() const { return geometry_; }
  int out_channels() const { return out_channels_; }
  // The portable kernel forward() runs without oneDNN. Public only because nvcc refuses an
  // extended (KOKKOS_LAMBDA) lambda in a private member function; call forward().
  void forward_reference(ConstMatrix x, int n, Matrix y);

 private:
  void require_unplanned(const char* what) const;  // Error once a primitive was made

  std::string name_;
  ConvGeometry geometry_;
  int out_channels_, capacity_;
  Int8View weights_;  // [C' * C * k * k], OIHW
  FloatView scales_;  // [C']: s_x * s_w[o]
  FloatView bias_;    // [C']
  ActivationQuant input_;
  Activation activation_;
  bool input_nhwc_ = false, output_nhwc_ = false, accumulate_ = false;
  bool ran_ = false;  // a forward with images ran: the epilogue is fixed from then on
  ByteView xq_;       // [capacity * C*H*W], reference path only
  struct Onednn;
  std::unique_ptr<Onednn> onednn_;
};

}  // namespace trellis::kernels
