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
