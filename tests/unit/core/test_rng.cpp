#include "catch.hpp"

#include "trellis/core/rng.hpp"

using trellis::Philox4x32;

// Known-answer vectors from Random123's kat_vectors for philox4x32_10.
TEST_CASE("philox4x32-10 matches the Random123 known answers", "[core][rng]") {
  Philox4x32 zero{{0, 0, 0, 0}};
  auto r = trellis::philox4x32_10(zero, 0, 0);
  CHECK(r.v[0] == 0x6627e8d5u);
  CHECK(r.v[1] == 0xe169c58du);
  CHECK(r.v[2] == 0xbc57ac4cu);
  CHECK(r.v[3] == 0x9b00dbd8u);

  Philox4x32 ones{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}};
  r = trellis::philox4x32_10(ones, 0xffffffffu, 0xffffffffu);
  CHECK(r.v[0] == 0x408f276du);
  CHECK(r.v[1] == 0x41c83b0eu);
  CHECK(r.v[2] == 0xa20bc7c6u);
  CHECK(r.v[3] == 0x6d5451fdu);

  Philox4x32 pi{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
  r = trellis::philox4x32_10(pi, 0xa4093822u, 0x299f31d0u);
  CHECK(r.v[0] == 0xd16cfe09u);
  CHECK(r.v[1] == 0x94fdccebu);
  CHECK(r.v[2] == 0x5001e420u);
  CHECK(r.v[3] == 0x24126ea1u);
}

TEST_CASE("uniform and normal draws have the right moments", "[core][rng]") {
  const int n = 200000;
  double sum_u = 0, sum_n = 0, sum_n2 = 0;
  for (int i = 0; i < n; ++i) {
    float u = trellis::random_uniform(42, 7, static_cast<std::uint64_t>(i));
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
    sum_u += u;
    float z = trellis::random_normal(42, 7, static_cast<std::uint64_t>(i));
    sum_n += z;
    sum_n2 += static_cast<double>(z) * z;
  }
  CHECK(sum_u / n == Approx(0.5).margin(0.005));
  CHECK(sum_n / n == Approx(0.0).margin(0.01));
  CHECK(sum_n2 / n == Approx(1.0).margin(0.02));
}

TEST_CASE("draws depend only on (seed, stream, index)", "[core][rng]") {
  CHECK(trellis::random_uniform(1, 2, 3) == trellis::random_uniform(1, 2, 3));
  CHECK(trellis::random_uniform(1, 2, 3) != trellis::random_uniform(1, 2, 4));
  CHECK(trellis::random_uniform(1, 2, 3) != trellis::random_uniform(1, 3, 3));
  CHECK(trellis::random_uniform(1, 2, 3) != trellis::random_uniform(2, 2, 3));
  CHECK(trellis::stream_from_name("fc1.weight") != trellis::stream_from_name("fc1.bias"));
}
