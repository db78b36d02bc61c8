// Test-only helpers for token streams: a synthetic stream whose every token is a known
// function of its global position, written as shards. Used by tests/unit and tests/mpi.
#pragma once

#include "unit/support/data_helpers.hpp"

#include "trellis/data/token_writer.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis::testing {

// Token at global position i of the synthetic stream. The multiplier is odd and the offset
// large, so every value of a small vocabulary occurs and neighbours differ.
inline std::int32_t token_of(std::int64_t i, std::int64_t vocab_size) {
  return static_cast<std::int32_t>((i * 40503 + 70001) % vocab_size);
}

inline TokenFileSpec token_spec(std::int64_t vocab_size, const std::string& split = "train") {
  TokenFileSpec spec;
  spec.vocab_size = vocab_size;
  spec.dtype = token_dtype_for_vocab(vocab_size);
  spec.tokenizer = vocab_size == 256 ? "bytes" : "synthetic";
  spec.split = split;
  spec.source = "synthetic";
  spec.chunk_tokens = 8;  // small chunks, so windows cross chunk boundaries too
  return spec;
}

// Writes tokens [first, first + n) of the synthetic stream to `path`.
inline void write_token_range(const std::string& path, const TokenFileSpec& spec,
                              std::int64_t first, std::int64_t n) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    tokens[static_cast<std::size_t>(i)] = token_of(first + i, spec.vocab_size);
  }
  write_token_file(path, spec, tokens.data(), n);
}

// Writes the synthetic stream as shards <stem>-i-of-K.h5 with the given token counts (zero
// allowed) and returns the glob that opens them.
inline std::string write_token_stream(const std::string& stem, const TokenFileSpec& spec,
                                      const std::vector<std::int64_t>& counts) {
  std::int64_t first = 0;
  const int k = static_cast<int>(counts.size());
  for (int i = 0; i < k; ++i) {
    write_token_range(shard_file_name(stem, i, k), spec, first,
                      counts[static_cast<std::size_t>(i)]);
    first += counts[static_cast<std::size_t>(i)];
  }
  return stem + "-*.h5";
}

// Counts the tokens of out [starts.size(), window] that differ from the synthetic stream.
inline int wrong_tokens(const std::vector<std::int64_t>& starts, int window,
                        const std::vector<std::int32_t>& out, std::int64_t vocab_size) {
  int wrong = 0;
  for (std::size_t w = 0; w < starts.size(); ++w) {
    for (int k = 0; k < window; ++k) {
      wrong += out[w * static_cast<std::size_t>(window) + static_cast<std::size_t>(k)] !=
               token_of(starts[w] + k, vocab_size);
    }
  }
  return wrong;
}

}  // namespace trellis::testing
