// Dropout: inverted dropout with a counter-based mask (kernels/dropout.hpp).
//
//   x [n, features] -> y [n, features];  y = x * keep / (1 - p),   dx = dy * keep / (1 - p) (=)
// Element (row r, col j) is kept iff
//   random_uniform(ctx.seed, stream_mix(stream_from_name(name), ctx.step),
//                  (ctx.first_sample + r) * features + j) >= p,
// so the mask of a sample depends on its global position in the batch only: the same whether
// the batch runs on one rank or is split over ranks and micro-batches. No mask is stored;
// backward recomputes it from the context its forward saw. Identity when !ctx.training or p == 0.
// Tensor parallelism: a Dropout on columns [column_offset, column_offset + features) of a
// logical_features-wide activation uses j + column_offset and logical_features above.
#pragma once

#include "trellis/kernels/dropout.hpp"
#include "trellis/nn/layer.hpp"

#include <cstdint>
#include <string>

namespace trellis::nn {

class Dropout : public Layer {
 public:
  Dropout(const std::string& name, int features, int capacity, float p, int logical_features = 0,
          int column_offset = 0);
  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;

  float p() const { return p_; }
  // The mask the last forward used (meaningful when it was active).
  const kernels::DropoutMask& mask() const { return mask_; }

 private:
  float p_;
  std::uint64_t name_stream_;  // stream_from_name(name)
  kernels::DropoutMask mask_;  // saved by forward for backward
  bool active_ = false;        // false: last forward was the identity
};

}  // namespace trellis::nn
