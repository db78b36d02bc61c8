// Autocast (nn/autocast.hpp): a Linear and a Conv2d in bf16 / fp16 compute exactly what the
// fp32 layer computes on operands rounded by hand (weights, input, output gradient), with the
// output and input gradient rounded after; weight and bias gradients stay fp32. And the
// compute copy follows the parameters only when refreshed.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/code_path.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/precision.hpp"
#include "trellis/kernels/bf16_speed_probe.hpp"
#include "trellis/kernels/gemm.hpp"
#include "trellis/nn/autocast.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/linear.hpp"

#include <cmath>

#include <functional>
#include <memory>
#include <string>
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

TEST_CASE("precision.kernels resolves with a notice", "[autocast]") {
  std::string notice;
  CHECK_FALSE(nn::resolve_autocast(Precision::fp32, "auto", notice).active());
  CHECK(notice.empty());
  const nn::Autocast emulated = nn::resolve_autocast(Precision::bf16, "emulated", notice);
  CHECK(emulated.active());
  CHECK_FALSE(emulated.native);
  CHECK(notice.find("emulated kernels") != std::string::npos);
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    if (kernels::native_gemm_available(p)) {
      CHECK(nn::resolve_autocast(p, "native", notice).native);
      CHECK(notice.find("native kernels") != std::string::npos);
    } else {
      CHECK_THROWS_AS(nn::resolve_autocast(p, "native", notice), ConfigError);
    }
  }
}

TEST_CASE("auto takes native bf16 kernels where the agreed measurement says they pay",
          "[autocast]") {
  std::string notice;
  int calls = 0;
  double seen = -1;
  const auto agreeing_on = [&](double least) {
    return nn::AgreeOnMinimum([&calls, &seen, least](double mine) {
      ++calls;
      seen = mine;
      return least;  // what the slowest rank measured
    });
  };
  const nn::Autocast slow = nn::resolve_autocast(Precision::bf16, "auto", notice, agreeing_on(0.5));
  CHECK_FALSE(slow.native);
  if (kHostKernels) {
    CHECK(calls == 1);
    CHECK(seen == kernels::measured_bf16_gemm_speedup());  // this rank's own measurement
    if (kernels::native_gemm_available(Precision::bf16) && seen > 0)
      CHECK(notice.find("measured 0.50x its fp32 GEMM here (the least over all ranks)") !=
            std::string::npos);
  }
  const nn::Autocast fast = nn::resolve_autocast(Precision::bf16, "auto", notice, agreeing_on(3));
  CHECK(fast.native == kernels::native_gemm_available(Precision::bf16));
  // fp16 and the explicit choices take no measurement.
  calls = 0;
  nn::resolve_autocast(Precision::fp16, "auto", notice, agreeing_on(3));
  nn::resolve_autocast(Precision::bf16, "emulated", notice, agreeing_on(3));
  CHECK(calls == 0);
}

TEST_CASE("without a native bf16 GEMM, the 16-bit gemm says why", "[autocast]") {
  // An AVX2-only CPU (oneDNN makes no bf16 primitive there) or a build without oneDNN: the
  // reason names it, and a 16-bit gemm throws it instead of crashing.
  if (kernels::native_gemm_available(Precision::bf16)) {
    CHECK(kernels::native_gemm_unavailable_reason(Precision::bf16).empty());
    return;
  }
  const std::string reason = kernels::native_gemm_unavailable_reason(Precision::bf16);
  INFO(reason);
  CHECK((reason.find("this CPU") != std::string::npos ||
         reason.find("no oneDNN") != std::string::npos));
  kernels::HalfView a("a", 4), b("b", 4);
  try {
    kernels::gemm(false, false, kernels::GemmOperand::half(a.data(), Precision::bf16, 2, 2),
                  kernels::GemmOperand::half(b.data(), Precision::bf16, 2, 2), 0.0f,
                  as_matrix(FloatView("c", 4), 2, 2));
    FAIL("a bf16 gemm ran without a native kernel");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find(reason) != std::string::npos);
  }
}

