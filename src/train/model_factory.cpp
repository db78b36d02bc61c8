#include "trellis/train/model_factory.hpp"

#include "trellis/core/error.hpp"

#include <limits>

namespace trellis {

nn::MlpSpec mlp_spec_from(const ModelConfig& model, std::int64_t input_dim, int classes,
                          std::int64_t capacity) {
  if (input_dim > std::numeric_limits<int>::max() || capacity > std::numeric_limits<int>::max())
    throw ConfigError("model input or batch too large for one call (input_dim=" +
                      std::to_string(input_dim) + ", capacity=" + std::to_string(capacity) + ")");
  nn::MlpSpec spec;
  spec.input_dim = static_cast<int>(input_dim);
  spec.hidden = model.hidden;
  spec.classes = classes;
  spec.activation = model.activation;
  spec.dropout = model.dropout;
  spec.init = model.init;
  spec.capacity = static_cast<int>(capacity);
  return spec;
}

}  // namespace trellis
