#include "shared_reduction.hpp"

#include "trellis/core/host_simd.hpp"

#include <algorithm>

namespace trellis::shared_reduction {

namespace {

// Blocks of 1024 floats (4 KiB): the partial sums stay in L1 while each source streams through
// once, and every inner loop is a contiguous add or copy GCC vectorises.
constexpr std::size_t kBlock = 1024;

TRELLIS_HOST_CLONES void sum_block(float* const* sources, std::size_t count, std::size_t begin,
                                   std::size_t n, float* const* targets, std::size_t target_count,
                                   std::size_t target_begin) {
  // Each __restrict pointer lives in its own block: a target may be a source (in place).
  alignas(64) float sum[kBlock];
  {
    const float* __restrict first = sources[0] + begin;
    for (std::size_t i = 0; i < n; ++i) sum[i] = first[i];
  }
  for (std::size_t s = 1; s < count; ++s) {
    const float* __restrict source = sources[s] + begin;
    for (std::size_t i = 0; i < n; ++i) sum[i] += source[i];
  }
  for (std::size_t t = 0; t < target_count; ++t) {
    float* __restrict target = targets[t] + target_begin;
    for (std::size_t i = 0; i < n; ++i) target[i] = sum[i];
  }
}

}  // namespace

void sum_into(const std::vector<float*>& sources, std::size_t offset, std::size_t n,
              const std::vector<float*>& targets, std::size_t target_offset) {
  if (sources.empty()) return;
  for (std::size_t done = 0; done < n; done += kBlock) {
    sum_block(sources.data(), sources.size(), offset + done, std::min(kBlock, n - done),
              targets.data(), targets.size(), target_offset + done);
  }
}

}  // namespace trellis::shared_reduction
