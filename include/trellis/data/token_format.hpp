// Names and value types of the "trellis.tokens" HDF5 format, shared by the reader
// (token_dataset.hpp, which documents the format), the per-file validation (token_shard.hpp)
// and the writer (token_writer.hpp).
#pragma once

#include <cstdint>
#include <string>

namespace trellis {

inline constexpr const char* kTokenFormat = "trellis.tokens";
inline constexpr int kTokenFormatVersion = 1;

// Tokens are handed out as int32, so a vocabulary may not be larger than int32 can index.
inline constexpr std::int64_t kMaxTokenVocab = 2147483647;

// Tokens per HDF5 chunk written by default: 64 Ki tokens = 128 KiB (uint16) or 256 KiB
// (uint32), large enough for efficient file-system reads, small enough that a window read
// does not drag in megabytes it does not need.
inline constexpr std::int64_t kDefaultTokenChunk = 65536;

// Element type of /tokens in the file. Readers always hand out int32.
enum class TokenDType { u16, u32 };
const char* token_dtype_name(TokenDType dtype);  // "uint16", "uint32"

// The narrowest type that holds every token id of a vocabulary (uint16 up to 65536 ids).
TokenDType token_dtype_for_vocab(std::int64_t vocab_size);

// Everything about a token file except its tokens.
struct TokenFileSpec {
  std::int64_t vocab_size = 256;  // token ids are in [0, vocab_size)
  TokenDType dtype = TokenDType::u16;
  std::string tokenizer = "bytes";                 // "bytes": token = byte value, vocab 256
  std::string split = "train";                     // "train" or "val"
  std::string source;                              // optional provenance
  std::int64_t chunk_tokens = kDefaultTokenChunk;  // storage only: tokens per HDF5 chunk
};

}  // namespace trellis
