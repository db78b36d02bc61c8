// ProcessGrid: the job's ranks arranged as dp x tp x pp (see GridLayout), with one owned
// sub-communicator per axis, and one Communicator (MPI or NCCL backend) over each of them for
// the model's float traffic. Passed explicitly to whatever needs it; never global.
#pragma once

#include "trellis/comm/collective_tally.hpp"
#include "trellis/comm/counting_communicator.hpp"
#include "trellis/comm/grid_layout.hpp"
#include "trellis/comm/mpi_comm.hpp"

#include <mpi.h>

#include <memory>

namespace trellis {

class ProcessGrid {
 public:
  // Collective over `world`. Throws ConfigError (on every rank alike) when tp x pp does not
  // divide the world size.
  ProcessGrid(MPI_Comm world, int tp, int pp, CommBackend backend = CommBackend::mpi);
  // Pinned: the Communicators hold references to axis_comms_ and embedding_comm_, which a
  // copy or a move would leave behind. Hold it by unique_ptr to hand it around.
  ProcessGrid(const ProcessGrid&) = delete;
  ProcessGrid& operator=(const ProcessGrid&) = delete;
  ProcessGrid(ProcessGrid&&) = delete;
  ProcessGrid& operator=(ProcessGrid&&) = delete;

  const GridLayout& layout() const { return layout_; }
  const GridCoords& coords() const { return coords_; }
  const MpiComm& world() const { return world_; }
  const MpiComm& comm(Axis axis) const;
  const MpiComm& dp() const { return comm(Axis::dp); }
  const MpiComm& tp() const { return comm(Axis::tp); }
  const MpiComm& pp() const { return comm(Axis::pp); }
  int rank() const { return world_.rank(); }
  int size(Axis axis) const { return layout_.size(axis); }
  // The float collectives along an axis (the backend chosen at construction).
  Communicator& communicator(Axis axis) const;
  CommBackend backend() const { return backend_; }
  // Whether this rank's tp group has ranks on more than one node (tp traffic then leaves the
  // node's fast links: worth a warning). Same answer on every rank of the group.
  bool tp_spans_nodes() const { return tp_spans_nodes_; }
  // The first and the last pipeline stage of this rank's (dp, tp) position, when pp > 1 (they
  // share the GPT's tied token table): a 2-rank group with the first stage as rank 0. nullptr
  // on every other rank and when pp == 1.
  Communicator* embedding_group() const { return embedding_communicator_.get(); }
  // What this rank has issued so far over an axis's communicator (the trainer takes a step's
  // difference); the embedding group's, empty where this rank has none.
  const CollectiveTally& tally(Axis axis) const;
  CollectiveTally embedding_tally() const;

 private:
  MpiComm world_;
  GridLayout layout_;
  GridCoords coords_;
  MpiComm axis_comms_[3];
  CommBackend backend_;
  std::unique_ptr<CountingCommunicator> communicators_[3];
  MpiComm embedding_comm_;
  std::unique_ptr<CountingCommunicator> embedding_communicator_;
  bool tp_spans_nodes_ = false;
};

}  // namespace trellis
