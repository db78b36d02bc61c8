// Pruning's pieces: the cubic schedule (Zhu & Gupta 2017), the exact k-th smallest magnitude
// found by bit-wise binary search (against a sort), the masks built from it, the units of
// structured pruning ranked by norm over tp pieces, and export's slicing.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/sparsity.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/optim/sparsity_schedule.hpp"
#include "trellis/train/commands/export_command.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace trellis;
using namespace trellis::test;

namespace {

// The k-th smallest |x| (1-based) by sorting: the reference.
float kth_smallest_magnitude(std::vector<float> x, std::size_t k) {
  for (float& v : x) v = std::fabs(v);
  std::sort(x.begin(), x.end());
  return x[k - 1];
}

float from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// count() over `parts` slices of x, summed, as ranks holding pieces would.
kernels::MagnitudeCounter counter_over(const FloatView& x, int parts) {
  return [x, parts](const std::vector<std::uint32_t>& probes, std::vector<long long>& counts) {
    const std::size_t n = x.extent(0), step = (n + parts - 1) / parts;
    counts[0] = 0;
    for (std::size_t begin = 0; begin < n; begin += step)
      counts[0] +=
          kernels::count_magnitudes_at_most(slice(x, begin, std::min(n, begin + step)), probes[0]);
  };
}

}  // namespace

TEST_CASE("the sparsity schedule follows the cubic of Zhu and Gupta", "[sparsity]") {
  SparsitySchedule s;
  s.initial = 0.1, s.final = 0.9, s.start_step = 100, s.end_step = 500, s.frequency = 100;
  CHECK(s.target(99) == 0.0);
  CHECK(s.target(100) == Approx(0.1));
  // halfway: s_f + (s_i - s_f) (1/2)^3
  CHECK(s.target(300) == Approx(0.9 - 0.8 * 0.125));
  CHECK(s.target(200) == Approx(0.9 - 0.8 * 0.75 * 0.75 * 0.75));
  CHECK(s.target(500) == Approx(0.9));
  CHECK(s.target(10000) == Approx(0.9));
  for (std::int64_t t = 101; t <= 500; ++t) CHECK(s.target(t) >= s.target(t - 1));
  std::vector<std::int64_t> due;
  for (std::int64_t t = 0; t <= 1000; ++t)
    if (s.due(t)) due.push_back(t);
  CHECK(due == std::vector<std::int64_t>{100, 200, 300, 400, 500});
  s.frequency = 150;  // does not divide the span: the end step is still due
  due.clear();
  for (std::int64_t t = 0; t <= 1000; ++t)
    if (s.due(t)) due.push_back(t);
  CHECK(due == std::vector<std::int64_t>{100, 250, 400, 500});
  s.end_step = s.start_step;  // one-shot pruning
  CHECK(s.target(100) == Approx(0.9));
  CHECK(s.due(100));
  CHECK_FALSE(s.due(101));
}

TEST_CASE("the k-th smallest magnitude is exact, whatever the split over ranks", "[sparsity]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> x(10007);
  for (float& v : x) v = normal(rng);
  x[5] = 0.0f, x[6] = -0.0f;  // pruned weights of an earlier step: the smallest
  const FloatView device = to_device("x", x);
  for (const std::size_t k : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{5000},
                              std::size_t{9006}, x.size()})
    for (const int parts : {1, 2, 3, 8}) {
      const std::vector<std::uint32_t> bits =
          kernels::kth_magnitude_bits({static_cast<std::int64_t>(k)}, counter_over(device, parts));
      CHECK(from_bits(bits[0]) == kth_smallest_magnitude(x, k));
    }
  const std::vector<std::uint32_t> none = kernels::kth_magnitude_bits({0}, counter_over(device, 1));
  CHECK(none[0] == kernels::kPruneNothing);
}