TEST_CASE("16-bit GEMM equals the fp32 GEMM of the same values", "[autocast]") {
  if (!kernels::native_gemm_available(Precision::bf16)) return;  // the case above
  const int m = 7, n = 5, k = 33;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 1.0f}) {
        INFO("trans_a " << ta << " trans_b " << tb << " beta " << beta);
        const std::vector<float> a = rounded(Precision::bf16, random_values(m * k, 3));
        const std::vector<float> b = rounded(Precision::bf16, random_values(k * n, 4));
        const FloatView a32 = to_device("a", a), b32 = to_device("b", b);
        kernels::HalfView a16("a16", a.size()), b16("b16", b.size());
        kernels::to_half(Precision::bf16, a32, a16);
        kernels::to_half(Precision::bf16, b32, b16);
        const std::vector<float> c0 = random_values(m * n, 5);
        const FloatView c_half = to_device("c", c0), c_ref = to_device("cr", c0);
        const std::size_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
        kernels::gemm(ta, tb, kernels::GemmOperand::half(a16.data(), Precision::bf16, ar, ac),
                      kernels::GemmOperand::half(b16.data(), Precision::bf16, br, bc), beta,
                      as_matrix(c_half, m, n));
        kernels::gemm(ta, tb, 1.0f, ConstMatrix(a32.data(), ar, ac),
                      ConstMatrix(b32.data(), br, bc), beta, as_matrix(c_ref, m, n));
        const std::vector<float> got = to_host(c_half), want = to_host(c_ref);
        for (std::size_t i = 0; i < got.size(); ++i)
          REQUIRE(std::fabs(got[i] - want[i]) <= 1e-5f * (1.0f + std::fabs(want[i])));
      }
    }
  }
  kernels::HalfView h("h", 4);
  const FloatView f("f", 4);
  CHECK_THROWS_AS(
      kernels::gemm(false, false, kernels::GemmOperand::half(h.data(), Precision::bf16, 2, 2),
                    kernels::GemmOperand::of(ConstMatrix(f.data(), 2, 2)), 0.0f,
                    as_matrix(FloatView("c", 4), 2, 2)),
      Error);
}

TEST_CASE("native autocast Linear matches the emulated one within rounding", "[autocast]") {
  if (!kernels::native_gemm_available(Precision::bf16)) return;
  const int rows = 6, in = 40, out = 24;
  nn::ParameterStore native_store, emulated_store;
  nn::Autocast native, emulated;
  native.mode = emulated.mode = Precision::bf16;
  native.native = true;
  native_store.set_autocast(native);
  emulated_store.set_autocast(emulated);
  nn::Linear a(native_store, "fc", in, out, rows), b(emulated_store, "fc", in, out, rows);
  native_store.finalize(7);
  emulated_store.finalize(7);
  const FloatView x = to_device("x", random_values(rows * in, 1, -3.0f, 3.0f));
  const FloatView dy = to_device("dy", random_values(rows * out, 2));
  a.forward(as_matrix(x, rows, in), rows, {});
  b.forward(as_matrix(x, rows, in), rows, {});
  native_store.zero_grads();
  emulated_store.zero_grads();
  a.backward(as_matrix(dy, rows, out), rows);
  b.backward(as_matrix(dy, rows, out), rows);
  const auto flat = [](ConstMatrix m) {
    return to_host(kernels::ConstVector(m.data(), m.extent(0) * m.extent(1)));
  };
  const auto near = [](const std::vector<float>& p, const std::vector<float>& q, double rel) {
    for (std::size_t i = 0; i < p.size(); ++i)
      if (std::fabs(p[i] - q[i]) > rel * (std::fabs(q[i]) + 1e-6)) return false;
    return true;
  };
  // Outputs are bf16 values: the two accumulation orders may land one bf16 step apart.
  CHECK(near(flat(a.output()), flat(b.output()), std::ldexp(1.0, -7)));
  CHECK(near(flat(a.input_grad()), flat(b.input_grad()), std::ldexp(1.0, -7)));
  const std::size_t w = native_store.index("fc.weight");
  CHECK(near(to_host(native_store.grad(w)), to_host(emulated_store.grad(w)), 1e-5));
}
