// The C++ byte-level BPE tokenizer (train/hf/bpe_tokenizer.hpp) against Hugging Face
// tokenizers: tests/reference/bpe_gpl3_400.json is a 400-token BPE that `tokenizers` 0.23
// trained on the GPL-3 text (tools/text_to_bpe.py's settings), and the expected ids below are
// that library's own encoding of each string (Tokenizer.encode(text, add_special_tokens=False)).
#include "catch.hpp"

#include "trellis/core/error.hpp"
#include "trellis/train/hf/bpe_tokenizer.hpp"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using trellis::BpeTokenizer;

namespace {

std::string reference_json() {
  const std::string here = __FILE__;
  std::ifstream in(here.substr(0, here.rfind("/unit/")) + "/reference/bpe_gpl3_400.json");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("BPE encoding equals Hugging Face tokenizers' and decoding gives the text back",
          "[bpe]") {
  const BpeTokenizer tok = BpeTokenizer::from_json(reference_json(), "bpe_gpl3_400.json");
  CHECK(tok.vocab_size() == 400);
  const std::vector<std::pair<std::string, std::vector<std::int32_t>>> cases = {
      {"It is a truth universally acknowledged",
       {41,  84,  340, 258, 257, 82, 85,  309, 351, 73, 311, 83,
        290, 318, 258, 67,  75,  78, 378, 76,  279, 71, 279}},
      {"  leading spaces and\ttabs\n\nnewlines  ",
       {221, 316, 69, 65, 68,  283, 284, 80, 65, 67, 293, 324, 198,
        84,  65,  66, 83, 199, 199, 78,  69, 87, 76, 263, 293, 270}},
      {"don't can't we'll THEY'RE",
       {68, 262, 7, 84, 265, 289, 7, 84, 273, 69, 7, 382, 333, 40, 37, 57, 7, 50, 37}},
      {"numbers 12345 and symbols #$%^!! (c) 2007",
       {78, 85, 77,  66, 259, 83, 221, 17, 18, 19,  20, 21, 324, 284, 89, 77, 66, 79,
        76, 83, 221, 3,  4,   5,  62,  1,  1,  383, 67, 9,  221, 18,  16, 16, 23}},
      {"Caf\xc3\xa9 na\xc3\xaf"
       "ve \xe2\x80\x94 \xc3\xbcn\xc3\xaf"
       "c\xc3\xb6"
       "d\xc3\xa9",
       {35,  65,  70,  128, 103, 303, 65,  128, 108, 310, 221, 159, 223,
        243, 221, 128, 121, 78,  128, 108, 67,  128, 115, 68,  128, 103}},
      {"end<|endoftext|>Second document",
       {264, 68, 0, 51, 69, 67, 262, 68, 305, 79, 67, 85, 77, 296}},
      {"   ", {320}},
      {"a\n", {65, 199}},
      {"GNU General Public License, version 3",
       {39, 46, 53, 369, 264, 259, 290, 329, 85, 323, 272, 337, 12, 393, 336, 221, 19}}};
  for (const auto& [text, ids] : cases) {
    INFO(text);
    CHECK(tok.encode(text) == ids);
    CHECK(tok.decode(ids) == text);
  }
}

TEST_CASE("tokenizer.json files the tokenizer cannot take are refused by key", "[bpe]") {
  CHECK_THROWS_AS(BpeTokenizer::from_json("{not json", "x.json"), trellis::InputError);
  CHECK_THROWS_WITH(BpeTokenizer::from_json(R"({"model": {"type": "Unigram"}})", "x.json"),
                    Catch::Contains("model.type = Unigram"));
  CHECK_THROWS_WITH(BpeTokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
                                  "pre_tokenizer": {"type": "Metaspace"}})",
                                            "x.json"),
                    Catch::Contains("pre_tokenizer"));
}
