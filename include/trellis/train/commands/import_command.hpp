// `trellis import --hf DIR --out FILE`: a Hugging Face model folder (config.json and
// model.safetensors or its shards with model.safetensors.index.json; F32, F16 or BF16
// tensors, read as float32) as a Trellis weights file (weights_file.hpp), exactly what a
// training run's model.h5 is: its `config` attribute a complete resolved configuration (the
// model.* keys from config.json, model.type gpt for GPT2LMHeadModel and llama for
// LlamaForCausalLM, every other section at its default), so `trellis eval`, `generate`,
// `quantize`, `export` and training with init.weights take it as it is.
//
// The model is built through the model registry on one rank, like any saved model, and its
// parameters are filled by name from the transformers tensors (train/hf/hf_names.hpp). Every
// problem with the folder is an InputError (exit 3) naming the file, and the config.json key
// or the tensor: a model_type or setting Trellis does not compute, a bad safetensors header, a
// tensor of another shape than config.json implies, tensors missing, or tensors left over
// (except buffers transformers itself recomputes, such as rotary_emb.inv_freq: noted).
#pragma once

#include "trellis/core/log.hpp"

#include <mpi.h>

#include <string>

namespace trellis {

struct ImportOptions {
  std::string hf_dir;  // DIR
  std::string out;     // FILE
};

// Collective over world (rank 0 does the work); errors reach every rank.
void import_command(MPI_Comm world, const ImportOptions& options, const Logger& log);

// The work itself, on one rank (not collective): InputError for a bad folder.
void import_hf(const ImportOptions& options, const Logger& log);

}  // namespace trellis
