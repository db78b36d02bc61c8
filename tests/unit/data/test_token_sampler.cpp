// TokenWindowSampler and TokenEvalWindows: starts are a pure function of (seed, step,
// position), in range, split into contiguous rank blocks that partition the global batch at
// any dp; evaluation windows score every target token of the stream exactly once.
#include "catch.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/rng.hpp"
#include "trellis/data/sampler.hpp"
#include "trellis/data/token_sampler.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <tuple>

using namespace trellis;

TEST_CASE("window starts follow the documented formula and stay in range", "[token]") {
  const std::int64_t tokens = 1000;
  const int seq_len = 64;
  TokenWindowSampler sampler(tokens, seq_len, 32, 1234);
  CHECK(sampler.window() == 65);
  const std::uint64_t stream = stream_from_name("token-windows");
  std::set<std::int64_t> distinct;
  for (std::int64_t step : {0, 1, 7, 123456}) {
    for (std::int64_t p = 0; p < 32; ++p) {
      const std::int64_t start = sampler.start(step, p);
      CHECK(start == static_cast<std::int64_t>(
                         random_below(tokens - seq_len, 1234, stream_mix(stream, step), p)));
      CHECK(start >= 0);
      CHECK(start + sampler.window() <= tokens);
      distinct.insert(start);
    }
  }
  CHECK(distinct.size() > 100);  // 128 draws from 936 values: few collisions

  // Same arguments, another instance: same starts; another seed or step: different batch.
  TokenWindowSampler again(tokens, seq_len, 32, 1234), other_seed(tokens, seq_len, 32, 1235);
  std::vector<std::int64_t> a, b, c, d;
  sampler.global_starts(5, a);
  again.global_starts(5, b);
  other_seed.global_starts(5, c);
  sampler.global_starts(6, d);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != d);

  // The tightest stream: exactly one window fits, so every start is 0.
  TokenWindowSampler tight(65, 64, 4, 9);
  tight.global_starts(3, a);
  CHECK(a == std::vector<std::int64_t>(4, 0));
}

TEST_CASE("window starts cover their range about uniformly", "[token]") {
  TokenWindowSampler sampler(18, 8, 1000, 77);  // starts in [0, 10)
  std::vector<int> counts(10, 0);
  std::vector<std::int64_t> starts;
  for (std::int64_t step = 0; step < 10; ++step) {
    sampler.global_starts(step, starts);
    for (std::int64_t s : starts) ++counts[static_cast<std::size_t>(s)];
  }
  // 10000 draws, 1000 expected per value, standard deviation ~30.
  for (int c : counts) CHECK(std::abs(c - 1000) < 200);
}

TEST_CASE("local window blocks partition the global batch at any dp", "[token]") {
  TokenWindowSampler sampler(5000, 16, 10, 42);
  std::vector<std::int64_t> global, local;
  for (std::int64_t step : {0, 3, 99}) {
    sampler.global_starts(step, global);
    REQUIRE(global.size() == 10);
    for (int dp : {1, 2, 3, 4, 7, 10, 16}) {
      INFO("step " << step << " dp " << dp);
      std::vector<std::int64_t> joined;
      for (int r = 0; r < dp; ++r) {
        const std::int64_t first = sampler.local_starts(step, r, dp, local);
        CHECK(first == static_cast<std::int64_t>(joined.size()));
        CHECK(local.size() >= static_cast<std::size_t>(10 / dp));
        CHECK(local.size() <= static_cast<std::size_t>(10 / dp + 1));
        joined.insert(joined.end(), local.begin(), local.end());
      }
      CHECK(joined == global);  // the same windows in the same order, whatever the layout
    }
  }
  CHECK_THROWS_AS(sampler.local_starts(0, 2, 2, local), Error);
}

TEST_CASE("evaluation windows score every target token exactly once", "[token]") {
  for (const auto& [tokens, seq_len, batch] :
       {std::tuple<std::int64_t, int, std::int64_t>{103, 10, 3},
        {101, 10, 4},
        {11, 10, 8},
        {1000, 7, 16}}) {
    TokenEvalWindows eval(tokens, seq_len, batch);
    const std::int64_t k = (tokens - 1) / seq_len;
    CHECK(eval.window_count() == k);
    CHECK(eval.scored_tokens() == k * seq_len);
    CHECK(eval.steps() == (k + batch - 1) / batch);
    for (int dp : {1, 2, 3, 5}) {
      INFO("tokens " << tokens << " seq_len " << seq_len << " batch " << batch << " dp " << dp);
      std::vector<int> scored(static_cast<std::size_t>(tokens), 0);  // times each is a target
      std::vector<std::int64_t> all, local;
      for (std::int64_t step = 0; step < eval.steps(); ++step) {
        std::int64_t joined = 0;
        for (int r = 0; r < dp; ++r) {
          const std::int64_t first = eval.local_starts(step, r, dp, local);
          CHECK(first == joined);
          joined += static_cast<std::int64_t>(local.size());
          all.insert(all.end(), local.begin(), local.end());
        }
        CHECK(joined == eval.batch_size(step));
      }
      REQUIRE(static_cast<std::int64_t>(all.size()) == k);
      for (std::size_t w = 0; w < all.size(); ++w) {
        CHECK(all[w] == static_cast<std::int64_t>(w) * seq_len);  // in order, stride seq_len
        CHECK(all[w] + eval.window() <= tokens);
        for (std::int64_t t = all[w] + 1; t <= all[w] + seq_len; ++t)
          ++scored[static_cast<std::size_t>(t)];
      }
      CHECK(scored[0] == 0);  // the first token has no context to be predicted from
      for (std::int64_t t = 1; t < tokens; ++t)
        CHECK(scored[static_cast<std::size_t>(t)] == (t <= k * seq_len ? 1 : 0));
    }
  }
}

TEST_CASE("token samplers reject streams shorter than one window", "[token]") {
  CHECK_THROWS_AS(TokenWindowSampler(64, 64, 8, 1), ConfigError);
  CHECK_THROWS_AS(TokenWindowSampler(100, 0, 8, 1), ConfigError);
  CHECK_THROWS_AS(TokenWindowSampler(100, 8, 0, 1), ConfigError);
  CHECK_THROWS_AS(TokenEvalWindows(10, 10, 4), ConfigError);
  CHECK_NOTHROW(TokenEvalWindows(11, 10, 4));
  try {
    TokenWindowSampler(64, 64, 8, 1);
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("64 tokens, fewer than one window of seq_len + 1 = 65") !=
          std::string::npos);
  }
}
