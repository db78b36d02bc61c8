#include "trellis/data/sampler.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/rng.hpp"

#include <algorithm>
#include <numeric>
#include <string>

namespace trellis {

std::uint64_t random_below(std::uint64_t bound, std::uint64_t seed, std::uint64_t stream,
                           std::uint64_t index) {
  // Attempt a uses words (v0, v1) or (v2, v3) of draw a/2; draw 0 is (seed, stream, index),
  // later draws move to a derived stream so they never collide with other indices' draws.
  const std::uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  for (std::uint64_t attempt = 0;; ++attempt) {
    const std::uint64_t draw_stream = attempt < 2 ? stream : stream_mix(stream, attempt / 2);
    const Philox4x32 w = random_words(seed, draw_stream, index);
    const std::uint32_t hi = attempt % 2 == 0 ? w.v[0] : w.v[2];
    const std::uint32_t lo = attempt % 2 == 0 ? w.v[1] : w.v[3];
    const std::uint64_t x = (static_cast<std::uint64_t>(hi) << 32) | lo;
    const unsigned __int128 product = static_cast<unsigned __int128>(x) * bound;
    if (static_cast<std::uint64_t>(product) >= threshold) {
      return static_cast<std::uint64_t>(product >> 64);
    }
  }
}

DistributedSampler::DistributedSampler(std::int64_t dataset_size, std::int64_t global_batch,
                                       std::uint64_t seed, bool shuffle, RemainderPolicy policy)
    : size_(dataset_size), batch_(global_batch), seed_(seed), shuffle_(shuffle), policy_(policy) {
  if (size_ < 1) throw ConfigError("sampler: the dataset is empty");
  if (batch_ < 1) throw ConfigError("sampler: global batch size must be >= 1");
  if (policy_ == RemainderPolicy::drop && batch_ > size_) {
    throw ConfigError("sampler: global batch " + std::to_string(batch_) +
                      " is larger than the dataset (" + std::to_string(size_) +
                      " samples) and the remainder policy is drop: an epoch would have no steps");
  }
}

std::int64_t DistributedSampler::steps_per_epoch() const {
  return policy_ == RemainderPolicy::drop ? size_ / batch_ : (size_ + batch_ - 1) / batch_;
}

std::int64_t DistributedSampler::batch_size(std::int64_t step) const {
  check_step(step);
  return std::min(batch_, size_ - step * batch_);
}

void DistributedSampler::check_step(std::int64_t step) const {
  if (step < 0 || step >= steps_per_epoch()) {
    throw Error("sampler: step " + std::to_string(step) + " is outside the epoch's " +
                std::to_string(steps_per_epoch()) + " steps");
  }
}

const std::vector<std::int64_t>& DistributedSampler::permutation(std::int64_t epoch) {
  TRELLIS_REQUIRE(epoch >= 0, "sampler epochs count from 0");
  if (epoch == cached_epoch_) return permutation_;
  permutation_.resize(static_cast<std::size_t>(size_));
  std::iota(permutation_.begin(), permutation_.end(), std::int64_t{0});
  if (shuffle_) {
    // Fisher-Yates from the back: position i swaps with a uniform j in [0, i]; draw i is
    // (seed, stream of this epoch, i), so the result depends on nothing but (seed, epoch).
    const std::uint64_t stream =
        stream_mix(stream_from_name("sampler"), static_cast<std::uint64_t>(epoch));
    for (std::int64_t i = size_ - 1; i > 0; --i) {
      const auto j = static_cast<std::int64_t>(random_below(
          static_cast<std::uint64_t>(i) + 1, seed_, stream, static_cast<std::uint64_t>(i)));
      std::swap(permutation_[static_cast<std::size_t>(i)],
                permutation_[static_cast<std::size_t>(j)]);
    }
  }
  cached_epoch_ = epoch;
  return permutation_;
}

std::vector<std::int64_t> DistributedSampler::global_batch_indices(std::int64_t epoch,
                                                                   std::int64_t step) {
  const std::int64_t b = batch_size(step);
  const auto begin = permutation(epoch).begin() + step * batch_;
  return std::vector<std::int64_t>(begin, begin + b);
}

LocalBatch DistributedSampler::local_indices(std::int64_t epoch, std::int64_t step, int dp_rank,
                                             int dp_size) {
  LocalBatch out;
  local_indices(epoch, step, dp_rank, dp_size, out);
  return out;
}

void DistributedSampler::local_indices(std::int64_t epoch, std::int64_t step, int dp_rank,
                                       int dp_size, LocalBatch& out) {
  TRELLIS_REQUIRE(dp_size >= 1 && dp_rank >= 0 && dp_rank < dp_size,
                  "dp rank " + std::to_string(dp_rank) + " of " + std::to_string(dp_size));
  const std::int64_t b = batch_size(step);
  const std::int64_t first = dp_rank * b / dp_size, last = (dp_rank + 1) * b / dp_size;
  const auto begin = permutation(epoch).begin() + step * batch_;
  out.indices.assign(begin + first, begin + last);
  out.first_position = first;
  out.global_size = b;
}

}  // namespace trellis
