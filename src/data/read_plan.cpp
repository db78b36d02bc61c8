#include "trellis/data/read_plan.hpp"

#include "trellis/core/error.hpp"

#include <algorithm>
#include <string>

namespace trellis {

void ReadPlan::build(const std::vector<std::int64_t>& indices,
                     const std::vector<std::int64_t>& shard_begin) {
  const std::size_t shards = shard_begin.size() - 1;
  const std::int64_t total = shard_begin.back();

  sorted_.clear();
  for (std::size_t p = 0; p < indices.size(); ++p) {
    sorted_.emplace_back(indices[p], static_cast<std::int64_t>(p));
  }
  std::sort(sorted_.begin(), sorted_.end());
  if (!sorted_.empty() && (sorted_.front().first < 0 || sorted_.back().first >= total)) {
    const std::int64_t bad =
        sorted_.front().first < 0 ? sorted_.front().first : sorted_.back().first;
    throw Error("sample index " + std::to_string(bad) + " is outside the dataset [0, " +
                std::to_string(total) + ")");
  }

  runs_.clear();
  run_begin_.assign(shards + 1, 0);
  slot_begin_.assign(shards + 1, 0);
  slot_of_.resize(indices.size());

  std::size_t shard = 0;
  std::int64_t slot = -1, previous = -2;
  for (const auto& [index, position] : sorted_) {
    if (index != previous) {
      ++slot;
      // Shards before this row's shard are complete; later ones start here.
      while (index >= shard_begin[shard + 1]) {
        ++shard;
        run_begin_[shard] = runs_.size();
        slot_begin_[shard] = slot;
      }
      const bool extends = index == previous + 1 && runs_.size() > run_begin_[shard];
      if (extends) {
        ++runs_.back().rows;
      } else {
        runs_.push_back(RowRun{index - shard_begin[shard], 1});
      }
      previous = index;
    }
    slot_of_[static_cast<std::size_t>(position)] = slot;
  }
  unique_rows_ = slot + 1;
  for (std::size_t s = shard + 1; s <= shards; ++s) {
    run_begin_[s] = runs_.size();
    slot_begin_[s] = unique_rows_;
  }
}

}  // namespace trellis
