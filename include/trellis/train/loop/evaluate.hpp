// Evaluation of a model on an evaluation source, split over data-parallel ranks in contiguous
// blocks; loss and correct-prediction sums are reduced over dp, so every rank gets the global
// result. For language models the loss is per token and accuracy is next-token accuracy.
#pragma once

#include "trellis/parallel/pipeline_engine.hpp"

#include "trellis/comm/mpi_comm.hpp"
#include "trellis/core/log.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/softmax_xent.hpp"
#include "trellis/train/input/batch_buffers.hpp"
#include "trellis/train/input/data_source.hpp"
#include "trellis/train/monitoring/eval_result.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>

namespace trellis {

// batch: samples read at a time, at most the buffers' capacity; the engine runs them through
// the pipeline stages (one stage: just the model) in pieces of the model's capacity.
// Collective over dp and pp.
EvalResult evaluate_model(PipelineEngine& engine, EvalSource& data, BatchBuffers& buffers,
                          std::int64_t batch, const MpiComm& dp, const MpiComm& pp);

}  // namespace trellis
