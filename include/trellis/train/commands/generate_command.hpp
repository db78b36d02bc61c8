// `trellis generate`: samples text from a trained language model (weights file of a gpt or
// llama run).
//
// Autoregressive sampling on one rank. The prompt is encoded with the model's tokenizer (the
// BPE tokenizer.json its weights file keeps, else bytes) and prefilled in one pass into
// per-layer key/value caches (nn::Gpt::forward_cached; grouped kv heads stored once); then each
// token costs one row. The next token is drawn from softmax(logits / temperature) restricted
// to the top_k most likely tokens (0 = all); draws come from the counter-based RNG keyed by
// (seed, position), so the same command prints the same text. Once the window (model.seq_len)
// is full the cache restarts from its last half. --no-cache (and int8 models) recompute the
// window of the last seq_len tokens for every token instead, sliding it by one; the two give
// the same tokens while prompt and output fit in the window (tested). Prefill and decode
// tokens/s are reported. Output: the prompt and the decoded continuation (models without a
// tokenizer and a vocabulary above 256 print ids).
//
// --logits FILE: before sampling, the logits of every position of the prompt's window (its last
// model.seq_len bytes), float32 [positions, vocab] in NumPy's .npy format (version 1.0,
// little-endian '<f4', C order): row t is the distribution of the token after prompt byte t.
// What a comparison with another implementation (transformers) reads.
#pragma once

#include "trellis/core/log.hpp"

#include "trellis/train/commands/sharded_model.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>

namespace trellis {

struct GenerateOptions {
  std::string weights;
  std::string prompt;
  std::int64_t tokens = 200;
  double temperature = 1.0;
  int top_k = 0;
  std::uint64_t seed = 0;
  std::string logits;     // "" = none
  bool no_cache = false;  // recompute the window per token (the cache-less reference)
  ModelLayout layout;     // --tp, --zero: a model larger than one rank, on all ranks
};

void generate_command(MPI_Comm world, const GenerateOptions& options, const Logger& log);

}  // namespace trellis
