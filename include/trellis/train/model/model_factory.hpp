// Builds the model named by model.type for a dataset's shape, registering its parameters in
// `store` (the caller finalizes it).
#pragma once

#include "trellis/nn/tensor_parallel.hpp"

#include "trellis/comm/mpi_comm.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/input/data_source.hpp"

#include <cstdint>
#include <memory>

namespace trellis {

// capacity: the most samples one forward/backward call will see. dp: the data-parallel
// communicator for layers that synchronise over it (BatchNorm with model.sync_bn), or null.
// tp: the tensor-parallel group (mlp and gpt; ConfigError for other models when active).
std::unique_ptr<nn::Model> build_model(const ModelConfig& model, const DataShape& data,
                                       std::int64_t capacity, nn::ParameterStore& store,
                                       const MpiComm* dp, nn::TensorParallel tp = {},
                                       nn::StageRange stage = {});

// Relative cost of each pipeline unit of the configured model (mlp, gpt); ConfigError naming
// parallel.pp for models that cannot be split.
std::vector<double> model_unit_costs(const ModelConfig& model, const DataShape& data);

}  // namespace trellis
