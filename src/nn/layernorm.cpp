#include "trellis/nn/layernorm.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/layernorm.hpp"
#include "trellis/kernels/rmsnorm.hpp"

#include <string>

namespace trellis::nn {

NormKind parse_norm_kind(const std::string& name) {
  if (name == "layernorm") return NormKind::layernorm;
  if (name == "rmsnorm") return NormKind::rmsnorm;
  throw ConfigError("config key model.norm = \"" + name + "\": expected layernorm or rmsnorm");
}

const char* norm_kind_name(NormKind kind) {
  return kind == NormKind::rmsnorm ? "rmsnorm" : "layernorm";
}

LayerNorm::LayerNorm(ParameterStore& store, const std::string& name, int d, int capacity_rows,
                     float eps, NormKind kind, BufferRole output_role)
    : Layer(name, d, d, capacity_rows, OwnBuffers{true, true, output_role}),
      store_(&store),
      kind_(kind),
      eps_(eps) {
  if (!(eps > 0.0f)) {
    throw Error("layernorm \"" + name + "\": eps must be positive, got " + std::to_string(eps));
  }
  weight_ = store.add(name + ".weight", {d}, InitSpec::constant(1.0), false);
  if (kind == NormKind::layernorm) bias_ = store.add(name + ".bias", {d}, InitSpec::zeros(), false);
  const auto cap = static_cast<std::size_t>(capacity_rows);
  if (kind == NormKind::layernorm)
    mean_ = layer_buffer(BufferRole::saved, "trellis::nn::" + name + ".mean", cap);
  rstd_ = layer_buffer(BufferRole::saved, "trellis::nn::" + name + ".rstd", cap);
}

void LayerNorm::forward(ConstMatrix input, int n, const StepContext&) {
  const kernels::ConstVector gamma = store_->param_vector(weight_);
  const ConstMatrix x = begin_forward(input, n);
  if (kind_ == NormKind::rmsnorm) {
    kernels::rmsnorm_forward(x, gamma, eps_, output_rows(n), rstd_);
    return;
  }
  kernels::layernorm_forward(x, gamma, store_->param_vector(*bias_), eps_, output_rows(n), mean_,
                             rstd_);
}

void LayerNorm::backward(ConstMatrix output_grad, int n) {
  const ConstMatrix dy = begin_backward(output_grad, n);
  const kernels::ConstVector gamma = store_->param_vector(weight_);
  if (kind_ == NormKind::rmsnorm) {
    kernels::rmsnorm_backward(saved_input(), dy, gamma, rstd_, input_grad_rows(n),
                              store_->grad_vector(weight_));
    return;
  }
  kernels::layernorm_backward(saved_input(), dy, gamma, mean_, rstd_, input_grad_rows(n),
                              store_->grad_vector(weight_), store_->grad_vector(*bias_));
}

void LayerNorm::forward_quantized(ConstMatrix x, int rows, const kernels::ActivationQuant& q,
                                  kernels::ByteView out) const {
  const ConstMatrix xr = kernels::first_rows(x, rows);
  const kernels::ConstVector gamma = store_->param_vector(weight_);
  if (kind_ == NormKind::rmsnorm) {
    kernels::rmsnorm_forward_quantized(xr, gamma, eps_, q, out);
    return;
  }
  kernels::layernorm_forward_quantized(xr, gamma, store_->param_vector(*bias_), eps_, q, out);
}

}  // namespace trellis::nn
