// Data-parallel gradient reduction over contiguous buckets of the flat gradient buffer.
//
// Each rank's gradient is already scaled by 1 / global_batch (the loss is a mean over the
// global batch), so the sum over dp ranks is the global-mean gradient: no division after.
// Buckets of parallel.bucket_mb MiB are reduced with non-blocking MPI_Iallreduce so that
// several are in flight at once; start()/wait() are split so that a later change can launch
// buckets as backward fills them.
#pragma once

#include "trellis/comm/mpi_comm.hpp"
#include "trellis/core/kokkos_types.hpp"

#include <mpi.h>

#include <cstddef>
#include <utility>
#include <vector>

namespace trellis {

class GradientAllReducer {
 public:
  GradientAllReducer(const MpiComm& dp, FloatView grads, std::size_t bucket_bytes);

  void start();  // launch every bucket
  void wait();   // complete every bucket
  void all_reduce() {
    start();
    wait();
  }

  std::size_t bucket_count() const { return buckets_.size(); }
  const std::vector<std::pair<std::size_t, std::size_t>>& buckets() const { return buckets_; }

 private:
  const MpiComm& dp_;
  FloatView grads_;  // [numel] flat gradient buffer, reduced in place
  std::vector<std::pair<std::size_t, std::size_t>> buckets_;  // [begin, end) element ranges
  std::vector<MPI_Request> requests_;                         // one per bucket, reused
};

// Splits [0, numel) into contiguous ranges of at most bucket_elems elements.
std::vector<std::pair<std::size_t, std::size_t>> make_buckets(std::size_t numel,
                                                              std::size_t bucket_elems);

}  // namespace trellis
