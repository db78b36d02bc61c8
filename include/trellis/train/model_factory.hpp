// Builds the model named by the configuration for a dataset's input and class count.
#pragma once

#include "trellis/nn/mlp.hpp"
#include "trellis/train/train_config.hpp"

#include <cstdint>

namespace trellis {

// capacity: the most rows one forward/backward call will see (max of micro and eval batch).
nn::MlpSpec mlp_spec_from(const ModelConfig& model, std::int64_t input_dim, int classes,
                          std::int64_t capacity);

}  // namespace trellis
