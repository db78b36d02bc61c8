// What one sample of a dataset looks like to a model: the shape a model is built for, and the
// shape a model's registration (train/model/model_registry.hpp) sizes its memory and FLOPs by.
#pragma once

#include "trellis/core/shape.hpp"

#include <cstdint>

namespace trellis {

struct DataShape {
  Shape sample_shape;              // classifiers: one sample, e.g. [1, 28, 28]; empty for tokens
  std::int64_t feature_numel = 0;  // classifiers: values per sample; 0 for tokens
  int classes = 0;                 // classes, or the vocabulary size
  std::int64_t seq_len = 0;        // language models: tokens per sample; 0 for classifiers
};

}  // namespace trellis
