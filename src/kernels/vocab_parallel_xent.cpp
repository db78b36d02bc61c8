#include "trellis/kernels/vocab_parallel_xent.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/fast_math.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/core/math.hpp"

#include <string>

namespace trellis::kernels {

void vp_xent_row_max(ConstMatrix logits, Vector row_max) {
  const std::int64_t rows = static_cast<std::int64_t>(logits.extent(0));
  const std::int64_t c = static_cast<std::int64_t>(logits.extent(1));
  TRELLIS_REQUIRE(row_max.extent(0) >= logits.extent(0) && (c > 0 || rows == 0),
                  "vp_xent_row_max: " + extents_string(logits));
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::vpxent::max"), Range(0, rows),
      KOKKOS_LAMBDA(const std::int64_t r) {
        float m = logits(r, 0);
        for (std::int64_t j = 1; j < c; ++j) m = logits(r, j) > m ? logits(r, j) : m;
        row_max(r) = m;
      });
}

void vp_xent_row_stats(ConstMatrix logits, ConstLabels labels, ConstVector row_max,
                       std::int64_t offset, std::int64_t classes, Vector stats) {
  const std::int64_t rows = static_cast<std::int64_t>(logits.extent(0));
  const std::int64_t c = static_cast<std::int64_t>(logits.extent(1));
  TRELLIS_REQUIRE(stats.extent(0) >= 3 * logits.extent(0) && labels.extent(0) >= logits.extent(0),
                  "vp_xent_row_stats: buffers too small for " + extents_string(logits));
  const float none = static_cast<float>(classes);
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::vpxent::stats"), Range(0, rows),
      KOKKOS_LAMBDA(const std::int64_t r) {
        const float m = row_max(r);
        float sum = 0.0f;
        float first = none;
        for (std::int64_t j = 0; j < c; ++j) {
          sum += math::fast_exp(logits(r, j) - m);
          if (first == none && logits(r, j) == m) first = static_cast<float>(offset + j);
        }
        const std::int64_t local = static_cast<std::int64_t>(labels(r)) - offset;
        stats(r) = sum;
        stats(rows + r) = (local >= 0 && local < c) ? logits(r, local) : 0.0f;
        stats(2 * rows + r) = first;
      });
}

XentResult vp_xent_result(ConstLabels labels, ConstVector row_max, ConstVector stats,
                          std::int64_t classes) {
  const std::int64_t rows = static_cast<std::int64_t>(row_max.extent(0));
  double loss_sum = 0.0;
  std::int64_t correct = 0;
  std::int64_t first_bad_row = 0;
  Kokkos::parallel_reduce(
      TRELLIS_KERNEL_LABEL("trellis::vpxent::result"), Range(0, rows),
      KOKKOS_LAMBDA(const std::int64_t r, double& loss, std::int64_t& hits, std::int64_t& bad) {
        const std::int32_t label = labels(r);
        if (label < 0 || label >= classes) {
          if (r < bad) bad = r;
          return;
        }
        loss += static_cast<double>(math::log(stats(r))) + static_cast<double>(row_max(r)) -
                static_cast<double>(stats(rows + r));
        if (static_cast<std::int64_t>(stats(2 * rows + r)) == label) hits += 1;
      },
      loss_sum, correct, Kokkos::Min<std::int64_t>(first_bad_row));
  if (rows > 0 && first_bad_row < rows) throw_bad_label(labels, first_bad_row, classes);
  return XentResult{loss_sum, correct};
}

void vp_xent_backward(ConstMatrix logits, ConstLabels labels, ConstVector row_max,
                      ConstVector stats, std::int64_t offset, float scale, Matrix dlogits) {
  require_same_shape(logits, dlogits, "vp_xent_backward");
  const std::int64_t c = static_cast<std::int64_t>(logits.extent(1));
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::vpxent::bwd"),
      Range(0, static_cast<std::int64_t>(logits.extent(0))), KOKKOS_LAMBDA(const std::int64_t r) {
        const float m = row_max(r);
        const float inv_sum = 1.0f / stats(r);
        const std::int64_t local = static_cast<std::int64_t>(labels(r)) - offset;
        for (std::int64_t j = 0; j < c; ++j) {
          const float p = math::fast_exp(logits(r, j) - m) * inv_sum;
          dlogits(r, j) = (p - (j == local ? 1.0f : 0.0f)) * scale;
        }
      });
}

}  // namespace trellis::kernels
