// The fused Linear epilogue kernels (bias + activation forward, activation backward + bias
// gradient) and the one-pass residual add, against naive references on shapes that are not
// multiples of the vector width or of the 256-column tile, and against the unfused kernels.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/activation.hpp"
#include "trellis/kernels/bias.hpp"
#include "trellis/kernels/vector_ops.hpp"

#include <cmath>
#include <utility>
#include <vector>

using namespace trellis;
using trellis::kernels::Activation;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

const std::vector<std::pair<int, int>> kShapes{{1, 1},   {1, 17},  {3, 15}, {4, 255},
                                               {5, 257}, {2, 513}, {9, 64}, {33, 7}};

float reference_activation(Activation f, float v) {
  if (f == Activation::gelu_tanh) return kernels::gelu_tanh(v);
  return f == Activation::relu ? (v > 0.0f ? v : 0.0f) : kernels::gelu(v);
}
float reference_derivative(Activation f, float saved) {
  if (f == Activation::gelu_tanh) return kernels::gelu_tanh_grad(saved);
  return f == Activation::relu ? (saved > 0.0f ? 1.0f : 0.0f) : kernels::gelu_grad(saved);
}
// GELU in the kernels' clones (AVX-512 / AVX2 contract to FMAs) and in this file's scalar
// code round differently; both are within 5e-7 of the exact function (core/fast_math.hpp).
constexpr double kGeluMargin = 1e-6;

void check_equal(Activation f, const std::vector<float>& a, const std::vector<float>& b,
                 double gelu_margin) {
  REQUIRE(a.size() == b.size());
  if (f == Activation::relu) {
    CHECK(a == b);  // nothing approximate on this path: the same bits
    return;
  }
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == Approx(b[i]).margin(gelu_margin));
}

}  // namespace

TEST_CASE("bias_activation_forward adds the bias and activates, in place or not",
          "[kernels][fused]") {
  for (Activation f : {Activation::relu, Activation::gelu, Activation::gelu_tanh}) {
    for (auto [rows, cols] : kShapes) {
      INFO("activation " << static_cast<int>(f) << " shape " << rows << "x" << cols);
      const auto z0 = random_values(static_cast<std::size_t>(rows * cols), 3, -3.0f, 3.0f);
      const auto b = random_values(static_cast<std::size_t>(cols), 4, -1.0f, 1.0f);
      FloatView z = to_device("z", z0), y("y", z0.size()), zy = to_device("zy", z0);
      FloatView bias = to_device("b", b);
      kernels::bias_activation_forward(as_matrix(z, rows, cols), bias, f, as_matrix(y, rows, cols));
      kernels::bias_activation_forward(as_matrix(zy, rows, cols), bias, f,
                                       as_matrix(zy, rows, cols));
      const auto zh = to_host(z), yh = to_host(y), inplace = to_host(zy);
      for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < cols; ++j) {
          const std::size_t i = static_cast<std::size_t>(r * cols + j);
          const float v = z0[i] + b[static_cast<std::size_t>(j)];
          REQUIRE(zh[i] == v);
          REQUIRE(yh[i] == Approx(reference_activation(f, v)).margin(kGeluMargin));
          REQUIRE(inplace[i] == yh[i]);
        }
      }
    }
  }
}

