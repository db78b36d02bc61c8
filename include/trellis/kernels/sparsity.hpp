// Element-wise pieces of magnitude pruning (train/loop/pruner.hpp), on any execution space.
//
// Magnitudes are compared through the bits of |x|: for non-negative floats the IEEE-754 bit
// pattern, read as an unsigned integer, orders like the value, so the k-th smallest
// magnitude of a tensor spread over several ranks is found exactly by a binary search over
// 31-bit integers, each probe one count_magnitudes_at_most() per rank plus one reduction,
// with no gather of the tensor. NaN magnitudes sort above infinity.
#pragma once

#include "trellis/kernels/random_fill.hpp"
#include "trellis/kernels/views.hpp"

#include <cstdint>
#include <functional>
#include <vector>

namespace trellis::kernels {

// The bits of |x| as an unsigned integer (see above).
KOKKOS_INLINE_FUNCTION std::uint32_t magnitude_bits(float x) {
  union {
    float f;
    std::uint32_t u;
  } v;
  v.f = x;
  return v.u & 0x7fffffffu;
}

// magnitude_mask() bits that prune nothing (a k of 0).
constexpr std::uint32_t kPruneNothing = 0xffffffffu;

// For each group g of magnitudes (a tensor, or all of a model's, spread over ranks): the bits
// of its ks[g]-th smallest magnitude (1-based; kPruneNothing for 0). count(probes, counts)
// must set counts[g] to how many magnitudes of group g, over every rank holding a part, have
// bits <= probes[g] (count_magnitudes_at_most per part, then a sum over the ranks). It is
// called exactly 32 times, so ranks that pass the same ks make the same collective calls.
using MagnitudeCounter =
    std::function<void(const std::vector<std::uint32_t>& probes, std::vector<long long>& counts)>;
std::vector<std::uint32_t> kth_magnitude_bits(const std::vector<std::int64_t>& ks,
                                              const MagnitudeCounter& count);

// How many elements of x have magnitude_bits(x) <= bits.
std::int64_t count_magnitudes_at_most(ConstVector x, std::uint32_t bits);

// mask[i] = 0 where magnitude_bits(x[i]) <= bits (pruned), 1 elsewhere; x and mask [n].
void magnitude_mask(ConstVector x, std::uint32_t bits, Vector mask);

// x[i] *= mask[i]; both [n]. With a 0/1 mask: the pruned elements become zero (-0 where
// they were negative: equal to 0 all the same).
void apply_mask(ConstVector mask, Vector x);

// How many elements of mask are 0.
std::int64_t count_zeros(ConstVector mask);

// Structured pruning (host side: a few hundred units per layer, recomputed every few hundred
// steps). piece: this rank's elements of a tensor whose logical shape is [rows, row_size...];
// map: piece element -> logical element. Returns [rows] with the sum of squares of each
// logical row's elements found in the piece (zero for rows not held here), so summing the
// results over the ranks holding pieces gives the squared L2 norm of every row.
std::vector<double> row_square_norms(const std::vector<float>& piece, const ShardIndexMap& map,
                                     std::int64_t rows, std::int64_t row_size);

// Which units survive when the k smallest of `norms` are pruned: [units] 0 pruned, 1 kept.
// Ties are broken by index (the lower index goes first), so every rank with the same norms
// prunes the same units; units already pruned (norm 0) are the first to go again.
std::vector<float> units_kept(const std::vector<double>& norms, std::int64_t k);

}  // namespace trellis::kernels
