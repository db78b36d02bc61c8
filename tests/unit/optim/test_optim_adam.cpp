// Adam and AdamW against values worked by hand from torch.optim.Adam/AdamW's update rule.
// p0 = [1, -2, 3], g1 = [0.5, -1, 2], g2 = [1, 1, -1], g3 = [-0.5, 0.25, 0.5], lr = 0.1,
// betas (0.9, 0.999), eps 1e-8, decay mask [1, 1, 0].
#include "catch.hpp"
#include "unit/support/optim_helpers.hpp"

#include "trellis/optim/adam.hpp"

using optim_test::check_close;
using optim_test::mask_to_device;
using optim_test::to_device;
using optim_test::to_host;

namespace {

const std::vector<std::vector<float>> kGrads = {
    {0.5f, -1.f, 2.f}, {1.f, 1.f, -1.f}, {-0.5f, 0.25f, 0.5f}};

struct Snapshot {
  std::vector<float> p, m, v;
};

std::vector<Snapshot> run(trellis::Adam::Decay decay, float weight_decay) {
  trellis::OptimizerSpec spec;  // torch's defaults
  spec.weight_decay = weight_decay;
  spec.beta1 = 0.9f;
  spec.beta2 = 0.999f;
  spec.eps = 1e-8f;
  trellis::Adam opt(spec, decay, 3, mask_to_device({1.f, 1.f, 0.f}));
  const auto state = opt.state();
  REQUIRE(state.size() == 2);
  REQUIRE(state[0].first == "exp_avg");
  REQUIRE(state[1].first == "exp_avg_sq");
  auto params = to_device({1.f, -2.f, 3.f});
  std::vector<Snapshot> after;
  for (const auto& g : kGrads) {
    opt.step(params, to_device(g), 0.1f);
    after.push_back({to_host(params), to_host(state[0].second), to_host(state[1].second)});
  }
  CHECK(opt.step_count() == 3);
  return after;
}

}  // namespace

TEST_CASE("adam bias correction at steps 1, 2 and 3", "[optim][adam]") {
  const auto s = run(trellis::Adam::Decay::coupled, 0.f);
  // Step 1: m = 0.1 g, v = 0.001 g^2; bias correction turns them back into g and g^2, so
  // every element moves by lr * sign(g) (up to eps).
  check_close(s[0].m, {0.05f, -0.1f, 0.2f});
  check_close(s[0].v, {0.00025f, 0.001f, 0.004f});
  check_close(s[0].p, {0.9f, -1.9f, 2.9f});
  // Step 2: m = [0.145, 0.01, 0.08], v = [0.00124975, 0.001999, 0.004996];
  // m_hat = m / 0.19, v_hat = v / 0.001999 = [0.625188, 1, 2.49925];
  // p -= 0.1 m_hat / sqrt(v_hat) = [0.0965182, 0.0052632, 0.0266336].
  check_close(s[1].m, {0.145f, 0.01f, 0.08f});
  check_close(s[1].v, {0.00124975f, 0.001999f, 0.004996f});
  check_close(s[1].p, {0.8034818f, -1.9052632f, 2.8733664f});
  check_close(s[2].p, {0.7614729f, -1.9203979f, 2.8393235f});
}

TEST_CASE("adam adds L2 decay to the gradient where masked", "[optim][adam]") {
  const auto plain = run(trellis::Adam::Decay::coupled, 0.f);
  const auto s = run(trellis::Adam::Decay::coupled, 0.1f);
  // g + 0.1 p = [0.6, -1.2, 2] enters the moments; step 1 still moves by lr * sign.
  check_close(s[0].m, {0.06f, -0.12f, 0.2f});
  check_close(s[0].v, {0.00036f, 0.00144f, 0.004f});
  check_close(s[0].p, {0.9f, -1.9f, 2.9f});
  check_close(s[1].p, {0.802503f, -1.8861177f, 2.8733664f});
  check_close(s[2].p, {0.7515277f, -1.8781048f, 2.8393235f});
  for (int t = 0; t < 3; ++t) CHECK(s[t].p[2] == plain[t].p[2]);  // the unmasked element
}

TEST_CASE("adamw decays the parameter, not the gradient", "[optim][adam]") {
  const auto plain = run(trellis::Adam::Decay::coupled, 0.f);
  const auto s = run(trellis::Adam::Decay::decoupled, 0.1f);
  // Step 1: p * (1 - 0.1 * 0.1) = [0.99, -1.98, 3] (last not masked), then -lr * sign(g).
  check_close(s[0].p, {0.89f, -1.88f, 2.9f});
  check_close(s[1].p, {0.7845818f, -1.8664632f, 2.8733664f});
  check_close(s[2].p, {0.7347271f, -1.8629333f, 2.8393235f});
  for (int t = 0; t < 3; ++t) {
    check_close(s[t].m, plain[t].m);  // decay never reaches the moments
    check_close(s[t].v, plain[t].v);
    CHECK(s[t].p[2] == plain[t].p[2]);
  }
}
