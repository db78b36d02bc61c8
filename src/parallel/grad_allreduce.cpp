#include "trellis/parallel/grad_allreduce.hpp"

#include "trellis/comm/mpi_check.hpp"

#include <algorithm>

namespace trellis {

std::vector<std::pair<std::size_t, std::size_t>> make_buckets(std::size_t numel,
                                                              std::size_t bucket_elems) {
  bucket_elems = std::max<std::size_t>(bucket_elems, 1);
  std::vector<std::pair<std::size_t, std::size_t>> buckets;
  for (std::size_t begin = 0; begin < numel; begin += bucket_elems)
    buckets.emplace_back(begin, std::min(numel, begin + bucket_elems));
  return buckets;
}

GradientAllReducer::GradientAllReducer(const MpiComm& dp, FloatView grads, std::size_t bucket_bytes)
    : dp_(dp),
      grads_(grads),
      buckets_(make_buckets(grads.extent(0), bucket_bytes / sizeof(float))),
      requests_(buckets_.size(), MPI_REQUEST_NULL) {}

void GradientAllReducer::start() {
  if (dp_.size() == 1) return;
  // Kernels that wrote the gradients must be done before MPI reads the buffer.
  Kokkos::fence();
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const auto [begin, end] = buckets_[b];
    TRELLIS_MPI(MPI_Iallreduce(MPI_IN_PLACE, grads_.data() + begin, static_cast<int>(end - begin),
                               MPI_FLOAT, MPI_SUM, dp_.get(), &requests_[b]));
  }
}

void GradientAllReducer::wait() {
  if (dp_.size() == 1) return;
  TRELLIS_MPI(
      MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE));
}

}  // namespace trellis
