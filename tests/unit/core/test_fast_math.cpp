// fast_exp and fast_erf (core/fast_math.hpp) against double-precision exp and erf over dense
// grids, at the accuracy their header promises.
#include "catch.hpp"

#include "trellis/core/fast_math.hpp"

#include <cmath>

TEST_CASE("fast_exp is within 3e-7 relative of exp on [-87, 88]", "[math][fast]") {
  double worst = 0;
  for (int i = 0; i <= 1750000; ++i) {
    const float x = -87.0f + 1e-4f * static_cast<float>(i);
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(trellis::math::fast_exp(x) - ref) / ref);
  }
  INFO("worst relative error " << worst);
  CHECK(worst < 3e-7);
  CHECK(trellis::math::fast_exp(0.0f) == 1.0f);
  CHECK(trellis::math::fast_exp(-1000.0f) < 2e-38f);  // clamped, not NaN or a denormal
  CHECK(trellis::math::fast_exp(-1000.0f) >= 0.0f);
}

TEST_CASE("fast_erf is within 5e-7 of erf everywhere", "[math][fast]") {
  double worst = 0;
  for (int i = 0; i <= 1200000; ++i) {
    const float x = -6.0f + 1e-5f * static_cast<float>(i);
    worst =
        std::max(worst, std::fabs(trellis::math::fast_erf(x) - std::erf(static_cast<double>(x))));
  }
  INFO("worst absolute error " << worst);
  CHECK(worst < 5e-7);
  CHECK(trellis::math::fast_erf(0.0f) == 0.0f);
  CHECK(trellis::math::fast_erf(-30.0f) == -trellis::math::fast_erf(30.0f));
}
