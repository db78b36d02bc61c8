#include "trellis/comm/grid_layout.hpp"

#include "trellis/core/error.hpp"

namespace trellis {

const char* axis_name(Axis axis) {
  switch (axis) {
    case Axis::tp:
      return "tp";
    case Axis::dp:
      return "dp";
    case Axis::pp:
      return "pp";
  }
  return "?";
}

int GridCoords::along(Axis axis) const {
  switch (axis) {
    case Axis::tp:
      return tp;
    case Axis::dp:
      return dp;
    case Axis::pp:
      return pp;
  }
  return 0;
}

GridLayout GridLayout::from_world(int world_size, int tp, int pp) {
  if (tp < 1 || pp < 1)
    throw ConfigError("config keys parallel.tp and parallel.pp must be >= 1 (got tp=" +
                      std::to_string(tp) + ", pp=" + std::to_string(pp) + ")");
  if (world_size % (tp * pp) != 0)
    throw ConfigError("config keys parallel.tp=" + std::to_string(tp) +
                      " x parallel.pp=" + std::to_string(pp) + " = " + std::to_string(tp * pp) +
                      " do not divide the " + std::to_string(world_size) +
                      " ranks of this job; the world size must be a multiple of tp x pp");
  return GridLayout(world_size / (tp * pp), tp, pp);
}

int GridLayout::size(Axis axis) const {
  switch (axis) {
    case Axis::tp:
      return tp_;
    case Axis::dp:
      return dp_;
    case Axis::pp:
      return pp_;
  }
  return 1;
}

GridCoords GridLayout::coords(int rank) const {
  TRELLIS_REQUIRE(rank >= 0 && rank < world_size(), "rank outside the process grid");
  GridCoords c;
  c.tp = rank % tp_;
  c.dp = (rank / tp_) % dp_;
  c.pp = rank / (tp_ * dp_);
  return c;
}

int GridLayout::rank_of(const GridCoords& c) const {
  TRELLIS_REQUIRE(c.tp >= 0 && c.tp < tp_ && c.dp >= 0 && c.dp < dp_ && c.pp >= 0 && c.pp < pp_,
                  "grid coordinates out of range");
  return c.tp + tp_ * (c.dp + dp_ * c.pp);
}

std::vector<int> GridLayout::group(Axis axis, int rank) const {
  GridCoords c = coords(rank);
  std::vector<int> ranks;
  for (int i = 0; i < size(axis); ++i) {
    GridCoords member = c;
    (axis == Axis::tp ? member.tp : axis == Axis::dp ? member.dp : member.pp) = i;
    ranks.push_back(rank_of(member));
  }
  return ranks;
}

int GridLayout::group_id(Axis axis, int rank) const {
  GridCoords c = coords(rank);
  (axis == Axis::tp ? c.tp : axis == Axis::dp ? c.dp : c.pp) = 0;
  return rank_of(c);  // the lowest rank of the group names it
}

std::string GridLayout::describe() const {
  return "dp=" + std::to_string(dp_) + " x tp=" + std::to_string(tp_) +
         " x pp=" + std::to_string(pp_);
}

}  // namespace trellis
