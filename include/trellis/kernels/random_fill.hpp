// Fills a buffer from the counter-based RNG: element e gets draw (seed, stream, e), so the
// values depend only on the element's index, never on the device, rank count or launch shape.
#pragma once

#include "trellis/kernels/views.hpp"

#include <cstdint>

namespace trellis::kernels {

// x[e] = lo + (hi - lo) * random_uniform(seed, stream, first_index + e), in [lo, hi].
void fill_uniform(Vector x, float lo, float hi, std::uint64_t seed, std::uint64_t stream,
                  std::uint64_t first_index = 0);
// x[e] = mean + stddev * random_normal(seed, stream, first_index + e).
void fill_normal(Vector x, float mean, float stddev, std::uint64_t seed, std::uint64_t stream,
                 std::uint64_t first_index = 0);

}  // namespace trellis::kernels
