// Evaluation of a model on an evaluation source, split over data-parallel ranks in contiguous
// blocks; loss and correct-prediction sums are reduced over dp, so every rank gets the global
// result. For language models the loss is per token and accuracy is next-token accuracy.
#pragma once

#include "trellis/parallel/pipeline_engine.hpp"

#include "trellis/comm/mpi_comm.hpp"
#include "trellis/core/log.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/softmax_xent.hpp"
#include "trellis/train/batch_buffers.hpp"
#include "trellis/train/data_source.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>

namespace trellis {

struct EvalResult {
  double loss = 0;           // mean cross-entropy per target (sample or token), in nats
  double accuracy = 0;       // fraction of targets whose argmax is right
  std::int64_t samples = 0;  // samples (images, sequences) evaluated over all ranks
  std::int64_t targets = 0;  // loss terms: samples x rows per sample
  double bits_per_target() const { return loss / 0.6931471805599453; }
};

// batch: samples per forward call, at most the model's and the buffers' capacity. The engine
// runs the forward passes through the pipeline stages (one stage: just the model); collective
// over dp and pp.
EvalResult evaluate_model(PipelineEngine& engine, EvalSource& data, BatchBuffers& buffers,
                          std::int64_t batch, const MpiComm& dp, const MpiComm& pp);

// `trellis eval`: rebuilds the model from the configuration stored in a weights file (an int8
// model's Linears run int8, nn/quantization.hpp), loads the weights and prints loss, accuracy
// and throughput on `data_spec`, all ranks sharing the work. cache_in_memory: each rank reads
// its share into memory first, so the throughput is the model's, not the file system's.
void evaluate_weights_command(MPI_Comm world, const std::string& weights_path,
                              const std::string& data_spec, std::int64_t batch, const Logger& log,
                              bool cache_in_memory = false);

}  // namespace trellis
