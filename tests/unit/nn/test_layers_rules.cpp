// The gradient rule (parameter grads +=, input grads =), batch-split invariance of dropout
// masks, and the errors layers raise on misuse.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/activation.hpp"
#include "trellis/nn/dropout.hpp"
#include "trellis/nn/linear.hpp"

#include <vector>

using namespace trellis;
using trellis::kernels::first_rows;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

TEST_CASE("backward accumulates parameter grads and writes input grads", "[nn][layers]") {
  nn::ParameterStore store;
  nn::Linear fc(store, "fc", 3, 2, 4);
  store.finalize(1);
  FloatView x = to_device("x", random_values(12, 1)), dy = to_device("dy", random_values(8, 2));
  fc.forward(as_matrix(x, 4, 3), 4, {});
  fc.backward(as_matrix(dy, 4, 2), 4);
  const auto grads_once = to_host(store.grads());
  const auto dx_once = to_host(fc.input_grad());
  fc.backward(as_matrix(dy, 4, 2), 4);
  const auto grads_twice = to_host(store.grads());
  const auto dx_twice = to_host(fc.input_grad());
  for (std::size_t i = 0; i < grads_once.size(); ++i) CHECK(grads_twice[i] == 2.0f * grads_once[i]);
  CHECK(dx_twice == dx_once);

  // Activation and dropout layers have no parameters: input grads are simply rewritten.
  nn::Gelu gelu("gelu", 3, 4);
  gelu.forward(as_matrix(x, 4, 3), 4, {});
  FloatView dg = to_device("dg", random_values(12, 3));
  gelu.backward(as_matrix(dg, 4, 3), 4);
  const auto g1 = to_host(gelu.input_grad());
  gelu.backward(as_matrix(dg, 4, 3), 4);
  CHECK(to_host(gelu.input_grad()) == g1);
}

TEST_CASE("Linear computes x W^T + b", "[nn][layers]") {
  nn::ParameterStore store;
  nn::Linear fc(store, "fc", 2, 3, 2);
  store.finalize(1);
  // W = [[1, 2], [3, 4], [5, 6]], b = [0.5, -1, 2]
  Kokkos::deep_copy(store.param(fc.weight_index()), to_device("w", {1, 2, 3, 4, 5, 6}));
  Kokkos::deep_copy(store.param(*fc.bias_index()), to_device("b", {0.5f, -1, 2}));
  FloatView x = to_device("x", {1, -1, 2, 0.5f});
  fc.forward(as_matrix(x, 2, 2), 2, {});
  CHECK(to_host(fc.output()) == std::vector<float>{-0.5f, -2, 1, 3.5f, 7, 15});
  CHECK(fc.flops_per_sample() == 6 * 2 * 3);
  CHECK(store.info(fc.weight_index()).name == "fc.weight");
  CHECK(store.info(fc.weight_index()).shape == Shape{3, 2});
  CHECK(store.info(fc.weight_index()).weight_decay);
  CHECK_FALSE(store.info(*fc.bias_index()).weight_decay);
}

TEST_CASE("PyTorch Linear default init bounds", "[nn][layers]") {
  nn::ParameterStore store;
  nn::Linear fc(store, "fc", 64, 32, 1);
  store.finalize(2);
  for (auto i : {fc.weight_index(), *fc.bias_index()}) {
    for (float v : to_host(store.param(i))) CHECK(std::abs(v) <= 0.125f);  // 1/sqrt(64)
  }
}

