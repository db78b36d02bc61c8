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
// capacity) with the build's tp group and stage range, then Model(spec, store).
template <class Model, class SpecOf>
std::function<std::unique_ptr<nn::Model>(const ModelBuildArgs&)> split_builder(SpecOf spec_of) {
  return [spec_of](const ModelBuildArgs& a) -> std::unique_ptr<nn::Model> {
    auto spec = spec_of(a.model, a.data, a.capacity);
    spec.tp = a.tp;
    spec.stage = a.stage;
    return std::make_unique<Model>(spec, a.store);
  };
}

// FLOPs per sample of a model that counts them itself for the whole logical model.
inline double flops_of_built(const ModelConfig&, const DataShape&, const nn::Model& built) {
  return static_cast<double>(built.flops_per_sample());
}

}  // namespace trellis
