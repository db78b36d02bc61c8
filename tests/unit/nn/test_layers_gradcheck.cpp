// Finite-difference checks of every layer and the loss: for L = sum(w * y) with fixed random w,
// the analytic gradients w.r.t. the input and every parameter must match central differences.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/kernels/views.hpp"
#include "trellis/nn/activation.hpp"
#include "trellis/nn/dropout.hpp"
#include "trellis/nn/linear.hpp"
#include "trellis/nn/softmax_xent.hpp"

#include <cmath>
#include <vector>

using namespace trellis;
using trellis::kernels::first_rows;
using trellis::test::check_gradient;
using trellis::test::gradcheck_layer;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;
using trellis::test::weighted_sum;

namespace {

// Inputs at least 0.1 away from 0, so no finite difference crosses ReLU's kink.
std::vector<float> away_from_zero(std::vector<float> v) {
  for (float& e : v) e = e < 0 ? e - 0.1f : e + 0.1f;
  return v;
}

}  // namespace

TEST_CASE("Linear gradients match finite differences", "[nn][layers][gradcheck]") {
  for (auto init : {nn::LinearInit::kaiming, nn::LinearInit::xavier}) {
    nn::ParameterStore store;
    nn::Linear fc(store, "fc", 5, 4, /*capacity=*/6, init);
    store.finalize(11);
    gradcheck_layer(fc, store, 3, random_values(15, 1), nn::StepContext{});
  }
}

TEST_CASE("ReLU and GELU gradients match finite differences", "[nn][layers][gradcheck]") {
  nn::ParameterStore store;
  store.finalize(0);
  nn::Relu relu("relu", 6, 4);
  gradcheck_layer(relu, store, 4, away_from_zero(random_values(24, 2, -2.0f, 2.0f)), {});
  nn::Gelu gelu("gelu", 6, 4);
  gradcheck_layer(gelu, store, 3, random_values(18, 3, -3.0f, 3.0f), {});
}

TEST_CASE("Dropout gradients match finite differences under a fixed mask",
          "[nn][layers][gradcheck]") {
  nn::ParameterStore store;
  store.finalize(0);
  nn::Dropout drop("drop", 8, 5, 0.4f);
  nn::StepContext ctx{5, 3, 10, true};
  gradcheck_layer(drop, store, 5, random_values(40, 4), ctx);
  // Sanity: the mask is neither all-keep nor all-drop here.
  const auto y = to_host(first_rows(drop.output(), 5));
  int zeros = 0;
  for (float v : y) zeros += v == 0.0f;
  CHECK(zeros > 0);
  CHECK(zeros < 40);
}

TEST_CASE("softmax cross-entropy gradient matches finite differences", "[nn][layers][gradcheck]") {
  const int n = 4, classes = 5;
  nn::SoftmaxCrossEntropy xent(classes, 6);
  FloatView logits = to_device("logits", random_values(n * classes, 5, -3.0f, 3.0f));
  IntView labels = test::labels_to_device({0, 4, 2, 2});
  const float scale = 1.0f / 8.0f;  // e.g. 1 / global batch
  auto loss = [&] {
    return xent.forward(as_matrix(logits, n, classes), labels, n).loss_sum * scale;
  };
  loss();
  xent.backward(scale);
  const auto analytic = to_host(first_rows(xent.input_grad(), n));
  check_gradient("logits", logits, analytic, loss);
}
