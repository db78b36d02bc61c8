// ProcessGrid: the job's ranks arranged as dp x tp x pp (see GridLayout), with one owned
// sub-communicator per axis. Passed explicitly to whatever needs it; never global.
#pragma once

#include "trellis/comm/grid_layout.hpp"
#include "trellis/comm/mpi_comm.hpp"

#include <mpi.h>

namespace trellis {

class ProcessGrid {
 public:
  // Collective over `world`. Throws ConfigError (on every rank alike) when tp x pp does not
  // divide the world size.
  ProcessGrid(MPI_Comm world, int tp, int pp);

  const GridLayout& layout() const { return layout_; }
  const GridCoords& coords() const { return coords_; }
  const MpiComm& world() const { return world_; }
  const MpiComm& comm(Axis axis) const;
  const MpiComm& dp() const { return comm(Axis::dp); }
  const MpiComm& tp() const { return comm(Axis::tp); }
  const MpiComm& pp() const { return comm(Axis::pp); }
  int rank() const { return world_.rank(); }
  int size(Axis axis) const { return layout_.size(axis); }

 private:
  MpiComm world_;
  GridLayout layout_;
  GridCoords coords_;
  MpiComm axis_comms_[3];
};

}  // namespace trellis
