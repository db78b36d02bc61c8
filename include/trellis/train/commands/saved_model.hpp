// A model saved by a run (model.h5, an exported or an int8 weights file), opened again: the one
// way eval, generate, quantize and export read a weights file.
#pragma once

#include "trellis/data/data_shape.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/quantization.hpp"
#include "trellis/train/config/train_config.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trellis {

struct SavedModel {
  nn::ParameterStore store;
  std::unique_ptr<nn::Model> model;
  std::vector<nn::Int8Layer> int8;  // the file's int8 layers, running int8 (empty: fp32)
};

// The configuration stored in the weights file at `path`, validated like a run's.
TrainConfig saved_config(const std::string& path);

// Builds `config`'s model for `shape` (at most `capacity` samples per call) into `out` and
// loads the weights of `path`; an int8 file's layers run the int8 kernels (nn/quantization.hpp).
// Not collective: each rank reads the file.
void open_saved_model(SavedModel& out, const std::string& path, const TrainConfig& config,
                      const DataShape& shape, std::int64_t capacity);

// Builds `config`'s model for `shape` into `out` with freshly initialised parameters (export
// fills them from another model).
void build_saved_model(SavedModel& out, const TrainConfig& config, const DataShape& shape,
                       std::int64_t capacity);

}  // namespace trellis
