// Linear with a fused activation epilogue stands for Linear + activation layer: same
// parameters, outputs and gradients; and a Linear that skips its input gradient changes
// nothing else.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/activation.hpp"
#include "trellis/nn/linear.hpp"
#include "trellis/nn/mlp.hpp"
#include "trellis/nn/transformer.hpp"

#include <memory>
#include <vector>

using namespace trellis;
using trellis::kernels::Activation;
using trellis::kernels::first_rows;
using trellis::test::gradcheck_layer;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

struct StepResult {
  std::vector<float> y, dx, dw, db;
};

// One forward + backward of fc (+ act when given) on x [n, in] with output gradient dy.
StepResult step(nn::Linear& fc, nn::Layer* act, nn::ParameterStore& store, const FloatView& x,
                const FloatView& dy, int n) {
  const nn::StepContext ctx{};
  store.zero_grads();
  fc.forward(as_matrix(x, n, fc.in_features()), n, ctx);
  nn::Layer& last = act ? *act : fc;
  if (act) act->forward(fc.output(), n, ctx);
  const int out = fc.out_features();
  StepResult r;
  r.y = to_host(first_rows(last.output(), n));
  if (act) {
    act->backward(as_matrix(dy, n, out), n);
    fc.backward(act->input_grad(), n);
  } else {
    fc.backward(as_matrix(dy, n, out), n);
  }
  r.dx = to_host(first_rows(fc.input_grad(), n));
  r.dw = to_host(store.grad(fc.weight_index()));
  r.db = to_host(store.grad(*fc.bias_index()));
  return r;
}

void check_close(const char* what, const std::vector<float>& a, const std::vector<float>& b) {
  INFO(what);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    REQUIRE(a[i] == Approx(b[i]).epsilon(1e-5).margin(1e-6));
}

}  // namespace

TEST_CASE("Linear with a fused activation equals Linear followed by the activation layer",
          "[nn][layers][fused]") {
  const int in = 19, out = 37, n = 5, cap = 7;
  FloatView x = to_device("x", random_values(static_cast<std::size_t>(n * in), 21, -2.0f, 2.0f));
  FloatView dy = to_device("dy", random_values(static_cast<std::size_t>(n * out), 22));
  for (Activation f : {Activation::relu, Activation::gelu}) {
    INFO("activation " << static_cast<int>(f));
    nn::ParameterStore fused_store, plain_store;
    nn::Linear fused(fused_store, "fc", in, out, cap);
    fused.fuse_activation(f);
    nn::Linear plain(plain_store, "fc", in, out, cap);
    std::unique_ptr<nn::Layer> act;
    if (f == Activation::relu) {
      act = std::make_unique<nn::Relu>("act", out, cap);
    } else {
      act = std::make_unique<nn::Gelu>("act", out, cap);
    }
    fused_store.finalize(3);
    plain_store.finalize(3);
    REQUIRE(to_host(fused_store.params()) == to_host(plain_store.params()));

    // Twice: the second step checks that nothing carries over from the first.
    for (int repeat = 0; repeat < 2; ++repeat) {
      const StepResult a = step(fused, nullptr, fused_store, x, dy, n);
      const StepResult b = step(plain, act.get(), plain_store, x, dy, n);
      check_close("y", a.y, b.y);
      check_close("dx", a.dx, b.dx);
      check_close("dW", a.dw, b.dw);
      check_close("db", a.db, b.db);
      if (f == Activation::relu) {  // nothing approximate on this path: the same bits
        CHECK(a.y == b.y);
        CHECK(a.db == b.db);
      }
    }
  }
}

TEST_CASE("Linear with a fused GELU (exact or tanh) matches finite differences",
          "[nn][layers][gradcheck][fused]") {
  for (Activation f : {Activation::gelu, Activation::gelu_tanh}) {
    INFO("activation " << static_cast<int>(f));
    nn::ParameterStore store;
    nn::Linear fc(store, "fc", 6, 5, /*capacity=*/4);
    fc.fuse_activation(f);
    store.finalize(13);
    gradcheck_layer(fc, store, 3, random_values(18, 23, -2.0f, 2.0f), nn::StepContext{});
  }
}

