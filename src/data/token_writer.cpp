#include "trellis/data/token_writer.hpp"

#include "trellis/data/hdf5.hpp"
#include "trellis/data/hdf5_attributes.hpp"
#include "trellis/data/shard_paths.hpp"

#include <algorithm>

namespace trellis {

namespace {

void check_spec(const TokenFileSpec& spec, const std::int32_t* tokens, std::int64_t n) {
  TRELLIS_REQUIRE(spec.vocab_size > 0 && spec.vocab_size <= kMaxTokenVocab,
                  "vocab_size " + std::to_string(spec.vocab_size));
  TRELLIS_REQUIRE(spec.dtype == TokenDType::u32 || spec.vocab_size <= 65536,
                  "uint16 tokens cannot hold a vocabulary of " + std::to_string(spec.vocab_size));
  TRELLIS_REQUIRE(!spec.tokenizer.empty(), "tokenizer name");
  TRELLIS_REQUIRE(spec.split == "train" || spec.split == "val", "split \"" + spec.split + "\"");
  TRELLIS_REQUIRE(spec.chunk_tokens > 0, "chunk_tokens");
  TRELLIS_REQUIRE(n >= 0, "token count");
  for (std::int64_t i = 0; i < n; ++i) {
    TRELLIS_REQUIRE(tokens[i] >= 0 && tokens[i] < spec.vocab_size,
                    "token " + std::to_string(tokens[i]) + " at " + std::to_string(i));
  }
}

}  // namespace

void write_token_file(const std::string& path, const TokenFileSpec& spec,
                      const std::int32_t* tokens, std::int64_t n, const Hdf5Tuning& tuning) {
  hdf5_quiet();
  check_spec(spec, tokens, n);
  H5Plist access = make_serial_file_access(tuning);
  H5File file(TRELLIS_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get())));

  const hsize_t dims = static_cast<hsize_t>(n);
  // A chunk needs an extent >= 1, even for an empty shard.
  const hsize_t chunk =
      static_cast<hsize_t>(std::max<std::int64_t>(1, std::min(spec.chunk_tokens, n)));
  H5Space space(TRELLIS_H5(H5Screate_simple(1, &dims, nullptr)));
  H5Plist create(TRELLIS_H5(H5Pcreate(H5P_DATASET_CREATE)));
  TRELLIS_H5(H5Pset_chunk(create.get(), 1, &chunk));
  const bool u16 = spec.dtype == TokenDType::u16;
  H5Dataset dataset(TRELLIS_H5(H5Dcreate2(file.get(), "tokens", u16 ? H5T_STD_U16LE : H5T_STD_U32LE,
                                          space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT)));
  // HDF5 narrows the checked int32 values to the file type.
  if (n > 0) {
    TRELLIS_H5(H5Dwrite(dataset.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens));
  }

  // Attributes on the root group (a file id stands for its root group).
  write_string_attribute(file.get(), "format", kTokenFormat);
  write_int_attribute(file.get(), "format_version", kTokenFormatVersion);
  write_int_attribute(file.get(), "vocab_size", static_cast<std::int32_t>(spec.vocab_size));
  write_string_attribute(file.get(), "tokenizer", spec.tokenizer);
  write_string_attribute(file.get(), "split", spec.split);
  if (!spec.source.empty()) write_string_attribute(file.get(), "source", spec.source);
}

std::vector<std::string> write_token_shards(const std::string& stem, int shards,
                                            const TokenFileSpec& spec, const std::int32_t* tokens,
                                            std::int64_t n, const Hdf5Tuning& tuning) {
  TRELLIS_REQUIRE(shards >= 1, "shard count");
  std::vector<std::string> paths;
  for (int i = 0; i < shards; ++i) {
    const std::int64_t begin = i * n / shards, end = (i + 1) * n / shards;
    paths.push_back(shard_file_name(stem, i, shards));
    write_token_file(paths.back(), spec, tokens + begin, end - begin, tuning);
  }
  return paths;
}

}  // namespace trellis
