// TokenDataset::read_windows: hyperslab reads of window pieces, then widen to int32 + check.
#include "trellis/data/token_dataset.hpp"

#include <algorithm>

namespace trellis {

namespace {

hid_t memory_type(TokenDType dtype) {
  return dtype == TokenDType::u16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT32;
}

// Selects the single block [first, first + count) of a 1-D dataspace.
void select_block(hid_t space, std::int64_t first, std::int64_t count, H5S_seloper_t op) {
  const hsize_t start = static_cast<hsize_t>(first), one = 1, block = static_cast<hsize_t>(count);
  TRELLIS_H5(H5Sselect_hyperslab(space, op, &start, nullptr, &one, &block));
}

// Returns the index of the first token >= vocab in raw[0..count), or -1; copies as int32.
template <class Raw>
std::int64_t widen_tokens(const Raw* raw, std::int64_t count, std::uint32_t vocab,
                          std::int32_t* out) {
  for (std::int64_t k = 0; k < count; ++k) {
    if (raw[k] >= vocab) return k;
    out[k] = static_cast<std::int32_t>(raw[k]);
  }
  return -1;
}

}  // namespace

void TokenDataset::read_windows(const std::vector<std::int64_t>& starts, int window,
                                std::int32_t* out) {
  plan_.build(starts, window, shard_begin_);  // also checks every window's bounds
  if (cached_) {
    for (std::size_t w = 0; w < starts.size(); ++w) {
      widen(cache_at(starts[w]), starts[w], window, out + static_cast<std::int64_t>(w) * window);
    }
    return;
  }
  if (tuning_.collective_transfer)
    read_collective(out);
  else
    read_independent(out);
}

void TokenDataset::read_independent(std::int32_t* out) {
  const hid_t type = memory_type(spec_.dtype);
  for (const TokenPiece& piece : plan_.pieces()) {
    reserve_scratch(piece.count);
    TokenShard& shard = shards_[piece.shard];
    select_block(shard.space.get(), piece.first, piece.count, H5S_SELECT_SET);
    select_block(memory_.get(), 0, piece.count, H5S_SELECT_SET);
    TRELLIS_H5(H5Dread(shard.data.get(), type, memory_.get(), shard.space.get(), transfer_.get(),
                       raw_at(0)));
    widen(raw_at(0), shard_begin_[piece.shard] + piece.first, piece.count, out + piece.out);
  }
}

void TokenDataset::read_collective(std::int32_t* out) {
  plan_.merge_runs();
  reserve_scratch(plan_.slot_begin(shards_.size()));
  const hid_t type = memory_type(spec_.dtype);
  // Every rank reads every shard, with an empty selection where it has nothing to read, so
  // all ranks make the same H5Dread calls in the same order.
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    TokenShard& shard = shards_[s];
    const std::size_t first_run = plan_.run_begin(s), end_run = plan_.run_begin(s + 1);
    const std::int64_t slots = plan_.slot_begin(s + 1) - plan_.slot_begin(s);
    if (first_run == end_run) {
      TRELLIS_H5(H5Sselect_none(shard.space.get()));
      TRELLIS_H5(H5Sselect_none(memory_.get()));
    } else {
      for (std::size_t r = first_run; r < end_run; ++r) {
        const TokenRun& run = plan_.runs()[r];
        select_block(shard.space.get(), run.first, run.count,
                     r == first_run ? H5S_SELECT_SET : H5S_SELECT_OR);
      }
      select_block(memory_.get(), 0, slots, H5S_SELECT_SET);
    }
    TRELLIS_H5(H5Dread(shard.data.get(), type, memory_.get(), shard.space.get(), transfer_.get(),
                       raw_at(plan_.slot_begin(s))));
  }
  // Tokens are checked only after all reads, so a bad one never leaves other ranks waiting
  // inside a collective H5Dread.
  const std::vector<TokenPiece>& pieces = plan_.pieces();
  for (std::size_t p = 0; p < pieces.size(); ++p) {
    widen(raw_at(plan_.piece_slot(p)), shard_begin_[pieces[p].shard] + pieces[p].first,
          pieces[p].count, out + pieces[p].out);
  }
}

void TokenDataset::reserve_scratch(std::int64_t tokens) {
  // At least one element, so that pointers and the memory space are valid for empty reads.
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(tokens, 1));
  if (spec_.dtype == TokenDType::u16 && raw16_.size() < n) raw16_.resize(n);
  if (spec_.dtype == TokenDType::u32 && raw32_.size() < n) raw32_.resize(n);
  if (memory_extent_ < static_cast<std::int64_t>(n)) {
    const hsize_t extent = n;
    memory_ = H5Space(TRELLIS_H5(H5Screate_simple(1, &extent, nullptr)));
    memory_extent_ = static_cast<std::int64_t>(n);
  }
}

void* TokenDataset::raw_at(std::int64_t offset) {
  const auto at = static_cast<std::size_t>(offset);
  return spec_.dtype == TokenDType::u16 ? static_cast<void*>(raw16_.data() + at)
                                        : static_cast<void*>(raw32_.data() + at);
}

void TokenDataset::widen(const void* raw, std::int64_t first, std::int64_t count,
                         std::int32_t* out) const {
  const auto vocab = static_cast<std::uint32_t>(spec_.vocab_size);
  const std::int64_t bad =
      spec_.dtype == TokenDType::u16
          ? widen_tokens(static_cast<const std::uint16_t*>(raw), count, vocab, out)
          : widen_tokens(static_cast<const std::uint32_t*>(raw), count, vocab, out);
  if (bad < 0) return;
  const std::uint32_t value = spec_.dtype == TokenDType::u16
                                  ? static_cast<const std::uint16_t*>(raw)[bad]
                                  : static_cast<const std::uint32_t*>(raw)[bad];
  bad_token(first + bad, value);
}

void TokenDataset::bad_token(std::int64_t position, std::uint32_t value) const {
  const auto s = static_cast<std::size_t>(
      std::upper_bound(shard_begin_.begin(), shard_begin_.end(), position) - shard_begin_.begin() -
      1);
  throw InputError(shards_[s].path + ": dataset '/tokens': position " +
                   std::to_string(position - shard_begin_[s]) + " (global position " +
                   std::to_string(position) + ") has token " + std::to_string(value) +
                   ", expected a value in [0, vocab_size = " + std::to_string(spec_.vocab_size) +
                   ")");
}

}  // namespace trellis
