// SGD against values worked by hand from torch.optim.SGD's update rule.
// Every case: p0 = [1, -2, 3], grads g1 = [0.5, -1, 2], g2 = [1, 1, -1], g3 = [-0.5, 0.25, 0.5],
// lr = 0.1, decay mask [1, 1, 0] (the last element plays a bias).
#include "catch.hpp"
#include "unit/support/optim_helpers.hpp"

#include "trellis/optim/sgd.hpp"

using optim_test::check_close;
using optim_test::mask_to_device;
using optim_test::to_device;
using optim_test::to_host;

namespace {

const std::vector<std::vector<float>> kGrads = {
    {0.5f, -1.f, 2.f}, {1.f, 1.f, -1.f}, {-0.5f, 0.25f, 0.5f}};

trellis::OptimizerSpec sgd_spec(float momentum, bool nesterov, float weight_decay) {
  trellis::OptimizerSpec spec;
  spec.type = trellis::OptimizerType::sgd;
  spec.momentum = momentum;
  spec.nesterov = nesterov;
  spec.weight_decay = weight_decay;
  return spec;
}

// Runs steps and returns params after each.
std::vector<std::vector<float>> run(trellis::Optimizer& opt, int steps) {
  auto params = to_device({1.f, -2.f, 3.f});
  std::vector<std::vector<float>> after;
  for (int t = 0; t < steps; ++t) {
    opt.step(params, to_device(kGrads[t]), 0.1f);
    after.push_back(to_host(params));
  }
  return after;
}

}  // namespace

TEST_CASE("sgd without momentum: p -= lr * (g + wd * p), decay only where masked", "[optim][sgd]") {
  trellis::Sgd opt(sgd_spec(0.f, false, 0.1f), 3, mask_to_device({1.f, 1.f, 0.f}));
  CHECK(opt.state().empty());
  auto p = run(opt, 2);
  // Step 1: g + 0.1 p = [0.6, -1.2, 2] (element 2 not decayed) -> p = [0.94, -1.88, 2.8].
  check_close(p[0], {0.94f, -1.88f, 2.8f});
  // Step 2: g + 0.1 p = [1.094, 0.812, -1] -> p = [0.8306, -1.9612, 2.9].
  check_close(p[1], {0.8306f, -1.9612f, 2.9f});
  CHECK(opt.step_count() == 2);
}

TEST_CASE("sgd momentum: buffer starts at the first gradient", "[optim][sgd]") {
  trellis::Sgd opt(sgd_spec(0.9f, false, 0.f), 3, mask_to_device({1.f, 1.f, 0.f}));
  auto params = to_device({1.f, -2.f, 3.f});
  const auto state = opt.state();
  REQUIRE(state.size() == 1);
  CHECK(state[0].first == "momentum_buffer");

  opt.step(params, to_device(kGrads[0]), 0.1f);
  check_close(to_host(state[0].second), kGrads[0]);  // buf = g1, not 0.9 * 0 + 0.1 * g1
  check_close(to_host(params), {0.95f, -1.9f, 2.8f});

  // buf = 0.9 g1 + g2 = [1.45, 0.1, 0.8]; p = [0.95 - 0.145, -1.9 - 0.01, 2.8 - 0.08].
  opt.step(params, to_device(kGrads[1]), 0.1f);
  check_close(to_host(state[0].second), {1.45f, 0.1f, 0.8f});
  check_close(to_host(params), {0.805f, -1.91f, 2.72f});

  // buf = 0.9 [1.45, 0.1, 0.8] + g3 = [0.805, 0.34, 1.22].
  opt.step(params, to_device(kGrads[2]), 0.1f);
  check_close(to_host(params), {0.7245f, -1.944f, 2.598f});
}

TEST_CASE("sgd nesterov steps along g + momentum * buf", "[optim][sgd]") {
  trellis::Sgd opt(sgd_spec(0.9f, true, 0.f), 3, mask_to_device({1.f, 1.f, 0.f}));
  auto p = run(opt, 3);
  // Step 1: buf = g1, d = 1.9 g1 = [0.95, -1.9, 3.8].
  check_close(p[0], {0.905f, -1.81f, 2.62f});
  // Step 2: buf = [1.45, 0.1, 0.8], d = g2 + 0.9 buf = [2.305, 1.09, -0.28].
  check_close(p[1], {0.6745f, -1.919f, 2.648f});
  check_close(p[2], {0.65205f, -1.9746f, 2.4882f});
}

TEST_CASE("sgd nesterov with masked L2 weight decay", "[optim][sgd]") {
  trellis::Sgd opt(sgd_spec(0.9f, true, 0.1f), 3, mask_to_device({1.f, 1.f, 0.f}));
  auto p = run(opt, 3);
  // Step 1: g = [0.6, -1.2, 2], d = 1.9 g = [1.14, -2.28, 3.8].
  check_close(p[0], {0.886f, -1.772f, 2.62f});
  check_close(p[1], {0.630566f, -1.831132f, 2.648f});
  check_close(p[2], {0.5816686f, -1.8230072f, 2.4882f});  // element 2 as without decay
}
