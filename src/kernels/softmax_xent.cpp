#include "trellis/kernels/softmax_xent.hpp"

#include "trellis/core/fast_math.hpp"
#include "trellis/core/kernel_label.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/math.hpp"

#include <climits>
#include <string>

namespace trellis::kernels {

namespace {

void check_labels_extent(const ConstMatrix& logits, const ConstLabels& labels, const char* who) {
  if (labels.extent(0) < logits.extent(0)) {
    throw Error(std::string(who) + ": " + std::to_string(labels.extent(0)) + " labels for " +
                std::to_string(logits.extent(0)) + " rows of logits");
  }
}

}  // namespace

void throw_bad_label(ConstLabels labels, std::int64_t row, std::int64_t classes) {
  std::int32_t value = 0;
  Kokkos::View<std::int32_t, HostSpace> host_value(&value);
  Kokkos::deep_copy(host_value, Kokkos::subview(labels, row));
  throw InputError("softmax cross-entropy: label " + std::to_string(value) + " at row " +
                   std::to_string(row) + " is outside [0, " + std::to_string(classes) + ")");
}

XentResult softmax_xent_forward(ConstMatrix logits, ConstLabels labels) {
  check_labels_extent(logits, labels, "softmax_xent_forward");
  const std::int64_t rows = static_cast<std::int64_t>(logits.extent(0));
  const std::int32_t classes = static_cast<std::int32_t>(logits.extent(1));
  TRELLIS_REQUIRE(classes > 0 || rows == 0, "softmax_xent_forward: logits have 0 classes");

  double loss_sum = 0.0;
  std::int64_t correct = 0;
  std::int64_t first_bad_row = 0;  // reduced with Min; rows if every label is valid
  Kokkos::parallel_reduce(
      TRELLIS_KERNEL_LABEL("trellis::xent::fwd"), Range(0, rows),
      KOKKOS_LAMBDA(const std::int64_t r, double& loss, std::int64_t& hits, std::int64_t& bad) {
        const std::int32_t label = labels(r);
        if (label < 0 || label >= classes) {
          if (r < bad) bad = r;
          return;
        }
        float zmax = logits(r, 0);
        std::int32_t argmax = 0;
        for (std::int32_t j = 1; j < classes; ++j) {
          if (logits(r, j) > zmax) {
            zmax = logits(r, j);
            argmax = j;
          }
        }
        float sum = 0.0f;
        for (std::int32_t j = 0; j < classes; ++j) sum += math::fast_exp(logits(r, j) - zmax);
        loss += static_cast<double>(math::log(sum)) + static_cast<double>(zmax) -
                static_cast<double>(logits(r, label));
        if (argmax == label) hits += 1;
      },
      loss_sum, correct, Kokkos::Min<std::int64_t>(first_bad_row));

  // Min's identity is the largest int64, which is what an all-valid batch leaves behind.
  if (rows > 0 && first_bad_row < rows) throw_bad_label(labels, first_bad_row, classes);
  return XentResult{loss_sum, correct};
}

void softmax_xent_backward(ConstMatrix logits, ConstLabels labels, float scale, Matrix dlogits) {
  require_same_shape(logits, dlogits, "softmax_xent_backward");
  check_labels_extent(logits, labels, "softmax_xent_backward");
  const std::int32_t classes = static_cast<std::int32_t>(logits.extent(1));
  TRELLIS_REQUIRE(classes > 0 || logits.extent(0) == 0, "softmax_xent_backward: 0 classes");
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::xent::bwd"),
      Range(0, static_cast<std::int64_t>(logits.extent(0))), KOKKOS_LAMBDA(const std::int64_t r) {
        float zmax = logits(r, 0);
        for (std::int32_t j = 1; j < classes; ++j) zmax = logits(r, j) > zmax ? logits(r, j) : zmax;
        float sum = 0.0f;
        for (std::int32_t j = 0; j < classes; ++j) sum += math::fast_exp(logits(r, j) - zmax);
        const float inv_sum = 1.0f / sum;
        const std::int32_t label = labels(r);
        for (std::int32_t j = 0; j < classes; ++j) {
          const float p = math::fast_exp(logits(r, j) - zmax) * inv_sum;
          dlogits(r, j) = (p - (j == label ? 1.0f : 0.0f)) * scale;
        }
      });
}

}  // namespace trellis::kernels
