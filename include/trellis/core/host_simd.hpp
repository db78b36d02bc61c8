// What the host bodies of the kernels and the optimizers share.
//
// Each such kernel has two bodies. Host memory: a plain loop over __restrict pointers with a
// contiguous, branch-free inner loop that GCC vectorises, compiled in three clones (AVX-512,
// AVX2 + FMA, baseline x86-64) of which the loader picks the best the CPU has (target_clones,
// an ifunc resolved at start-up): the build host's instruction set is never assumed. Device
// memory: a Kokkos kernel whose consecutive threads touch consecutive elements (coalesced).
// Trellis runs one rank per core, so the host body needs no threads of its own.
#pragma once

#include "trellis/core/code_path.hpp"
#include "trellis/core/kokkos_types.hpp"

// No clones where the build's own -march already has AVX-512 (x86-64-v4, -march=native on an
// AVX-512 host, Spack's target flags): nothing to gain, and GCC 12 crashes (internal compiler
// error) cloning down to x86-64-v3 from such a baseline.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__) && \
    !defined(__AVX512F__)
#define TRELLIS_HOST_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
// For helpers called from a clone: inlined into each clone, so they get its instruction set.
#define TRELLIS_HOST_INLINE inline __attribute__((always_inline))
#else
#define TRELLIS_HOST_CLONES
#define TRELLIS_HOST_INLINE inline
#endif

// Per-ISA versions written by hand, where a clone is not enough: code whose register blocking
// depends on the vector width (a 64-byte GCC vector in an AVX2 clone is split into halves that
// GCC keeps in memory: measured 10x slower than 32-byte vectors there). Built on the same
// condition as the clones; elsewhere the build's own -march is the only version.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__) && \
    !defined(__AVX512F__)
#define TRELLIS_HOST_ISA_VERSIONS 1
#define TRELLIS_TARGET_X86_64_V4 __attribute__((target("arch=x86-64-v4")))
#define TRELLIS_TARGET_X86_64_V3 __attribute__((target("arch=x86-64-v3")))
#else
#define TRELLIS_HOST_ISA_VERSIONS 0
#endif

namespace trellis {

// The instruction-set level the hand-written versions pick: the best this CPU has.
enum class HostIsa { baseline, x86_64_v3, x86_64_v4 };
inline HostIsa host_isa() {
#if TRELLIS_HOST_ISA_VERSIONS
  static const HostIsa isa = __builtin_cpu_supports("x86-64-v4")   ? HostIsa::x86_64_v4
                             : __builtin_cpu_supports("x86-64-v3") ? HostIsa::x86_64_v3
                                                                   : HostIsa::baseline;
  return isa;
#else
  return HostIsa::baseline;  // the build's own instruction set
#endif
}

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

// Both sums sum_j first(j) and sum_j second(j) in double, in 8 interleaved partial sums each
// (one AVX-512 register of doubles), in one pass over j. For BatchNorm's per-channel moments.
template <class First, class Second>
inline void lane_sums_double(std::int64_t n, First first, Second second, double& sum_first,
                             double& sum_second) {
  constexpr int kLanes = 8;
  double a[kLanes] = {}, b[kLanes] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      a[l] += first(j + l);
      b[l] += second(j + l);
    }
  }
  for (int l = 0; j < n; ++j, ++l) {
    a[l] += first(j);
    b[l] += second(j);
  }
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) {
      a[l] += a[l + width];
      b[l] += b[l + width];
    }
  }
  sum_first = a[0];
  sum_second = b[0];
}

// Work items of a per-row device kernel: one team per row, its vector lanes over the columns.
using RowTeams = Kokkos::TeamPolicy<ExecSpace>;

}  // namespace trellis
