// cuDNN convolution for CUDA builds with TRELLIS_ENABLE_CUDNN (the host path is im2col + GEMM
// in conv.hpp). Compiled to nothing otherwise.
#pragma once

#if defined(TRELLIS_ENABLE_CUDNN)

#include "trellis/core/precision.hpp"
#include "trellis/kernels/conv.hpp"
#include "trellis/kernels/precision_cast.hpp"

#include <memory>

namespace trellis::kernels {

// cuDNN convolution of one layer (CUDA builds with TRELLIS_ENABLE_CUDNN): NCHW fp32, square
// kernel, PyTorch's cross-correlation. The handle (on Kokkos' default CUDA stream), the
// descriptors, deterministic FMA-math (no TF32) algorithms and one workspace sized for
// `capacity` images are made at construction; forward/backward allocate nothing.
//   forward:  y[n, C'*H'*W'] = conv(x[n, C*H*W], w[C', C, k, k])            (y written)
//   backward: dw += dconv/dw(x, dy);  dx[n, C*H*W] = dconv/dx(w, dy)          (dx written;
//             skipped when dx.data() is null)
//
// 16-bit operands (bf16 or fp16, mixed precision's native kernels): cuDNN's pseudo-16-bit
// configurations, every tensor 16-bit and fp32 arithmetic inside, on tensor-core algorithms
// (still deterministic). x and dy are converted into 16-bit buffers of this object (one for
// x, later reused for dx; one for y and dy), y and dx converted back to fp32, and dw computed
// in 16 bits per call and added into the fp32 gradient: PyTorch autocast's numerics (its
// bf16 convolution's weight gradient is bf16 too). The weights are the store's 16-bit copy.
class CudnnConvolution {
 public:
  CudnnConvolution(const ConvGeometry& g, int out_channels, int capacity,
                   Precision operands = Precision::fp32);
  ~CudnnConvolution();
  CudnnConvolution(const CudnnConvolution&) = delete;
  CudnnConvolution& operator=(const CudnnConvolution&) = delete;

  // w: fp32 with fp32 operands, the 16-bit words with 16-bit operands (Error otherwise).
  void forward(ConstMatrix x, int n, ConstVector w, Matrix y);
  void forward(ConstMatrix x, int n, ConstHalfVector w, Matrix y);
  void backward(ConstMatrix x, ConstMatrix dy, int n, ConstVector w, Vector dw, Matrix dx);
  void backward(ConstMatrix x, ConstMatrix dy, int n, ConstHalfVector w, Vector dw, Matrix dx);
  Precision operands() const;

 private:
  struct State;  // cudnn.h stays out of this header
  std::unique_ptr<State> state_;
};

}  // namespace trellis::kernels

#endif
