// Final model weights as HDF5 ("trellis.weights", version 1): one float32 dataset per
// parameter, /params/<name>, in its logical shape, one per non-trainable model buffer (BatchNorm
// running statistics), /buffers/<name>, and the resolved configuration (INI text) as the root
// attribute `config`, so `trellis eval` can rebuild the model from the file alone.
//
// Written by one rank into "<path>.tmp" and renamed over <path>, so an interrupted write never
// leaves a half-written file under the final name.
#pragma once

#include "trellis/parallel/logical_tensors.hpp"

#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <string>

namespace trellis {

// params: logical tensors (parallel/logical_tensors.hpp), whatever layout trained them.
void save_weights(const std::string& path, const std::vector<HostTensor>& params,
                  const std::vector<nn::NamedBuffer>& buffers, const std::string& config_ini);

// The `config` attribute of a weights file. Throws InputError naming the file.
std::string read_weights_config(const std::string& path);

// Loads every parameter of `store` (finalized) by name; throws InputError naming the file and
// parameter when one is missing or has another shape.
void load_weights(const std::string& path, nn::ParameterStore& store,
                  const std::vector<nn::NamedBuffer>& buffers);

}  // namespace trellis
