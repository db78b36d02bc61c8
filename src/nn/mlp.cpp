#include "trellis/nn/mlp.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/dropout.hpp"
#include "trellis/nn/linear.hpp"
#include "trellis/nn/mlp_layer.hpp"

#include <algorithm>

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
  if (spec.activation != "relu" && spec.activation != "gelu" && spec.activation != "gelu_tanh") {
    throw ConfigError("mlp: unknown activation \"" + spec.activation +
                      "\" (expected relu, gelu or gelu_tanh)");
  }
  if (!(spec.dropout >= 0.0f && spec.dropout < 1.0f)) {
    throw ConfigError("mlp: dropout must be in [0, 1), got " + std::to_string(spec.dropout));
  }
  parse_linear_init(spec.init);  // throws ConfigError
  const int units = static_cast<int>(spec.hidden.size()) + 1;
  const int end = spec.stage.end_unit < 0 ? units : spec.stage.end_unit;
  if (spec.stage.first_unit < 0 || spec.stage.first_unit >= end || end > units)
    throw ConfigError("mlp: stage units [" + std::to_string(spec.stage.first_unit) + ", " +
                      std::to_string(end) + ") outside the model's " + std::to_string(units));
}

std::vector<double> mlp_unit_costs(const MlpSpec& spec) {
  std::vector<double> costs;
  int width = spec.input_dim;
  for (int out : spec.hidden) {
    costs.push_back(static_cast<double>(width) * out);
    width = out;
  }
  costs.push_back(static_cast<double>(width) * spec.classes);
  return costs;
}

Mlp::Mlp(const MlpSpec& spec, ParameterStore& store, const std::string& prefix)
    : spec_(spec), prefix_(prefix), layers_(store) {
  validate(spec);
  first_unit_ = spec.stage.first_unit;
  end_unit_ = spec.stage.end_unit < 0 ? num_units(spec) : spec.stage.end_unit;
  RecomputeSpec recompute = spec.recompute;
  if (recompute.mode == Recompute::selective) recompute.mode = Recompute::none;  // no cheap part
  stack_ = std::make_unique<BlockStack>(prefix + "layers", recompute, spec.capacity, &store);
  const LinearInit init = parse_linear_init(spec.init);
  const TensorParallel tp = spec.tp;
  const int cap = spec.capacity;
  int width = spec.input_dim;
  bool columns_split = false;  // whether the last layer's output is this rank's column slice
  for (std::size_t i = 0; i < spec.hidden.size(); ++i) {
    const std::string k = std::to_string(i + 1);
    const int out = spec.hidden[i];
    const Split split = columns_split ? Split::row : Split::column;
    columns_split = split == Split::column && tp.active();
    const int unit = static_cast<int>(i);
    if (unit < first_unit_ || unit >= end_unit_) {  // another pipeline stage's
      width = out;
      continue;
    }
    std::unique_ptr<MlpLayer> layer;
    {  // fc<k> + act<k> as one Linear (bias and activation in the GEMM's epilogue), drop<k>
      const SharedBufferScope shared = stack_->building(stack_->size());
      auto fc =
          std::make_unique<Linear>(store, prefix + "fc" + k, width, out, cap, init, split, tp);
      fc->fuse_activation(spec.activation == "relu"   ? kernels::Activation::relu
                          : spec.activation == "gelu" ? kernels::Activation::gelu
                                                      : kernels::Activation::gelu_tanh);
      no_input_grad_if_data(*fc);
      const int local = fc->out_features();
      std::unique_ptr<Dropout> drop;
      if (spec.dropout > 0.0f)
        drop = std::make_unique<Dropout>(prefix + "drop" + k, local, cap, spec.dropout, out,
                                         columns_split ? tp.rank() * local : 0);
      layer = std::make_unique<MlpLayer>(std::move(fc), std::move(drop));
    }
    stack_->add(*layer);
    layers_.add(std::move(layer));
    width = out;
  }
  stack_->finish();
  if (end_unit_ == num_units(spec)) {
    auto head = std::make_unique<Linear>(store, prefix + "head", width, spec.classes, cap, init,
                                         columns_split ? Split::row : Split::none, tp);
    no_input_grad_if_data(*head);
    layers_.add(std::move(head));
  }
}

void Mlp::no_input_grad_if_data(Linear& fc) const {
  // The model's input is data: nobody reads the first layer's dx unless asked to.
  if (layers_.size() == 0 && first_stage() && !spec_.input_grad) fc.set_input_grad_needed(false);
}

ConstMatrix Mlp::forward(ConstMatrix input, int n, const StepContext& ctx) {
  ConstMatrix x = stack_->forward(input, n, ctx);
  if (layers_.size() > stack_->size())
    x = layers_.forward(x, n, ctx, stack_->size(), layers_.size());
  return kernels::first_rows(x, n);
}

void Mlp::backward(ConstMatrix dlogits, int n) {
  ConstMatrix dy = dlogits;
  if (layers_.size() > stack_->size()) dy = layers_.backward(dy, n, stack_->size(), layers_.size());
  stack_->backward(dy, n, [&](std::size_t i) { layers_.grads_final(i); });
}

ConstMatrix Mlp::input_grad() const {
  if (first_stage() && !spec_.input_grad)
    throw Error("mlp: input_grad() of a first stage built without MlpSpec::input_grad");
  return layers_[0].input_grad();
}

std::vector<PrunableUnits> Mlp::prunable_units() const {
  std::vector<PrunableUnits> units;
  const int hidden = static_cast<int>(spec_.hidden.size());
  for (int unit = first_unit_; unit < std::min(end_unit_, hidden); ++unit) {
    const std::string fc = prefix_ + "fc" + std::to_string(unit + 1);
    PrunableUnits u;
    u.weight = fc + ".weight";
    u.followers = {fc + ".bias"};
    if (unit + 1 < end_unit_)
      u.consumer = unit + 1 < hidden ? prefix_ + "fc" + std::to_string(unit + 2) + ".weight"
                                     : prefix_ + "head.weight";
    units.push_back(std::move(u));
  }
  return units;
}

std::int64_t Mlp::flops_per_sample() const { return layers_.flops_per_sample(); }

std::string Mlp::describe() const {
  std::string text = "mlp " + std::to_string(spec_.input_dim);
  for (int width : spec_.hidden) text += "-" + std::to_string(width);
  text += "-" + std::to_string(spec_.classes) + " (" + spec_.activation + ")";
  if (!first_stage() || !last_stage())
    text += ", units [" + std::to_string(first_unit_) + ", " + std::to_string(end_unit_) + ")";
  return text;
}

}  // namespace trellis::nn
