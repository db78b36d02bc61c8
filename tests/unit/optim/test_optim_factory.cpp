// What every optimizer shares: the factory and its config errors, ranged steps (ZeRO-1
// shards), and restoring state + step count from a checkpoint.
#include "catch.hpp"
#include "unit/support/optim_helpers.hpp"

#include "trellis/optim/optimizer.hpp"

using optim_test::check_close;
using optim_test::config_error_of;
using optim_test::contains;
using optim_test::mask_to_device;
using optim_test::to_device;
using optim_test::to_host;

namespace {

trellis::OptimizerSpec spec_of(const std::string& type) {
  trellis::OptimizerSpec spec;
  spec.type = trellis::parse_optimizer_type(type);
  spec.momentum = 0.9f;
  spec.weight_decay = 0.1f;
  spec.beta1 = 0.9f;  // torch's defaults
  spec.beta2 = 0.999f;
  spec.eps = 1e-8f;
  spec.alpha = 0.99f;
  return spec;
}

std::unique_ptr<trellis::Optimizer> make(const trellis::OptimizerSpec& spec) {
  return trellis::make_optimizer(spec, 3, mask_to_device({1.f, 1.f, 0.f}));
}

}  // namespace

TEST_CASE("make_optimizer builds each type with its named state", "[optim]") {
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {"sgd", {"momentum_buffer"}},
      {"adam", {"exp_avg", "exp_avg_sq"}},
      {"adamw", {"exp_avg", "exp_avg_sq"}},
      {"rmsprop", {"square_avg", "momentum_buffer"}}};
  for (const auto& [type, names] : expected) {
    auto opt = make(spec_of(type));
    CHECK(opt->name() == type);
    CHECK(opt->numel() == 3);
    CHECK(opt->step_count() == 0);
    const auto state = opt->state();
    REQUIRE(state.size() == names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      CHECK(state[i].first == names[i]);
      CHECK(state[i].second.extent(0) == 3);
      check_close(to_host(state[i].second), {0.f, 0.f, 0.f});
    }
  }
}

TEST_CASE("make_optimizer rejects bad specs naming the key", "[optim]") {
  auto error_for = [](trellis::OptimizerSpec spec) { return config_error_of([&] { make(spec); }); };
  const std::string unknown = config_error_of([] { make(spec_of("lamb")); });
  CHECK(contains(unknown, "optim.type"));
  CHECK(contains(unknown, "'lamb'"));
  CHECK(contains(unknown, "sgd, adam, adamw, rmsprop"));

  auto nesterov = spec_of("sgd");
  nesterov.nesterov = true;
  nesterov.momentum = 0.f;
  CHECK(contains(error_for(nesterov), "optim.nesterov"));

  auto beta = spec_of("adamw");
  beta.beta2 = 1.f;
  CHECK(contains(error_for(beta), "optim.beta2"));
  auto wd = spec_of("adam");
  wd.weight_decay = -1e-4f;
  CHECK(contains(error_for(wd), "optim.weight_decay"));
  auto alpha = spec_of("rmsprop");
  alpha.alpha = 1.5f;
  CHECK(contains(error_for(alpha), "optim.alpha"));
  auto momentum = spec_of("sgd");
  momentum.momentum = -0.5f;
  CHECK(contains(error_for(momentum), "optim.momentum"));

  // A mask of the wrong size is a programming error, not a config error.
  CHECK_THROWS_AS(trellis::make_optimizer(spec_of("sgd"), 4, mask_to_device({1.f, 1.f, 0.f})),
                  trellis::Error);
}

TEST_CASE("a ranged step touches only its range, and matches the full step there", "[optim]") {
  for (const char* type : {"sgd", "adam", "adamw", "rmsprop"}) {
    INFO(type);
    auto full = make(spec_of(type));
    auto ranged = make(spec_of(type));
    auto p_full = to_device({1.f, -2.f, 3.f});
    auto p_ranged = to_device({1.f, -2.f, 3.f});
    for (const auto& g : std::vector<std::vector<float>>{{0.5f, -1.f, 2.f}, {1.f, 1.f, -1.f}}) {
      full->step(p_full, to_device(g), 0.1f);
      ranged->step(p_ranged, to_device(g), 0.1f, 1, 3);
    }
    const auto a = to_host(p_full), b = to_host(p_ranged);
    CHECK(b[0] == 1.f);
    CHECK(b[1] == a[1]);
    CHECK(b[2] == a[2]);
    for (const auto& [name, view] : ranged->state()) CHECK(to_host(view)[0] == 0.f);
    CHECK(ranged->step_count() == 2);
    CHECK_THROWS_AS(ranged->step(p_ranged, to_device({0.f, 0.f, 0.f}), 0.1f, 2, 4), trellis::Error);
    CHECK_THROWS_AS(ranged->step(p_ranged, to_device({0.f, 0.f}), 0.1f), trellis::Error);
  }
}

TEST_CASE("restoring state and step count continues bitwise-identically", "[optim]") {
  const std::vector<std::vector<float>> grads = {
      {0.5f, -1.f, 2.f}, {1.f, 1.f, -1.f}, {-0.5f, 0.25f, 0.5f}};
  for (const char* type : {"sgd", "adam", "adamw", "rmsprop"}) {
    INFO(type);
    auto original = make(spec_of(type));
    auto p = to_device({1.f, -2.f, 3.f});
    original->step(p, to_device(grads[0]), 0.1f);
    original->step(p, to_device(grads[1]), 0.1f);

    // "Checkpoint": copy params, state and the step count into a fresh optimizer.
    auto resumed = make(spec_of(type));
    auto p_resumed = to_device(to_host(p));
    const auto from = original->state();
    const auto to = resumed->state();
    for (std::size_t i = 0; i < from.size(); ++i) Kokkos::deep_copy(to[i].second, from[i].second);
    resumed->set_step_count(original->step_count());

    original->step(p, to_device(grads[2]), 0.1f);
    resumed->step(p_resumed, to_device(grads[2]), 0.1f);
    CHECK(to_host(p) == to_host(p_resumed));
  }
}
