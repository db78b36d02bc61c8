// oneDNN convolution for host builds with oneDNN (TRELLIS_HAVE_ONEDNN): the CPU counterpart of
// conv_cudnn.hpp. Compiled to nothing otherwise; the im2col + GEMM path in conv.hpp stays the
// portable fallback and the reference the tests compare this against.
//
// Layouts: Trellis keeps activations as NCHW rows everywhere (BatchNorm, pooling and the
// residual adds index them so). oneDNN's direct convolutions are fast only on its blocked
// layouts (nChw16c on AVX-512: 16 channels in one vector), and on plain NCHW it falls back to
// an im2col + GEMM of its own that measured 5x slower on the CNN's shapes. So each primitive is
// created with format `any` for activations and weights, and the data is reordered between
// NCHW and the chosen layout around it (about a fifth of the convolution time measured on the
// CNN's shapes). Weights are reordered every step (they change every step; they are small).
//
// Everything is created once per batch size: the descriptors, primitives, reorders and the
// internal buffers for `capacity` images at construction, and for a smaller batch (the last one
// of an epoch, evaluation) at its first use; the scratchpad is user-managed and shared. forward
// and backward then run through oneDNN's C API with fixed argument arrays, so a warmed-up step
// allocates nothing.
#pragma once

#if TRELLIS_HAVE_ONEDNN

#include "trellis/kernels/conv.hpp"

#include <memory>

namespace trellis::kernels {

// NCHW fp32, square kernel, PyTorch's cross-correlation; bias is left to channel_bias_add.
//   forward:  y[n, C'*H'*W'] = conv(x[n, C*H*W], w[C', C, k, k])            (y written)
//   backward: dw += dconv/dw(x, dy);  dx[n, C*H*W] = dconv/dx(w, dy)          (dx written;
//             skipped when dx.data() is null)
class OnednnConvolution {
 public:
  OnednnConvolution(const ConvGeometry& g, int out_channels, int capacity);
  ~OnednnConvolution();
  OnednnConvolution(const OnednnConvolution&) = delete;
  OnednnConvolution& operator=(const OnednnConvolution&) = delete;

  void forward(ConstMatrix x, int n, ConstVector w, Matrix y);
  void backward(ConstMatrix x, ConstMatrix dy, int n, ConstVector w, Vector dw, Matrix dx);

  // "jit:avx512_core" and friends: the implementations oneDNN chose (forward, backward-data,
  // backward-weights), for logs and tests.
  std::string implementation() const;

 private:
  struct Plan;  // the primitives for one batch size
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace trellis::kernels

#endif
