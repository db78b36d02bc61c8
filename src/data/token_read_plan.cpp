#include "trellis/data/token_read_plan.hpp"

#include "trellis/core/error.hpp"

#include <algorithm>
#include <string>

namespace trellis {

void TokenReadPlan::build(const std::vector<std::int64_t>& starts, int window,
                          const std::vector<std::int64_t>& shard_begin) {
  if (window < 1) throw Error("token windows need at least 1 token, got " + std::to_string(window));
  shard_count_ = shard_begin.size() - 1;
  const std::int64_t total = shard_begin.back();
  pieces_.clear();
  for (std::size_t w = 0; w < starts.size(); ++w) {
    const std::int64_t start = starts[w];
    if (start < 0 || start > total - window) {
      throw Error("token window [" + std::to_string(start) + ", " + std::to_string(start + window) +
                  ") is outside the stream [0, " + std::to_string(total) + ")");
    }
    // The last shard whose first token is <= start; empty shards share their successor's
    // begin, so upper_bound skips them.
    auto s = static_cast<std::size_t>(
        std::upper_bound(shard_begin.begin(), shard_begin.end(), start) - shard_begin.begin() - 1);
    std::int64_t position = start, out = static_cast<std::int64_t>(w) * window;
    for (std::int64_t left = window; left > 0; ++s) {
      const std::int64_t count = std::min(left, shard_begin[s + 1] - position);
      if (count == 0) continue;  // an empty shard between two others
      pieces_.push_back(TokenPiece{s, position - shard_begin[s], count, out});
      position += count;
      out += count;
      left -= count;
    }
  }
}

void TokenReadPlan::merge_runs() {
  order_.resize(pieces_.size());
  for (std::size_t p = 0; p < order_.size(); ++p) order_[p] = p;
  std::sort(order_.begin(), order_.end(), [this](std::size_t a, std::size_t b) {
    const TokenPiece &x = pieces_[a], &y = pieces_[b];
    return x.shard != y.shard ? x.shard < y.shard : x.first < y.first;
  });
  runs_.clear();
  run_begin_.assign(shard_count_ + 1, 0);
  slot_begin_.assign(shard_count_ + 1, 0);
  piece_slot_.resize(pieces_.size());

  std::int64_t slots = 0;  // slots used by the finished runs
  std::size_t next = 0;    // into order_
  for (std::size_t s = 0; s < shard_count_; ++s) {
    run_begin_[s] = runs_.size();
    slot_begin_[s] = slots;
    for (; next < order_.size() && pieces_[order_[next]].shard == s; ++next) {
      const TokenPiece& piece = pieces_[order_[next]];
      // Overlapping or adjacent pieces extend the current run; the run's slot is fixed at
      // its creation, so offsets from its first token stay valid as it grows.
      if (runs_.size() > run_begin_[s] && piece.first <= runs_.back().first + runs_.back().count) {
        TokenRun& run = runs_.back();
        run.count = std::max(run.count, piece.first + piece.count - run.first);
      } else {
        if (runs_.size() > run_begin_[s]) slots += runs_.back().count;
        runs_.push_back(TokenRun{piece.first, piece.count});
      }
      piece_slot_[order_[next]] = slots + (piece.first - runs_.back().first);
    }
    if (runs_.size() > run_begin_[s]) slots += runs_.back().count;
  }
  run_begin_[shard_count_] = runs_.size();
  slot_begin_[shard_count_] = slots;
}

}  // namespace trellis
