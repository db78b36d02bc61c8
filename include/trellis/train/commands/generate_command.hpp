// `trellis generate`: samples text from a trained language model (weights file of a gpt run).
//
// Autoregressive sampling on one rank: the context is the last model.seq_len tokens, placed
// at the start of the window (causal attention makes the padding after it irrelevant), and the
// next token is drawn from softmax(logits / temperature) restricted to the top_k most likely
// tokens (0 = all). Draws come from the counter-based RNG keyed by (seed, position), so the
// same command prints the same text. Byte-level models (vocab <= 256) print bytes; others
// print token ids.
//
// --logits FILE: before sampling, the logits of every position of the prompt's window (its last
// model.seq_len bytes), float32 [positions, vocab] in NumPy's .npy format (version 1.0,
// little-endian '<f4', C order): row t is the distribution of the token after prompt byte t.
// What a comparison with another implementation (transformers) reads.
#pragma once

#include "trellis/core/log.hpp"

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
  std::string logits;  // "" = none
};

void generate_command(MPI_Comm world, const GenerateOptions& options, const Logger& log);

}  // namespace trellis
