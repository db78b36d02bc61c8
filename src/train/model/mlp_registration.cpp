// model.type = mlp: a multilayer perceptron on labelled samples (nn/mlp.hpp).
#include "registration_util.hpp"
#include "trellis/int8/classifiers.hpp"
#include "trellis/nn/mlp.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <algorithm>
#include <numeric>

namespace trellis {

namespace {

nn::MlpSpec mlp_spec(const ModelConfig& model, const DataShape& data, std::int64_t capacity) {
  if (data.feature_numel <= 0)
    throw ConfigError(
        "config key model.type = mlp needs a labelled-sample dataset (trellis.samples)");
  nn::MlpSpec spec;
  spec.input_dim = spec_int(data.feature_numel, "sample size");
  spec.hidden = model.hidden;
  spec.classes = data.classes;
  spec.activation = model.activation;
  spec.dropout = model.dropout;
  spec.init = model.init;
  spec.capacity = spec_int(capacity, "batch");
  return spec;
}

ModelSizes mlp_sizes(const ModelConfig& model, const DataShape& data, int) {
  ModelSizes s;
  long double in = static_cast<long double>(data.feature_numel);
  for (int width : model.hidden) {
    s.params += in * width + width;
    s.per_sample += 4 * static_cast<long double>(width);  // pre-activation, activation, mask, grad
    in = width;
  }
  s.params += in * data.classes + data.classes;
  s.per_sample +=
      2 * static_cast<long double>(data.classes) + 2 * static_cast<long double>(data.feature_numel);
  s.params_key = "model.hidden";
  s.sample_key = "model.hidden";
  return s;
}

// Per sample, on one of tp ranks: hidden layers pair up column- then row-parallel (nn/mlp.hpp);
// the head is row-parallel after an unpaired column layer. Element-wise: the fused bias and
// activation (2 floats forward, 3 backward per output), the loss (4 per class).
ModelWork mlp_work(const ModelConfig& model, const DataShape& data, int, int tp, bool) {
  ModelWork work;
  double in = static_cast<double>(data.feature_numel);
  const double p = tp;
  for (std::size_t i = 0; i < model.hidden.size(); ++i) {
    const double out = model.hidden[i];
    const bool column = i % 2 == 0;
    UnitWork u;
    u.block = true;
    u.gemms.push_back({1, column ? out / p : out, column ? in : in / p, i > 0});
    u.elementwise_floats = 5 * (column ? out / p : out);
    u.recompute_floats = 2 * (column ? out / p : out);
    // Column layers sum their input gradient over tp in backward, row layers their output in
    // forward.
    if (tp > 1 && column && i > 0) u.tp_collectives.push_back({TpCollective::all_reduce, in, 1, 0});
    if (tp > 1 && !column) u.tp_collectives.push_back({TpCollective::all_reduce, out, 1, 1});
    work.params += in * out + out;
    u.params = (in * out + out) / p;
    u.output_floats = out;
    u.kernels = 6;  // 3 GEMMs, the epilogue and its backward, the bias gradient
    work.units.push_back(u);
    in = out;
  }
  const bool row_head = tp > 1 && model.hidden.size() % 2 == 1;
  UnitWork head;
  head.gemms.push_back(
      {1, static_cast<double>(data.classes), row_head ? in / p : in, !model.hidden.empty()});
  head.elementwise_floats = 4.0 * data.classes;
  head.kernels = 8;
  if (row_head) head.tp_collectives.push_back({TpCollective::all_reduce, 1.0 * data.classes, 1, 1});
  work.params += in * data.classes + data.classes;
  head.params = (row_head ? in / p : in) * data.classes + data.classes;
  work.units.push_back(head);
  return work;
}

}  // namespace

ModelRegistration mlp_registration() {
  ModelRegistration r;
  r.type = ModelType::mlp;
  r.name = "mlp";
  r.config_keys = {"model.hidden", "model.activation", "model.dropout", "model.init"};
  r.data = DataKind::samples;
  r.tensor_parallel = true;
  r.pipeline_parallel = true;
  r.recompute_blocks = true;  // full, per hidden layer or group of them (nn/mlp_layer.hpp)
  r.build = split_builder<nn::Mlp>(mlp_spec);
  r.unit_costs = [](const ModelConfig& model, const DataShape& data) {
    return nn::mlp_unit_costs(mlp_spec(model, data, 1));
  };
  r.validate = [](const ModelConfig&) {};
  // A pipeline stage holds only some layers: the whole model's cost comes from its spec.
  r.flops_per_sample = [](const ModelConfig& model, const DataShape& data, const nn::Model&) {
    const std::vector<double> macs = nn::mlp_unit_costs(mlp_spec(model, data, 1));
    return 6.0 * std::accumulate(macs.begin(), macs.end(), 0.0);
  };
  r.sizes = mlp_sizes;
  r.work = mlp_work;
  r.set_pruned_widths = [](ModelConfig& model, const std::vector<int>& widths) {
    model.hidden = widths;
  };
  r.data_shape_from_weights = [](const ModelConfig& model,
                                 const std::function<Shape(const std::string&)>& shape_of) {
    DataShape shape;
    shape.classes = static_cast<int>(shape_of("head.weight").at(0));
    shape.feature_numel = shape_of(model.hidden.empty() ? "head.weight" : "fc1.weight").at(1);
    shape.sample_shape = {shape.feature_numel};
    return shape;
  };
  r.to_int8 = int8_converter<nn::Mlp, int8::Int8Mlp>();
  return r;
}

}  // namespace trellis
