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

ProcessGrid::ProcessGrid(MPI_Comm world, int tp, int pp, CommBackend backend)
    : world_(MpiComm::duplicate(world)),
      layout_(GridLayout::from_world(world_size_of(world), tp, pp)),
      coords_(layout_.coords(world_.rank())),
      backend_(backend) {
  for (Axis axis : {Axis::tp, Axis::dp, Axis::pp}) {
    MPI_Comm sub = MPI_COMM_NULL;
    TRELLIS_MPI(MPI_Comm_split(world_.get(), layout_.group_id(axis, world_.rank()),
                               coords_.along(axis), &sub));
    axis_comms_[static_cast<int>(axis)] = MpiComm::adopt(sub);
  }
  for (Axis axis : {Axis::tp, Axis::dp, Axis::pp}) {
    const int a = static_cast<int>(axis);
    communicators_[a] = make_communicator(backend, axis_comms_[a]);
  }
  const int pp_size = layout_.size(Axis::pp);
  const bool end_stage = coords_.pp == 0 || coords_.pp == pp_size - 1;
  MPI_Comm embedding = MPI_COMM_NULL;
  TRELLIS_MPI(MPI_Comm_split(
      world_.get(),
      pp_size > 1 && end_stage ? coords_.dp * layout_.size(Axis::tp) + coords_.tp : MPI_UNDEFINED,
      coords_.pp, &embedding));
  if (embedding != MPI_COMM_NULL) {
    embedding_comm_ = MpiComm::adopt(embedding);
    embedding_communicator_ = make_communicator(backend, embedding_comm_);
  }
  // Ranks of the tp group that share this rank's node: fewer than the group means it spans.
  MPI_Comm node_part = MPI_COMM_NULL;
  TRELLIS_MPI(MPI_Comm_split_type(comm(Axis::tp).get(), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                                  &node_part));
  const MpiComm on_node = MpiComm::adopt(node_part);
  int spans = on_node.size() < layout_.size(Axis::tp) ? 1 : 0;
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, &spans, 1, MPI_INT, MPI_MAX, comm(Axis::tp).get()));
  tp_spans_nodes_ = spans != 0;
}

Communicator& ProcessGrid::communicator(Axis axis) const {
  return *communicators_[static_cast<int>(axis)];
}

const CollectiveTally& ProcessGrid::tally(Axis axis) const {
  return communicators_[static_cast<int>(axis)]->tally();
}

CollectiveTally ProcessGrid::embedding_tally() const {
  return embedding_communicator_ ? embedding_communicator_->tally() : CollectiveTally{};
}

const MpiComm& ProcessGrid::comm(Axis axis) const { return axis_comms_[static_cast<int>(axis)]; }

}  // namespace trellis
