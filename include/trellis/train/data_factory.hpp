// Opens the training and evaluation sources a configuration names, in the format its model
// needs (labelled samples for mlp/cnn, token streams for gpt). Collective over dp.
#pragma once

#include "trellis/comm/mpi_comm.hpp"
#include "trellis/train/data_source.hpp"
#include "trellis/train/train_config.hpp"

#include <memory>
#include <string>

namespace trellis {

std::unique_ptr<TrainSource> open_train_source(const TrainConfig& config, const MpiComm& dp);
// max_batch: the largest evaluation batch that will be loaded.
std::unique_ptr<EvalSource> open_eval_source(const TrainConfig& config, const std::string& spec,
                                             const MpiComm& dp, std::int64_t max_batch);

}  // namespace trellis
