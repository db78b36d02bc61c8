#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/activation.hpp"
#include "trellis/kernels/bias.hpp"
#include "trellis/kernels/dropout.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/kernels/vector_ops.hpp"

#include <cmath>
#include <vector>

using namespace trellis;
using trellis::test::to_device;
using trellis::test::to_host;

TEST_CASE("bias_add broadcasts over rows; column sums accumulate", "[kernels]") {
  FloatView y = to_device("y", {1, 2, 3, 4, 5, 6});  // [2, 3]
  FloatView b = to_device("b", {10, 20, 30});
  kernels::bias_add(as_matrix(y, 2, 3), b);
  CHECK(to_host(y) == std::vector<float>{11, 22, 33, 14, 25, 36});

  FloatView g = to_device("g", {1, 1, 1});
  kernels::column_sum_accumulate(as_matrix(y, 2, 3), g);
  CHECK(to_host(g) == std::vector<float>{26, 48, 70});
  CHECK_THROWS_AS(kernels::bias_add(as_matrix(y, 3, 2), b), trellis::Error);
}

TEST_CASE("relu and exact gelu match reference values", "[kernels]") {
  const std::vector<float> xs{-3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 1.0f, 2.5f};
  FloatView x = to_device("x", xs), y("y", xs.size()),
            dy = to_device("dy", std::vector<float>(xs.size(), 2.0f)), dx("dx", xs.size());
  const int n = static_cast<int>(xs.size());

  kernels::relu_forward(as_matrix(x, 1, n), as_matrix(y, 1, n));
  kernels::relu_backward(as_matrix(x, 1, n), as_matrix(dy, 1, n), as_matrix(dx, 1, n));
  auto yh = to_host(y), dxh = to_host(dx);
  for (int i = 0; i < n; ++i) {
    CHECK(yh[i] == (xs[i] > 0 ? xs[i] : 0.0f));
    CHECK(dxh[i] == (xs[i] > 0 ? 2.0f : 0.0f));
  }

  kernels::gelu_forward(as_matrix(x, 1, n), as_matrix(y, 1, n));
  kernels::gelu_backward(as_matrix(x, 1, n), as_matrix(dy, 1, n), as_matrix(dx, 1, n));
  yh = to_host(y);
  dxh = to_host(dx);
  for (int i = 0; i < n; ++i) {
    const double v = xs[i];
    const double cdf = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0)));
    const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2.0 * 3.14159265358979323846);
    CHECK(yh[i] == Approx(v * cdf).margin(1e-6));
    CHECK(dxh[i] == Approx(2.0 * (cdf + v * pdf)).margin(1e-6));
  }
  // torch.nn.functional.gelu(torch.tensor([1.0, -1.0])) = [0.8413447, -0.1586553]
  CHECK(kernels::gelu(1.0f) == Approx(0.8413447).margin(1e-6));
  CHECK(kernels::gelu(-1.0f) == Approx(-0.1586553).margin(1e-6));
}

TEST_CASE("add_relu_forward is relu(a + b); relu_backward(_add) take their mask from the output",
          "[kernels]") {
  // Sums negative, zero (-1 + 1), positive, and a NaN (relu(NaN) = 0 here, as relu_forward).
  const std::vector<float> as{-3.0f, -1.0f, 0.25f, 2.0f, -0.5f, std::nanf("")};
  const std::vector<float> bs{1.0f, 1.0f, -0.5f, 0.5f, 4.0f, 1.0f};
  const int n = static_cast<int>(as.size());
  FloatView a = to_device("a", as), b = to_device("b", bs), y("y", n), sum("sum", n),
            reference("reference", n), dy = to_device("dy", std::vector<float>(n, 3.0f)),
            dx_from_y("dx_from_y", n), dx_from_sum("dx_from_sum", n);
  kernels::add_relu_forward(as_matrix(a, 2, 3), as_matrix(b, 2, 3), as_matrix(y, 2, 3));
  kernels::add(a, b, sum);
  kernels::relu_forward(as_matrix(sum, 2, 3), as_matrix(reference, 2, 3));
  CHECK(to_host(y) == to_host(reference));
  kernels::relu_backward(as_matrix(y, 2, 3), as_matrix(dy, 2, 3), as_matrix(dx_from_y, 2, 3));
  kernels::relu_backward(as_matrix(sum, 2, 3), as_matrix(dy, 2, 3), as_matrix(dx_from_sum, 2, 3));
  CHECK(to_host(dx_from_y) == to_host(dx_from_sum));
  CHECK(to_host(dx_from_y) == std::vector<float>{0, 0, 0, 3, 3, 0});
  // relu_backward_add: dx += the same masked values, as add(dx, relu_backward(...)) would give
  // (-0 + 0 = +0 included: the masked zeros are added, not skipped).
  FloatView acc = to_device("acc", {-0.0f, 1.0f, -2.0f, 0.5f, -0.0f, 7.0f}), reference_acc("r", n);
  kernels::add(acc, dx_from_y, reference_acc);
  kernels::relu_backward_add(as_matrix(y, 2, 3), as_matrix(dy, 2, 3), as_matrix(acc, 2, 3));
  const std::vector<float> got = to_host(acc), want = to_host(reference_acc);
  CHECK(got == want);
  for (int i = 0; i < n; ++i) CHECK(std::signbit(got[i]) == std::signbit(want[i]));
  CHECK_THROWS_AS(
      kernels::add_relu_forward(as_matrix(a, 2, 3), as_matrix(b, 3, 2), as_matrix(y, 2, 3)),
      trellis::Error);
}

