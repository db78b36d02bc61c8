#include "trellis/kernels/bias.hpp"

#include "trellis/core/kernel_label.hpp"

namespace trellis::kernels {

void bias_add(Matrix y, ConstVector bias) {
  TRELLIS_REQUIRE(bias.extent(0) == y.extent(1),
                  "bias_add: bias " + extents_string(bias) + " for rows " + extents_string(y));
  const std::int64_t cols = static_cast<std::int64_t>(y.extent(1));
  float* yp = y.data();
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::linear::bias_fwd"),
      Range(0, static_cast<std::int64_t>(y.size())),
      KOKKOS_LAMBDA(const std::int64_t i) { yp[i] += bias(i % cols); });
}

void column_sum_accumulate(ConstMatrix dy, Vector grad) {
  TRELLIS_REQUIRE(
      grad.extent(0) == dy.extent(1),
      "column_sum_accumulate: grad " + extents_string(grad) + " for rows " + extents_string(dy));
  const std::int64_t rows = static_cast<std::int64_t>(dy.extent(0));
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::linear::bias_bwd"),
      Range(0, static_cast<std::int64_t>(dy.extent(1))), KOKKOS_LAMBDA(const std::int64_t j) {
        float sum = 0.0f;
        for (std::int64_t r = 0; r < rows; ++r) sum += dy(r, j);
        grad(j) += sum;
      });
}

}  // namespace trellis::kernels
