// Writes "trellis.tokens" files (format in token_dataset.hpp) from memory: for tests, for
// tools that generate synthetic streams, and as the C++ twin of tools/text_to_tokens.py.
// Serial (one process writes; others wait at a barrier before reading).
#pragma once

#include "trellis/data/hdf5_tuning.hpp"
#include "trellis/data/token_format.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

// tokens [n], each in [0, spec.vocab_size) and representable in spec.dtype; stored in chunks
// of spec.chunk_tokens. Replaces `path`. Throws Error for a bad spec or token.
void write_token_file(const std::string& path, const TokenFileSpec& spec,
                      const std::int32_t* tokens, std::int64_t n,
                      const Hdf5Tuning& tuning = Hdf5Tuning{});

// Splits the stream into `shards` files <stem>-0000i-of-0000K.h5, shard i holding tokens
// [floor(i*n/K), floor((i+1)*n/K)) (the converter splits the same way). Returns the paths.
std::vector<std::string> write_token_shards(const std::string& stem, int shards,
                                            const TokenFileSpec& spec, const std::int32_t* tokens,
                                            std::int64_t n,
                                            const Hdf5Tuning& tuning = Hdf5Tuning{});

}  // namespace trellis
