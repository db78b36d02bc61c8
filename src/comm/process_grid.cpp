#include "trellis/comm/process_grid.hpp"

#include "trellis/comm/mpi_check.hpp"

namespace trellis {

namespace {
int world_size_of(MPI_Comm comm) {
  int size = 0;
  TRELLIS_MPI(MPI_Comm_size(comm, &size));
  return size;
}
}  // namespace

ProcessGrid::ProcessGrid(MPI_Comm world, int tp, int pp)
    : world_(MpiComm::duplicate(world)),
      layout_(GridLayout::from_world(world_size_of(world), tp, pp)),
      coords_(layout_.coords(world_.rank())) {
  for (Axis axis : {Axis::tp, Axis::dp, Axis::pp}) {
    MPI_Comm sub = MPI_COMM_NULL;
    TRELLIS_MPI(MPI_Comm_split(world_.get(), layout_.group_id(axis, world_.rank()),
                               coords_.along(axis), &sub));
    axis_comms_[static_cast<int>(axis)] = MpiComm::adopt(sub);
  }
}

const MpiComm& ProcessGrid::comm(Axis axis) const { return axis_comms_[static_cast<int>(axis)]; }

}  // namespace trellis