TEST_CASE("bias_activation_backward: dz = dy f'(z) and the bias gradient in one pass",
          "[kernels][fused]") {
  for (Activation f : {Activation::relu, Activation::gelu, Activation::gelu_tanh}) {
    for (auto [rows, cols] : kShapes) {
      INFO("activation " << static_cast<int>(f) << " shape " << rows << "x" << cols);
      const auto n = static_cast<std::size_t>(rows * cols);
      const auto s = random_values(n, 5, -3.0f, 3.0f);
      const auto dy = random_values(n, 6, -1.0f, 1.0f);
      const auto g0 = random_values(static_cast<std::size_t>(cols), 7, -1.0f, 1.0f);
      FloatView saved = to_device("s", s), dyv = to_device("dy", dy), dz("dz", n);
      FloatView grad = to_device("g", g0);
      kernels::bias_activation_backward(as_matrix(saved, rows, cols), as_matrix(dyv, rows, cols), f,
                                        as_matrix(dz, rows, cols), grad);
      const auto dzh = to_host(dz), gh = to_host(grad);
      std::vector<double> colsum(static_cast<std::size_t>(cols), 0.0);
      for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(dzh[i] == Approx(dy[i] * reference_derivative(f, s[i])).margin(kGeluMargin));
        colsum[i % static_cast<std::size_t>(cols)] += dzh[i];
      }
      for (int j = 0; j < cols; ++j) {
        const auto c = static_cast<std::size_t>(j);
        REQUIRE(gh[c] == Approx(g0[c] + colsum[c]).epsilon(1e-5).margin(1e-5));
      }

      // The unfused pair (tanh GELU has no layer of its own): the same per-element formula and
      // the same summation order, so the same bits for relu (and for gelu up to the FMA
      // contraction of each loop).
      if (f == Activation::gelu_tanh) continue;
      FloatView dz_unfused("dz_unfused", n), grad_unfused = to_device("g", g0);
      if (f == Activation::relu) {
        kernels::relu_backward(as_matrix(saved, rows, cols), as_matrix(dyv, rows, cols),
                               as_matrix(dz_unfused, rows, cols));
      } else {
        kernels::gelu_backward(as_matrix(saved, rows, cols), as_matrix(dyv, rows, cols),
                               as_matrix(dz_unfused, rows, cols));
      }
      kernels::column_sum_accumulate(as_matrix(dz_unfused, rows, cols), grad_unfused);
      check_equal(f, to_host(dz_unfused), dzh, kGeluMargin);
      check_equal(f, to_host(grad_unfused), gh, rows * kGeluMargin);  // a sum of rows terms
    }
  }
}

TEST_CASE("relu backward from the saved output equals backward from the pre-activation",
          "[kernels][fused]") {
  const int rows = 6, cols = 37;
  const auto n = static_cast<std::size_t>(rows * cols);
  auto z = random_values(n, 8, -2.0f, 2.0f);
  z[3] = 0.0f;  // the kink: subgradient 0 either way
  std::vector<float> y(n);
  for (std::size_t i = 0; i < n; ++i) y[i] = z[i] > 0.0f ? z[i] : 0.0f;
  FloatView zv = to_device("z", z), yv = to_device("y", y),
            dy = to_device("dy", random_values(n, 9)), dz_z("dz_z", n), dz_y("dz_y", n),
            g_z("g_z", cols), g_y("g_y", cols);
  kernels::bias_activation_backward(as_matrix(zv, rows, cols), as_matrix(dy, rows, cols),
                                    Activation::relu, as_matrix(dz_z, rows, cols), g_z);
  kernels::bias_activation_backward(as_matrix(yv, rows, cols), as_matrix(dy, rows, cols),
                                    Activation::relu, as_matrix(dz_y, rows, cols), g_y);
  CHECK(to_host(dz_z) == to_host(dz_y));
  CHECK(to_host(g_z) == to_host(g_y));
}

TEST_CASE("fused epilogue kernels reject bad shapes and a missing activation", "[kernels][fused]") {
  FloatView z("z", 6), y("y", 6), b("b", 3), g("g", 3);
  CHECK_THROWS_AS(
      kernels::bias_activation_forward(as_matrix(z, 2, 3), b, Activation::relu, as_matrix(y, 3, 2)),
      trellis::Error);
  CHECK_THROWS_AS(
      kernels::bias_activation_forward(as_matrix(z, 3, 2), b, Activation::gelu, as_matrix(y, 3, 2)),
      trellis::Error);
  CHECK_THROWS_AS(kernels::bias_activation_backward(as_matrix(z, 2, 3), as_matrix(y, 2, 3),
                                                    Activation::none, as_matrix(y, 2, 3), g),
                  trellis::Error);
}

TEST_CASE("add: out = a + b in one pass, also in place", "[kernels][fused]") {
  for (int n : {1, 15, 16, 17, 1000}) {
    const auto a = random_values(static_cast<std::size_t>(n), 10);
    const auto b = random_values(static_cast<std::size_t>(n), 11);
    FloatView av = to_device("a", a), bv = to_device("b", b), out("out", n);
    kernels::add(av, bv, out);
    kernels::add(av, bv, av);  // out aliases a
    const auto oh = to_host(out), ah = to_host(av);
    for (std::size_t i = 0; i < a.size(); ++i) {
      REQUIRE(oh[i] == a[i] + b[i]);
      REQUIRE(ah[i] == oh[i]);
    }
  }
  FloatView a("a", 3), b("b", 4);
  CHECK_THROWS_AS(kernels::add(a, b, a), trellis::Error);
}
