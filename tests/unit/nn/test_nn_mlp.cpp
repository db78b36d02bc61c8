#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/mlp.hpp"
#include "trellis/nn/softmax_xent.hpp"

#include <string>
#include <vector>

using namespace trellis;
using trellis::kernels::first_rows;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

nn::MlpSpec small_spec(const std::string& activation, float dropout) {
  nn::MlpSpec spec;
  spec.input_dim = 6;
  spec.hidden = {5, 4};
  spec.classes = 3;
  spec.activation = activation;
  spec.dropout = dropout;
  spec.init = "kaiming";
  spec.capacity = 8;
  return spec;
}

}  // namespace

TEST_CASE("Mlp registers named parameters and counts FLOPs", "[nn][mlp]") {
  nn::ParameterStore store;
  nn::Mlp mlp(small_spec("relu", 0.1f), store);
  const std::vector<std::pair<std::string, Shape>> expected{
      {"fc1.weight", {5, 6}}, {"fc1.bias", {5}},       {"fc2.weight", {4, 5}},
      {"fc2.bias", {4}},      {"head.weight", {3, 4}}, {"head.bias", {3}}};
  REQUIRE(store.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CHECK(store.info(i).name == expected[i].first);
    CHECK(store.info(i).shape == expected[i].second);
  }
  CHECK(mlp.num_layers() == 2 + 1);  // an MlpLayer (fc + fused act, drop) per hidden layer + head
  int parts = 0;
  mlp.layer(0).for_each_part([&](nn::Layer&) { ++parts; });
  CHECK(parts == 2);
  CHECK(mlp.flops_per_sample() == 6 * (6 * 5 + 5 * 4 + 4 * 3));

  nn::ParameterStore prefixed;
  nn::Mlp named(small_spec("gelu", 0.0f), prefixed, "encoder.");
  CHECK(prefixed.info(0).name == "encoder.fc1.weight");
  CHECK(named.num_layers() == 2 + 1);
}

TEST_CASE("Mlp rejects bad specs with ConfigError", "[nn][mlp]") {
  nn::ParameterStore store;
  auto spec = small_spec("tanh", 0.0f);
  CHECK_THROWS_AS(nn::Mlp(spec, store), trellis::ConfigError);
  spec = small_spec("relu", 1.0f);
  CHECK_THROWS_AS(nn::Mlp(spec, store), trellis::ConfigError);
  spec = small_spec("relu", 0.0f);
  spec.init = "he";
  CHECK_THROWS_AS(nn::Mlp(spec, store), trellis::ConfigError);
  spec = small_spec("relu", 0.0f);
  spec.hidden = {5, 0};
  CHECK_THROWS_AS(nn::Mlp(spec, store), trellis::ConfigError);
  spec = small_spec("relu", 0.0f);
  spec.capacity = 0;
  CHECK_THROWS_AS(nn::Mlp(spec, store), trellis::ConfigError);
  CHECK(store.size() == 0);  // nothing registered by a rejected spec
}

TEST_CASE("whole Mlp gradient matches finite differences", "[nn][mlp][gradcheck]") {
  for (const std::string init : {"kaiming", "xavier"}) {
    nn::ParameterStore store;
    auto spec = small_spec("gelu", 0.25f);
    spec.init = init;
    spec.input_grad = true;
    nn::Mlp mlp(spec, store);
    store.finalize(7);
    nn::SoftmaxCrossEntropy xent(spec.classes, spec.capacity);
    const int n = 5;
    FloatView x = to_device("x", random_values(n * spec.input_dim, 1, -2.0f, 2.0f));
    IntView labels = test::labels_to_device({0, 2, 1, 1, 0});
    const nn::StepContext ctx{99, 2, 0, true};
    const float scale = 1.0f / n;
    auto loss = [&] {
      const ConstMatrix logits = mlp.forward(as_matrix(x, n, spec.input_dim), n, ctx);
      return xent.forward(logits, labels, n).loss_sum * scale;
    };
    loss();
    xent.backward(scale);
    mlp.backward(xent.input_grad(), n);
    const auto dx = to_host(first_rows(mlp.input_grad(), n));
    std::vector<std::vector<float>> dparams;
    for (std::size_t i = 0; i < store.size(); ++i) dparams.push_back(to_host(store.grad(i)));
    test::check_gradient("input", x, dx, loss);
    for (std::size_t i = 0; i < store.size(); ++i) {
      test::check_gradient(store.info(i).name, store.param(i), dparams[i], loss);
    }
  }
}

TEST_CASE("Mlp gradients of a batch equal the sum over its micro-batches", "[nn][mlp]") {
  // The data-parallel contract: with first_sample set and scale = 1/global_batch, gradients
  // accumulated over parts of the batch equal those of the whole batch (up to rounding).
  auto spec = small_spec("relu", 0.3f);
  const int n = 8;
  FloatView x = to_device("x", random_values(n * spec.input_dim, 1, -2.0f, 2.0f));
  IntView labels = test::labels_to_device({0, 2, 1, 1, 0, 2, 2, 1});
  const float scale = 1.0f / n;

  auto run = [&](const std::vector<std::pair<int, int>>& parts, double& loss_sum) {
    nn::ParameterStore store;
    nn::Mlp mlp(spec, store);
    store.finalize(5);
    nn::SoftmaxCrossEntropy xent(spec.classes, spec.capacity);
    loss_sum = 0;
    for (auto [first, count] : parts) {
      const nn::StepContext ctx{17, 3, first, true};
      const ConstMatrix xs(x.data() + first * spec.input_dim, count, spec.input_dim);
      const kernels::ConstLabels ls(labels.data() + first, count);
      loss_sum += xent.forward(mlp.forward(xs, count, ctx), ls, count).loss_sum;
      xent.backward(scale);
      mlp.backward(xent.input_grad(), count);
    }
    return to_host(store.grads());
  };
  double loss_whole = 0, loss_split = 0;
  const auto whole = run({{0, 8}}, loss_whole);
  const auto split = run({{0, 3}, {3, 4}, {7, 1}}, loss_split);
  CHECK(loss_split == Approx(loss_whole).epsilon(1e-6));
  REQUIRE(whole.size() == split.size());
  for (std::size_t i = 0; i < whole.size(); ++i) CHECK(split[i] == Approx(whole[i]).margin(1e-6));

  // Eval mode is deterministic and ignores dropout.
  nn::ParameterStore store;
  nn::Mlp mlp(spec, store);
  store.finalize(5);
  const auto a = to_host(mlp.forward(as_matrix(x, n, spec.input_dim), n, {17, 3, 0, false}));
  const auto b = to_host(mlp.forward(as_matrix(x, n, spec.input_dim), n, {18, 4, 0, false}));
  CHECK(a == b);
}
