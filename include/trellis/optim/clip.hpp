// Gradient-norm clipping over the flat gradient buffer, as torch.nn.utils.clip_grad_norm_
// (L2 norm): with coef = max_norm / (norm + 1e-6), gradients are scaled by coef when coef < 1.
//
// Sums of squares accumulate in double. With gradients split over ranks (ZeRO, tp, pp),
// all-reduce grad_sum_of_squares() first, then call clip_to_norm() with the global norm.
#pragma once

#include "trellis/core/kokkos_types.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trellis {

double grad_sum_of_squares(ConstFloatView grads);  // sum of g*g
// sum of g*g*mask: mask [n] is 1 where this rank counts the gradient in the global norm and 0
// where another rank does (parameters replicated over tp) or for padding.
double grad_sum_of_squares(ConstFloatView grads, ConstMaskView mask);
double global_grad_norm(ConstFloatView grads);  // sqrt of the above

// A 0/1 norm mask read once into the runs of 1s it holds (parameters are contiguous in the
// flat buffer, so there are about as many runs as parameters): on the host the sum of squares
// then reads only the counted gradients, not a [n] mask besides (half the memory traffic of
// the per-step norm pass); device builds keep the masked kernel (one launch, no host loop).
// The sum is grad_sum_of_squares(grads, mask) up to rounding: the blocks start at each run.
class NormMask {
 public:
  NormMask() = default;
  // mask: [n] of 0 and 1 (Error for any other value). Setup time only.
  explicit NormMask(ConstMaskView mask);
  std::size_t size() const { return mask_.extent(0); }
  const ConstMaskView& mask() const { return mask_; }
  double sum_of_squares(ConstFloatView grads) const;  // grads [size()]

 private:
  struct Run {
    std::size_t begin = 0, end = 0;
  };
  ConstMaskView mask_;
  std::vector<Run> runs_;  // the [begin, end) ranges where the mask is 1, in order
};

// The factor clip_to_norm() scales gradients by: max_norm / (norm + 1e-6) rounded to float when
// that is below 1, else exactly 1 (also when max_norm <= 0 or norm is not finite). Pass it as
// the optimizer's grad_scale to clip inside the update pass instead of in a pass of its own.
float clip_coefficient(double norm, double max_norm);

// Scales grads by max_norm / (norm + 1e-6) when that is below 1; returns whether it did.
// Does nothing when max_norm <= 0 (clipping off) or norm is not finite: torch would turn
// every gradient into NaN, and the caller skips a non-finite step anyway.
bool clip_to_norm(FloatView grads, double norm, double max_norm);

// Computes the norm, clips as clip_to_norm() and returns the norm before clipping.
double clip_grad_norm(FloatView grads, double max_norm);

std::int64_t count_nonfinite(ConstFloatView values);  // NaN and +-inf elements
bool all_finite(ConstFloatView values);

}  // namespace trellis
