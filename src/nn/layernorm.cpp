#include "trellis/nn/layernorm.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/layernorm.hpp"

#include <string>

namespace trellis::nn {

LayerNorm::LayerNorm(ParameterStore& store, const std::string& name, int d, int capacity_rows,
                     float eps)
    : Layer(name, d, d, capacity_rows), store_(&store), eps_(eps) {
  if (!(eps > 0.0f)) {
    throw Error("layernorm \"" + name + "\": eps must be positive, got " + std::to_string(eps));
  }
  weight_ = store.add(name + ".weight", {d}, InitSpec::constant(1.0), false);
  bias_ = store.add(name + ".bias", {d}, InitSpec::zeros(), false);
  const auto cap = static_cast<std::size_t>(capacity_rows);
  mean_ = FloatView("trellis::nn::" + name + ".mean", cap);
  rstd_ = FloatView("trellis::nn::" + name + ".rstd", cap);
}

void LayerNorm::forward(ConstMatrix input, int n, const StepContext&) {
  const kernels::ConstVector gamma = store_->param_vector(weight_);
  const kernels::ConstVector beta = store_->param_vector(bias_);
  const ConstMatrix x = begin_forward(input, n);
  kernels::layernorm_forward(x, gamma, beta, eps_, output_rows(n), mean_, rstd_);
}

void LayerNorm::backward(ConstMatrix output_grad, int n) {
  const ConstMatrix dy = begin_backward(output_grad, n);
  kernels::layernorm_backward(saved_input(), dy, store_->param_vector(weight_), mean_, rstd_,
                              input_grad_rows(n), store_->grad_vector(weight_),
                              store_->grad_vector(bias_));
}

}  // namespace trellis::nn
