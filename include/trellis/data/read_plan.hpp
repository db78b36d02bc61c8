// ReadPlan: turns a batch of global sample indices into as few HDF5 selections as possible.
//
// Indices are sorted, duplicates are read once, and consecutive rows become one run (one
// hyperslab block). Rows land in a "slot" buffer in sorted order, shard after shard, because
// H5Dread fills memory in the file selection's order; slot_of() then says where the sample
// for each requested position sits, so the caller scatters back into the requested order.
// All storage is reused between calls: no allocation once a batch size has been seen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace trellis {

struct RowRun {
  std::int64_t first_row;  // shard-local row
  std::int64_t rows;       // >= 1
};

class ReadPlan {
 public:
  // shard_begin: [S+1] global index of each shard's first row, then the total row count.
  // Throws trellis::Error when an index is outside [0, total).
  void build(const std::vector<std::int64_t>& indices,
             const std::vector<std::int64_t>& shard_begin);

  std::int64_t unique_rows() const { return unique_rows_; }
  const std::vector<RowRun>& runs() const { return runs_; }
  // Runs of shard s are runs()[run_begin(s) .. run_begin(s+1)); their rows fill slots
  // [slot_begin(s), slot_begin(s+1)) in order.
  std::size_t run_begin(std::size_t shard) const { return run_begin_[shard]; }
  std::int64_t slot_begin(std::size_t shard) const { return slot_begin_[shard]; }
  // [n] slot holding the row of indices[p].
  const std::vector<std::int64_t>& slot_of() const { return slot_of_; }

 private:
  std::vector<std::pair<std::int64_t, std::int64_t>> sorted_;  // [n] (index, position)
  std::vector<RowRun> runs_;
  std::vector<std::size_t> run_begin_;    // [S+1]
  std::vector<std::int64_t> slot_begin_;  // [S+1]
  std::vector<std::int64_t> slot_of_;     // [n]
  std::int64_t unique_rows_ = 0;
};

}  // namespace trellis
