// DistributedSampler: coverage per epoch at several dp sizes, remainder policies,
// determinism of the shuffle, and the block split of a global batch.
#include "catch.hpp"

#include "trellis/core/error.hpp"
#include "trellis/data/sampler.hpp"

#include <algorithm>
#include <numeric>
#include <set>

using namespace trellis;

namespace {

// How often each sample is seen over one epoch, collected from every rank's local blocks.
std::vector<int> epoch_counts(DistributedSampler& sampler, std::int64_t epoch, int dp) {
  std::vector<int> counts(static_cast<std::size_t>(sampler.dataset_size()), 0);
  for (std::int64_t step = 0; step < sampler.steps_per_epoch(); ++step) {
    for (int r = 0; r < dp; ++r) {
      for (std::int64_t i : sampler.local_indices(epoch, step, r, dp).indices) {
        ++counts[static_cast<std::size_t>(i)];
      }
    }
  }
  return counts;
}

}  // namespace

TEST_CASE("partial: every sample exactly once per epoch at dp = 1, 2, 3", "[sampler]") {
  for (const auto& [n, b] :
       {std::pair<std::int64_t, std::int64_t>{103, 10}, {100, 10}, {7, 10}, {64, 1}, {5, 4}}) {
    DistributedSampler sampler(n, b, 42, true, RemainderPolicy::partial);
    CHECK(sampler.steps_per_epoch() == (n + b - 1) / b);
    for (int dp : {1, 2, 3}) {
      for (std::int64_t epoch : {0, 1, 5}) {
        INFO("n " << n << " b " << b << " dp " << dp << " epoch " << epoch);
        const std::vector<int> counts = epoch_counts(sampler, epoch, dp);
        CHECK(std::all_of(counts.begin(), counts.end(), [](int c) { return c == 1; }));
      }
    }
  }
}

TEST_CASE("local blocks partition each global batch in order", "[sampler]") {
  DistributedSampler sampler(103, 10, 7, true);
  for (int dp : {1, 2, 3, 4, 7}) {
    for (std::int64_t step = 0; step < sampler.steps_per_epoch(); ++step) {
      const std::vector<std::int64_t> global = sampler.global_batch_indices(2, step);
      CHECK(static_cast<std::int64_t>(global.size()) == sampler.batch_size(step));
      std::vector<std::int64_t> joined;
      for (int r = 0; r < dp; ++r) {
        const LocalBatch local = sampler.local_indices(2, step, r, dp);
        CHECK(local.first_position == static_cast<std::int64_t>(joined.size()));
        CHECK(local.global_size == sampler.batch_size(step));
        // Block sizes differ by at most one.
        const auto size = static_cast<std::int64_t>(local.indices.size());
        CHECK(size >= local.global_size / dp);
        CHECK(size <= local.global_size / dp + 1);
        joined.insert(joined.end(), local.indices.begin(), local.indices.end());
      }
      CHECK(joined == global);
    }
  }
  // The last batch of 103 = 10*10 + 3 holds the 3 leftovers; at dp = 4 one rank gets none.
  CHECK(sampler.batch_size(10) == 3);
  CHECK(sampler.local_indices(0, 10, 0, 4).indices.empty());
}

TEST_CASE("drop: floor(N/B) full steps, different leftovers each epoch", "[sampler]") {
  DistributedSampler sampler(103, 10, 42, true, RemainderPolicy::drop);
  CHECK(sampler.steps_per_epoch() == 10);
  CHECK_THROWS_AS(sampler.batch_size(10), Error);
  std::set<std::int64_t> dropped_over_epochs;
  for (std::int64_t epoch = 0; epoch < 6; ++epoch) {
    const std::vector<int> counts = epoch_counts(sampler, epoch, 3);
    CHECK(std::count(counts.begin(), counts.end(), 1) == 100);
    CHECK(std::count(counts.begin(), counts.end(), 0) == 3);
    for (std::size_t i = 0; i < counts.size(); ++i) {
      if (counts[i] == 0) dropped_over_epochs.insert(static_cast<std::int64_t>(i));
    }
  }
  CHECK(dropped_over_epochs.size() > 3);

  DistributedSampler exact(100, 10, 42, true, RemainderPolicy::drop);
  CHECK(exact.steps_per_epoch() == 10);
  CHECK_THROWS_AS(DistributedSampler(5, 10, 1, true, RemainderPolicy::drop), ConfigError);
}

TEST_CASE("the shuffle depends only on (seed, epoch)", "[sampler]") {
  DistributedSampler a(1000, 32, 1234, true), b(1000, 32, 1234, true), c(1000, 32, 99, true);
  const std::vector<std::int64_t> a0 = a.permutation(0), a1 = a.permutation(1);
  CHECK(a0 != a1);
  CHECK(b.permutation(1) == a1);  // another instance (another rank) computes the same
  CHECK(b.permutation(0) == a0);  // and going back to an earlier epoch recomputes it
  CHECK(c.permutation(0) != a0);
  std::vector<std::int64_t> sorted = a0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), std::int64_t{0});
  CHECK(sorted == identity);
  CHECK(a0 != identity);

  // Known answer: resumed runs and other builds must keep producing this exact order.
  DistributedSampler small(10, 4, 1, true);
  const std::vector<std::int64_t> expected{0, 7, 6, 2, 5, 1, 9, 8, 4, 3};
  CHECK(small.permutation(0) == expected);
}

TEST_CASE("shuffle off is the identity order", "[sampler]") {
  DistributedSampler sampler(25, 10, 42, false);
  std::vector<std::int64_t> identity(25);
  std::iota(identity.begin(), identity.end(), std::int64_t{0});
  CHECK(sampler.permutation(0) == identity);
  CHECK(sampler.permutation(3) == identity);
  CHECK(sampler.global_batch_indices(0, 2) == std::vector<std::int64_t>{20, 21, 22, 23, 24});
  const LocalBatch local = sampler.local_indices(0, 1, 1, 2);
  CHECK(local.indices == std::vector<std::int64_t>{15, 16, 17, 18, 19});
  CHECK(local.first_position == 5);
}

TEST_CASE("bounded draws are in range and unbiased", "[sampler]") {
  CHECK(random_below(1, 5, 6, 7) == 0);
  std::vector<int> counts(3, 0);
  const int n = 30000;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t v = random_below(3, 11, 12, static_cast<std::uint64_t>(i));
    REQUIRE(v < 3);
    ++counts[v];
  }
  for (int c : counts) CHECK(c == Approx(n / 3).margin(400));  // ~5 sigma
  // Huge bounds (where modulo bias would be large) stay in range.
  const std::uint64_t big = (std::uint64_t{1} << 63) + 12345;
  for (int i = 0; i < 1000; ++i)
    CHECK(random_below(big, 1, 2, static_cast<std::uint64_t>(i)) < big);
}

TEST_CASE("bad sampler arguments", "[sampler]") {
  CHECK_THROWS_AS(DistributedSampler(0, 4, 1, true), ConfigError);
  CHECK_THROWS_AS(DistributedSampler(10, 0, 1, true), ConfigError);
  DistributedSampler sampler(10, 4, 1, true);
  CHECK_THROWS_AS(sampler.local_indices(0, 0, 2, 2), Error);
  CHECK_THROWS_AS(sampler.global_batch_indices(0, 3), Error);
  CHECK_THROWS_AS(sampler.permutation(-1), Error);
}
