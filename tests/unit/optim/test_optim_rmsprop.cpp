// RMSProp against values worked by hand from torch.optim.RMSprop's update rule.
// p0 = [1, -2, 3], g1 = [0.5, -1, 2], g2 = [1, 1, -1], g3 = [-0.5, 0.25, 0.5], lr = 0.01,
// alpha 0.99, eps 1e-8, decay mask [1, 1, 0].
#include "catch.hpp"
#include "unit/support/optim_helpers.hpp"

#include "trellis/optim/rmsprop.hpp"

using optim_test::check_close;
using optim_test::mask_to_device;
using optim_test::to_device;
using optim_test::to_host;

namespace {

const std::vector<std::vector<float>> kGrads = {
    {0.5f, -1.f, 2.f}, {1.f, 1.f, -1.f}, {-0.5f, 0.25f, 0.5f}};

trellis::OptimizerSpec rmsprop_spec(float momentum, float weight_decay) {
  trellis::OptimizerSpec spec;
  spec.type = trellis::OptimizerType::rmsprop;
  spec.momentum = momentum;
  spec.weight_decay = weight_decay;
  spec.eps = 1e-8f;  // torch's defaults
  spec.alpha = 0.99f;
  return spec;
}

}  // namespace

TEST_CASE("rmsprop without momentum", "[optim][rmsprop]") {
  trellis::RmsProp opt(rmsprop_spec(0.f, 0.f), 3, mask_to_device({1.f, 1.f, 0.f}));
  const auto state = opt.state();
  REQUIRE(state.size() == 1);
  REQUIRE(state[0].first == "square_avg");
  auto params = to_device({1.f, -2.f, 3.f});

  // Step 1: v = 0.01 g^2, sqrt(v) = 0.1 |g|, so p moves by lr * 10 * sign(g) = 0.1 sign(g).
  opt.step(params, to_device(kGrads[0]), 0.01f);
  check_close(to_host(state[0].second), {0.0025f, 0.01f, 0.04f});
  check_close(to_host(params), {0.9f, -1.9f, 2.9f});
  // Step 2: v = 0.99 v + 0.01 g2^2 = [0.012475, 0.0199, 0.0496].
  opt.step(params, to_device(kGrads[1]), 0.01f);
  check_close(to_host(state[0].second), {0.012475f, 0.0199f, 0.0496f});
  check_close(to_host(params), {0.8104677f, -1.9708881f, 2.9449015f});
  opt.step(params, to_device(kGrads[2]), 0.01f);
  check_close(to_host(params), {0.8514979f, -1.9884235f, 2.9228911f});
}

TEST_CASE("rmsprop with momentum and masked L2 decay", "[optim][rmsprop]") {
  trellis::RmsProp opt(rmsprop_spec(0.9f, 0.1f), 3, mask_to_device({1.f, 1.f, 0.f}));
  const auto state = opt.state();
  REQUIRE(state.size() == 2);
  REQUIRE(state[1].first == "momentum_buffer");
  auto params = to_device({1.f, -2.f, 3.f});

  // Step 1: g = [0.6, -1.2, 2]; buf = g / (0.1 |g| + eps) = 10 sign(g) (less eps).
  opt.step(params, to_device(kGrads[0]), 0.01f);
  check_close(to_host(state[0].second), {0.0036f, 0.0144f, 0.04f});
  check_close(to_host(state[1].second), {9.999998f, -9.999999f, 9.999999f});
  check_close(to_host(params), {0.9f, -1.9f, 2.9f});
  opt.step(params, to_device(kGrads[1]), 0.01f);
  check_close(to_host(state[1].second), {17.770664f, -3.3859534f, 4.5098667f});
  check_close(to_host(params), {0.7222934f, -1.8661405f, 2.8549013f});
  opt.step(params, to_device(kGrads[2]), 0.01f);
  check_close(to_host(params), {0.5950503f, -1.840078f, 2.7923021f});
}
