#include "trellis/comm/device_binding.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/comm/mpi_comm.hpp"

#include <unistd.h>

#if defined(TRELLIS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif

namespace trellis {

namespace {
int count_visible_devices() {
#if defined(TRELLIS_ENABLE_CUDA)
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  check_call(rc == cudaSuccess, "CUDA", "cudaGetDeviceCount(&count)",
             rc == cudaSuccess ? "" : cudaGetErrorString(rc), __FILE__, __LINE__);
  return count;
#else
  return 0;
#endif
}
}  // namespace

int device_for_local_rank(int local_rank, int visible) {
  return visible > 0 ? local_rank % visible : -1;
}

NodeBinding bind_to_node(MPI_Comm world) {
  NodeBinding binding;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) binding.hostname = host;

  MPI_Comm node_comm = MPI_COMM_NULL;
  TRELLIS_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_comm));
  MpiComm node = MpiComm::adopt(node_comm);
  binding.local_rank = node.rank();
  binding.local_size = node.size();

  // Node count = number of node leaders (local rank 0).
  int is_leader = binding.local_rank == 0 ? 1 : 0;
  TRELLIS_MPI(MPI_Allreduce(&is_leader, &binding.node_count, 1, MPI_INT, MPI_SUM, world));

  binding.visible_devices = count_visible_devices();
  binding.device = device_for_local_rank(binding.local_rank, binding.visible_devices);
  return binding;
}

}  // namespace trellis
