// Fills a buffer from the counter-based RNG: element e gets draw (seed, stream, e), so the
// values depend only on the element's index, never on the device, rank count or launch shape.
#pragma once

#include "trellis/kernels/views.hpp"

#include <cstdint>

namespace trellis::kernels {

// Which element of a logical tensor element e of a buffer holds, so that a shard draws the
// very numbers the whole tensor would. The logical tensor is viewed as
// [outer, sections, parts, piece, inner] (row-major); a shard holds piece `index` of every
// section: [outer, sections, piece, inner]. piece == 0 means no sharding: e -> first + e.
// Examples: rows r0.. of a matrix: {first = r0 * cols}; column block k of [rows, cols] over p
// ranks: {piece = cols / p, parts = p, index = k}; the q|k|v rows of a fused [3d, d] weight
// split by heads: {inner = d, piece = d / p, sections = 3, parts = p, index = k}.
// skip: the buffer starts at element `skip` of the shard (a ZeRO-3 rank's range of it).
struct ShardIndexMap {
  std::uint64_t first = 0;
  std::uint64_t inner = 1, piece = 0, sections = 1, parts = 1, index = 0;
  std::uint64_t skip = 0;

  KOKKOS_INLINE_FUNCTION std::uint64_t operator()(std::uint64_t e) const {
    e += skip;
    if (piece == 0) return first + e;
    const std::uint64_t i = e % inner;
    std::uint64_t rest = e / inner;
    const std::uint64_t j = rest % piece;
    rest /= piece;
    const std::uint64_t s = rest % sections;
    const std::uint64_t o = rest / sections;
    return (((o * sections + s) * parts + index) * piece + j) * inner + i;
  }
};

// x[e] = lo + (hi - lo) * random_uniform(seed, stream, map(e)), in [lo, hi].
void fill_uniform(Vector x, float lo, float hi, std::uint64_t seed, std::uint64_t stream,
                  const ShardIndexMap& map = {});
// x[e] = mean + stddev * random_normal(seed, stream, map(e)).
void fill_normal(Vector x, float mean, float stddev, std::uint64_t seed, std::uint64_t stream,
                 const ShardIndexMap& map = {});

}  // namespace trellis::kernels
