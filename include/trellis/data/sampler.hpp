// DistributedSampler: which samples each data-parallel rank reads at each step.
//
// An epoch is a permutation of [0, N): a Fisher-Yates shuffle whose draws come from the
// counter-based Philox RNG keyed by (seed, epoch), so every rank computes the same
// permutation without communicating, and a resumed run recomputes it from (seed, epoch).
// The permutation is cut into global batches of B positions; global batch `step` is
// positions [step*B, step*B + b). Rank r of dp ranks reads the contiguous block
// [floor(r*b/dp), floor((r+1)*b/dp)) of it, so the global batch, and therefore the
// gradient, is the same for any dp (the layout only changes who reads which part).
//
// Remainder policy when B does not divide N:
//   partial (default): the last global batch holds the N mod B leftover samples, so every
//     sample is used exactly once per epoch. With b < dp some ranks get an empty block and
//     must still take part in the step's collectives; losses should be averaged over b.
//   drop: the N mod B leftover positions are skipped; with shuffling they are different
//     samples each epoch. steps_per_epoch = floor(N / B).
// shuffle = false gives the identity order (evaluation).
//
// Not thread-safe: the current epoch's permutation is cached (recomputed only when the
// epoch changes); give each thread its own sampler.
#pragma once

#include <cstdint>
#include <vector>

namespace trellis {

enum class RemainderPolicy { partial, drop };

// This rank's part of one global batch.
struct LocalBatch {
  std::vector<std::int64_t> indices;  // [count] dataset indices, in global-batch order
  std::int64_t first_position = 0;    // position of indices[0] within the global batch: with
                                      // (epoch, step) a layout-independent id of each sample
  std::int64_t global_size = 0;       // b, the size of the whole global batch
};

class DistributedSampler {
 public:
  // Throws ConfigError for dataset_size < 1, global_batch < 1, or drop with N < B.
  DistributedSampler(std::int64_t dataset_size, std::int64_t global_batch, std::uint64_t seed,
                     bool shuffle, RemainderPolicy policy = RemainderPolicy::partial);

  std::int64_t dataset_size() const { return size_; }
  std::int64_t global_batch() const { return batch_; }
  std::int64_t steps_per_epoch() const;
  std::int64_t batch_size(std::int64_t step) const;  // b: B, or N mod B for a partial last step

  // The epoch's order of dataset indices ([N]); valid until another epoch is asked for.
  const std::vector<std::int64_t>& permutation(std::int64_t epoch);

  std::vector<std::int64_t> global_batch_indices(std::int64_t epoch, std::int64_t step);

  // Rank dp_rank's block of the global batch. The out-parameter form reuses out's storage.
  LocalBatch local_indices(std::int64_t epoch, std::int64_t step, int dp_rank, int dp_size);
  void local_indices(std::int64_t epoch, std::int64_t step, int dp_rank, int dp_size,
                     LocalBatch& out);

 private:
  void check_step(std::int64_t step) const;

  std::int64_t size_, batch_;
  std::uint64_t seed_;
  bool shuffle_;
  RemainderPolicy policy_;
  std::int64_t cached_epoch_ = -1;
  std::vector<std::int64_t> permutation_;  // [N]
};

// Uniform integer in [0, bound) from Philox (seed, stream, index), without modulo bias
// (Lemire's multiply-and-reject on 64-bit draws; a rejection, rarer than bound / 2^64,
// takes the next words). Exposed for tests.
std::uint64_t random_below(std::uint64_t bound, std::uint64_t seed, std::uint64_t stream,
                           std::uint64_t index);

}  // namespace trellis
