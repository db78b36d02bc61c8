// The Llama-family kernels: RMSNorm, rotary position embedding and SwiGLU, against double
// precision references and central differences (host bodies here; the portable build runs the
// device bodies through the same cases).
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/precision.hpp"
#include "trellis/kernels/attention/qkv_layout.hpp"
#include "trellis/kernels/attention/rope.hpp"
#include "trellis/kernels/rmsnorm.hpp"
#include "trellis/kernels/swiglu.hpp"

#include <cmath>
#include <vector>

using namespace trellis;
using trellis::test::check_gradient;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;
using trellis::test::weighted_sum;

TEST_CASE(
    "rmsnorm forward equals the double-precision formula; gradients match finite "
    "differences",
    "[kernels][rmsnorm][gradcheck]") {
  const int rows = 5;
  for (int d : {7, 32, 48}) {
    INFO("d " << d);
    const float eps = 1e-6f;
    const std::vector<float> xs = random_values(static_cast<std::size_t>(rows * d), 1, -2, 2);
    const std::vector<float> gs = random_values(static_cast<std::size_t>(d), 2, 0.5f, 1.5f);
    FloatView x = to_device("x", xs), gamma = to_device("gamma", gs);
    FloatView y("y", xs.size()), rstd("rstd", rows), dx("dx", xs.size()), dgamma("dgamma", d);
    kernels::rmsnorm_forward(as_matrix(x, rows, d), gamma, eps, as_matrix(y, rows, d), rstd);
    const std::vector<float> yh = to_host(y);
    for (int r = 0; r < rows; ++r) {
      double sq = 0;
      for (int j = 0; j < d; ++j) sq += double(xs[r * d + j]) * xs[r * d + j];
      const double rs = 1.0 / std::sqrt(sq / d + eps);
      for (int j = 0; j < d; ++j)
        CHECK(yh[r * d + j] == Approx(xs[r * d + j] * rs * gs[j]).margin(2e-6));
    }
    const std::vector<float> w = random_values(xs.size(), 3);
    FloatView dy = to_device("dy", w);
    kernels::rmsnorm_backward(as_matrix(x, rows, d), as_matrix(dy, rows, d), gamma, rstd,
                              as_matrix(dx, rows, d), dgamma);
    auto loss = [&] {
      kernels::rmsnorm_forward(as_matrix(x, rows, d), gamma, eps, as_matrix(y, rows, d), rstd);
      return weighted_sum(y, w);
    };
    check_gradient("x", x, to_host(dx), loss);
    check_gradient("gamma", gamma, to_host(dgamma), loss);
  }
}

TEST_CASE("rmsnorm rejects mismatched shapes", "[kernels][rmsnorm]") {
  FloatView x("x", 12), y("y", 12), gamma("g", 3), rstd("r", 2);
  CHECK_THROWS_AS(
      kernels::rmsnorm_forward(as_matrix(x, 3, 4), gamma, 1e-5f, as_matrix(y, 3, 4), rstd), Error);
}

