// A model saved by a run (model.h5, an exported or an int8 weights file), opened again: the one
// way eval, generate, quantize and export read a weights file.
#pragma once

#include "trellis/data/data_shape.hpp"
#include "trellis/int8/quantize_layer.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/train/config/train_config.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trellis {

struct SavedModel {
  nn::ParameterStore store;
  std::unique_ptr<nn::Model> model;   // the int8 form when the file has int8 layers
  std::vector<int8::Int8Layer> int8;  // the file's int8 layers (empty: fp32)
};

// The configuration stored in the weights file at `path`, validated like a run's.
TrainConfig saved_config(const std::string& path);

// Builds `config`'s model for `shape` (at most `capacity` samples per call) into `out` and
// loads the weights of `path`; an int8 file's model is converted to its int8 form
// (int8/int8_model.hpp), which then owns the fp32 one.
// Not collective: each rank reads the file.
void open_saved_model(SavedModel& out, const std::string& path, const TrainConfig& config,
                      const DataShape& shape, std::int64_t capacity);

// Builds `config`'s model for `shape` into `out` with freshly initialised parameters (export
// fills them from another model).
void build_saved_model(SavedModel& out, const TrainConfig& config, const DataShape& shape,
                       std::int64_t capacity);

}  // namespace trellis
