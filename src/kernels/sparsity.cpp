#include "trellis/kernels/sparsity.hpp"

#include "trellis/core/kernel_label.hpp"

#include <algorithm>
#include <numeric>

namespace trellis::kernels {

std::vector<std::uint32_t> kth_magnitude_bits(const std::vector<std::int64_t>& ks,
                                              const MagnitudeCounter& count) {
  // The smallest b with count(bits <= b) >= k, in [0, 2^31 - 1]: 31 halvings find it; one
  // more probe keeps the call count a round, fixed number.
  const std::size_t n = ks.size();
  std::vector<std::uint32_t> lo(n, 0), hi(n, 0x7fffffffu), probes(n);
  std::vector<long long> counts(n);
  for (int probe = 0; probe < 32; ++probe) {
    for (std::size_t g = 0; g < n; ++g) probes[g] = lo[g] + (hi[g] - lo[g]) / 2;
    count(probes, counts);
    for (std::size_t g = 0; g < n; ++g) {
      if (lo[g] >= hi[g]) continue;
      if (counts[g] >= ks[g])
        hi[g] = probes[g];
      else
        lo[g] = probes[g] + 1;
    }
  }
  for (std::size_t g = 0; g < n; ++g)
    if (ks[g] <= 0) lo[g] = kPruneNothing;
  return lo;
}

std::int64_t count_magnitudes_at_most(ConstVector x, std::uint32_t bits) {
  std::int64_t count = 0;
  Kokkos::parallel_reduce(
      TRELLIS_KERNEL_LABEL("trellis::sparsity::count_at_most"), Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i, std::int64_t& sum) {
        sum += magnitude_bits(x(i)) <= bits ? 1 : 0;
      },
      count);
  return count;
}

void magnitude_mask(ConstVector x, std::uint32_t bits, Vector mask) {
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::sparsity::magnitude_mask"), Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i) {
        mask(i) = magnitude_bits(x(i)) <= bits ? 0.0f : 1.0f;
      });
}

void apply_mask(ConstVector mask, Vector x) {
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::sparsity::apply_mask"), Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i) { x(i) *= mask(i); });
}

std::int64_t count_zeros(ConstVector mask) {
  std::int64_t count = 0;
  Kokkos::parallel_reduce(
      TRELLIS_KERNEL_LABEL("trellis::sparsity::count_zeros"), Range(0, mask.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i, std::int64_t& sum) { sum += mask(i) == 0.0f ? 1 : 0; },
      count);
  return count;
}

std::vector<double> row_square_norms(const std::vector<float>& piece, const ShardIndexMap& map,
                                     std::int64_t rows, std::int64_t row_size) {
  std::vector<double> norms(static_cast<std::size_t>(rows), 0.0);
  for (std::size_t e = 0; e < piece.size(); ++e) {
    const double v = piece[e];
    norms[map(e) / static_cast<std::uint64_t>(row_size)] += v * v;
  }
  return norms;
}

std::vector<float> units_kept(const std::vector<double>& norms, std::int64_t k) {
  std::vector<std::size_t> order(norms.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return norms[a] < norms[b]; });
  std::vector<float> keep(norms.size(), 1.0f);
  const auto pruned =
      std::min<std::size_t>(static_cast<std::size_t>(std::max<std::int64_t>(k, 0)), norms.size());
  for (std::size_t i = 0; i < pruned; ++i) keep[order[i]] = 0.0f;
  return keep;
}

}  // namespace trellis::kernels
