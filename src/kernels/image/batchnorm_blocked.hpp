// Host bodies of the BatchNorm kernels (kernels/batchnorm.hpp) on channel-blocked rows
// x[i, cb, p, l] (kernels/channel_layout.hpp), for the blocks oneDNN's convolutions use: the B
// channels of a block sit in adjacent floats, so every loop runs over them in vector lanes with
// per-lane coefficients, and a pass reads each element once, contiguously.
//
// Each returns false, doing nothing, for a block it has no body for (the caller then runs the
// general kernel). Shapes: n images of CB channel blocks of `plane` pixels of `block` channels;
// C = CB * block; sums and stats [2C] as in batchnorm.hpp.
#pragma once

#include "trellis/core/kokkos_types.hpp"

#include <cstdint>

namespace trellis::kernels::detail {

// Channel c's input-gradient coefficients: dx = a * dy + b * (x - mean) + d, with
//   training: a = gamma*invstd, b = -a * invstd * S2/N, d = -a * S1/N
//   eval:     a = gamma*invstd, b = d = 0
// computed in double and applied in float on the centred input, in every layout alike.
struct InputGradCoefficients {
  float a, b, d, mean;
};
KOKKOS_INLINE_FUNCTION InputGradCoefficients
input_grad_coefficients(const double* stats, const float* gamma, const double* sums,
                        double inv_count, bool training, std::int64_t c, std::int64_t channels) {
  const double invstd = stats[channels + c];
  const double a = static_cast<double>(gamma[c]) * invstd;
  double b = 0.0, d = 0.0;
  if (training) {
    b = -a * invstd * sums[channels + c] * inv_count;
    d = -a * sums[c] * inv_count;
  }
  return {static_cast<float>(a), static_cast<float>(b), static_cast<float>(d),
          static_cast<float>(stats[c])};
}

struct BlockedShape {
  std::int64_t n = 0, blocks = 0, plane = 0;
  int block = 1;
};

// sums[c] = sum x, sums[C + c] = sum x^2.
bool blocked_sums(const float* x, double* sums, const BlockedShape& s);
// sums[c] = sum dy, sums[C + c] = sum dy * (x - mean) * invstd. relu_output (nullptr: none):
// dy * [relu_output > 0] in place of dy, here and in blocked_backward_input.
bool blocked_backward_sums(const float* x, const float* dy, const float* relu_output,
                           const double* stats, double* sums, const BlockedShape& s);
// y = (x - mean) * (invstd * gamma) + beta; relu: max(y, 0).
bool blocked_normalize(const float* x, const double* stats, const float* gamma, const float* beta,
                       bool relu, float* y, const BlockedShape& s);
// dx = a * dy + b * (x - mean) + d, the coefficients per channel as batchnorm.cpp makes them.
bool blocked_backward_input(const float* x, const float* dy, const float* relu_output,
                            const double* stats, const float* gamma, const double* sums,
                            double inv_count, bool training, float* dx, const BlockedShape& s);

}  // namespace trellis::kernels::detail
