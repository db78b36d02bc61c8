#include "trellis/optim/clip.hpp"

#include "host_loops.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/math.hpp"

#include <cmath>
#include <cstring>
#include <string>

namespace trellis {

namespace {
// Kokkos takes labels as std::string; statics avoid building one (and allocating) per call.
const std::string kSumSquaresLabel = "trellis::clip::sum_of_squares";
const std::string kScaleLabel = "trellis::clip::scale";
const std::string kNonfiniteLabel = "trellis::clip::count_nonfinite";
}  // namespace

namespace {

constexpr std::size_t kBlock = 256, kLanes = 8;

#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define TRELLIS_HOST_SUM_OF_SQUARES 1
using Lanes = double __attribute__((vector_size(kLanes * sizeof(double))));
using LaneFloats = float __attribute__((vector_size(kLanes * sizeof(float))));
using LaneBytes = std::uint8_t __attribute__((vector_size(kLanes)));

// The same sums, in the same order, as the kernel below, one block after another on one core:
// the kLanes partial sums are one vector (one AVX-512 register, two AVX2 ones), so each group
// of kLanes gradients is a convert, two multiplies and an add. No FMA contraction: the norm
// stays bit-identical to the device kernel's and to earlier builds'.
TRELLIS_HOST_CLONES __attribute__((optimize("fp-contract=off"))) double host_sum_of_squares(
    const float* __restrict grads, const std::uint8_t* __restrict weights, std::size_t n) {
  double sum = 0.0;
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t end = begin + kBlock < n ? begin + kBlock : n;
    Lanes lane = {};
    std::size_t i = begin;
    for (; i + kLanes <= end; i += kLanes) {
      LaneFloats gf;
      std::memcpy(&gf, grads + i, sizeof gf);
      const Lanes g = __builtin_convertvector(gf, Lanes);
      if (weights != nullptr) {
        LaneBytes wb;
        std::memcpy(&wb, weights + i, sizeof wb);
        lane += g * g * __builtin_convertvector(wb, Lanes);
      } else {
        lane += g * g;
      }
    }
    double partial[kLanes];
    std::memcpy(partial, &lane, sizeof partial);
    for (; i < end; ++i) {
      const double g = grads[i];
      partial[0] += weights != nullptr ? g * g * weights[i] : g * g;
    }
    double block_sum = 0.0;
    for (std::size_t l = 0; l < kLanes; ++l) block_sum += partial[l];
    sum += block_sum;
  }
  return sum;
}
#endif

// weights: [n] 0/1 flags, or empty (all 1). One work item per block of kBlock elements, summed with
// kLanes independent accumulators: a single running double sum is bound by the latency of
// each add (and cannot vectorise, since the compiler may not reorder it). The work items'
// sums are added in block order (the host path above spells that order out).
double weighted_sum_of_squares(ConstFloatView grads, ConstMaskView weights) {
  const std::size_t n = grads.extent(0);
  const bool weighted = weights.extent(0) > 0;
#ifdef TRELLIS_HOST_SUM_OF_SQUARES
  if constexpr (optim_detail::kHostKernels)
    return host_sum_of_squares(grads.data(), weighted ? weights.data() : nullptr, n);
#endif
  const std::size_t blocks = (n + kBlock - 1) / kBlock;
  double sum = 0.0;
  Kokkos::parallel_reduce(
      kSumSquaresLabel, Kokkos::RangePolicy<ExecSpace>(0, blocks),
      KOKKOS_LAMBDA(const std::size_t b, double& acc) {
        const std::size_t begin = b * kBlock;
        const std::size_t end = begin + kBlock < n ? begin + kBlock : n;
        double lane[kLanes] = {};
        std::size_t i = begin;
        for (; i + kLanes <= end; i += kLanes)
          for (std::size_t l = 0; l < kLanes; ++l) {
            const double g = grads(i + l);
            lane[l] += weighted ? g * g * weights(i + l) : g * g;
          }
        for (; i < end; ++i) {
          const double g = grads(i);
          lane[0] += weighted ? g * g * weights(i) : g * g;
        }
        double block_sum = 0.0;
        for (std::size_t l = 0; l < kLanes; ++l) block_sum += lane[l];
        acc += block_sum;
      },
      sum);
  return sum;
}

}  // namespace

double grad_sum_of_squares(ConstFloatView grads) {
  return weighted_sum_of_squares(grads, ConstMaskView());
}

double grad_sum_of_squares(ConstFloatView grads, ConstMaskView mask) {
  TRELLIS_REQUIRE(mask.extent(0) == grads.extent(0),
                  "grad_sum_of_squares: mask of " + std::to_string(mask.extent(0)) + " for " +
                      std::to_string(grads.extent(0)) + " gradients");
  return weighted_sum_of_squares(grads, mask);
}

NormMask::NormMask(ConstMaskView mask) : mask_(mask) {
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), mask);
  for (std::size_t i = 0; i < host.extent(0); ++i) {
    if (host(i) > 1)
      throw Error("NormMask: element " + std::to_string(i) + " is " + std::to_string(host(i)) +
                  ", expected 0 or 1");
    if (host(i) == 0) continue;
    if (runs_.empty() || runs_.back().end != i)
      runs_.push_back(Run{i, i + 1});
    else
      runs_.back().end = i + 1;
  }
}

double NormMask::sum_of_squares(ConstFloatView grads) const {
  TRELLIS_REQUIRE(grads.extent(0) == size(),
                  "NormMask::sum_of_squares: " + std::to_string(grads.extent(0)) +
                      " gradients for a mask of " + std::to_string(size()));
#ifdef TRELLIS_HOST_SUM_OF_SQUARES
  if constexpr (optim_detail::kHostKernels) {
    double sum = 0.0;
    for (const Run& run : runs_)
      sum += host_sum_of_squares(grads.data() + run.begin, nullptr, run.end - run.begin);
    return sum;
  }
#endif
  return weighted_sum_of_squares(grads, mask_);
}

double global_grad_norm(ConstFloatView grads) { return std::sqrt(grad_sum_of_squares(grads)); }

float clip_coefficient(double norm, double max_norm) {
  if (!(max_norm > 0.0) || !std::isfinite(norm)) return 1.0f;
  const double coef = max_norm / (norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

bool clip_to_norm(FloatView grads, double norm, double max_norm) {
  // Not `scale == 1`: a coefficient just below 1 can round to 1.0f and still counts as clipped.
  if (!(max_norm > 0.0) || !std::isfinite(norm) || !(max_norm / (norm + 1e-6) < 1.0)) return false;
  const float scale = clip_coefficient(norm, max_norm);
  Kokkos::parallel_for(
      kScaleLabel, Kokkos::RangePolicy<ExecSpace>(0, grads.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) { grads(i) *= scale; });
  return true;
}

double clip_grad_norm(FloatView grads, double max_norm) {
  const double norm = global_grad_norm(grads);
  clip_to_norm(grads, norm, max_norm);
  return norm;
}

std::int64_t count_nonfinite(ConstFloatView values) {
  std::int64_t count = 0;
  Kokkos::parallel_reduce(
      kNonfiniteLabel, Kokkos::RangePolicy<ExecSpace>(0, values.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i, std::int64_t& acc) {
        if (!math::isfinite(values(i))) ++acc;
      },
      count);
  return count;
}

bool all_finite(ConstFloatView values) { return count_nonfinite(values) == 0; }

}  // namespace trellis
