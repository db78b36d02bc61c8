// cuDNN convolution for CUDA builds with TRELLIS_ENABLE_CUDNN (the host path is im2col + GEMM
// in conv.hpp). Compiled to nothing otherwise.
#pragma once

#if defined(TRELLIS_ENABLE_CUDNN)

#include "trellis/kernels/conv.hpp"

#include <memory>

namespace trellis::kernels {

// cuDNN convolution of one layer (CUDA builds with TRELLIS_ENABLE_CUDNN): NCHW fp32, square
// kernel, PyTorch's cross-correlation. The handle (on Kokkos' default CUDA stream), the
// descriptors, deterministic FMA-math (no TF32) algorithms and one workspace sized for
// `capacity` images are made at construction; forward/backward allocate nothing.
//   forward:  y[n, C'*H'*W'] = conv(x[n, C*H*W], w[C', C, k, k])            (y written)
//   backward: dw += dconv/dw(x, dy);  dx[n, C*H*W] = dconv/dx(w, dy)          (dx written;
//             skipped when dx.data() is null)
class CudnnConvolution {
 public:
  CudnnConvolution(const ConvGeometry& g, int out_channels, int capacity);
  ~CudnnConvolution();
  CudnnConvolution(const CudnnConvolution&) = delete;
  CudnnConvolution& operator=(const CudnnConvolution&) = delete;

  void forward(ConstMatrix x, int n, ConstVector w, Matrix y);
  void backward(ConstMatrix x, ConstMatrix dy, int n, ConstVector w, Vector dw, Matrix dx);

 private:
  struct State;  // cudnn.h stays out of this header
  std::unique_ptr<State> state_;
};

}  // namespace trellis::kernels

#endif
