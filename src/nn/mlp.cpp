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

Mlp::Mlp(const MlpSpec& spec, ParameterStore& store, const std::string& prefix)
    : spec_(spec), layers_(store) {
  validate(spec);
  const LinearInit init = parse_linear_init(spec.init);
  const TensorParallel tp = spec.tp;
  const int cap = spec.capacity;
  int width = spec.input_dim;
  bool columns_split = false;  // whether the last layer's output is this rank's column slice
  for (std::size_t i = 0; i < spec.hidden.size(); ++i) {
    const std::string k = std::to_string(i + 1);
    const int out = spec.hidden[i];
    const Split split = columns_split ? Split::row : Split::column;
    Layer& fc = layers_.add(
        std::make_unique<Linear>(store, prefix + "fc" + k, width, out, cap, init, split, tp));
    columns_split = split == Split::column && tp.active();
    const int local = fc.out_features();
    if (spec.activation == "relu") {
      layers_.add(std::make_unique<Relu>(prefix + "act" + k, local, cap));
    } else {
      layers_.add(std::make_unique<Gelu>(prefix + "act" + k, local, cap));
    }
    if (spec.dropout > 0.0f) {
      layers_.add(std::make_unique<Dropout>(prefix + "drop" + k, local, cap, spec.dropout, out,
                                            columns_split ? tp.rank() * local : 0));
    }
    width = out;
  }
  layers_.add(std::make_unique<Linear>(store, prefix + "head", width, spec.classes, cap, init,
                                       columns_split ? Split::row : Split::none, tp));
}

ConstMatrix Mlp::forward(ConstMatrix input, int n, const StepContext& ctx) {
  return kernels::first_rows(layers_.forward(input, n, ctx), n);
}

void Mlp::backward(ConstMatrix dlogits, int n) { layers_.backward(dlogits, n); }

ConstMatrix Mlp::input_grad() const { return layers_[0].input_grad(); }

std::int64_t Mlp::flops_per_sample() const { return layers_.flops_per_sample(); }

std::string Mlp::describe() const {
  std::string text = "mlp " + std::to_string(spec_.input_dim);
  for (int width : spec_.hidden) text += "-" + std::to_string(width);
  return text + "-" + std::to_string(spec_.classes) + " (" + spec_.activation + ")";
}

}  // namespace trellis::nn
