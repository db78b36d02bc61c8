#include "trellis/nn/mlp.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/activation.hpp"
#include "trellis/nn/dropout.hpp"
#include "trellis/nn/linear.hpp"

namespace trellis::nn {

void validate(const MlpSpec& spec) {
  if (spec.input_dim <= 0) throw ConfigError("mlp: input_dim must be positive");
  if (spec.classes <= 0) throw ConfigError("mlp: classes must be positive");
  if (spec.capacity <= 0) throw ConfigError("mlp: capacity (max rows per call) must be positive");
  for (std::size_t i = 0; i < spec.hidden.size(); ++i) {
    if (spec.hidden[i] <= 0) {
      throw ConfigError("mlp: hidden width " + std::to_string(i + 1) + " is " +
                        std::to_string(spec.hidden[i]) + ", must be positive");
    }
  }
  if (spec.activation != "relu" && spec.activation != "gelu") {
    throw ConfigError("mlp: unknown activation \"" + spec.activation +
                      "\" (expected relu or gelu)");
  }
  if (!(spec.dropout >= 0.0f && spec.dropout < 1.0f)) {
    throw ConfigError("mlp: dropout must be in [0, 1), got " + std::to_string(spec.dropout));
  }
  parse_linear_init(spec.init);  // throws ConfigError
}

Mlp::Mlp(const MlpSpec& spec, ParameterStore& store, const std::string& prefix) : spec_(spec) {
  validate(spec);
  const LinearInit init = parse_linear_init(spec.init);
  const int cap = spec.capacity;
  int width = spec.input_dim;
  for (std::size_t i = 0; i < spec.hidden.size(); ++i) {
    const std::string k = std::to_string(i + 1);
    const int out = spec.hidden[i];
    layers_.push_back(std::make_unique<Linear>(store, prefix + "fc" + k, width, out, cap, init));
    if (spec.activation == "relu") {
      layers_.push_back(std::make_unique<Relu>(prefix + "act" + k, out, cap));
    } else {
      layers_.push_back(std::make_unique<Gelu>(prefix + "act" + k, out, cap));
    }
    if (spec.dropout > 0.0f) {
      layers_.push_back(std::make_unique<Dropout>(prefix + "drop" + k, out, cap, spec.dropout));
    }
    width = out;
  }
  layers_.push_back(
      std::make_unique<Linear>(store, prefix + "head", width, spec.classes, cap, init));
}

ConstMatrix Mlp::forward(ConstMatrix input, int n, const StepContext& ctx) {
  ConstMatrix x = input;
  for (auto& layer : layers_) {
    layer->forward(x, n, ctx);
    x = layer->output();  // [capacity, features]; the next layer reads rows [0, n)
  }
  return kernels::first_rows(x, n);
}

void Mlp::backward(ConstMatrix dlogits, int n) {
  ConstMatrix dy = dlogits;
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) {
    (*it)->backward(dy, n);
    dy = (*it)->input_grad();
  }
}

ConstMatrix Mlp::input_grad() const { return layers_.front()->input_grad(); }

std::int64_t Mlp::flops_per_sample() const {
  std::int64_t total = 0;
  for (const auto& layer : layers_) total += layer->flops_per_sample();
  return total;
}

std::string Mlp::describe() const {
  std::string text = "mlp " + std::to_string(spec_.input_dim);
  for (int width : spec_.hidden) text += "-" + std::to_string(width);
  return text + "-" + std::to_string(spec_.classes) + " (" + spec_.activation + ")";
}

}  // namespace trellis::nn