TEST_CASE("tanh gelu matches PyTorch's approximate='tanh' values and its gradient", "[kernels]") {
  // torch.nn.functional.gelu(x, approximate='tanh') and its gradient, float64 (PyTorch 2.x).
  const std::vector<double> xs{1.0, -1.0, 3.0, -3.0, 0.5};
  const std::vector<double> ys{0.8411919906082768, -0.15880800939172324, 2.996362607918227,
                               -0.0036373920817729943, 0.34571400982514394};
  const std::vector<double> gs{1.0829640838457826, -0.08296408384578252, 1.0115841666309695,
                               -0.011584166630969648, 0.8673699035346424};
  for (std::size_t i = 0; i < xs.size(); ++i) {
    CHECK(kernels::gelu_tanh(static_cast<float>(xs[i])) == Approx(ys[i]).margin(1e-6));
    CHECK(kernels::gelu_tanh_grad(static_cast<float>(xs[i])) == Approx(gs[i]).margin(1e-6));
  }
  // Dense grid against the tanh formula in double, and the far tails.
  for (int i = -1200; i <= 1200; ++i) {
    const double x = 0.01 * i + 0.0007;
    const double u = std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
    const double t = std::tanh(u);
    const double du = std::sqrt(2.0 / 3.14159265358979323846) * (1 + 3 * 0.044715 * x * x);
    INFO("x = " << x);
    REQUIRE(kernels::gelu_tanh(static_cast<float>(x)) == Approx(0.5 * x * (1 + t)).margin(2e-6));
    REQUIRE(kernels::gelu_tanh_grad(static_cast<float>(x)) ==
            Approx(0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du).margin(2e-6));
  }
  CHECK(kernels::gelu_tanh(-60.0f) == Approx(0.0).margin(1e-30));
  CHECK(kernels::gelu_tanh(60.0f) == 60.0f);
  CHECK(kernels::gelu_tanh_grad(60.0f) == 1.0f);
}

TEST_CASE("dropout keeps about 1-p, scales kept values, and recomputes the same mask",
          "[kernels][dropout]") {
  const int rows = 200, cols = 50;
  FloatView x = to_device("x", std::vector<float>(rows * cols, 1.0f)), y("y", rows * cols),
            y2("y2", rows * cols);
  kernels::DropoutMask mask{0.3f, 7, 99, 0};
  kernels::dropout_apply(as_matrix(x, rows, cols), as_matrix(y, rows, cols), mask);
  kernels::dropout_apply(as_matrix(x, rows, cols), as_matrix(y2, rows, cols), mask);
  const auto yh = to_host(y);
  CHECK(yh == to_host(y2));
  int kept = 0;
  for (int i = 0; i < rows * cols; ++i) {
    if (yh[i] != 0.0f) {
      ++kept;
      CHECK(yh[i] == Approx(1.0 / 0.7).epsilon(1e-6));
    }
    CHECK((yh[i] != 0.0f) == kernels::dropout_keep(mask, i / cols, i % cols, cols));
  }
  CHECK(kept / double(rows * cols) == Approx(0.7).margin(0.02));

  kernels::DropoutMask other_stream = mask;
  other_stream.stream = 100;
  kernels::dropout_apply(as_matrix(x, rows, cols), as_matrix(y2, rows, cols), other_stream);
  CHECK(yh != to_host(y2));

  mask.p = 1.0f;
  CHECK_THROWS_AS(kernels::dropout_apply(as_matrix(x, rows, cols), as_matrix(y, rows, cols), mask),
                  trellis::Error);
}

TEST_CASE("vector ops: fill, scale, axpy, copy", "[kernels]") {
  FloatView x = to_device("x", {1, 2, 3}), y = to_device("y", {10, 20, 30});
  kernels::axpy(2.0f, x, y);
  CHECK(to_host(y) == std::vector<float>{12, 24, 36});
  kernels::scale(y, 0.5f);
  CHECK(to_host(y) == std::vector<float>{6, 12, 18});
  test::set(y, 1, NAN);
  kernels::scale(y, 0.0f);  // exact zeros, NaN gone
  CHECK(to_host(y) == std::vector<float>{0, 0, 0});
  kernels::copy(x, y);
  CHECK(to_host(y) == std::vector<float>{1, 2, 3});
  kernels::fill(y, 4.0f);
  CHECK(to_host(y) == std::vector<float>{4, 4, 4});
  FloatView z("z", 2);
  CHECK_THROWS_AS(kernels::axpy(1.0f, x, z), trellis::Error);
}

TEST_CASE("random fills depend on the element index only", "[kernels]") {
  FloatView whole("whole", 100), tail("tail", 40);
  kernels::fill_uniform(whole, -2.0f, 3.0f, 5, 11);
  kernels::fill_uniform(tail, -2.0f, 3.0f, 5, 11,
                        kernels::ShardIndexMap{60});  // elements 60..99 of the same draw
  const auto w = to_host(whole), t = to_host(tail);
  for (int i = 0; i < 40; ++i) CHECK(t[i] == w[60 + i]);
  for (float v : w) {
    CHECK(v >= -2.0f);
    CHECK(v <= 3.0f);
  }
  FloatView normal("normal", 20000);
  kernels::fill_normal(normal, 1.0f, 0.5f, 5, 12);
  double sum = 0, sum2 = 0;
  for (float v : to_host(normal)) {
    sum += v;
    sum2 += double(v) * v;
  }
  const double mean = sum / 20000, var = sum2 / 20000 - mean * mean;
  CHECK(mean == Approx(1.0).margin(0.02));
  CHECK(std::sqrt(var) == Approx(0.5).margin(0.02));
}
