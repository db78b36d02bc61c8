// TokenDataset: a stream of token ids (text for language models) stored in one or more HDF5
// files, read in parallel: every rank opens every shard and reads only its own windows.
//
// ---- File format "trellis.tokens", version 1 (also in docs/data-formats.md)
// ---------------
//
//   /tokens    uint16 (vocab_size <= 65536) or uint32, shape [N], one token id per element,
//              chunked (64 Ki tokens per chunk by default)
//   attributes of the root group:
//     format          string   "trellis.tokens"
//     format_version  integer  1
//     vocab_size      integer  in [1, 2^31 - 1]; every token is in [0, vocab_size)
//     tokenizer       string   how text became tokens, e.g. "bytes" (token = byte value of
//                              the UTF-8 text, vocab_size 256)
//     split           string   "train" or "val"
//     source          string   optional provenance, e.g. "janeaustenr (train); converted by ..."
//
//   One logical stream may be split into K shard files <stem>-00000-of-0000K.h5 ... (see
//   shard_paths.hpp); they are concatenated in name order: global position = tokens in the
//   earlier shards + position in the shard. A window may cross a shard boundary. Shards
//   must agree on dtype, vocab_size, tokenizer and split. Integer attributes may have any
//   width, strings fixed or variable length: files written by plain h5py are accepted.
//
// Every violation throws InputError "<file>: <dataset or attribute>: expected ..., found ...".
// Token values are checked when they are read (a start-up scan of billions of tokens would
// cost more than it catches).
//
// Not thread-safe (one thread per dataset, and HDF5 itself is usually not thread-safe).
#pragma once

#include "trellis/data/hdf5_tuning.hpp"
#include "trellis/data/token_format.hpp"
#include "trellis/data/token_read_plan.hpp"
#include "trellis/data/token_shard.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

class TokenDataset {
 public:
  // Collective over comm: every rank must call open with the same arguments. `spec` is one
  // file or a glob of shards ("data/austen/train-*.h5"); a list is concatenated in order.
  // Throws InputError for missing, unreadable, invalid or disagreeing files, or an empty
  // stream; ConfigError for an unsafe tuning (collective metadata reads without collective
  // transfer).
  static TokenDataset open(const std::string& spec, MPI_Comm comm,
                           const Hdf5Tuning& tuning = Hdf5Tuning{});
  static TokenDataset open(const std::vector<std::string>& specs, MPI_Comm comm,
                           const Hdf5Tuning& tuning = Hdf5Tuning{});

  TokenDataset(TokenDataset&&) noexcept = default;
  TokenDataset& operator=(TokenDataset&&) noexcept = default;
  ~TokenDataset() = default;  // collective over the open communicator (MPI-IO closes together)

  std::int64_t size() const { return shard_begin_.back(); }  // tokens summed over shards
  int vocab_size() const { return static_cast<int>(spec_.vocab_size); }
  const std::string& tokenizer() const { return spec_.tokenizer; }
  const std::string& split() const { return spec_.split; }
  const std::string& source() const { return spec_.source; }  // "" when the file has none
  TokenDType token_dtype() const { return spec_.dtype; }      // as stored; reads give int32
  std::size_t shard_count() const { return shards_.size(); }
  const std::string& shard_path(std::size_t shard) const { return shards_.at(shard).path; }
  std::int64_t shard_begin(std::size_t shard) const { return shard_begin_.at(shard); }

  // out [starts.size(), window] int32: row i holds the global tokens
  // [starts[i], starts[i] + window). Windows may overlap and cross shard boundaries.
  // Independent transfer (default): one H5Dread per window per shard it touches, each a
  // single hyperslab. Collective transfer: a collective call (every rank calls it equally
  // often, an empty starts list is fine) with one H5Dread per shard over the union of the
  // windows' pieces. Scratch is kept, so repeated reads of one shape do not allocate (HDF5
  // itself still may). Throws InputError naming file, position and value for a token
  // >= vocab_size, and Error for window < 1 or a window outside [0, size()).
  void read_windows(const std::vector<std::int64_t>& starts, int window, std::int32_t* out);

  // Reads the whole stream into this rank's memory (one H5Dread per shard; 2 or 4 bytes per
  // token as stored), after which read_windows() copies from memory without HDF5 calls.
  // For streams that fit in RAM many times over (config data.cache = memory). Collective
  // when tuning.collective_transfer is set.
  void cache_in_memory();
  bool cached() const { return cached_; }

 private:
  TokenDataset() = default;
  void read_independent(std::int32_t* out);
  void read_collective(std::int32_t* out);
  void reserve_scratch(std::int64_t tokens);  // grow-only raw buffer + memory space
  void* raw_at(std::int64_t offset);          // into raw16_ or raw32_
  void* cache_at(std::int64_t offset);        // into cache16_ or cache32_
  // Widens count raw tokens (global positions first, first + 1, ...) into out, checking
  // each against vocab_size.
  void widen(const void* raw, std::int64_t first, std::int64_t count, std::int32_t* out) const;
  [[noreturn]] void bad_token(std::int64_t position, std::uint32_t value) const;

  std::vector<TokenShard> shards_;
  std::vector<std::int64_t> shard_begin_{0};  // [S+1] global position of each shard's
                                              // first token, then the total
  TokenFileSpec spec_;                        // the first shard's declaration
  Hdf5Tuning tuning_;
  H5Plist transfer_;  // H5Dread transfer list (independent or collective)

  // Scratch reused by read_windows(): grows to the largest batch seen, never shrinks.
  TokenReadPlan plan_;
  std::vector<std::uint16_t> raw16_;  // [tokens] when dtype is uint16
  std::vector<std::uint32_t> raw32_;  // [tokens] when dtype is uint32
  H5Space memory_;                    // 1-D [memory_extent_], re-selected by every read
  std::int64_t memory_extent_ = 0;

  // After cache_in_memory(): the whole stream in file order, as stored.
  bool cached_ = false;
  std::vector<std::uint16_t> cache16_;  // [size()] when dtype is uint16
  std::vector<std::uint32_t> cache32_;  // [size()] when dtype is uint32
};

}  // namespace trellis
