// NodeSharedWindow: one MPI-3 shared-memory window over a communicator whose ranks all run on
// one node. Each rank contributes `floats_per_rank` floats, and every rank loads and stores
// every rank's part directly: a reduction then reads each peer's buffer once, in place, where
// a message-passing collective copies it into bounce buffers first (Open MPI's vader + libnbc
// spent ~4 ms per step on the 7.4 MB MLP gradient this way on a 2-core host).
//
//   part(0)  |---- floats_per_rank ----|   each part is its own allocation
//   part(1)  |---- floats_per_rank ----|   (alloc_shared_noncontig: first-touched, hence
//   ...                                     placed, by its owner), whole cache lines long
//
// Memory model: the window is locked once (MPI_Win_lock_all, MPI_MODE_NOCHECK) for its whole
// life; barrier() is MPI_Win_sync + MPI_Barrier + MPI_Win_sync, after which every store any
// rank made before the barrier is visible to every rank (MPI 3.1, section 11.5.4).
#pragma once

#include "trellis/comm/mpi_comm.hpp"

#include <mpi.h>

#include <cstddef>
#include <vector>

namespace trellis {

class NodeSharedWindow {
 public:
  // Whether every rank of `comm` runs on one shared-memory node. Collective over comm.
  static bool on_one_node(const MpiComm& comm);

  // Collective over comm, whose ranks must share one node (Error otherwise). The parts are
  // zero-filled by their owners.
  NodeSharedWindow(const MpiComm& comm, std::size_t floats_per_rank);
  // Frees the window (collective) unless an exception is unwinding the stack: a rank leaving
  // through an error must not wait in MPI_Win_free for ranks that are still training.
  ~NodeSharedWindow();
  NodeSharedWindow(const NodeSharedWindow&) = delete;
  NodeSharedWindow& operator=(const NodeSharedWindow&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(parts_.size()); }
  std::size_t floats_per_rank() const { return floats_per_rank_; }
  // Rank r's part [floats_per_rank], loadable and storable by every rank.
  float* part(int r) const { return parts_.at(static_cast<std::size_t>(r)); }
  // All parts, indexed by rank.
  const std::vector<float*>& parts() const { return parts_; }

  // Memory barrier over the communicator (see above). Collective.
  void barrier();

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;  // borrowed: the caller's communicator outlives the window
  MPI_Win window_ = MPI_WIN_NULL;
  int rank_ = 0;
  std::size_t floats_per_rank_ = 0;
  std::vector<float*> parts_;
};

}  // namespace trellis
