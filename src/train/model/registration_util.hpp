// Shared by the model registrations (private to train/model/).
#pragma once

#include "trellis/core/error.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

namespace trellis {

// A size from the data or the batch as the int a model spec holds; ConfigError when it does not
// fit one model call.
inline int spec_int(std::int64_t value, const char* what) {
  if (value < 0 || value > std::numeric_limits<int>::max())
    throw ConfigError(std::string(what) + " = " + std::to_string(value) +
                      " does not fit one model call");
  return static_cast<int>(value);
}

// The builder of a model whose spec splits over tp and pipeline stages: spec_of(model, data,
// capacity) with the build's tp group, stage range and recomputation, then Model(spec, store).
template <class Model, class SpecOf>
std::function<std::unique_ptr<nn::Model>(const ModelBuildArgs&)> split_builder(SpecOf spec_of) {
  return [spec_of](const ModelBuildArgs& a) -> std::unique_ptr<nn::Model> {
    auto spec = spec_of(a.model, a.data, a.capacity);
    spec.tp = a.tp;
    spec.stage = a.stage;
    spec.recompute = a.recompute;
    return std::make_unique<Model>(spec, a.store);
  };
}

// The int8 converter of a model whose int8 form is Int8(fp32 model, store, layers, options).
template <class Fp32, class Int8>
ModelRegistration::Int8Converter int8_converter() {
  return [](std::unique_ptr<nn::Model> fp32, const nn::ParameterStore& store,
            const std::vector<int8::Int8Layer>& layers, const int8::Int8Options& options) {
    return int8::convert_owned<Fp32>(std::move(fp32), [&](Fp32& model) {
      return std::make_unique<Int8>(model, store, layers, options);
    });
  };
}

// FLOPs per sample of a model that counts them itself for the whole logical model.
inline double flops_of_built(const ModelConfig&, const DataShape&, const nn::Model& built) {
  return static_cast<double>(built.flops_per_sample());
}

}  // namespace trellis
