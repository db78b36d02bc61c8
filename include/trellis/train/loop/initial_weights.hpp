// init.weights: a new run (nothing to resume) starts from a weights file's parameters instead
// of a fresh initialisation: fine-tuning a model.h5 or a model `trellis import` read from
// Hugging Face. The file holds whole logical tensors, so the run reads its own pieces of them
// on any tp/pp/dp layout (CheckpointManager::resume_or_start, weights_file.hpp); the optimizer
// state, step and schedule start from zero.
//
// The run's model.* keys must describe the file's model. Compared after each side's "auto"
// options are resolved by its model type (so a Llama imported with explicit options matches
// model.type = llama with the defaults), the keys that decide the parameters' shapes and what
// they mean must be equal (ConfigError naming the key and both values); the others may differ,
// and the run uses its own (fine-tuning with another dropout, rotary base or context length of
// a rotary model):
//   free:  model.dropout, model.init, model.sync_bn, kernels.*, model.norm_eps,
//          model.rope_* and, with rotary positions, model.seq_len
// model.type may differ only between types that read the same keys (gpt and llama).
#pragma once

#include "trellis/train/config/train_config.hpp"

#include <string>
#include <vector>

namespace trellis {

// Checks `stored` (the file's configuration) against `current` (model.vocab resolved:
// derived.vocab) as above; `path` names the file in messages. Returns one line per free key
// that differs, for the log.
std::vector<std::string> check_initial_weights(const TrainConfig& stored,
                                               const TrainConfig& current, const std::string& path);

}  // namespace trellis
