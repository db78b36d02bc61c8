#include "trellis/kernels/softmax_xent.hpp"

#include "trellis/core/fast_math.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/host_vector.hpp"
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

#if TRELLIS_HOST_VECTORS
// The host bodies: a row is read as 16-float vectors (the last one masked), its maximum, the
// first column holding it and the sum of exp(z - max) kept in registers. Same results as the
// Kokkos kernels up to the order of the additions.
struct RowStats {
  float max, sum;       // max_j z_j, sum_j exp(z_j - max)
  std::int32_t argmax;  // the first j with z_j == max
};

TRELLIS_HOST_INLINE RowStats row_stats(const float* __restrict z, std::int32_t classes) {
  using simd::Floats16;
  const simd::Ints16 lane = simd::lane_index();
  const Floats16 minus_inf = simd::splat(-__builtin_huge_valf());
  Floats16 vmax = minus_inf;
  std::int32_t j = 0;
  for (; j + simd::kWidth <= classes; j += simd::kWidth) vmax = simd::max(vmax, simd::load(z + j));
  float zmax = simd::hmax(vmax);
  for (std::int32_t t = j; t < classes; ++t) zmax = z[t] > zmax ? z[t] : zmax;
  // The first column equal to the maximum: per vector, the smallest lane holding it (16 where
  // none does), until one does.
  std::int32_t argmax = classes;
  const Floats16 lane_f = __builtin_convertvector(lane, Floats16), none = simd::splat(16.0f);
  for (j = 0; j + simd::kWidth <= classes; j += simd::kWidth) {
    const float first = simd::hmin(simd::load(z + j) == zmax ? lane_f : none);
    if (first < 16.0f) {
      argmax = j + static_cast<std::int32_t>(first);
      break;
    }
  }
  for (std::int32_t t = j; t < classes && argmax == classes; ++t)
    if (z[t] == zmax) argmax = t;
  Floats16 vsum = Floats16{};
  for (j = 0; j + simd::kWidth <= classes; j += simd::kWidth)
    vsum += simd::fast_exp(simd::load(z + j) - zmax);
  float sum = simd::hsum(vsum);
  for (std::int32_t t = j; t < classes; ++t) sum += math::fast_exp(z[t] - zmax);
  return RowStats{zmax, sum, argmax};
}

TRELLIS_HOST_CLONES
void xent_forward_host(const float* __restrict logits, std::int64_t ld,
                       const std::int32_t* __restrict labels, std::int64_t rows,
                       std::int32_t classes, double& loss_sum, std::int64_t& correct,
                       std::int64_t& first_bad_row) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int32_t label = labels[r];
    if (label < 0 || label >= classes) {
      first_bad_row = r;
      return;
    }
    const float* z = logits + r * ld;
    const RowStats row = row_stats(z, classes);
    loss_sum += static_cast<double>(math::log(row.sum)) + static_cast<double>(row.max) -
                static_cast<double>(z[label]);
    if (row.argmax == label) correct += 1;
  }
}

TRELLIS_HOST_CLONES
void xent_backward_host(const float* __restrict logits, std::int64_t ld,
                        const std::int32_t* __restrict labels, std::int64_t rows,
                        std::int32_t classes, float scale, float* __restrict dlogits,
                        std::int64_t ld_grad, std::int64_t& first_bad_row) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int32_t label = labels[r];
    if (label < 0 || label >= classes) {
      first_bad_row = r;
      return;
    }
    const float* z = logits + r * ld;
    float* dz = dlogits + r * ld_grad;
    const RowStats row = row_stats(z, classes);
    const float inv_sum = 1.0f / row.sum;
    std::int32_t j = 0;
    for (; j + simd::kWidth <= classes; j += simd::kWidth)
      simd::store(dz + j, simd::fast_exp(simd::load(z + j) - row.max) * (inv_sum * scale));
    for (; j < classes; ++j) dz[j] = math::fast_exp(z[j] - row.max) * inv_sum * scale;
    dz[label] = (math::fast_exp(z[label] - row.max) * inv_sum - 1.0f) * scale;
  }
}

#endif

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
#if TRELLIS_HOST_VECTORS
  if constexpr (kHostKernels) {
    first_bad_row = rows;
    xent_forward_host(logits.data(), static_cast<std::int64_t>(logits.stride(0)), labels.data(),
                      rows, classes, loss_sum, correct, first_bad_row);
    if (first_bad_row < rows) throw_bad_label(labels, first_bad_row, classes);
    return XentResult{loss_sum, correct};
  }
#endif
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
#if TRELLIS_HOST_VECTORS
  if constexpr (kHostKernels) {
    const auto rows = static_cast<std::int64_t>(logits.extent(0));
    std::int64_t first_bad_row = rows;
    xent_backward_host(logits.data(), static_cast<std::int64_t>(logits.stride(0)), labels.data(),
                       rows, classes, scale, dlogits.data(),
                       static_cast<std::int64_t>(dlogits.stride(0)), first_bad_row);
    if (first_bad_row < rows) throw_bad_label(labels, first_bad_row, classes);
    return;
  }
#endif
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
