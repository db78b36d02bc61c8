#include "catch.hpp"

#include "trellis/comm/grid_layout.hpp"
#include "trellis/core/error.hpp"

#include <algorithm>
#include <set>

using trellis::Axis;
using trellis::GridLayout;

TEST_CASE("grid layout derives dp and rejects sizes that do not divide", "[comm][grid]") {
  auto layout = GridLayout::from_world(8, 2, 2);
  CHECK(layout.size(Axis::dp) == 2);
  CHECK(layout.size(Axis::tp) == 2);
  CHECK(layout.size(Axis::pp) == 2);
  CHECK_THROWS_AS(GridLayout::from_world(6, 4, 1), trellis::ConfigError);
  CHECK_THROWS_AS(GridLayout::from_world(4, 0, 1), trellis::ConfigError);
  try {
    GridLayout::from_world(6, 4, 1);
  } catch (const trellis::ConfigError& e) {
    CHECK(std::string(e.what()).find("parallel.tp") != std::string::npos);
  }
}

TEST_CASE("tp is the fastest axis, then dp, then pp", "[comm][grid]") {
  auto layout = GridLayout::from_world(8, 2, 2);  // dp = 2
  CHECK(layout.group(Axis::tp, 0) == std::vector<int>{0, 1});
  CHECK(layout.group(Axis::dp, 0) == std::vector<int>{0, 2});
  CHECK(layout.group(Axis::pp, 0) == std::vector<int>{0, 4});
  CHECK(layout.group(Axis::dp, 5) == std::vector<int>{5, 7});
  auto c = layout.coords(6);
  CHECK(c.tp == 0);
  CHECK(c.dp == 1);
  CHECK(c.pp == 1);
}

TEST_CASE("coords and rank_of are inverse and groups partition the world", "[comm][grid]") {
  for (int world : {1, 2, 3, 4, 6, 8, 12, 16}) {
    for (int tp = 1; tp <= world; ++tp) {
      for (int pp = 1; tp * pp <= world; ++pp) {
        if (world % (tp * pp) != 0) continue;
        auto layout = GridLayout::from_world(world, tp, pp);
        for (Axis axis : {Axis::tp, Axis::dp, Axis::pp}) {
          std::set<int> covered;
          std::set<int> ids;
          for (int r = 0; r < world; ++r) {
            REQUIRE(layout.rank_of(layout.coords(r)) == r);
            auto group = layout.group(axis, r);
            REQUIRE(static_cast<int>(group.size()) == layout.size(axis));
            REQUIRE(std::find(group.begin(), group.end(), r) != group.end());
            REQUIRE(group[layout.coords(r).along(axis)] == r);
            ids.insert(layout.group_id(axis, r));
            if (layout.group_id(axis, r) == r) covered.insert(group.begin(), group.end());
          }
          CHECK(static_cast<int>(covered.size()) == world);
          CHECK(static_cast<int>(ids.size()) == world / layout.size(axis));
        }
      }
    }
  }
}
