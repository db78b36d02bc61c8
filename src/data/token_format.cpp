#include "trellis/data/token_format.hpp"

namespace trellis {

const char* token_dtype_name(TokenDType dtype) {
  return dtype == TokenDType::u16 ? "uint16" : "uint32";
}

TokenDType token_dtype_for_vocab(std::int64_t vocab_size) {
  return vocab_size <= 65536 ? TokenDType::u16 : TokenDType::u32;
}

}  // namespace trellis
