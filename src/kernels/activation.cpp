#include "trellis/kernels/activation.hpp"

#include "trellis/core/kernel_label.hpp"

namespace trellis::kernels {

// Matrices are contiguous row-major, so element-wise kernels run over the flat index.

void relu_forward(ConstMatrix x, Matrix y) {
  require_same_shape(x, y, "relu_forward");
  const float* xp = x.data();
  float* yp = y.data();
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::relu::fwd"), Range(0, static_cast<std::int64_t>(x.size())),
      KOKKOS_LAMBDA(const std::int64_t i) { yp[i] = xp[i] > 0.0f ? xp[i] : 0.0f; });
}

void relu_backward(ConstMatrix x, ConstMatrix dy, Matrix dx) {
  require_same_shape(x, dy, "relu_backward");
  require_same_shape(x, dx, "relu_backward");
  const float* xp = x.data();
  const float* dyp = dy.data();
  float* dxp = dx.data();
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::relu::bwd"), Range(0, static_cast<std::int64_t>(x.size())),
      KOKKOS_LAMBDA(const std::int64_t i) { dxp[i] = xp[i] > 0.0f ? dyp[i] : 0.0f; });
}

void gelu_forward(ConstMatrix x, Matrix y) {
  require_same_shape(x, y, "gelu_forward");
  const float* xp = x.data();
  float* yp = y.data();
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::gelu::fwd"), Range(0, static_cast<std::int64_t>(x.size())),
      KOKKOS_LAMBDA(const std::int64_t i) { yp[i] = gelu(xp[i]); });
}

void gelu_backward(ConstMatrix x, ConstMatrix dy, Matrix dx) {
  require_same_shape(x, dy, "gelu_backward");
  require_same_shape(x, dx, "gelu_backward");
  const float* xp = x.data();
  const float* dyp = dy.data();
  float* dxp = dx.data();
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::gelu::bwd"), Range(0, static_cast<std::int64_t>(x.size())),
      KOKKOS_LAMBDA(const std::int64_t i) { dxp[i] = dyp[i] * gelu_grad(xp[i]); });
}

}  // namespace trellis::kernels
