// ZeroGroups: the groups ZeRO shards over. Normally the whole data-parallel group. With
// parallel.zero_shard_ranks = N (HSDP, hybrid sharding: N the ranks of a node), the dp group's
// ranks split into shard groups of N consecutive dp ranks, each holding one copy of the
// sharded state, and replica groups (the ranks at the same position of every shard group):
//
//   dp rank      0  1  2  3  4  5  6  7        N = 4
//   shard group  [   0      ][   1      ]      reduce-scatter / all-gather inside (fast links)
//   replica      0  1  2  3  0  1  2  3        all-reduce of each shard across (1 / N of the
//                                              gradients cross the slow links)
#pragma once

#include "trellis/comm/communicator.hpp"
#include "trellis/comm/mpi_comm.hpp"

#include <memory>

namespace trellis {

class ZeroGroups {
 public:
  // dp / dp_comm: the data-parallel group (outlive this). shard_ranks: 0 or dp.size() for the
  // whole group, else a divisor of it (ConfigError naming parallel.zero_shard_ranks otherwise).
  // Collective over dp when it splits.
  ZeroGroups(const MpiComm& dp, Communicator& dp_comm, CommBackend backend, int shard_ranks);
  ZeroGroups(const ZeroGroups&) = delete;
  ZeroGroups& operator=(const ZeroGroups&) = delete;

  Communicator& shard() const { return *shard_; }
  const MpiComm& shard_mpi() const { return *shard_mpi_; }
  // The replica group, or null when the shard group is the whole dp group.
  Communicator* replica() const { return replica_.get(); }
  int replica_rank() const { return replica_ ? replica_->rank() : 0; }

 private:
  MpiComm shard_split_, replica_split_;
  std::unique_ptr<Communicator> owned_shard_, replica_;
  Communicator* shard_ = nullptr;
  const MpiComm* shard_mpi_ = nullptr;
};

}  // namespace trellis
