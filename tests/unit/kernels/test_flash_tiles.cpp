// The forward tile products of the host flash attention (kernels/attention/flash_tiles.hpp) in
// every instruction-set version this CPU runs: each against a double-precision reference on
// the visible (causal) columns, full and partial tiles, head dimensions 16 to 128; the AVX2 and
// AVX-512 versions (both with FMA) give the same bits where the CPU has both.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/host_simd.hpp"
#include "trellis/kernels/attention/flash_tiles.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace trellis;
using trellis::kernels::flash::kHostTile;
using trellis::test::random_values;

namespace {

std::vector<HostIsa> versions_here() {
  std::vector<HostIsa> all{HostIsa::baseline};
  if (host_isa() != HostIsa::baseline) all.push_back(HostIsa::x86_64_v3);
  if (host_isa() == HostIsa::x86_64_v4) all.push_back(HostIsa::x86_64_v4);
  return all;
}

struct TileCase {
  std::int64_t qn, kn, hd, shift;
};

// Keys query row i sees.
std::int64_t visible(const TileCase& c, std::int64_t i) {
  return std::clamp<std::int64_t>(i + c.shift + 1, 0, c.kn);
}

}  // namespace

TEST_CASE("flash tile products agree with a reference in every instruction-set version",
          "[attention][flash]") {
  if (!kernels::flash::vector_tiles_fit(32)) {
    WARN("this build has no vector tile products (no GCC vectors): nothing to compare");
    return;
  }
  const std::vector<TileCase> cases{{64, 64, 32, 0},  {64, 64, 32, 64}, {5, 5, 32, 0},
                                    {37, 64, 16, 0},  {64, 23, 64, 41}, {64, 64, 128, 0},
                                    {64, 64, 48, 64}, {3, 64, 96, 61}};
  const std::int64_t ld = 3 * 128 + 5;  // rows of a wider qkv buffer
  std::vector<std::vector<float>> v3_results, v4_results;
  for (const HostIsa isa : versions_here()) {
    for (std::size_t n = 0; n < cases.size(); ++n) {
      const TileCase& c = cases[n];
      INFO("isa " << static_cast<int>(isa) << ", qn " << c.qn << ", kn " << c.kn << ", hd " << c.hd
                  << ", shift " << c.shift);
      const std::vector<float> q = random_values(static_cast<std::size_t>(kHostTile * ld), 1);
      const std::vector<float> k = random_values(static_cast<std::size_t>(kHostTile * ld), 2);
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
      std::vector<float> s(static_cast<std::size_t>(kHostTile * kHostTile), 7.0f);
      kernels::flash::scores_tile(isa, c.qn, c.kn, c.hd, c.shift, scale, q.data(), ld, k.data(), ld,
                                  s.data());
      // p: the scores where visible, 0 past them (as the softmax leaves them).
      std::vector<float> p(s.size(), 0.0f);
      for (std::int64_t i = 0; i < c.qn; ++i)
        for (std::int64_t j = 0; j < visible(c, i); ++j) {
          double want = 0;
          for (std::int64_t x = 0; x < c.hd; ++x)
            want += static_cast<double>(q[i * ld + x]) * k[j * ld + x];
          want *= scale;
          const float got = s[i * kHostTile + j];
          CHECK(got == Approx(want).margin(1e-5).epsilon(1e-5));
          p[i * kHostTile + j] = got;
        }
      for (std::int64_t i = c.qn; i < kHostTile; ++i)  // rows past qn untouched
        CHECK(s[i * kHostTile] == 7.0f);

      const std::vector<float> v = random_values(static_cast<std::size_t>(kHostTile * ld), 3);
      std::vector<float> acc = random_values(static_cast<std::size_t>(kHostTile * c.hd), 4);
      const std::vector<float> acc0 = acc;
      kernels::flash::accumulate_values(isa, c.qn, c.kn, c.hd, c.shift, p.data(), v.data(), ld,
                                        acc.data());
      for (std::int64_t i = 0; i < kHostTile; ++i)
        for (std::int64_t x = 0; x < c.hd; ++x) {
          double want = acc0[i * c.hd + x];
          if (i < c.qn)
            for (std::int64_t j = 0; j < visible(c, i); ++j)
              want += static_cast<double>(p[i * kHostTile + j]) * v[j * ld + x];
          CHECK(acc[i * c.hd + x] == Approx(want).margin(1e-5).epsilon(1e-5));
        }
      std::vector<float> visible_scores;
      for (std::int64_t i = 0; i < c.qn; ++i)
        for (std::int64_t j = 0; j < visible(c, i); ++j)
          visible_scores.push_back(s[i * kHostTile + j]);
      visible_scores.insert(visible_scores.end(), acc.begin(), acc.end());
      if (isa == HostIsa::x86_64_v3) v3_results.push_back(visible_scores);
      if (isa == HostIsa::x86_64_v4) v4_results.push_back(visible_scores);
    }
  }
  if (!v4_results.empty()) CHECK(v3_results == v4_results);
}
