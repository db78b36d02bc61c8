// What the host paths of the element-wise kernels share (private to src/kernels).
//
// Each such kernel has two bodies. Host memory: a plain loop over __restrict pointers with a
// contiguous, branch-free inner loop that GCC vectorises, compiled in three clones (AVX-512,
// AVX2 + FMA, baseline x86-64) of which the loader picks the best the CPU has (target_clones,
// an ifunc resolved at start-up): the build host's instruction set is never assumed. Device
// memory: a Kokkos kernel whose consecutive threads touch consecutive elements (coalesced).
// Trellis runs one rank per core, so the host body needs no threads of its own.
#pragma once

#include "trellis/core/kokkos_types.hpp"

#include <type_traits>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__)
#define TRELLIS_HOST_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TRELLIS_HOST_CLONES
#endif

namespace trellis::kernels {

inline constexpr bool kHostMemory = std::is_same_v<MemSpace, Kokkos::HostSpace>;

// sum_j term(j) for j in [0, n) in 16 interleaved partial sums (lane l adds terms l, l + 16,
// ...), then the partial sums pairwise: a float reduction GCC can vectorise without
// -ffast-math, because the order of additions is written out. Deterministic; it differs from
// a left-to-right sum only by rounding.
template <class Term>
inline float lane_sum(std::int64_t n, Term term) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += term(j + l);
  }
  for (int l = 0; j < n; ++j, ++l) acc[l] += term(j);
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// Work items of a per-row device kernel: one team per row, its vector lanes over the columns.
using RowTeams = Kokkos::TeamPolicy<ExecSpace>;

}  // namespace trellis::kernels
