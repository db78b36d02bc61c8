// ParameterStore: the autocast compute copy of the parameters (parameter_store.hpp).
#include "trellis/core/error.hpp"
#include "trellis/core/rng.hpp"
#include "trellis/nn/init.hpp"
#include "trellis/nn/parameter_store.hpp"

namespace trellis::nn {

void ParameterStore::set_autocast(const Autocast& autocast, bool stochastic_rounding) {
  if (finalized_) throw Error("ParameterStore::set_autocast() after finalize()");
  autocast_ = autocast;
  stochastic_rounding_ = stochastic_rounding;
}

void ParameterStore::refresh_compute_copy(std::int64_t step) {
  require_finalized("refresh_compute_copy");
  compute_step_ = step;
  if (!autocast_.active()) return;
  if (!stochastic_rounding_ && !params_placed()) {  // padding rounds to zero with the rest
    if (autocast_.native)
      kernels::to_half(autocast_.mode, params_, compute_half_);
    else
      kernels::round_to(autocast_.mode, params_, compute_params_);
    return;
  }
  // Placed: the units' slots are refreshed as they are gathered (refresh_compute_range).
  for (std::size_t i = 0; i < infos_.size(); ++i)
    if (!params_placed() || !in_unit(i)) refresh_param(i);
}

void ParameterStore::refresh_compute_range(std::size_t begin, std::size_t end) {
  require_finalized("refresh_compute_range");
  if (!autocast_.active()) return;
  for (std::size_t i = 0; i < infos_.size(); ++i)
    if (infos_[i].offset >= begin && infos_[i].offset < end) refresh_param(i);
}

void ParameterStore::refresh_param(std::size_t i) {
  const ParamInfo& p = infos_[i];
  const kernels::HalfVector half =
      autocast_.native ? kernels::HalfVector(compute_half_.data() + param_at_[i], p.numel)
                       : kernels::HalfVector();
  if (!stochastic_rounding_) {
    if (autocast_.native)
      kernels::to_half(autocast_.mode, param_window(params_, i), half);
    else
      kernels::round_to(autocast_.mode, param_window(params_, i), param_window(compute_params_, i));
    return;
  }
  const std::uint64_t stream =
      stream_mix(stream_from_name(p.name) ^ 0x5352u, static_cast<std::uint64_t>(compute_step_));
  const kernels::ShardIndexMap map = p.shard.index_map(p.logical_shape);
  if (autocast_.native)
    kernels::to_half_stochastic(autocast_.mode, param_window(params_, i), half, seed_, stream, map);
  else
    kernels::round_stochastic(autocast_.mode, param_window(params_, i),
                              param_window(compute_params_, i), seed_, stream, map);
}

kernels::Vector ParameterStore::compute_vector(std::size_t i) const {
  require_finalized("compute_vector");
  TRELLIS_REQUIRE(!autocast_.native,
                  "ParameterStore::compute_vector: native kernels keep a "
                  "16-bit copy (compute_operand / compute_half)");
  return param_window(autocast_.active() ? compute_params_ : params_, i);
}

Matrix ParameterStore::compute_matrix(std::size_t i) const {
  require_finalized("compute_matrix");
  TRELLIS_REQUIRE(!autocast_.native,
                  "ParameterStore::compute_matrix: native kernels keep a "
                  "16-bit copy (compute_operand / compute_half)");
  return matrix_window(autocast_.active() ? compute_params_ : params_, i);
}

kernels::GemmOperand ParameterStore::compute_operand(std::size_t i) const {
  require_finalized("compute_operand");
  const ParamInfo& p = info(i);
  TRELLIS_REQUIRE(!p.shape.empty() && p.shape[0] > 0,
                  "ParameterStore: \"" + p.name + "\" is not a matrix operand");
  const auto rows = static_cast<std::size_t>(p.shape[0]);
  if (autocast_.native)
    return kernels::GemmOperand::half(compute_half_.data() + param_at_[i], autocast_.mode, rows,
                                      p.numel / rows);
  const FloatView& buffer = autocast_.active() ? compute_params_ : params_;
  return kernels::GemmOperand::of(ConstMatrix(buffer.data() + param_at_[i], rows, p.numel / rows));
}

kernels::ConstHalfVector ParameterStore::compute_half(std::size_t i) const {
  require_finalized("compute_half");
  TRELLIS_REQUIRE(autocast_.native, "ParameterStore::compute_half: no 16-bit copy (not native)");
  return kernels::ConstHalfVector(compute_half_.data() + param_at_[i], info(i).numel);
}

}  // namespace trellis::nn
