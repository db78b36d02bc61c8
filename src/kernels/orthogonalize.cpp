#include "trellis/kernels/orthogonalize.hpp"

#include "trellis/core/kernel_label.hpp"
#include "trellis/core/math.hpp"

namespace trellis::kernels {

namespace {
// A column keeping less than this fraction of its norm after projection counts as dependent.
constexpr double kDependent = 1e-3;
}  // namespace

void orthonormalize_columns(Matrix p) {
  const auto n = static_cast<std::int64_t>(p.extent(0));
  const auto r = static_cast<std::int64_t>(p.extent(1));
  const auto squared_norm = [&](std::int64_t j) {
    double squares = 0;
    Kokkos::parallel_reduce(
        TRELLIS_KERNEL_LABEL("trellis::orthogonalize::norm"), Range(0, n),
        KOKKOS_LAMBDA(const std::int64_t i, double& sum) {
          sum += static_cast<double>(p(i, j)) * static_cast<double>(p(i, j));
        },
        squares);
    return squares;
  };
  for (std::int64_t j = 0; j < r; ++j) {
    const double before = squared_norm(j);
    // Projected out twice ("twice is enough", Giraud et al. 2005): one pass of Gram-Schmidt in
    // fp32 leaves errors growing with P's condition number.
    for (int pass = 0; pass < 2; ++pass) {
      for (std::int64_t k = 0; k < j; ++k) {
        double dot = 0;
        Kokkos::parallel_reduce(
            TRELLIS_KERNEL_LABEL("trellis::orthogonalize::dot"), Range(0, n),
            KOKKOS_LAMBDA(const std::int64_t i, double& sum) {
              sum += static_cast<double>(p(i, k)) * static_cast<double>(p(i, j));
            },
            dot);
        const auto d = static_cast<float>(dot);
        Kokkos::parallel_for(
            TRELLIS_KERNEL_LABEL("trellis::orthogonalize::project"), Range(0, n),
            KOKKOS_LAMBDA(const std::int64_t i) { p(i, j) -= d * p(i, k); });
      }
    }
    const double squares = squared_norm(j);
    // What is left of a column (nearly) in the span of the earlier ones is rounding noise:
    // normalised, it would be a direction of no meaning, far from orthogonal. Drop it.
    const bool dependent = squares <= kDependent * kDependent * before;
    const auto inverse = dependent ? 0.0f : static_cast<float>(1.0 / (math::sqrt(squares) + 1e-8));
    Kokkos::parallel_for(
        TRELLIS_KERNEL_LABEL("trellis::orthogonalize::scale"), Range(0, n),
        KOKKOS_LAMBDA(const std::int64_t i) { p(i, j) *= inverse; });
  }
}

}  // namespace trellis::kernels
