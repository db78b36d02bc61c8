#include "trellis/kernels/vector_ops.hpp"

#include "trellis/core/host_simd.hpp"
#include "trellis/core/kernel_label.hpp"

#include <algorithm>

namespace trellis::kernels {

namespace {

using Index = std::int64_t;

TRELLIS_HOST_CLONES
void host_axpy(float alpha, const float* __restrict x, float* __restrict y, Index n) {
  for (Index i = 0; i < n; ++i) y[i] += alpha * x[i];
}
// No __restrict: out may alias a or b (each element is read before it is written).
TRELLIS_HOST_CLONES
void host_add(const float* a, const float* b, float* out, Index n) {
  for (Index i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace

void fill(Vector x, float value) {
  if constexpr (kHostKernels) {  // memset for zeros (the per-step gradient reset)
    std::fill_n(x.data(), x.extent(0), value);
    return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::vec::fill"), Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i) { x(i) = value; });
}

void scale(Vector x, float alpha) {
  if (alpha == 0.0f) {
    fill(x, 0.0f);
    return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::vec::scale"), Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i) { x(i) *= alpha; });
}

void axpy(float alpha, ConstVector x, Vector y) {
  require_same_shape(x, y, "axpy");
  if constexpr (kHostKernels) {
    host_axpy(alpha, x.data(), y.data(), static_cast<Index>(x.extent(0)));
    return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::vec::axpy"), Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i) { y(i) += alpha * x(i); });
}

void copy(ConstVector x, Vector y) {
  require_same_shape(x, y, "copy");
  if constexpr (kHostKernels) {
    std::copy(x.data(), x.data() + x.extent(0), y.data());
    return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::vec::copy"), Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i) { y(i) = x(i); });
}

void add(ConstVector a, ConstVector b, Vector out) {
  require_same_shape(a, b, "add");
  require_same_shape(a, out, "add");
  const float* ap = a.data();
  const float* bp = b.data();
  float* op = out.data();
  const Index n = static_cast<Index>(a.extent(0));
  if constexpr (kHostKernels) {
    host_add(ap, bp, op, n);
  } else {
    Kokkos::parallel_for(
        TRELLIS_KERNEL_LABEL("trellis::vec::add"), Range(0, n),
        KOKKOS_LAMBDA(const Index i) { op[i] = ap[i] + bp[i]; });
  }
}

}  // namespace trellis::kernels
