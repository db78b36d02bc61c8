// What the optimizers' host loops share (private to src/optim).
//
// Every optimizer step is one pass over the flat buffers: on the host a branch-free loop over
// __restrict pointers per run of equal decay flag (decay_runs()), compiled in three clones
// (AVX-512, AVX2 + FMA, baseline x86-64) of which the loader picks the best the CPU has; in
// device memory a flat RangePolicy, where consecutive threads touch consecutive elements
// (coalesced) and the decay mask is read per element (a select, not a divergent branch: masks
// are constant over long runs). Square roots are __builtin_sqrtf, and adam.cpp / rmsprop.cpp
// build with -fno-math-errno (cmake/TrellisLayers.cmake): with errno semantics each sqrt is a
// scalar call and the loop does not vectorise (GCC 12 ignores no-math-errno in optimize
// attributes and pragmas). The arguments are never negative; NaN still propagates. The clone and
// inline macros are core/host_simd.hpp's.
#pragma once

#include "trellis/core/host_simd.hpp"
#include "trellis/core/kokkos_types.hpp"

#include <type_traits>

namespace trellis::optim_detail {

using trellis::kHostKernels;

// data() + offset of a state buffer that may be unallocated (nullptr then).
inline float* at(const FloatView& view, std::size_t offset) {
  return view.data() == nullptr ? nullptr : view.data() + offset;
}

}  // namespace trellis::optim_detail
