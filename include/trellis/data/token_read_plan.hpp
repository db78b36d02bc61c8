// TokenReadPlan: turns a batch of token windows into HDF5 selections.
//
// A window of `window` consecutive global tokens may cross shard boundaries: it is cut into
// pieces, one per shard it touches (empty shards are skipped). Independent transfer reads
// each piece with its own hyperslab straight to its place in the output.
//
// Collective transfer needs the same H5Dread calls on every rank, so it reads one selection
// per shard: the union of that shard's pieces, merged into sorted runs (windows drawn at
// random overlap; a token shared by two windows is read once). H5Dread fills memory in file
// order, so the runs of shard s land in the slots [slot_begin(s), slot_begin(s+1)) and
// piece_slot(p) says where piece p's tokens start.
//
// All storage is reused between calls: no allocation once a batch shape has been seen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trellis {

struct TokenPiece {
  std::size_t shard;
  std::int64_t first;  // shard-local position of the piece's first token
  std::int64_t count;  // tokens, >= 1
  std::int64_t out;    // offset of its first token in the output [n, window]
};

struct TokenRun {
  std::int64_t first;  // shard-local position
  std::int64_t count;  // >= 1
};

class TokenReadPlan {
 public:
  // shard_begin: [S+1] global position of each shard's first token, then the total.
  // Throws trellis::Error for window < 1 or a window outside [0, total).
  void build(const std::vector<std::int64_t>& starts, int window,
             const std::vector<std::int64_t>& shard_begin);
  const std::vector<TokenPiece>& pieces() const { return pieces_; }  // window by window

  // The union form above; call after build().
  void merge_runs();
  const std::vector<TokenRun>& runs() const { return runs_; }
  std::size_t run_begin(std::size_t shard) const { return run_begin_[shard]; }     // [S+1]
  std::int64_t slot_begin(std::size_t shard) const { return slot_begin_[shard]; }  // [S+1]
  std::int64_t piece_slot(std::size_t piece) const { return piece_slot_[piece]; }

 private:
  std::size_t shard_count_ = 0;
  std::vector<TokenPiece> pieces_;
  std::vector<std::size_t> order_;  // [pieces] piece indices sorted by (shard, first)
  std::vector<TokenRun> runs_;
  std::vector<std::size_t> run_begin_;    // [S+1]
  std::vector<std::int64_t> slot_begin_;  // [S+1]
  std::vector<std::int64_t> piece_slot_;  // [pieces]
};

}  // namespace trellis