TEST_CASE("Linear with a fused ReLU matches finite differences away from the kink",
          "[nn][layers][gradcheck][fused]") {
  // Positive inputs and a positive bias with |W| small keep every pre-activation of one sign
  // per column far from 0: no finite difference crosses the kink.
  nn::ParameterStore store;
  nn::Linear fc(store, "fc", 4, 6, /*capacity=*/3, nn::InitSpec::uniform(-0.1, 0.1),
                nn::InitSpec::uniform(-1.0, 1.0));
  fc.fuse_activation(Activation::relu);
  store.finalize(17);
  std::vector<float> bias = to_host(store.param(*fc.bias_index()));
  for (float& b : bias) b = b < 0 ? b - 0.5f : b + 0.5f;
  Kokkos::deep_copy(store.param(*fc.bias_index()), to_device("b", bias));
  gradcheck_layer(fc, store, 3, random_values(12, 24, 0.0f, 1.0f), nn::StepContext{});
}

TEST_CASE("Linear without its input gradient leaves the parameter gradients as they were",
          "[nn][layers][fused]") {
  const int in = 9, out = 11, n = 4;
  FloatView x = to_device("x", random_values(static_cast<std::size_t>(n * in), 31));
  FloatView dy = to_device("dy", random_values(static_cast<std::size_t>(n * out), 32));
  nn::ParameterStore with_store, without_store;
  nn::Linear with(with_store, "fc", in, out, n), without(without_store, "fc", in, out, n);
  without.set_input_grad_needed(false);
  CHECK_FALSE(without.input_grad_needed());
  with_store.finalize(5);
  without_store.finalize(5);
  const StepResult a = step(with, nullptr, with_store, x, dy, n);
  const StepResult b = step(without, nullptr, without_store, x, dy, n);
  CHECK(a.y == b.y);
  CHECK(a.dw == b.dw);
  CHECK(a.db == b.db);
  CHECK(b.dx == std::vector<float>(a.dx.size(), 0.0f));  // never written
}

TEST_CASE("Mlp computes its input gradient on the first stage only when asked",
          "[nn][mlp][fused]") {
  nn::MlpSpec spec;
  spec.input_dim = 6;
  spec.hidden = {5};
  spec.classes = 3;
  spec.capacity = 4;
  nn::ParameterStore store;
  nn::Mlp mlp(spec, store);
  CHECK_THROWS_AS(mlp.input_grad(), trellis::Error);
  spec.input_grad = true;
  nn::ParameterStore asked_store;
  nn::Mlp asked(spec, asked_store);
  CHECK(asked.input_grad().extent(1) == 6);
}

TEST_CASE("FeedForward's shared buffers: evaluation with dropout equals no dropout",
          "[nn][gpt][fused]") {
  // p = 0 returns c_proj's output buffer itself; p > 0 in evaluation copies it into its own.
  const int d = 6, n = 5, cap = 8;
  const nn::TransformerInit init{0.02, 0.005};
  FloatView x = to_device("x", random_values(static_cast<std::size_t>(n * d), 41, -2.0f, 2.0f));
  FloatView dy = to_device("dy", random_values(static_cast<std::size_t>(n * d), 42));
  nn::ParameterStore plain_store, dropout_store;
  nn::FeedForward plain(plain_store, "mlp", d, cap, 0.0f, init);
  nn::FeedForward dropout(dropout_store, "mlp", d, cap, 0.25f, init);
  plain_store.finalize(9);
  dropout_store.finalize(9);
  nn::StepContext eval{3, 7, 0, false};
  plain.forward(as_matrix(x, n, d), n, eval);
  dropout.forward(as_matrix(x, n, d), n, eval);
  CHECK(to_host(first_rows(plain.output(), n)) == to_host(first_rows(dropout.output(), n)));
  plain.backward(as_matrix(dy, n, d), n);
  dropout.backward(as_matrix(dy, n, d), n);
  CHECK(to_host(first_rows(plain.input_grad(), n)) == to_host(first_rows(dropout.input_grad(), n)));
  CHECK(to_host(plain_store.grads()) == to_host(dropout_store.grads()));
}
