#include "trellis/kernels/activation.hpp"

#include "trellis/core/host_simd.hpp"
#include "trellis/core/kernel_label.hpp"

namespace trellis::kernels {

// Matrices are contiguous row-major, so element-wise kernels run over the flat index: one
// contiguous loop on the host (branch-free selects, so it vectorises), consecutive threads on
// consecutive elements on a device.
namespace {

using Index = std::int64_t;

TRELLIS_HOST_CLONES
void host_relu_forward(const float* __restrict x, float* __restrict y, Index n) {
  for (Index i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
TRELLIS_HOST_CLONES
void host_relu_backward(const float* __restrict x, const float* __restrict dy, float* __restrict dx,
                        Index n) {
  for (Index i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}
TRELLIS_HOST_CLONES
void host_relu_backward_add(const float* __restrict y, const float* __restrict dy,
                            float* __restrict dx, Index n) {
  for (Index i = 0; i < n; ++i) dx[i] += y[i] > 0.0f ? dy[i] : 0.0f;
}
TRELLIS_HOST_CLONES
void host_add_relu_forward(const float* __restrict a, const float* __restrict b,
                           float* __restrict y, Index n) {
  for (Index i = 0; i < n; ++i) {
    const float sum = a[i] + b[i];
    y[i] = sum > 0.0f ? sum : 0.0f;
  }
}
TRELLIS_HOST_CLONES
void host_gelu_forward(const float* __restrict x, float* __restrict y, Index n) {
  for (Index i = 0; i < n; ++i) y[i] = gelu(x[i]);
}
TRELLIS_HOST_CLONES
void host_gelu_backward(const float* __restrict x, const float* __restrict dy, float* __restrict dx,
                        Index n) {
  for (Index i = 0; i < n; ++i) dx[i] = dy[i] * gelu_grad(x[i]);
}

}  // namespace

void relu_forward(ConstMatrix x, Matrix y) {
  require_same_shape(x, y, "relu_forward");
  const float* xp = x.data();
  float* yp = y.data();
  const Index n = static_cast<Index>(x.size());
  if constexpr (kHostKernels) {
    host_relu_forward(xp, yp, n);
  } else {
    Kokkos::parallel_for(
        TRELLIS_KERNEL_LABEL("trellis::relu::fwd"), Range(0, n),
        KOKKOS_LAMBDA(const Index i) { yp[i] = xp[i] > 0.0f ? xp[i] : 0.0f; });
  }
}

void relu_backward(ConstMatrix x, ConstMatrix dy, Matrix dx) {
  require_same_shape(x, dy, "relu_backward");
  require_same_shape(x, dx, "relu_backward");
  const float* xp = x.data();
  const float* dyp = dy.data();
  float* dxp = dx.data();
  const Index n = static_cast<Index>(x.size());
  if constexpr (kHostKernels) {
    host_relu_backward(xp, dyp, dxp, n);
  } else {
    Kokkos::parallel_for(
        TRELLIS_KERNEL_LABEL("trellis::relu::bwd"), Range(0, n),
        KOKKOS_LAMBDA(const Index i) { dxp[i] = xp[i] > 0.0f ? dyp[i] : 0.0f; });
  }
}

void relu_backward_add(ConstMatrix y, ConstMatrix dy, Matrix dx) {
  require_same_shape(y, dy, "relu_backward_add");
  require_same_shape(y, dx, "relu_backward_add");
  const float* yp = y.data();
  const float* dyp = dy.data();
  float* dxp = dx.data();
  const Index n = static_cast<Index>(y.size());
  if constexpr (kHostKernels) {
    host_relu_backward_add(yp, dyp, dxp, n);
  } else {
    Kokkos::parallel_for(
        TRELLIS_KERNEL_LABEL("trellis::relu::bwd_add"), Range(0, n),
        KOKKOS_LAMBDA(const Index i) { dxp[i] += yp[i] > 0.0f ? dyp[i] : 0.0f; });
  }
}

void add_relu_forward(ConstMatrix a, ConstMatrix b, Matrix y) {
  require_same_shape(a, b, "add_relu_forward");
  require_same_shape(a, y, "add_relu_forward");
  const float* ap = a.data();
  const float* bp = b.data();
  float* yp = y.data();
  const Index n = static_cast<Index>(a.size());
  if constexpr (kHostKernels) {
    host_add_relu_forward(ap, bp, yp, n);
  } else {
    Kokkos::parallel_for(
        TRELLIS_KERNEL_LABEL("trellis::add_relu::fwd"), Range(0, n), KOKKOS_LAMBDA(const Index i) {
          const float sum = ap[i] + bp[i];
          yp[i] = sum > 0.0f ? sum : 0.0f;
        });
  }
}

void gelu_forward(ConstMatrix x, Matrix y) {
  require_same_shape(x, y, "gelu_forward");
  const float* xp = x.data();
  float* yp = y.data();
  const Index n = static_cast<Index>(x.size());
  if constexpr (kHostKernels) {
    host_gelu_forward(xp, yp, n);
  } else {
    Kokkos::parallel_for(
        TRELLIS_KERNEL_LABEL("trellis::gelu::fwd"), Range(0, n),
        KOKKOS_LAMBDA(const Index i) { yp[i] = gelu(xp[i]); });
  }
}

void gelu_backward(ConstMatrix x, ConstMatrix dy, Matrix dx) {
  require_same_shape(x, dy, "gelu_backward");
  require_same_shape(x, dx, "gelu_backward");
  const float* xp = x.data();
  const float* dyp = dy.data();
  float* dxp = dx.data();
  const Index n = static_cast<Index>(x.size());
  if constexpr (kHostKernels) {
    host_gelu_backward(xp, dyp, dxp, n);
  } else {
    Kokkos::parallel_for(
        TRELLIS_KERNEL_LABEL("trellis::gelu::bwd"), Range(0, n),
        KOKKOS_LAMBDA(const Index i) { dxp[i] = dyp[i] * gelu_grad(xp[i]); });
  }
}

}  // namespace trellis::kernels
