#include "catch.hpp"

#include "trellis/comm/agreement.hpp"
#include "trellis/comm/device_binding.hpp"
#include "trellis/comm/process_grid.hpp"

#include <mpi.h>

#include <type_traits>

using namespace trellis;

namespace {
int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}
int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}
}  // namespace

// Its Communicators refer to its own MpiComm members: a copy or a move would dangle.
static_assert(!std::is_copy_constructible<ProcessGrid>::value, "ProcessGrid must be pinned");
static_assert(!std::is_copy_assignable<ProcessGrid>::value, "ProcessGrid must be pinned");
static_assert(!std::is_move_constructible<ProcessGrid>::value, "ProcessGrid must be pinned");
static_assert(!std::is_move_assignable<ProcessGrid>::value, "ProcessGrid must be pinned");

TEST_CASE("sub-communicators match the grid layout for every factorisation", "[grid_mpi]") {
  const int world = world_size();
  for (int tp = 1; tp <= world; ++tp) {
    for (int pp = 1; tp * pp <= world; ++pp) {
      if (world % (tp * pp) != 0) continue;
      ProcessGrid grid(MPI_COMM_WORLD, tp, pp);
      const GridLayout& layout = grid.layout();
      for (Axis axis : {Axis::tp, Axis::dp, Axis::pp}) {
        const MpiComm& comm = grid.comm(axis);
        REQUIRE(comm.size() == layout.size(axis));
        REQUIRE(comm.rank() == grid.coords().along(axis));
        // Each member's world rank, gathered along the axis, is the layout's group.
        std::vector<int> members(static_cast<std::size_t>(comm.size()));
        int me = grid.rank();
        MPI_Allgather(&me, 1, MPI_INT, members.data(), 1, MPI_INT, comm.get());
        CHECK(members == layout.group(axis, grid.rank()));
      }
    }
  }
}

TEST_CASE("a failure on one rank stops every rank with its exit code", "[grid_mpi]") {
  const int last = world_size() - 1;
  const Logger quiet(world_rank());
  bool agreed = false;
  ExitCode code = ExitCode::ok;
  try {
    run_agreed(MPI_COMM_WORLD, quiet, [&] {
      if (world_rank() == last)
        throw InputError("injected failure on the last rank (expected in this test)");
    });
  } catch (const AgreedFailure& e) {
    agreed = true;
    code = e.code();
  }
  CHECK(agreed);
  CHECK(code == ExitCode::bad_input);
  // Success everywhere: no exception.
  CHECK_NOTHROW(run_agreed(MPI_COMM_WORLD, quiet, [] {}));
}

TEST_CASE("node binding counts ranks on this node", "[grid_mpi]") {
  const NodeBinding node = bind_to_node(MPI_COMM_WORLD);
  CHECK(node.local_rank >= 0);
  CHECK(node.local_rank < node.local_size);
  CHECK(node.node_count >= 1);
  CHECK(node.device == -1);  // host-only build
  CHECK(device_for_local_rank(5, 4) == 1);
  CHECK(device_for_local_rank(0, 0) == -1);
}
