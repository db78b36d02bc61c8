// Opening and validating one "trellis.tokens" file.
#include "trellis/data/token_shard.hpp"

#include "trellis/data/hdf5_attributes.hpp"

namespace trellis {

namespace {

std::string quoted(const std::string& text) { return "\"" + text + "\""; }

void read_declarations(hid_t file, TokenFileSpec& spec) {
  spec.vocab_size = read_int_attribute(file, "vocab_size");
  if (spec.vocab_size <= 0 || spec.vocab_size > kMaxTokenVocab) {
    throw InputError("attribute 'vocab_size': expected an integer in [1, " +
                     std::to_string(kMaxTokenVocab) + "], found " +
                     std::to_string(spec.vocab_size));
  }
  spec.tokenizer = read_string_attribute(file, "tokenizer");
  if (spec.tokenizer.empty()) {
    throw InputError("attribute 'tokenizer': expected a name (e.g. \"bytes\"), found \"\"");
  }
  spec.split = read_string_attribute(file, "split");
  if (spec.split != "train" && spec.split != "val") {
    throw InputError("attribute 'split': expected \"train\" or \"val\", found " +
                     quoted(spec.split));
  }
  spec.source = has_attribute(file, "source") ? read_string_attribute(file, "source") : "";
  spec.chunk_tokens = 0;  // a storage detail the reader does not need
}

// Opens /tokens and checks rank 1 and an unsigned 16- or 32-bit integer type.
H5Dataset open_tokens(hid_t file, hid_t dapl, TokenShard& shard) {
  if (TRELLIS_H5(H5Lexists(file, "tokens", H5P_DEFAULT)) <= 0) {
    throw InputError("dataset '/tokens' is missing");
  }
  H5Dataset dataset(TRELLIS_H5(H5Dopen2(file, "tokens", dapl)));
  H5Type type(TRELLIS_H5(H5Dget_type(dataset.get())));
  const bool is_unsigned =
      H5Tget_class(type.get()) == H5T_INTEGER && H5Tget_sign(type.get()) == H5T_SGN_NONE;
  const std::size_t bytes = H5Tget_size(type.get());
  if (!is_unsigned || (bytes != 2 && bytes != 4)) {
    throw InputError("dataset '/tokens': expected uint16 or uint32, found " +
                     hdf5_type_name(type.get()));
  }
  shard.spec.dtype = bytes == 2 ? TokenDType::u16 : TokenDType::u32;

  shard.space = H5Space(TRELLIS_H5(H5Dget_space(dataset.get())));
  const int rank = TRELLIS_H5(H5Sget_simple_extent_ndims(shard.space.get()));
  if (rank != 1) {
    throw InputError("dataset '/tokens': expected rank 1 ([N]), found rank " +
                     std::to_string(rank));
  }
  hsize_t n = 0;
  TRELLIS_H5(H5Sget_simple_extent_dims(shard.space.get(), &n, nullptr));
  shard.tokens = static_cast<std::int64_t>(n);
  return dataset;
}

}  // namespace

TokenShard open_token_shard(const std::string& path, hid_t fapl, hid_t dapl) {
  TokenShard shard;
  shard.path = path;
  try {
    const hid_t file_id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl);
    if (file_id < 0) {
      throw InputError("cannot open as HDF5 (not an HDF5 file, or unreadable): " +
                       hdf5_error_detail());
    }
    shard.file = H5File(file_id);
    check_file_format(shard.file.get(), kTokenFormat, kTokenFormatVersion,
                      "convert text with tools/text_to_tokens.py");
    read_declarations(shard.file.get(), shard.spec);
    shard.data = open_tokens(shard.file.get(), dapl, shard);
  } catch (const Error& e) {  // HDF5 failures and format violations alike name the file
    throw InputError(path + ": " + e.what());
  }
  return shard;
}

}  // namespace trellis
