// TokenDataset::open and read_windows reject bad files with an InputError that names the
// file, the dataset or attribute, and what was expected versus found.
#include "catch.hpp"

#include "unit/support/token_helpers.hpp"

#include "trellis/data/hdf5_attributes.hpp"
#include "trellis/data/token_dataset.hpp"

#include <fstream>
#include <functional>
#include <utility>

using namespace trellis;
using namespace trellis::testing;

namespace {

// The InputError message of `action` (which must throw one), checked for every one of `parts`.
template <class Action>
void expect_input_error(Action&& action, const std::vector<std::string>& parts) {
  try {
    action();
    FAIL("no InputError");
  } catch (const InputError& e) {
    const std::string message = e.what();
    INFO("message: " << message);
    for (const std::string& part : parts) CHECK(message.find(part) != std::string::npos);
    CHECK(e.code() == ExitCode::bad_input);
  }
}

void expect_open_error(const std::string& spec, const std::vector<std::string>& parts) {
  expect_input_error([&] { TokenDataset::open(spec, MPI_COMM_SELF); }, parts);
}

// A valid 20-token file at dir/name, then `edit` breaks it.
std::string broken_file(const std::string& dir, const std::string& name,
                        const std::function<void(hid_t)>& edit) {
  const std::string path = dir + "/" + name;
  write_token_range(path, token_spec(256), 0, 20);
  edit_file(path, edit);
  return path;
}

// Overwrites the token at `position` of /tokens with `value` (in the file's own type).
void poke_token(hid_t file, std::int64_t position, std::uint32_t value) {
  H5Dataset data(TRELLIS_H5(H5Dopen2(file, "tokens", H5P_DEFAULT)));
  H5Space space(TRELLIS_H5(H5Dget_space(data.get())));
  const hsize_t start = static_cast<hsize_t>(position), one = 1;
  TRELLIS_H5(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, &start, nullptr, &one, nullptr));
  H5Space memory(TRELLIS_H5(H5Screate_simple(1, &one, nullptr)));
  TRELLIS_H5(
      H5Dwrite(data.get(), H5T_NATIVE_UINT32, memory.get(), space.get(), H5P_DEFAULT, &value));
}

}  // namespace

TEST_CASE("token files: missing, unmatched and non-HDF5", "[token]") {
  const std::string dir = fresh_test_dir("token_validation_files");
  expect_open_error(dir + "/nope.h5", {dir + "/nope.h5", "no such file"});
  expect_open_error(dir + "/nothing-*.h5", {dir + "/nothing-*.h5", "no files match"});
  std::ofstream(dir + "/text.h5") << "plain text, not tokens\n";
  expect_open_error(dir + "/text.h5", {dir + "/text.h5", "not an HDF5 file"});
  // A sample file is HDF5 but not a token file.
  write_synthetic(dir + "/samples.h5", image_spec(), 0, 4);
  expect_open_error(dir + "/samples.h5",
                    {dir + "/samples.h5", "'format'", "\"trellis.tokens\"", "\"trellis.samples\""});
}

TEST_CASE("token files: bad format attributes", "[token]") {
  const std::string dir = fresh_test_dir("token_validation_attributes");
  using Case = std::pair<std::string, std::function<void(hid_t)>>;
  const std::vector<std::pair<Case, std::vector<std::string>>> cases{
      {{"no_format.h5", [](hid_t f) { TRELLIS_H5(H5Adelete(f, "format")); }},
       {"'format' is missing", "text_to_tokens.py"}},
      {{"version.h5", [](hid_t f) { write_int_attribute(f, "format_version", 2); }},
       {"'format_version'", "expected 1", "found 2"}},
      {{"no_vocab.h5", [](hid_t f) { TRELLIS_H5(H5Adelete(f, "vocab_size")); }},
       {"'vocab_size' is missing"}},
      {{"zero_vocab.h5", [](hid_t f) { write_int_attribute(f, "vocab_size", 0); }},
       {"'vocab_size'", "expected an integer in [1,", "found 0"}},
      {{"text_vocab.h5", [](hid_t f) { write_string_attribute(f, "vocab_size", "256"); }},
       {"'vocab_size'", "expected one integer", "found string"}},
      {{"no_tokenizer.h5", [](hid_t f) { TRELLIS_H5(H5Adelete(f, "tokenizer")); }},
       {"'tokenizer' is missing"}},
      {{"no_split.h5", [](hid_t f) { TRELLIS_H5(H5Adelete(f, "split")); }}, {"'split' is missing"}},
      {{"test_split.h5", [](hid_t f) { write_string_attribute(f, "split", "test"); }},
       {"'split'", "expected \"train\" or \"val\"", "found \"test\""}},
  };
  for (const auto& [c, parts] : cases) {
    const std::string path = broken_file(dir, c.first, c.second);
    std::vector<std::string> all = parts;
    all.push_back(path);
    expect_open_error(path, all);
  }
}