TEST_CASE("dropout mask does not depend on how the batch is split", "[nn][layers][dropout]") {
  const int features = 7, rows = 8;
  FloatView x = to_device("x", random_values(rows * features, 1));
  FloatView dy = to_device("dy", random_values(rows * features, 2));
  nn::StepContext ctx{123, 4, 0, true};

  nn::Dropout whole("drop1", features, rows, 0.5f);
  whole.forward(as_matrix(x, rows, features), rows, ctx);
  whole.backward(as_matrix(dy, rows, features), rows);
  const auto y_whole = to_host(whole.output());
  const auto dx_whole = to_host(whole.input_grad());

  // The same global batch as two calls (rows 0..2, then rows 3..7), e.g. two ranks or two
  // micro-batches, on a layer of the same name.
  nn::Dropout part("drop1", features, rows, 0.5f);
  std::vector<float> y_split, dx_split;
  for (auto [first, count] : {std::pair<int, int>{0, 3}, std::pair<int, int>{3, 5}}) {
    ctx.first_sample = first;
    const ConstMatrix xs(x.data() + first * features, count, features);
    const ConstMatrix dys(dy.data() + first * features, count, features);
    part.forward(xs, count, ctx);
    part.backward(dys, count);
    const auto y = to_host(first_rows(part.output(), count));
    const auto dx = to_host(first_rows(part.input_grad(), count));
    y_split.insert(y_split.end(), y.begin(), y.end());
    dx_split.insert(dx_split.end(), dx.begin(), dx.end());
  }
  CHECK(y_split == y_whole);
  CHECK(dx_split == dx_whole);

  // A new step, another layer name or another seed gives another mask.
  ctx.first_sample = 0;
  for (nn::StepContext other :
       {nn::StepContext{123, 5, 0, true}, nn::StepContext{124, 4, 0, true}}) {
    whole.forward(as_matrix(x, rows, features), rows, other);
    CHECK(to_host(whole.output()) != y_whole);
  }
  nn::Dropout renamed("drop2", features, rows, 0.5f);
  renamed.forward(as_matrix(x, rows, features), rows, ctx);
  CHECK(to_host(renamed.output()) != y_whole);
}

TEST_CASE("dropout is the identity in eval mode and for p = 0", "[nn][layers][dropout]") {
  FloatView x = to_device("x", random_values(12, 1)), dy = to_device("dy", random_values(12, 2));
  nn::Dropout drop("drop", 4, 3, 0.5f);
  drop.forward(as_matrix(x, 3, 4), 3, nn::StepContext{1, 1, 0, false});
  CHECK(to_host(drop.output()) == to_host(x));
  drop.backward(as_matrix(dy, 3, 4), 3);
  CHECK(to_host(drop.input_grad()) == to_host(dy));
  nn::Dropout none("none", 4, 3, 0.0f);
  none.forward(as_matrix(x, 3, 4), 3, nn::StepContext{1, 1, 0, true});
  CHECK(to_host(none.output()) == to_host(x));
  CHECK_THROWS_AS(nn::Dropout("bad", 4, 3, 1.0f), trellis::ConfigError);
}

TEST_CASE("layers reject calls that do not fit their buffers", "[nn][layers]") {
  nn::ParameterStore store;
  nn::Linear fc(store, "fc", 3, 2, 4);
  FloatView x("x", 30), dy("dy", 20);
  CHECK_THROWS_AS(fc.forward(as_matrix(x, 4, 3), 4, {}), trellis::Error);  // store not finalized
  store.finalize(1);
  CHECK_THROWS_AS(fc.backward(as_matrix(dy, 4, 2), 4), trellis::Error);    // no forward yet
  CHECK_THROWS_AS(fc.forward(as_matrix(x, 5, 3), 5, {}), trellis::Error);  // n > capacity
  CHECK_THROWS_AS(fc.forward(as_matrix(x, 4, 5), 4, {}), trellis::Error);  // wrong features
  CHECK_THROWS_AS(fc.forward(as_matrix(x, 2, 3), 3, {}), trellis::Error);  // too few rows
  fc.forward(as_matrix(x, 4, 3), 3, {});                                   // more rows than n: ok
  CHECK_THROWS_AS(fc.backward(as_matrix(dy, 4, 2), 4), trellis::Error);    // n differs from forward
  CHECK_THROWS_AS(fc.backward(as_matrix(dy, 4, 3), 3), trellis::Error);    // wrong features
  fc.backward(as_matrix(dy, 4, 2), 3);
  fc.forward(as_matrix(x, 4, 3), 0, {});  // empty call
  fc.backward(as_matrix(dy, 4, 2), 0);
}
