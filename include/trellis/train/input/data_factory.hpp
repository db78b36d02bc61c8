// Opens the training and evaluation sources a configuration names, in the format its model
// needs (labelled samples for mlp/cnn, token streams for gpt). Collective over dp.
#pragma once

#include "trellis/comm/mpi_comm.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/input/data_source.hpp"

#include <memory>
#include <string>

namespace trellis {

// With data.prefetch > 0 the files are opened for POSIX reads (no MPI), ready for with_prefetch().
std::unique_ptr<TrainSource> open_train_source(const TrainConfig& config, const MpiComm& dp);
// data.prefetch > 0: `source` wrapped in a PrefetchingTrainSource reading up to global step
// end_step into local_capacity-sample buffers; otherwise `source` itself.
std::unique_ptr<TrainSource> with_prefetch(std::unique_ptr<TrainSource> source,
                                           const TrainConfig& config, std::int64_t local_capacity,
                                           std::int64_t end_step);
// max_batch: the largest evaluation batch that will be loaded.
std::unique_ptr<EvalSource> open_eval_source(const TrainConfig& config, const std::string& spec,
                                             const MpiComm& dp, std::int64_t max_batch);

}  // namespace trellis
