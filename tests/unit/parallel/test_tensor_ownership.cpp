// The one ownership rule (parallel/tensor_ownership.hpp): every distinct piece of a logical
// tensor has exactly one owner among the ranks that hold it, for every layout.
#include "trellis/comm/grid_layout.hpp"
#include "trellis/parallel/tensor_ownership.hpp"

#include "catch.hpp"

using namespace trellis;

namespace {

// Owners of one tensor on a dp x tp grid (one pipeline stage): for each tp piece (or the one
// replicated piece), how many ranks own it.
std::vector<int> owners_per_piece(int dp, int tp, bool sharded, DpCopies copies) {
  std::vector<int> owners(sharded ? static_cast<std::size_t>(tp) : 1u, 0);
  for (int d = 0; d < dp; ++d)
    for (int t = 0; t < tp; ++t) {
      GridCoords at;
      at.dp = d;
      at.tp = t;
      if (owns_piece(sharded, false, copies, at))
        ++owners[sharded ? static_cast<std::size_t>(t) : 0];
    }
  return owners;
}

}  // namespace

TEST_CASE("owns_piece: one writer per distinct piece over dp and tp", "[ownership]") {
  for (int dp : {1, 2, 4})
    for (int tp : {1, 2, 4}) {
      for (int n : owners_per_piece(dp, tp, true, DpCopies::identical)) CHECK(n == 1);
      for (int n : owners_per_piece(dp, tp, false, DpCopies::identical)) CHECK(n == 1);
      // Counted per dp rank (norm of replicated gradients, ZeRO-1 shards): once per dp rank.
      for (int n : owners_per_piece(dp, tp, true, DpCopies::distinct)) CHECK(n == dp);
      for (int n : owners_per_piece(dp, tp, false, DpCopies::distinct)) CHECK(n == dp);
    }
}

TEST_CASE("owns_piece: a pipeline stage's copy of a tied tensor is never owned", "[ownership]") {
  GridCoords first;  // all zero
  CHECK(owns_piece(true, false, DpCopies::identical, first));
  CHECK_FALSE(owns_piece(true, true, DpCopies::identical, first));
  CHECK_FALSE(owns_piece(false, true, DpCopies::distinct, first));
}
