#include "trellis/parallel/zero_groups.hpp"

#include "trellis/comm/counting_communicator.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"

#include <string>

namespace trellis {

ZeroGroups::ZeroGroups(const MpiComm& dp, Communicator& dp_comm, CommBackend backend,
                       int shard_ranks)
    : shard_(&dp_comm), shard_mpi_(&dp) {
  const int size = dp.size();
  if (shard_ranks < 0 || (shard_ranks > 0 && size % shard_ranks != 0))
    throw ConfigError("config key parallel.zero_shard_ranks = " + std::to_string(shard_ranks) +
                      ": expected 0 (the whole data-parallel group) or a divisor of dp = " +
                      std::to_string(size));
  if (shard_ranks == 0 || shard_ranks == size) return;
  MPI_Comm shard = MPI_COMM_NULL, replica = MPI_COMM_NULL;
  TRELLIS_MPI(MPI_Comm_split(dp.get(), dp.rank() / shard_ranks, dp.rank(), &shard));
  shard_split_ = MpiComm::adopt(shard);
  TRELLIS_MPI(MPI_Comm_split(dp.get(), dp.rank() % shard_ranks, dp.rank(), &replica));
  replica_split_ = MpiComm::adopt(replica);
  owned_shard_ = make_communicator(backend, shard_split_);
  replica_ = make_communicator(backend, replica_split_);
  shard_ = owned_shard_.get();
  shard_mpi_ = &shard_split_;
}

}  // namespace trellis
