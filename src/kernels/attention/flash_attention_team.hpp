// The Kokkos team machinery the flash attention kernels share (forward in flash_attention.cpp,
// backward in flash_attention_backward.cpp); private to src/kernels.
#pragma once

#include "flash_attention_impl.hpp"

#include "trellis/core/code_path.hpp"
#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/views.hpp"

#include <cstdint>

namespace trellis::kernels::flash {

using TeamPolicy = Kokkos::TeamPolicy<ExecSpace>;
using Team = TeamPolicy::member_type;
using Scratch = Kokkos::View<float*, ExecSpace::scratch_memory_space, Unmanaged>;

// Tile sizes and team shape: see the header (L1/L2 on the host, 48 KiB shared memory on GPUs).
#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP)
constexpr int kTileQ = 32, kTileK = 32, kTeamSize = 8, kVectorLength = 32;
#elif TRELLIS_PORTABLE_KERNELS
// The device tiles; Kokkos' host back-ends run teams of one thread and one lane.
constexpr int kTileQ = 32, kTileK = 32, kTeamSize = 1, kVectorLength = 1;
#else
constexpr int kTileQ = 64, kTileK = 64, kTeamSize = 1, kVectorLength = 1;
#endif

// Loops of a team. GPUs: rows over the team's threads, the contiguous index over vector
// lanes (consecutive addresses: coalesced). Host (team of one): plain unit-stride loops, which
// GCC vectorises; Kokkos 3.4's host ThreadVectorRange steps by a run-time increment, which
// defeats the vectoriser ("complicated access pattern").
template <class F>
KOKKOS_FORCEINLINE_FUNCTION void team_for(const Team& team, std::int64_t n, const F& f) {
#if TRELLIS_DEVICE_BODIES
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), f);
#else
  (void)team;
  for (std::int64_t i = 0; i < n; ++i) f(i);
#endif
}

template <class F>
KOKKOS_FORCEINLINE_FUNCTION void vector_for(const Team& team, std::int64_t n, const F& f) {
#if TRELLIS_DEVICE_BODIES
  Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, n), f);
#else
  (void)team;
  for (std::int64_t i = 0; i < n; ++i) f(i);
#endif
}

// max / sum of x[0, n). Host: 8 partial results, so the loop vectorises without reassociating
// a single running value (which GCC will not do without -ffast-math).
KOKKOS_INLINE_FUNCTION float vector_max(const Team& team, std::int64_t n, const float* x) {
  float result = x[0];
#if TRELLIS_DEVICE_BODIES
  Kokkos::parallel_reduce(
      Kokkos::ThreadVectorRange(team, n),
      [&](const std::int64_t j, float& mx) { mx = x[j] > mx ? x[j] : mx; },
      Kokkos::Max<float>(result));
#else
  (void)team;
  float part[8] = {result, result, result, result, result, result, result, result};
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) part[l] = x[j + l] > part[l] ? x[j + l] : part[l];
  for (; j < n; ++j) result = x[j] > result ? x[j] : result;
  for (int l = 0; l < 8; ++l) result = part[l] > result ? part[l] : result;
#endif
  return result;
}

KOKKOS_INLINE_FUNCTION float vector_sum(const Team& team, std::int64_t n, const float* x) {
  float result = 0.0f;
#if TRELLIS_DEVICE_BODIES
  Kokkos::parallel_reduce(
      Kokkos::ThreadVectorRange(team, n), [&](const std::int64_t j, float& sum) { sum += x[j]; },
      result);
#else
  (void)team;
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) part[l] += x[j + l];
  for (; j < n; ++j) result += x[j];
  for (int l = 0; l < 8; ++l) result += part[l];
#endif
  return result;
}

KOKKOS_INLINE_FUNCTION std::int64_t visible_keys(std::int64_t t, std::int64_t k0, std::int64_t kn) {
  const std::int64_t v = t - k0 + 1;  // keys k0 .. t of this tile
  return v < 0 ? 0 : (v > kn ? kn : v);
}

inline TeamPolicy team_policy(std::int64_t league, std::size_t scratch_bytes) {
  TeamPolicy policy(static_cast<int>(league), kTeamSize, kVectorLength);
  policy.set_scratch_size(0, Kokkos::PerTeam(scratch_bytes));
  return policy;
}

}  // namespace trellis::kernels::flash
