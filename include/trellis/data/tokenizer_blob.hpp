// The tokenizer a token file carries (tools/text_to_bpe.py writes it) and a weights file keeps
// after it (the trainer copies it from the training data, `trellis import` from a Hugging Face
// folder): the dataset /tokenizer_json, uint8 [bytes], the UTF-8 text of a Hugging Face
// tokenizer.json. Byte-level files have none.
#pragma once

#include <hdf5.h>

#include <string>

namespace trellis {

inline constexpr const char* kTokenizerDataset = "tokenizer_json";

// "" when the file has no tokenizer. Errors (a file that does not open, a dataset of another
// type) are InputError naming the path.
std::string read_tokenizer_json(hid_t file, const std::string& path);
std::string read_tokenizer_json(const std::string& path);

// Writes /tokenizer_json into an open file (nothing for an empty text).
void write_tokenizer_json(hid_t file, const std::string& json);

}  // namespace trellis
