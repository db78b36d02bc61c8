// The loops of GradientSync's node shared-memory exchange (gradient_sync.cpp): plain host
// loops over the peers' buffers, read in place from the shared window.
#pragma once

#include <cstddef>
#include <vector>

namespace trellis::shared_reduction {

// sum[i] = sources[0][i] + sources[1][i] + ... (in rank order, so every element is summed
// alike wherever it is computed) for i in [offset, offset + n); the sum is stored at
// targets[t][i - offset + target_offset] for every target. A target may be a source (in place):
// each block of elements is read from every source before any target is written.
void sum_into(const std::vector<float*>& sources, std::size_t offset, std::size_t n,
              const std::vector<float*>& targets, std::size_t target_offset);

}  // namespace trellis::shared_reduction
