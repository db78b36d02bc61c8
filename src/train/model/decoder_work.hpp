// The work of one sequence through the decoder family (gpt, llama) for the planner
// (model_work.hpp), private to train/model/.
#pragma once

#include "trellis/nn/gpt.hpp"
#include "trellis/train/model/model_work.hpp"

namespace trellis {

// spec: the whole model's (vocab resolved); tp ranks, sequence parallelism as the layers split.
ModelWork decoder_work(const nn::GptSpec& spec, int tp, bool sequence_parallel);

}  // namespace trellis