namespace {

// The rotation written out in double: head slot s of row r turned by angle p * inv_freq_i.
std::vector<double> rope_reference(const std::vector<float>& x, const kernels::QkvLayout& L,
                                   int seq_len, int first_position, const std::vector<float>& inv) {
  std::vector<double> y(x.begin(), x.end());
  const std::int64_t width = L.width(), hd = L.head_dim, half = hd / 2;
  const std::int64_t rows = static_cast<std::int64_t>(x.size()) / width;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float p = static_cast<float>(first_position + r % seq_len);
    for (std::int64_t s = 0; s < L.n_head + 2 * L.n_kv_head; ++s) {
      if (!L.rotated_slot(s)) continue;
      for (std::int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(p * inv[static_cast<std::size_t>(i)]);
        const double a = x[r * width + s * hd + i], b = x[r * width + s * hd + half + i];
        y[r * width + s * hd + i] = a * std::cos(angle) - b * std::sin(angle);
        y[r * width + s * hd + half + i] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
  return y;
}

}  // namespace

TEST_CASE(
    "rope turns the query and key heads (not the values) by position, and its backward "
    "is the transpose",
    "[kernels][rope]") {
  struct Case {
    int H, KVH, hd, T, first;
  };
  for (const Case c :
       {Case{4, 4, 8, 5, 0}, Case{4, 2, 8, 6, 0}, Case{6, 1, 4, 3, 0}, Case{2, 2, 16, 1, 37}}) {
    INFO("H " << c.H << " KVH " << c.KVH << " hd " << c.hd << " T " << c.T << " first " << c.first);
    const kernels::QkvLayout L{c.H, c.KVH, c.hd};
    const int rows = 2 * c.T, width = static_cast<int>(L.width());
    const int positions = c.first + c.T, half = c.hd / 2;
    const kernels::RopeSpec spec{};
    FloatView cos("cos", static_cast<std::size_t>(positions * half)), sin("sin", cos.size());
    kernels::rope_tables(spec, c.hd, positions, cos, sin);
    const std::vector<float> xs = random_values(static_cast<std::size_t>(rows * width), 4);
    FloatView x = to_device("x", xs);
    kernels::rope_forward(as_matrix(x, rows, width), L, c.T, c.first, cos, sin);
    const std::vector<double> want =
        rope_reference(xs, L, c.T, c.first, kernels::rope_inverse_frequencies(spec, c.hd));
    const std::vector<float> got = to_host(x);
    int unchanged = 0;
    for (std::size_t e = 0; e < xs.size(); ++e) {
      CHECK(got[e] == Approx(want[e]).margin(1e-6));
      unchanged += got[e] == xs[e];
    }
    // The KVH value heads stay bit for bit (and position 0 turns nothing).
    CHECK(unchanged >= rows * c.KVH * c.hd);
    // <R x, y> == <x, R^T y>: the backward is the forward's transpose.
    const std::vector<float> ys = random_values(xs.size(), 5);
    FloatView ry = to_device("ry", ys);
    kernels::rope_backward(as_matrix(ry, rows, width), L, c.T, c.first, cos, sin);
    const std::vector<float> rty = to_host(ry);
    double lhs = 0, rhs = 0;
    for (std::size_t e = 0; e < xs.size(); ++e) {
      lhs += double(got[e]) * ys[e];
      rhs += double(xs[e]) * rty[e];
    }
    CHECK(lhs == Approx(rhs).margin(1e-5));
    // And it undoes the forward.
    kernels::rope_backward(as_matrix(x, rows, width), L, c.T, c.first, cos, sin);
    const std::vector<float> back = to_host(x);
    for (std::size_t e = 0; e < xs.size(); ++e) CHECK(back[e] == Approx(xs[e]).margin(1e-6));
  }
}

TEST_CASE("rope's inverse frequencies equal Hugging Face's, with and without Llama 3 scaling",
          "[kernels][rope]") {
  // transformers' _compute_default_rope_parameters and _compute_llama3_parameters for
  // theta 500000, head_dim 64, factor 8, low 1, high 4, original context 8192, in float32.
  const std::vector<float> plain{1.f,
                                 0.66360122f,
                                 0.440366626f,
                                 0.292227805f,
                                 0.193922758f,
                                 0.128687382f,
                                 0.0853971019f,
                                 0.0566696189f,
                                 0.0376060307f,
                                 0.0249554086f,
                                 0.0165604409f,
                                 0.0109895291f,
                                 0.00729266508f,
                                 0.00483942125f,
                                 0.00321144611f,
                                 0.0021311196f,
                                 0.00141421345f,
                                 0.000938473851f,
                                 0.000622772437f,
                                 0.000413272588f,
                                 0.000274248188f,
                                 0.000181991418f,
                                 0.000120769742f,
                                 8.01429414e-05f,
                                 5.31829646e-05f,
                                 3.52922762e-05f,
                                 2.34199979e-05f,
                                 1.55415401e-05f,
                                 1.03133852e-05f,
                                 6.84397537e-06f,
                                 4.54167048e-06f,
                                 3.0138583e-06f};
  const std::vector<float> scaled{1.f,
                                  0.66360122f,
                                  0.440366626f,
                                  0.292227805f,
                                  0.193922758f,
                                  0.128687382f,
                                  0.0853971019f,
                                  0.0566696189f,
                                  0.0376060307f,
                                  0.0249554086f,
                                  0.0165604409f,
                                  0.0109895291f,
                                  0.00729266508f,
                                  0.00483942125f,
                                  0.00321144611f,
                                  0.00137189368f,
                                  0.000524846022f,
                                  0.000178507791f,
                                  7.78465546e-05f,
                                  5.16590735e-05f,
                                  3.42810235e-05f,
                                  2.27489272e-05f,
                                  1.50962178e-05f,
                                  1.00178677e-05f,
                                  6.64787058e-06f,
                                  4.41153452e-06f,
                                  2.92749974e-06f,
                                  1.94269251e-06f,
                                  1.28917316e-06f,
                                  8.55496921e-07f,
                                  5.6770881e-07f,
                                  3.76732288e-07f};
  kernels::RopeSpec spec;
  spec.theta = 500000.0;
  const std::vector<float> got = kernels::rope_inverse_frequencies(spec, 64);
  spec.factor = 8.0;
  const std::vector<float> got_scaled = kernels::rope_inverse_frequencies(spec, 64);
  REQUIRE(got.size() == plain.size());
  for (std::size_t i = 0; i < plain.size(); ++i) {
    CHECK(got[i] == Approx(plain[i]).epsilon(2e-7));
    CHECK(got_scaled[i] == Approx(scaled[i]).epsilon(1e-6));
  }
  spec.factor = 0.5;
  CHECK_THROWS_AS(kernels::rope_inverse_frequencies(spec, 64), ConfigError);
  CHECK_THROWS_AS(kernels::rope_inverse_frequencies(kernels::RopeSpec{}, 7), Error);
}

TEST_CASE("swiglu equals silu(gate) * up; gradients match finite differences",
          "[kernels][swiglu][gradcheck]") {
  const int rows = 3, f = 5;
  std::vector<float> gu = random_values(static_cast<std::size_t>(rows * 2 * f), 6, -4, 4);
  gu[0] = -100.0f;  // sigmoid underflows: h must be -0 * up, not NaN
  FloatView x = to_device("gate_up", gu), h("h", rows * f), dx("dgate_up", gu.size());
  kernels::swiglu_forward(as_matrix(x, rows, 2 * f), as_matrix(h, rows, f));
  const std::vector<float> hh = to_host(h);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < f; ++j) {
      const double g = gu[r * 2 * f + j], u = gu[r * 2 * f + f + j];
      CHECK(hh[r * f + j] == Approx(g / (1.0 + std::exp(-g)) * u).margin(1e-6));
    }
  const std::vector<float> w = random_values(hh.size(), 7);
  FloatView dh = to_device("dh", w);
  kernels::swiglu_backward(as_matrix(x, rows, 2 * f), as_matrix(dh, rows, f),
                           as_matrix(dx, rows, 2 * f));
  auto loss = [&] {
    kernels::swiglu_forward(as_matrix(x, rows, 2 * f), as_matrix(h, rows, f));
    return weighted_sum(h, w);
  };
  check_gradient("gate_up", x, to_host(dx), loss);
  CHECK_THROWS_AS(kernels::swiglu_forward(as_matrix(x, rows, 2 * f), as_matrix(h, f, rows)), Error);
}

TEST_CASE("swiglu on 16-bit gate_up and h computes the fp32 swiglu of the widened values",
          "[kernels][swiglu][half]") {
  const int rows = 4, f = 37;  // not a multiple of the vector width
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    INFO(precision_name(p));
    std::vector<float> gu = random_values(static_cast<std::size_t>(rows * 2 * f), 8, -4, 4);
    kernels::HalfView gu16("gu16", gu.size());
    {
      auto host = Kokkos::create_mirror_view(gu16);
      for (std::size_t i = 0; i < gu.size(); ++i) {
        host(i) = to_half_bits(p, gu[i]);
        gu[i] = half_bits_to_float(p, host(i));  // the reference sees the stored values
      }
      Kokkos::deep_copy(gu16, host);
    }
    const FloatView x = to_device("gate_up", gu), h("h", rows * f);
    kernels::swiglu_forward(as_matrix(x, rows, 2 * f), as_matrix(h, rows, f));
    kernels::HalfView h16("h16", static_cast<std::size_t>(rows * f));
    kernels::swiglu_forward_half(p, gu16, rows, h16);
    const auto want = to_host(h);
    auto got = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), h16);
    for (std::size_t i = 0; i < want.size(); ++i)
      REQUIRE(
          half_bits_to_float(p, got(i)) ==
          Approx(round_to(p, want[i])).epsilon(p == Precision::bf16 ? 8e-3 : 1e-3).margin(1e-6));
    const FloatView dh = to_device("dh", random_values(want.size(), 9));
    const FloatView dx("dx", gu.size()), dx16("dx16", gu.size());
    kernels::swiglu_backward(as_matrix(x, rows, 2 * f), as_matrix(dh, rows, f),
                             as_matrix(dx, rows, 2 * f));
    kernels::swiglu_backward_half(p, gu16, as_matrix(dh, rows, f), as_matrix(dx16, rows, 2 * f));
    const auto a = to_host(dx), b = to_host(dx16);
    for (std::size_t i = 0; i < a.size(); ++i)
      REQUIRE(b[i] == Approx(a[i]).epsilon(1e-6).margin(1e-6));
    CHECK_THROWS_AS(kernels::swiglu_forward_half(Precision::fp32, gu16, rows, h16), Error);
    CHECK_THROWS_AS(kernels::swiglu_forward_half(p, gu16, rows + 1, h16), Error);
  }
}
