// Which node a rank is on and which device it drives. Ranks on one node are found with
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED); rank i on a node with d visible devices takes
// device i mod d (one rank per GPU is the intended layout; Slurm's --gpus-per-task or
// CUDA_VISIBLE_DEVICES narrowing the view to one device also works, as then d = 1).
#pragma once

#include <mpi.h>

#include <string>

namespace trellis {

struct NodeBinding {
  std::string hostname;
  int local_rank = 0;  // rank among the ranks of this node
  int local_size = 1;  // ranks on this node
  int node_count = 1;  // nodes in the job
  int device = -1;     // device id handed to Kokkos, -1 on host-only builds
  int visible_devices = 0;
};

// Collective over `world`; call after MPI_Init and before Kokkos::initialize.
NodeBinding bind_to_node(MPI_Comm world);

// Device for the i-th rank of a node with `visible` devices (-1 when there are none).
int device_for_local_rank(int local_rank, int visible);

}  // namespace trellis
