// The gradual pruning schedule of Zhu & Gupta 2017 ("To prune, or not to prune"): sparsity
// rises from s_i to s_f over the steps [t0, t0 + n dt], pruned every dt steps, fast at first
// and slowly at the end, when the network has fewer redundant weights left to lose:
//
//   s_t = s_f + (s_i - s_f) (1 - (t - t0) / (n dt))^3
//
// t counts completed optimizer steps: the masks are recomputed after step t when due(t).
// Before t0 nothing is pruned; after the end the masks stay as they are (and keep applying).
#pragma once

#include <cstdint>

namespace trellis {

struct SparsitySchedule {
  double initial = 0;           // s_i, at start_step
  double final = 0;             // s_f, from end_step on
  std::int64_t start_step = 1;  // t0 >= 1
  std::int64_t end_step = 1;    // t0 + n dt >= t0
  std::int64_t frequency = 1;   // dt >= 1

  // The target sparsity after step t (0 before start_step).
  double target(std::int64_t t) const;
  // Whether the masks are recomputed after step t: t0, t0 + dt, ... up to the end, and the
  // end itself (so s_f is reached even when dt does not divide the span).
  bool due(std::int64_t t) const;
};

}  // namespace trellis
