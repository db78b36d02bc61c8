#include "trellis/kernels/precision_cast.hpp"

#include "trellis/core/host_simd.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/core/rng.hpp"

namespace trellis::kernels {

namespace {

using Index = std::int64_t;

// Host bodies: branch-free per element, so each clone vectorises the whole loop.
TRELLIS_HOST_CLONES
void host_round_bf16(const float* src, float* dst, Index n) {
  for (Index i = 0; i < n; ++i) dst[i] = bf16_bits_to_float(float_to_bf16_bits(src[i]));
}
TRELLIS_HOST_CLONES
void host_round_fp16(const float* src, float* dst, Index n) {
  for (Index i = 0; i < n; ++i) dst[i] = fp16_bits_to_float(float_to_fp16_bits(src[i]));
}
TRELLIS_HOST_CLONES
void host_to_bf16(const float* __restrict src, std::uint16_t* __restrict dst, Index n) {
  for (Index i = 0; i < n; ++i) dst[i] = float_to_bf16_bits(src[i]);
}
TRELLIS_HOST_CLONES
void host_to_fp16(const float* __restrict src, std::uint16_t* __restrict dst, Index n) {
  for (Index i = 0; i < n; ++i) dst[i] = float_to_fp16_bits(src[i]);
}
TRELLIS_HOST_CLONES
void host_from_bf16(const std::uint16_t* __restrict src, float* __restrict dst, Index n) {
  for (Index i = 0; i < n; ++i) dst[i] = bf16_bits_to_float(src[i]);
}
TRELLIS_HOST_CLONES
void host_from_fp16(const std::uint16_t* __restrict src, float* __restrict dst, Index n) {
  for (Index i = 0; i < n; ++i) dst[i] = fp16_bits_to_float(src[i]);
}

void require_half(Precision p, const char* kernel) {
  TRELLIS_REQUIRE(p != Precision::fp32,
                  std::string(kernel) + ": needs a 16-bit format (bf16 or fp16), got fp32");
}

}  // namespace

void round_to(Precision p, ConstVector src, Vector dst) {
  require_same_shape(src, dst, "round_to");
  const auto n = static_cast<Index>(src.extent(0));
  if (p == Precision::fp32) {
    if (src.data() != dst.data())
      Kokkos::parallel_for(
          TRELLIS_KERNEL_LABEL("trellis::precision::copy"), Range(0, n),
          KOKKOS_LAMBDA(const Index i) { dst(i) = src(i); });
    return;
  }
  if constexpr (kHostKernels) {
    if (p == Precision::bf16)
      host_round_bf16(src.data(), dst.data(), n);
    else
      host_round_fp16(src.data(), dst.data(), n);
    return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::precision::round_to"), Range(0, n),
      KOKKOS_LAMBDA(const Index i) { dst(i) = trellis::round_to(p, src(i)); });
}

void round_stochastic(Precision p, ConstVector src, Vector dst, std::uint64_t seed,
                      std::uint64_t stream, const ShardIndexMap& map) {
  require_same_shape(src, dst, "round_stochastic");
  if (p == Precision::fp32) return round_to(p, src, dst);
  // One Philox draw gives four words: logical elements 4j .. 4j+3 share draw j, whatever the
  // caller's chunking or sharding, because the draw index comes from the logical index.
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::precision::round_stochastic"),
      Range(0, static_cast<Index>(src.extent(0))), KOKKOS_LAMBDA(const Index i) {
        const std::uint64_t global = map(static_cast<std::uint64_t>(i));
        const Philox4x32 words = random_words(seed, stream, global >> 2);
        const std::uint16_t bits = to_half_bits_stochastic(p, src(i), words.v[global & 3u]);
        dst(i) = half_bits_to_float(p, bits);
      });
}

void to_half_stochastic(Precision p, ConstVector src, HalfVector dst, std::uint64_t seed,
                        std::uint64_t stream, const ShardIndexMap& map) {
  require_half(p, "to_half_stochastic");
  require_same_shape(src, dst, "to_half_stochastic");
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::precision::to_half_stochastic"),
      Range(0, static_cast<Index>(src.extent(0))), KOKKOS_LAMBDA(const Index i) {
        const std::uint64_t global = map(static_cast<std::uint64_t>(i));
        const Philox4x32 words = random_words(seed, stream, global >> 2);
        dst(i) = to_half_bits_stochastic(p, src(i), words.v[global & 3u]);
      });
}

void to_half(Precision p, ConstVector src, HalfVector dst) {
  require_half(p, "to_half");
  require_same_shape(src, dst, "to_half");
  const auto n = static_cast<Index>(src.extent(0));
  if constexpr (kHostKernels) {
    if (p == Precision::bf16)
      host_to_bf16(src.data(), dst.data(), n);
    else
      host_to_fp16(src.data(), dst.data(), n);
    return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::precision::to_half"), Range(0, n),
      KOKKOS_LAMBDA(const Index i) { dst(i) = to_half_bits(p, src(i)); });
}

void from_half(Precision p, ConstHalfVector src, Vector dst) {
  require_half(p, "from_half");
  require_same_shape(src, dst, "from_half");
  const auto n = static_cast<Index>(src.extent(0));
  if constexpr (kHostKernels) {
    if (p == Precision::bf16)
      host_from_bf16(src.data(), dst.data(), n);
    else
      host_from_fp16(src.data(), dst.data(), n);
    return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::precision::from_half"), Range(0, n),
      KOKKOS_LAMBDA(const Index i) { dst(i) = half_bits_to_float(p, src(i)); });
}

void add_from_half(Precision p, ConstHalfVector src, Vector dst) {
  require_half(p, "add_from_half");
  require_same_shape(src, dst, "add_from_half");
  const auto n = static_cast<Index>(src.extent(0));
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::precision::add_from_half"), Range(0, n),
      KOKKOS_LAMBDA(const Index i) { dst(i) += half_bits_to_float(p, src(i)); });
}

}  // namespace trellis::kernels
