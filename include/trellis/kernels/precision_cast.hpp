// Bulk conversions between fp32 and the 16-bit formats (core/precision.hpp), element-wise and
// bit-exact between host and device:
//   round_to          fp32 -> fp32 holding the nearest bf16/fp16 value (autocast operands)
//   round_stochastic  the same with stochastic rounding, the random word of element i drawn
//                     from (seed, stream, map(i)), map(i) the element's index in its logical
//                     tensor: the same bits for any layout, tensor-parallel pieces included
//   to_half/from_half fp32 <-> 16-bit words (the compressed gradient wire)
// fp32 as the format makes round_to a copy (or nothing, in place).
#pragma once

#include "trellis/core/precision.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/kernels/views.hpp"

#include <cstdint>

namespace trellis::kernels {

using HalfView = Kokkos::View<std::uint16_t*, MemSpace>;
using HalfVector = Kokkos::View<std::uint16_t*, MemSpace, Unmanaged>;
using ConstHalfVector = Kokkos::View<const std::uint16_t*, MemSpace, Unmanaged>;

// dst[i] = round_to(p, src[i]); dst may be src (in place). Same lengths, Error otherwise.
void round_to(Precision p, ConstVector src, Vector dst);
// dst[i] = nearest-or-next value of p by stochastic rounding; dst may be src.
void round_stochastic(Precision p, ConstVector src, Vector dst, std::uint64_t seed,
                      std::uint64_t stream, const ShardIndexMap& map = {});
// dst[i] = src[i] in p (bf16 or fp16; Error for fp32), round to nearest even.
void to_half(Precision p, ConstVector src, HalfVector dst);
// to_half with stochastic rounding, keyed as round_stochastic (the same values).
void to_half_stochastic(Precision p, ConstVector src, HalfVector dst, std::uint64_t seed,
                        std::uint64_t stream, const ShardIndexMap& map = {});
// dst[i] = src[i] as fp32 (exact).
void from_half(Precision p, ConstHalfVector src, Vector dst);
// dst[i] += src[i] as fp32 (a 16-bit partial gradient into the fp32 one).
void add_from_half(Precision p, ConstHalfVector src, Vector dst);

}  // namespace trellis::kernels
