#include "trellis/kernels/random_fill.hpp"

#include "trellis/core/kernel_label.hpp"

#include "trellis/core/rng.hpp"

namespace trellis::kernels {

void fill_uniform(Vector x, float lo, float hi, std::uint64_t seed, std::uint64_t stream,
                  const ShardIndexMap& map) {
  const float width = hi - lo;
  const ShardIndexMap index_of = map;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::init::uniform"),
      Range(0, static_cast<std::int64_t>(x.extent(0))), KOKKOS_LAMBDA(const std::int64_t e) {
        const std::uint64_t index = index_of(static_cast<std::uint64_t>(e));
        x(e) = lo + width * random_uniform(seed, stream, index);
      });
}

void fill_normal(Vector x, float mean, float stddev, std::uint64_t seed, std::uint64_t stream,
                 const ShardIndexMap& map) {
  const ShardIndexMap index_of = map;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::init::normal"),
      Range(0, static_cast<std::int64_t>(x.extent(0))), KOKKOS_LAMBDA(const std::int64_t e) {
        const std::uint64_t index = index_of(static_cast<std::uint64_t>(e));
        x(e) = mean + stddev * random_normal(seed, stream, index);
      });
}

}  // namespace trellis::kernels