TEST_CASE("a magnitude mask prunes the k smallest, ties at the threshold with them", "[sparsity]") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(4096);
  for (float& v : x) v = uniform(rng);
  const std::int64_t k = 3686;  // 90%
  const FloatView device = to_device("x", x);
  const std::uint32_t bits = kernels::kth_magnitude_bits({k}, counter_over(device, 1))[0];
  const FloatView device_mask("mask", x.size());
  kernels::magnitude_mask(device, bits, device_mask);
  const std::vector<float> mask = to_host(device_mask);
  const float threshold = kth_smallest_magnitude(x, static_cast<std::size_t>(k));
  std::int64_t pruned = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    CHECK(mask[i] == (std::fabs(x[i]) <= threshold ? 0.0f : 1.0f));
    pruned += mask[i] == 0.0f;
  }
  CHECK(pruned == k);  // no ties among continuous draws
  CHECK(kernels::count_zeros(device_mask) == k);
  kernels::apply_mask(device_mask, device);
  const std::vector<float> masked = to_host(device);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(masked[i] == (mask[i] == 0.0f ? 0.0f : x[i]));

  // k = 2 meets a three-way tie at 0.25: all three go.
  const FloatView tied = to_device("tied", {0.5f, -0.25f, 0.25f, 0.25f, 1.0f});
  const std::uint32_t tie_bits = kernels::kth_magnitude_bits({2}, counter_over(tied, 1))[0];
  const FloatView tie_mask("tie_mask", 5);
  kernels::magnitude_mask(tied, tie_bits, tie_mask);
  CHECK(to_host(tie_mask) == std::vector<float>{1.0f, 0.0f, 0.0f, 0.0f, 1.0f});
}

TEST_CASE("structured pruning ranks units by L2 norm, whatever the tp split", "[sparsity]") {
  // A [4, 3] weight: row norms^2 14, 0.25, 77, 0.25.
  const std::vector<float> w{1, 2, 3, 0.5f, 0, 0, 4, 5, 6, 0, 0, 0.5f};
  const Shape logical{4, 3};
  const std::vector<double> whole =
      kernels::row_square_norms(w, nn::ShardSpec{}.index_map(logical), 4, 3);
  CHECK(whole == std::vector<double>{14.0, 0.25, 77.0, 0.25});
  // Split over 2 tp ranks by rows (column-parallel) and by columns (row-parallel): the pieces'
  // squares add up to the same norms.
  for (const int dim : {0, 1}) {
    const int parts = dim == 0 ? 2 : 3;
    std::vector<double> sum(4, 0.0);
    for (int index = 0; index < parts; ++index) {
      const nn::ShardSpec spec = nn::ShardSpec::split(dim, parts, index);
      const kernels::ShardIndexMap map = spec.index_map(logical);
      std::vector<float> piece(static_cast<std::size_t>(12 / parts));
      for (std::size_t e = 0; e < piece.size(); ++e) piece[e] = w[map(e)];
      const std::vector<double> part = kernels::row_square_norms(piece, map, 4, 3);
      for (std::size_t r = 0; r < 4; ++r) sum[r] += part[r];
    }
    CHECK(sum == whole);
  }
  // k = 1: the tie at 0.25 goes to the lower index; k = 2 takes both; k beyond: all.
  CHECK(kernels::units_kept(whole, 0) == std::vector<float>{1, 1, 1, 1});
  CHECK(kernels::units_kept(whole, 1) == std::vector<float>{1, 0, 1, 1});
  CHECK(kernels::units_kept(whole, 2) == std::vector<float>{1, 0, 1, 0});
  CHECK(kernels::units_kept(whole, 3) == std::vector<float>{0, 0, 1, 0});
  CHECK(kernels::units_kept(whole, 9) == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("select_along keeps the listed indices of one dimension", "[sparsity][export]") {
  // [2, 3, 2]: value = 100 a + 10 b + c.
  std::vector<float> x;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) x.push_back(static_cast<float>(100 * a + 10 * b + c));
  CHECK(select_along(x, {2, 3, 2}, 1, {0, 2}) ==
        std::vector<float>{0, 1, 20, 21, 100, 101, 120, 121});
  CHECK(select_along(x, {2, 3, 2}, 0, {1}) == std::vector<float>{100, 101, 110, 111, 120, 121});
  CHECK(select_along(x, {2, 3, 2}, 2, {1}) == std::vector<float>{1, 11, 21, 101, 111, 121});
  CHECK_THROWS_AS(select_along(x, {2, 3, 2}, 1, {3}), Error);
  CHECK_THROWS_AS(select_along(x, {2, 3, 2}, 3, {0}), Error);
}
