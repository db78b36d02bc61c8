// TokenDataset: opening the shards and checking that they agree. Reading lives in
// token_dataset_read.cpp.
#include "trellis/data/token_dataset.hpp"

#include "trellis/data/shard_paths.hpp"

namespace trellis {

namespace {

// A later shard's declaration must equal the first one's.
void check_same(const TokenShard& first, const TokenShard& other) {
  auto differs = [&](const std::string& what, const std::string& found,
                     const std::string& expected) {
    throw InputError(other.path + ": " + what + " " + found + " differs from " + expected + " in " +
                     first.path + " (all shards of a token stream must agree)");
  };
  const TokenFileSpec &a = other.spec, &b = first.spec;
  if (a.dtype != b.dtype) {
    differs("dataset '/tokens' type", token_dtype_name(a.dtype), token_dtype_name(b.dtype));
  }
  if (a.vocab_size != b.vocab_size) {
    differs("attribute 'vocab_size'", std::to_string(a.vocab_size), std::to_string(b.vocab_size));
  }
  if (a.tokenizer != b.tokenizer) {
    differs("attribute 'tokenizer'", "\"" + a.tokenizer + "\"", "\"" + b.tokenizer + "\"");
  }
  if (a.split != b.split)
    differs("attribute 'split'", "\"" + a.split + "\"", "\"" + b.split + "\"");
}

}  // namespace

TokenDataset TokenDataset::open(const std::string& spec, MPI_Comm comm, const Hdf5Tuning& tuning) {
  return open(std::vector<std::string>{spec}, comm, tuning);
}

TokenDataset TokenDataset::open(const std::vector<std::string>& specs, MPI_Comm comm,
                                const Hdf5Tuning& tuning) {
  check_tuning(tuning);
  hdf5_quiet();
  const std::vector<std::string> paths = resolve_data_files(specs, comm);

  TokenDataset data;
  data.tuning_ = tuning;
  H5Plist fapl = make_parallel_file_access(comm, tuning);
  H5Plist dapl = make_dataset_access(tuning);
  data.transfer_ = make_transfer(tuning);
  for (const std::string& path : paths) {
    data.shards_.push_back(open_token_shard(path, fapl.get(), dapl.get()));
    if (data.shards_.size() > 1) check_same(data.shards_.front(), data.shards_.back());
    data.shard_begin_.push_back(data.shard_begin_.back() + data.shards_.back().tokens);
  }
  if (data.size() == 0) {
    throw InputError(
        paths.front() + ": dataset '/tokens': expected at least 1 token, found 0" +
        (paths.size() > 1 ? " in all " + std::to_string(paths.size()) + " shards" : ""));
  }
  data.spec_ = data.shards_.front().spec;
  return data;
}

void TokenDataset::cache_in_memory() {
  if (cached_) return;
  const bool u16 = spec_.dtype == TokenDType::u16;
  const auto n = static_cast<std::size_t>(size());
  if (u16)
    cache16_.assign(n, 0);
  else
    cache32_.assign(n, 0);
  // One whole-shard read each, straight to the shard's place in the stream. Every rank
  // reads every shard, empty ones too, so collective transfer sees the same calls everywhere.
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    const TokenShard& shard = shards_[s];
    if (shard.tokens == 0 && !tuning_.collective_transfer) continue;
    TRELLIS_H5(H5Dread(shard.data.get(), u16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT32, H5S_ALL,
                       H5S_ALL, transfer_.get(), cache_at(shard_begin_[s])));
  }
  cached_ = true;
}

void* TokenDataset::cache_at(std::int64_t offset) {
  const auto at = static_cast<std::size_t>(offset);
  return spec_.dtype == TokenDType::u16 ? static_cast<void*>(cache16_.data() + at)
                                        : static_cast<void*>(cache32_.data() + at);
}

}  // namespace trellis
