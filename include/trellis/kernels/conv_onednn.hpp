// oneDNN convolution for host builds with oneDNN (TRELLIS_HAVE_ONEDNN): the CPU counterpart of
// conv_cudnn.hpp. Compiled to nothing otherwise; the im2col + GEMM path in conv.hpp stays the
// portable fallback and the reference the tests compare this against.
//
// Layouts: oneDNN's direct convolutions are fast only on its blocked layouts (nChw16c on
// AVX-512, nChw8c on AVX2: one vector of channels per pixel), and on plain NCHW it falls back to
// an im2col + GEMM of its own that measured 5x slower on the CNN's shapes. So each primitive is
// created with format `any` for activations and weights, and the data is reordered between the
// layout the caller holds (ChannelBlocks: NCHW, or a channel-blocked one,
// kernels/channel_layout.hpp) and the chosen layout around it where the two differ. With NCHW
// activations those reorders cost about a fifth of the convolution time on the CNN's shapes; a
// CNN that keeps its activations in preferred_channel_block()'s layout has none (nn/cnn.hpp).
// Weights are reordered every step (they change every step; they are small).
//
// Everything is created once per batch size: the descriptors, primitives, reorders and the
// internal buffers for `capacity` images at construction, and for a smaller batch (the last one
// of an epoch, evaluation) at its first use; the scratchpad is user-managed and shared. forward
// and backward then run through oneDNN's C API with fixed argument arrays, so a warmed-up step
// allocates nothing.
//
// Operands in bf16 (mixed precision with native kernels): the primitives read x, w and dy as
// bf16 in their blocked layouts and accumulate in fp32; y, dx and dw come out in fp32 (the
// layer rounds y and dx to bf16 as autocast says; dw stays fp32, added into the fp32 gradient).
// The fp32 -> bf16 conversion (round to nearest even) is the NCHW -> blocked reorder itself, so
// it costs no pass of its own, and backward-weights reuses the bf16 x the forward reordered,
// which is why the layer keeps no rounded copy of x. The weights arrive as the store's 16-bit
// compute copy. oneDNN 2.x's CPU convolutions have no fp16: fp16 stays emulated.
#pragma once

#if TRELLIS_HAVE_ONEDNN

#include "trellis/core/precision.hpp"
#include "trellis/kernels/conv.hpp"
#include "trellis/kernels/precision_cast.hpp"

#include <memory>

namespace trellis::kernels {

// NCHW fp32, square kernel, PyTorch's cross-correlation; bias is left to channel_bias_add.
//   forward:  y[n, C'*H'*W'] = conv(x[n, C*H*W], w[C', C, k, k])            (y written)
//   backward: dw += dconv/dw(x, dy);  dx[n, C*H*W] = dconv/dx(w, dy)          (dx written;
//             skipped when dx.data() is null)
// The channel blocks of the rows the caller passes (1: NCHW): x and dx in `input`'s, y and dy
// in `output`'s. Each must divide its channel count.
struct ChannelBlocks {
  int input = 1, output = 1;
};

class OnednnConvolution {
 public:
  // operands: fp32 or bf16 (above); Error for fp16.
  OnednnConvolution(const ConvGeometry& g, int out_channels, int capacity,
                    Precision operands = Precision::fp32, ChannelBlocks blocks = {});
  ~OnednnConvolution();
  OnednnConvolution(const OnednnConvolution&) = delete;
  OnednnConvolution& operator=(const OnednnConvolution&) = delete;

  // w: fp32 [C'*C*k*k] with fp32 operands, the bf16 words with bf16 operands (Error otherwise).
  void forward(ConstMatrix x, int n, ConstVector w, Matrix y);
  void forward(ConstMatrix x, int n, ConstHalfVector w, Matrix y);
  void backward(ConstMatrix x, ConstMatrix dy, int n, ConstVector w, Vector dw, Matrix dx);
  void backward(ConstMatrix x, ConstMatrix dy, int n, ConstHalfVector w, Vector dw, Matrix dx);

  Precision operands() const;
  // Whether this host's oneDNN has a bf16 convolution of its own (AVX512-BF16 or AMX), rather
  // than a slow reference one: what auto-selection asks before choosing bf16 operands.
  static bool bf16_available();
  // The channel block of the activation layout oneDNN's convolutions choose on this CPU for
  // these operands (asked of oneDNN once per process, not assumed from the CPU flags): 16 on
  // AVX-512, 8 on AVX2; 1 where it keeps NCHW.
  static int preferred_channel_block(Precision operands);
  // Reorders of activations and their gradients (x, y, dy, dx) a full batch's step runs: 0 when
  // the caller's layouts are the ones the primitives chose (fp32 operands).
  int activation_reorders() const;

  // "jit:avx512_core" and friends: the implementations oneDNN chose (forward, backward-data,
  // backward-weights), for logs and tests.
  std::string implementation() const;

 private:
  struct Plan;  // the primitives for one batch size
  struct State;
  void run_forward(ConstMatrix x, int n, const void* w, Matrix y);
  void run_backward(ConstMatrix x, ConstMatrix dy, int n, const void* w, Vector dw, Matrix dx);

  std::unique_ptr<State> state_;
};

}  // namespace trellis::kernels

#endif
