// Calibration of int8 inputs: the min-max, percentile and entropy thresholds on known
// distributions.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/int8/calibration.hpp"

#include <cmath>
#include <random>
#include <vector>

using namespace trellis;
using namespace trellis::test;
using kernels::QuantType;

namespace {

// An observer fed x in two passes, as calibration does on one rank.
int8::ActivationObserver observed(const std::vector<float>& x) {
  int8::ActivationObserver o;
  const FloatView d = to_device("x", x);
  o.observe(as_matrix(d, 1, static_cast<int>(x.size())));
  o.start_histogram(o.min(), o.max());
  o.observe(as_matrix(d, 1, static_cast<int>(x.size())));
  return o;
}

}  // namespace

TEST_CASE("calibration thresholds on known distributions", "[int8][calibration]") {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> gauss(400000);
  for (float& v : gauss) v = normal(rng);
  gauss[17] = 20.0f;  // one outlier far out (the histogram still resolves the bulk)
  const int8::ActivationObserver g = observed(gauss);
  CHECK(g.min() < 0);
  const double width = g.range() / int8::ActivationObserver::kBins;
  const kernels::ActivationQuant minmax = g.choose(int8::CalibrationMethod::minmax);
  CHECK(minmax.type == QuantType::s8);
  CHECK(minmax.scale == Approx(20.0 / 127));
  // P(|x| < t) = 0.99 at t = 2.5758 for a standard normal; the histogram resolves 20/2048.
  const kernels::ActivationQuant p99 = g.choose(int8::CalibrationMethod::percentile, 99.0);
  // One bin of resolution plus ~4 standard errors of the sample quantile (0.005 here).
  CHECK(p99.scale * 127 == Approx(2.5758).margin(width + 0.02));
  // The outlier costs entropy calibration nothing: its threshold stays in the bulk.
  const kernels::ActivationQuant kl = g.choose(int8::CalibrationMethod::entropy);
  INFO("entropy threshold " << kl.scale * 127);
  CHECK(kl.scale * 127 > 2.0);
  CHECK(kl.scale * 127 < 8.0);

  // Uniform [0, 1], never negative: u8, and nothing worth clipping (the KL minimum is at the
  // whole range, up to a few bins).
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> flat(200000);
  for (float& v : flat) v = uniform(rng);
  const int8::ActivationObserver u = observed(flat);
  const kernels::ActivationQuant ku = u.choose(int8::CalibrationMethod::entropy);
  CHECK(ku.type == QuantType::u8);
  CHECK(ku.zero_point == 0);
  CHECK(ku.scale * 255 == Approx(u.max()).epsilon(0.03));
  CHECK(u.choose(int8::CalibrationMethod::minmax).scale == Approx(u.max() / 255.0));

  // The thresholds on hand-made histograms: percentile counts whole bins.
  CHECK(int8::percentile_threshold({1, 1, 1, 1}, 0.5, 50.0) == 1.0);
  CHECK(int8::percentile_threshold({0, 0, 0, 0}, 0.5, 50.0) == 0.0);
  CHECK_THROWS_AS(int8::parse_calibration_method("mse"), ConfigError);
}
