#include "trellis/nn/dropout.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/rng.hpp"
#include "trellis/kernels/vector_ops.hpp"

namespace trellis::nn {

Dropout::Dropout(const std::string& name, int features, int capacity, float p, int logical_features,
                 int column_offset)
    : Layer(name, features, features, capacity), p_(p), name_stream_(stream_from_name(name)) {
  mask_.logical_cols = static_cast<std::uint64_t>(logical_features > 0 ? logical_features : 0);
  mask_.col_offset = static_cast<std::uint64_t>(column_offset);
  if (!(p >= 0.0f && p < 1.0f)) {
    throw ConfigError("dropout \"" + name + "\": probability must be in [0, 1), got " +
                      std::to_string(p));
  }
}

void Dropout::forward(ConstMatrix input, int n, const StepContext& ctx) {
  const ConstMatrix x = begin_forward(input, n);
  active_ = ctx.training && p_ > 0.0f;
  if (!active_) {
    kernels::copy(kernels::flat(x), kernels::flat(output_rows(n)));
    return;
  }
  TRELLIS_REQUIRE(ctx.first_sample >= 0, "dropout: negative first_sample");
  mask_.p = p_;
  mask_.seed = ctx.seed;
  mask_.stream = stream_mix(name_stream_, static_cast<std::uint64_t>(ctx.step));
  mask_.first_row = static_cast<std::uint64_t>(ctx.first_sample);
  kernels::dropout_apply(x, output_rows(n), mask_);
}

void Dropout::backward(ConstMatrix output_grad, int n) {
  const ConstMatrix dy = begin_backward(output_grad, n);
  if (!active_) {
    kernels::copy(kernels::flat(dy), kernels::flat(input_grad_rows(n)));
    return;
  }
  kernels::dropout_apply(dy, input_grad_rows(n), mask_);
}

}  // namespace trellis::nn