TEST_CASE("token files: missing, mistyped or misshapen /tokens", "[token]") {
  const std::string dir = fresh_test_dir("token_validation_dataset");
  std::string path =
      broken_file(dir, "none.h5", [](hid_t f) { TRELLIS_H5(H5Ldelete(f, "tokens", H5P_DEFAULT)); });
  expect_open_error(path, {path, "'/tokens' is missing"});

  // A named array and plain locals: nvcc's front end mistranslates a structured binding over
  // a braced list of these (H5T_* expand to comma expressions) when it regenerates host code.
  using Case = std::pair<hid_t, const char*>;
  const Case cases[] = {Case{H5T_STD_I32LE, "int32"}, Case{H5T_STD_U8LE, "uint8"},
                        Case{H5T_IEEE_F32LE, "float32"}, Case{H5T_STD_U64LE, "uint64"}};
  for (const Case& c : cases) {
    const hid_t type = c.first;
    const char* const name = c.second;
    path = broken_file(dir, std::string(name) + ".h5",
                       [type](hid_t f) { replace_dataset(f, "tokens", type, {20}); });
    expect_open_error(
        path, {path, "'/tokens'", "expected uint16 or uint32", std::string("found ") + name});
  }
  path = broken_file(dir, "rank2.h5", [](hid_t f) {
    replace_dataset(f, "tokens", H5T_STD_U16LE, {4, 5});
  });
  expect_open_error(path, {path, "'/tokens'", "expected rank 1", "found rank 2"});

  path = dir + "/empty.h5";
  write_token_range(path, token_spec(256), 0, 0);
  expect_open_error(path, {path, "'/tokens'", "at least 1 token", "found 0"});
}

TEST_CASE("token shards must agree", "[token]") {
  const std::string dir = fresh_test_dir("token_validation_shards");
  write_token_range(shard_file_name(dir + "/vocab", 0, 2), token_spec(256), 0, 5);
  write_token_range(shard_file_name(dir + "/vocab", 1, 2), token_spec(300), 5, 5);
  const std::string second = shard_file_name(dir + "/vocab", 1, 2);
  expect_open_error(dir + "/vocab-*.h5", {second, "'vocab_size' 300 differs from 256",
                                          shard_file_name(dir + "/vocab", 0, 2)});

  write_token_range(shard_file_name(dir + "/split", 0, 2), token_spec(256, "train"), 0, 5);
  write_token_range(shard_file_name(dir + "/split", 1, 2), token_spec(256, "val"), 5, 5);
  expect_open_error(dir + "/split-*.h5", {shard_file_name(dir + "/split", 1, 2),
                                          "'split' \"val\" differs from \"train\""});

  TokenFileSpec wide = token_spec(256);
  wide.dtype = TokenDType::u32;
  write_token_range(shard_file_name(dir + "/dtype", 0, 2), token_spec(256), 0, 5);
  write_token_range(shard_file_name(dir + "/dtype", 1, 2), wide, 5, 5);
  expect_open_error(dir + "/dtype-*.h5", {"'/tokens' type uint32 differs from uint16"});

  TokenFileSpec other = token_spec(256);
  other.tokenizer = "gpt2";
  write_token_range(shard_file_name(dir + "/tok", 0, 2), token_spec(256), 0, 5);
  write_token_range(shard_file_name(dir + "/tok", 1, 2), other, 5, 5);
  expect_open_error(dir + "/tok-*.h5", {"'tokenizer' \"gpt2\" differs from \"bytes\""});

  write_token_range(shard_file_name(dir + "/gap", 0, 3), token_spec(256), 0, 5);
  write_token_range(shard_file_name(dir + "/gap", 2, 3), token_spec(256), 5, 5);
  expect_open_error(dir + "/gap-*.h5", {"gap-00001-of-00003.h5", "missing"});
}

TEST_CASE("a token outside the vocabulary is reported with file, position and value", "[token]") {
  const std::string dir = fresh_test_dir("token_validation_values");
  const std::string glob = write_token_stream(dir + "/s", token_spec(256), {10, 10});
  const std::string second = shard_file_name(dir + "/s", 1, 2);
  edit_file(second, [](hid_t f) { poke_token(f, 3, 256); });  // global position 13

  for (int mode = 0; mode < 3; ++mode) {
    INFO("mode " << mode << " (independent, collective, cached)");
    Hdf5Tuning tuning;
    tuning.collective_transfer = mode == 1;
    TokenDataset data = TokenDataset::open(glob, MPI_COMM_SELF, tuning);
    if (mode == 2) data.cache_in_memory();  // caching does not check; reading does
    std::vector<std::int32_t> out(16);
    data.read_windows({0}, 13, out.data());  // stops just before the bad token
    CHECK(wrong_tokens({0}, 13, out, 256) == 0);
    expect_input_error(
        [&] {
          data.read_windows({0, 8}, 8, out.data());
        },
        {second, "'/tokens'", "position 3 (global position 13)", "token 256",
         "[0, vocab_size = 256)"});
  }
}
