#include "trellis/kernels/vector_ops.hpp"

#include "trellis/core/kernel_label.hpp"

namespace trellis::kernels {

void fill(Vector x, float value) {
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
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::vec::axpy"), Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i) { y(i) += alpha * x(i); });
}

void copy(ConstVector x, Vector y) {
  require_same_shape(x, y, "copy");
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::vec::copy"), Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i) { y(i) = x(i); });
}

}  // namespace trellis::kernels
