// Autocast (nn/autocast.hpp): a Linear and a Conv2d in bf16 / fp16 compute exactly what the
// fp32 layer computes on operands rounded by hand (weights, input, output gradient), with the
// output and input gradient rounded after; weight and bias gradients stay fp32. And the
// compute copy follows the parameters only when refreshed.
#include "catch.hpp"
#include "test_nn_util.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/precision.hpp"
#include "trellis/nn/autocast.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/linear.hpp"

#include <functional>
#include <memory>
#include <vector>

using namespace trellis;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

std::vector<float> rounded(Precision p, std::vector<float> v) {
  for (float& x : v) x = round_to(p, x);
  return v;
}

// Builds the same layer twice: `fast` under autocast, `ref` in fp32 whose weight is replaced
// by its rounded values; runs forward and backward on (x, dy) vs (round(x), round(dy)).
void check_layer_against_rounded_reference(
    Precision p, int rows, int in, int out,
    const std::function<std::unique_ptr<nn::Layer>(nn::ParameterStore&)>& build) {
  nn::ParameterStore fast_store, ref_store;
  nn::Autocast autocast;
  autocast.mode = p;
  fast_store.set_autocast(autocast);
  auto fast = build(fast_store);
  auto ref = build(ref_store);
  fast_store.finalize(7);
  ref_store.finalize(7);
  const std::size_t w = ref_store.index(ref->name() + ".weight");
  const FloatView ref_w = ref_store.param(w);
  Kokkos::deep_copy(ref_w, to_device("w", rounded(p, to_host(ref_w))));

  const std::vector<float> x = random_values(static_cast<std::size_t>(rows * in), 1, -3.0f, 3.0f);
  const std::vector<float> dy = random_values(static_cast<std::size_t>(rows * out), 2);
  const FloatView x_fast = to_device("x", x), x_ref = to_device("xr", rounded(p, x));
  const FloatView dy_fast = to_device("dy", dy), dy_ref = to_device("dyr", rounded(p, dy));
  const nn::StepContext ctx;
  fast->forward(as_matrix(x_fast, rows, in), rows, ctx);
  ref->forward(as_matrix(x_ref, rows, in), rows, ctx);
  const auto flat = [](ConstMatrix m) {
    return to_host(kernels::ConstVector(m.data(), m.extent(0) * m.extent(1)));
  };
  CHECK(flat(fast->output()) == rounded(p, flat(ref->output())));
  fast_store.zero_grads();
  ref_store.zero_grads();
  fast->backward(as_matrix(dy_fast, rows, out), rows);
  ref->backward(as_matrix(dy_ref, rows, out), rows);
  CHECK(flat(fast->input_grad()) == rounded(p, flat(ref->input_grad())));
  CHECK(to_host(fast_store.grad(w)) == to_host(ref_store.grad(w)));
  // The master weights stay fp32: the autocast store's params are not rounded.
  CHECK(to_host(fast_store.param(w)) != to_host(ref_store.param(w)));
}

}  // namespace

TEST_CASE("autocast Linear equals fp32 on rounded operands", "[autocast]") {
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    INFO(precision_name(p));
    check_layer_against_rounded_reference(p, 6, 40, 24, [](nn::ParameterStore& store) {
      return std::make_unique<nn::Linear>(store, "fc", 40, 24, 6);
    });
  }
}

TEST_CASE("autocast Conv2d equals fp32 on rounded operands", "[autocast]") {
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    INFO(precision_name(p));
    // 3 -> 4 channels, 3x3, stride 1, pad 1, 6x6 images: in = 108, out = 144 per sample.
    check_layer_against_rounded_reference(p, 3, 108, 144, [](nn::ParameterStore& store) {
      return std::make_unique<nn::Conv2d>(store, "conv", 3, 4, 3, 1, 1, 6, 6, 3, true);
    });
  }
}

TEST_CASE("the compute copy follows the parameters when refreshed", "[autocast]") {
  nn::ParameterStore store;
  nn::Autocast autocast;
  autocast.mode = Precision::bf16;
  store.set_autocast(autocast, /*stochastic_rounding=*/false);
  nn::Linear fc(store, "fc", 8, 4, 2);
  store.finalize(3);
  const std::size_t w = store.index("fc.weight");
  CHECK(to_host(store.compute_vector(w)) == rounded(Precision::bf16, to_host(store.param(w))));
  Kokkos::deep_copy(store.param(w), 0.3f);
  CHECK(to_host(store.compute_vector(w))[0] != round_to(Precision::bf16, 0.3f));  // stale
  store.refresh_compute_copy(1);
  CHECK(to_host(store.compute_vector(w))[0] == round_to(Precision::bf16, 0.3f));
  CHECK_THROWS_AS(store.set_autocast(autocast), Error);  // after finalize

  // fp32: compute_* are the parameters themselves.
  nn::ParameterStore plain;
  nn::Linear fc32(plain, "fc", 8, 4, 2);
  plain.finalize(3);
  CHECK(plain.compute_vector(w).data() == plain.param_vector(w).data());
}

TEST_CASE("stochastic rounding of the compute copy is unbiased and layout-keyed", "[autocast]") {
  nn::ParameterStore a, b;
  nn::Autocast autocast;
  autocast.mode = Precision::bf16;
  a.set_autocast(autocast, true);
  b.set_autocast(autocast, true);
  nn::Linear fa(a, "fc", 64, 32, 2), fb(b, "fc", 64, 32, 2);
  a.finalize(5);
  b.finalize(5);
  const std::size_t w = a.index("fc.weight");
  CHECK(to_host(a.compute_vector(w)) == to_host(b.compute_vector(w)));  // same keys, same bits
  const std::vector<float> master = to_host(a.param(w));
  double mean_error = 0, nearest_error = 0;
  const int steps = 200;
  for (int step = 1; step <= steps; ++step) {
    a.refresh_compute_copy(step);
    const std::vector<float> c = to_host(a.compute_vector(w));
    for (std::size_t i = 0; i < c.size(); ++i) mean_error += c[i] - master[i];
  }
  for (float m : master) nearest_error += std::fabs(round_to(Precision::bf16, m) - m);
  mean_error /= steps;
  // The summed bias over all elements shrinks with the number of draws; nearest rounding's
  // absolute error does not.
  CHECK(std::fabs(mean_error) < 0.2 * nearest_error);
}

TEST_CASE("precision.kernels resolves with a notice and refuses native", "[autocast]") {
  std::string notice;
  CHECK_FALSE(nn::resolve_autocast(Precision::fp32, "auto", notice).active());
  CHECK(notice.empty());
  const nn::Autocast bf16 = nn::resolve_autocast(Precision::bf16, "auto", notice);
  CHECK(bf16.active());
  CHECK_FALSE(bf16.native);
  CHECK(notice.find("emulated") != std::string::npos);
  CHECK_THROWS_AS(nn::resolve_autocast(Precision::bf16, "native", notice), ConfigError);
}
