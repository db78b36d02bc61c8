// Rank arithmetic of the 3-D process grid world = dp x tp x pp, with no MPI in it so that it
// can be unit-tested for any world size.
//
// Axis order: tp varies fastest (a tp group is tp consecutive ranks, which a block rank
// mapping keeps inside one node), then dp, then pp (pipeline stages span nodes).
//   rank = tp_index + tp * (dp_index + dp * pp_index)
#pragma once

#include <array>
#include <string>
#include <vector>

namespace trellis {

enum class Axis { tp = 0, dp = 1, pp = 2 };
const char* axis_name(Axis axis);

struct GridCoords {
  int tp = 0, dp = 0, pp = 0;
  int along(Axis axis) const;
};

class GridLayout {
 public:
  // Derives dp = world / (tp * pp); throws ConfigError naming parallel.tp / parallel.pp when
  // they do not divide the world size.
  static GridLayout from_world(int world_size, int tp, int pp);

  int size(Axis axis) const;
  int world_size() const { return tp_ * dp_ * pp_; }
  GridCoords coords(int rank) const;
  int rank_of(const GridCoords& coords) const;
  // World ranks of the group along `axis` that contains `rank`, ordered by their index on it.
  std::vector<int> group(Axis axis, int rank) const;
  // Identifies the group along `axis` containing `rank` (the MPI_Comm_split colour).
  int group_id(Axis axis, int rank) const;
  std::string describe() const;  // "dp=4 x tp=1 x pp=1"

 private:
  GridLayout(int dp, int tp, int pp) : dp_(dp), tp_(tp), pp_(pp) {}
  int dp_, tp_, pp_;
};

}  // namespace trellis
