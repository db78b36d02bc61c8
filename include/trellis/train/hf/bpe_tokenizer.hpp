// A Hugging Face byte-level BPE tokenizer (tokenizer.json: GPT-2's scheme, which
// tools/text_to_bpe.py trains and GPT-2 / Llama 3 publish), enough to encode a prompt and
// decode generated ids in `trellis generate`. Training data is tokenised in Python by
// `tokenizers` itself; this is its inverse and its prompt-sized forward.
//
//   decode: id -> the vocabulary's token string -> each character back to its byte (GPT-2's
//           bytes_to_unicode table, 256 printable characters standing for the 256 bytes);
//           added tokens (<|endoftext|>) decode to their text.
//   encode: the text split into pre-tokens by GPT-2's pattern ('s 't 're 've 'm 'll 'd, an
//           optional space and a run of letters, of digits or of other symbols, and runs of
//           whitespace, the last space of a run going to the word after it), each pre-token's
//           bytes mapped to characters and merged pairwise by the merges' ranks (lowest rank
//           first, as BPE was trained). Letters are ASCII letters and every non-ASCII byte
//           (a multi-byte UTF-8 character); a Unicode-aware split differs only around non-ASCII
//           digits and punctuation, where it still yields valid ids that decode to the text.
// Only model type BPE with a ByteLevel pre-tokenizer (or a Sequence ending in one) is taken;
// anything else is an InputError naming the key.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace trellis {

class BpeTokenizer {
 public:
  // The text of a tokenizer.json; `where` names it in errors (InputError, exit 3).
  static BpeTokenizer from_json(const std::string& json, const std::string& where);

  std::vector<std::int32_t> encode(const std::string& text) const;
  std::string decode(const std::vector<std::int32_t>& ids) const;
  std::string decode(std::int32_t id) const { return decode(std::vector<std::int32_t>{id}); }
  int vocab_size() const { return static_cast<int>(id_to_token_.size()); }

 private:
  std::vector<std::string> id_to_token_;                      // the token strings (byte characters)
  std::unordered_map<std::string, std::int32_t> ids_;         // token string -> id
  std::map<std::pair<std::string, std::string>, int> ranks_;  // merge pair -> rank
  std::vector<bool> added_;                                   // ids of added tokens: text as it is
  std::string byte_char_[256];                                // byte -> its character (UTF-8)
  std::unordered_map<std::string, std::uint8_t> char_byte_;

  void bpe(const std::string& piece, std::vector<std::int32_t>& out) const;
};

}  // namespace trellis
