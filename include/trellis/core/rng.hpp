// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11 / Random123).
//
// A random number is a pure function of (seed, stream, index): no state, no sequence. So the
// same parameter element, dropout mask bit or shuffle draw gets the same value on any backend,
// any number of ranks and any split of a tensor, and a resumed run needs no RNG state beyond
// the seed and the step. Streams separate independent uses (one per parameter name, one per
// dropout layer and step, one per epoch shuffle).
#pragma once

#include "trellis/core/math.hpp"

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>

namespace trellis {

struct Philox4x32 {
  std::uint32_t v[4];
};

KOKKOS_INLINE_FUNCTION Philox4x32 philox4x32_10(Philox4x32 counter, std::uint32_t key0,
                                                std::uint32_t key1) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * counter.v[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * counter.v[2];
    const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32),
                        lo0 = static_cast<std::uint32_t>(p0);
    const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32),
                        lo1 = static_cast<std::uint32_t>(p1);
    counter = Philox4x32{{hi1 ^ counter.v[1] ^ key0, lo1, hi0 ^ counter.v[3] ^ key1, lo0}};
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return counter;
}

// Four independent 32-bit words for (seed, stream, index).
KOKKOS_INLINE_FUNCTION Philox4x32 random_words(std::uint64_t seed, std::uint64_t stream,
                                               std::uint64_t index) {
  Philox4x32 counter{{static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                      static_cast<std::uint32_t>(stream),
                      static_cast<std::uint32_t>(stream >> 32)}};
  return philox4x32_10(counter, static_cast<std::uint32_t>(seed),
                       static_cast<std::uint32_t>(seed >> 32));
}

// Uniform in [0, 1) with 24 random bits (every value exactly representable in float).
KOKKOS_INLINE_FUNCTION float word_to_unit_float(std::uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

KOKKOS_INLINE_FUNCTION float random_uniform(std::uint64_t seed, std::uint64_t stream,
                                            std::uint64_t index) {
  return word_to_unit_float(random_words(seed, stream, index).v[0]);
}

// Standard normal by Box-Muller on two words of the same draw; computed in double so that
// host and device agree to the last float bit.
KOKKOS_INLINE_FUNCTION float random_normal(std::uint64_t seed, std::uint64_t stream,
                                           std::uint64_t index) {
  const Philox4x32 w = random_words(seed, stream, index);
  const double u1 = (static_cast<double>(w.v[0]) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
  const double u2 = static_cast<double>(w.v[1]) * (1.0 / 4294967296.0);
  return static_cast<float>(math::sqrt(-2.0 * math::log(u1)) * math::cos(6.283185307179586 * u2));
}

// Stable 64-bit stream id for a name (FNV-1a), e.g. a parameter's "fc1.weight".
std::uint64_t stream_from_name(const std::string& name);

// Combines a stream id with a sub-index (layer, step, epoch) into a new stream id.
constexpr std::uint64_t stream_mix(std::uint64_t stream, std::uint64_t sub) {
  std::uint64_t x = stream ^ (sub + 0x9E3779B97F4A7C15ull + (stream << 6) + (stream >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return x;
}

}  // namespace trellis
