// Int8 kernels: quantization round trips within half a step, per-row weight scales, and the
// int8 linear (oneDNN where the build has it) against the reference kernel and exact sums.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/int8.hpp"
#include "trellis/kernels/int8_conv.hpp"
#include "trellis/kernels/layernorm.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using namespace trellis;
using namespace trellis::test;
using kernels::ActivationQuant;
using kernels::QuantType;

namespace {

std::vector<std::uint8_t> bytes_of(const kernels::ByteView& v) {
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  return std::vector<std::uint8_t>(host.data(), host.data() + host.extent(0));
}

kernels::ByteView byte_view(const std::vector<std::uint8_t>& values) {
  kernels::ByteView v("bytes", values.size());
  const auto host = Kokkos::create_mirror_view(HostSpace(), v);
  for (std::size_t i = 0; i < values.size(); ++i) host(i) = values[i];
  Kokkos::deep_copy(v, host);
  return v;
}

std::vector<std::int8_t> random_weights(std::size_t count, std::mt19937& rng) {
  std::uniform_int_distribution<int> weight(-127, 127);
  std::vector<std::int8_t> w(count);
  for (auto& v : w) v = static_cast<std::int8_t>(weight(rng));
  return w;
}

kernels::Int8View int8_view(const std::vector<std::int8_t>& values) {
  kernels::Int8View v("w", values.size());
  const auto host = Kokkos::create_mirror_view(HostSpace(), v);
  for (std::size_t i = 0; i < values.size(); ++i) host(i) = values[i];
  Kokkos::deep_copy(v, host);
  return v;
}

int value_of(std::uint8_t byte, QuantType type) {
  return type == QuantType::u8 ? byte : static_cast<std::int8_t>(byte);
}

// f(z) in double: relu, the erf GELU, or GELU's tanh approximation.
double exact_activation(kernels::Activation f, double z) {
  if (f == kernels::Activation::relu) return z > 0 ? z : 0;
  if (f == kernels::Activation::gelu) return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
  if (f == kernels::Activation::gelu_tanh)
    return 0.5 * z *
           (1 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (z + 0.044715 * z * z * z)));
  return z;
}

}  // namespace

TEST_CASE("activation quantization round-trips within half a step and clamps", "[int8]") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-3.0f, 5.0f);
  std::vector<float> x(5000);
  for (float& v : x) v = uniform(rng);
  for (const QuantType type : {QuantType::u8, QuantType::s8}) {
    ActivationQuant q;
    q.type = type;
    q.scale = 0.02f;
    q.zero_point = type == QuantType::u8 ? 100 : 0;
    const float lo = q.scale * static_cast<float>(q.qmin() - q.zero_point);
    const float hi = q.scale * static_cast<float>(q.qmax() - q.zero_point);
    kernels::ByteView bytes("q", x.size());
    kernels::quantize(to_device("x", x), q, bytes);
    const FloatView back("back", x.size());
    kernels::dequantize(bytes, q, back);
    const std::vector<float> y = to_host(back);
    const std::vector<std::uint8_t> b = bytes_of(bytes);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const int v = value_of(b[i], type);
      CHECK(v >= q.qmin());
      CHECK(v <= q.qmax());
      if (x[i] >= lo && x[i] <= hi)
        CHECK(std::fabs(y[i] - x[i]) <= 0.5f * q.scale * (1 + 1e-5f));
      else
        CHECK(y[i] == (x[i] < lo ? lo : hi));
    }
  }
  // Ties go to even, as PyTorch's quantize_per_tensor: 0.5 -> 0, 1.5 -> 2, -2.5 -> -2.
  ActivationQuant s8;
  s8.type = QuantType::s8;
  kernels::ByteView ties("ties", 3);
  kernels::quantize(to_device("t", {0.5f, 1.5f, -2.5f}), s8, ties);
  const std::vector<std::uint8_t> t = bytes_of(ties);
  CHECK(value_of(t[0], QuantType::s8) == 0);
  CHECK(value_of(t[1], QuantType::s8) == 2);
  CHECK(value_of(t[2], QuantType::s8) == -2);
}

TEST_CASE("weights quantize per row to max|w| / 127", "[int8]") {
  const std::vector<float> w{0.5f, -1.27f, 0.01f, 0.0f, 0.0f, 0.0f, 2.54f, 1.0f, -0.02f};
  kernels::Int8View q("q", 9);
  const FloatView scales("scales", 3);
  kernels::quantize_weights(to_device("w", w), 3, 3, q, scales);
  const std::vector<float> s = to_host(scales);
  CHECK(s[0] == Approx(0.01f));
  CHECK(s[1] == 1.0f);  // an all-zero (pruned) row
  CHECK(s[2] == Approx(0.02f));
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), q);
  const std::vector<int> expected{50, -127, 1, 0, 0, 0, 127, 50, -1};
  for (std::size_t i = 0; i < 9; ++i) CHECK(static_cast<int>(host(i)) == expected[i]);
}

TEST_CASE("int8 linear: oneDNN equals the reference and the exact sums", "[int8]") {
  std::mt19937 rng(5);
  const int in = 67, out = 19;
  const std::vector<std::int8_t> w = random_weights(static_cast<std::size_t>(in * out), rng);
  const kernels::Int8View wq = int8_view(w);
  std::vector<float> ws(out), b(out);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int o = 0; o < out; ++o)
    ws[o] = 0.001f * (1.0f + static_cast<float>(o)), b[o] = uniform(rng);
  const FloatView wsd = to_device("ws", ws), bd = to_device("b", b);
  INFO("oneDNN int8 matmul available: " << kernels::int8_onednn_available());
  for (const QuantType type : {QuantType::u8, QuantType::s8})
    for (const kernels::Activation f : {kernels::Activation::none, kernels::Activation::relu,
                                        kernels::Activation::gelu, kernels::Activation::gelu_tanh})
      for (const int n : {1, 7, 64}) {
        ActivationQuant q;
        q.type = type;
        q.scale = 0.05f;
        q.zero_point = type == QuantType::u8 ? 37 : 0;
        std::uniform_int_distribution<int> value(q.qmin(), q.qmax());
        std::vector<std::uint8_t> x(static_cast<std::size_t>(n * in));
        for (auto& v : x) v = static_cast<std::uint8_t>(value(rng) & 0xff);
        const kernels::ByteView xq = byte_view(x);
        kernels::Int8Linear fast("fast", in, out, wq, wsd, bd, q, f);
        kernels::Int8Linear reference("ref", in, out, wq, wsd, bd, q, f,
                                      kernels::Int8Backend::reference);
        CHECK(fast.uses_onednn() == kernels::int8_onednn_available());
        const FloatView y1("y1", static_cast<std::size_t>(n * out)),
            y2("y2", static_cast<std::size_t>(n * out));
        fast.forward(xq, n, as_matrix(y1, n, out));
        reference.forward(xq, n, as_matrix(y2, n, out));
        const std::vector<float> a = to_host(y1), r = to_host(y2);
        for (int i = 0; i < n; ++i)
          for (int o = 0; o < out; ++o) {
            long long sum = 0;
            for (int k = 0; k < in; ++k)
              sum += static_cast<long long>(value_of(x[i * in + k], type) - q.zero_point) *
                     w[static_cast<std::size_t>(o * in + k)];
            double z = static_cast<double>(sum) * q.scale * ws[o] + b[o];
            z = exact_activation(f, z);
            const std::size_t e = static_cast<std::size_t>(i * out + o);
            CHECK(r[e] == Approx(z).epsilon(1e-5).margin(1e-5));
            CHECK(a[e] == Approx(r[e]).epsilon(1e-5).margin(1e-5));
          }
      }
}

// The transformer epilogue: a residual tensor added after the activation, oneDNN against the
// reference and both against the exact value.
TEST_CASE("int8 linear: residual epilogue", "[int8]") {
  std::mt19937 rng(11);
  const int in = 48, out = 40, n = 33;
  const std::vector<std::int8_t> w = random_weights(static_cast<std::size_t>(in * out), rng);
  const kernels::Int8View wq = int8_view(w);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> ws(out), b(out), residual(static_cast<std::size_t>(n * out));
  for (int o = 0; o < out; ++o) ws[o] = 0.002f * (1.0f + 0.1f * static_cast<float>(o));
  for (auto& v : b) v = uniform(rng);
  for (auto& v : residual) v = 3.0f * uniform(rng);
  const FloatView wsd = to_device("ws", ws), bd = to_device("b", b), rd = to_device("r", residual);
  ActivationQuant q;
  q.type = QuantType::s8;
  q.scale = 0.04f;
  std::uniform_int_distribution<int> value(q.qmin(), q.qmax());
  std::vector<std::uint8_t> x(static_cast<std::size_t>(n * in));
  for (auto& v : x) v = static_cast<std::uint8_t>(value(rng) & 0xff);
  const kernels::ByteView xq = byte_view(x);
  const ConstMatrix r = as_matrix(rd, n, out);
  auto exact = [&](int i, int o, kernels::Activation f, bool with_residual) {
    long long sum = 0;
    for (int k = 0; k < in; ++k)
      sum += static_cast<long long>(value_of(x[static_cast<std::size_t>(i * in + k)], q.type)) *
             w[static_cast<std::size_t>(o * in + k)];
    double z = static_cast<double>(sum) * q.scale * ws[o] + b[o];
    z = exact_activation(f, z);
    return with_residual ? z + residual[static_cast<std::size_t>(i * out + o)] : z;
  };
  for (const kernels::Activation f :
       {kernels::Activation::none, kernels::Activation::gelu, kernels::Activation::gelu_tanh}) {
    INFO("activation " << static_cast<int>(f));
    kernels::Int8Linear fast("fast", in, out, wq, wsd, bd, q, f);
    kernels::Int8Linear reference("ref", in, out, wq, wsd, bd, q, f,
                                  kernels::Int8Backend::reference);
    fast.set_residual(true);
    reference.set_residual(true);
    const FloatView y1("y1", static_cast<std::size_t>(n * out)),
        y2("y2", static_cast<std::size_t>(n * out));
    fast.forward(xq, n, as_matrix(y1, n, out), r);
    reference.forward(xq, n, as_matrix(y2, n, out), r);
    const std::vector<float> a = to_host(y1), ref = to_host(y2);
    for (int i = 0; i < n; ++i)
      for (int o = 0; o < out; ++o) {
        const std::size_t e = static_cast<std::size_t>(i * out + o);
        CHECK(ref[e] == Approx(exact(i, o, f, true)).margin(1e-5));
        CHECK(a[e] == Approx(ref[e]).margin(1e-5));
      }
    // The residual is required, and its shape checked.
    CHECK_THROWS_AS(fast.forward(xq, n, as_matrix(y1, n, out)), Error);
    CHECK_THROWS_AS(fast.forward(xq, n - 1, as_matrix(y1, n - 1, out), r), Error);
    CHECK_THROWS_AS(fast.set_residual(false), Error);  // after the first forward
  }
}

// The fused LayerNorm + quantization of the int8 GPT blocks gives the bytes that the
// LayerNorm followed by kernels::quantize gives (a level apart at most, and only where y sits
// within float rounding of a half step), for widths of whole vectors and not.
TEST_CASE("layernorm quantized in one pass equals layernorm then quantize", "[int8]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.5f, 2.0f);
  for (const int d : {128, 37})
    for (const QuantType type : {QuantType::s8, QuantType::u8}) {
      INFO("d " << d << ", " << kernels::quant_type_name(type));
      const int rows = 29;
      std::vector<float> x(static_cast<std::size_t>(rows * d)), g(d), b(d);
      for (auto& v : x) v = normal(rng);
      for (auto& v : g) v = 1.0f + 0.3f * normal(rng);
      for (auto& v : b) v = 0.1f * normal(rng);
      const FloatView xd = to_device("x", x), gd = to_device("g", g), bd = to_device("b", b);
      ActivationQuant q;
      q.type = type;
      q.scale = 0.02f;  // clips the tails: saturation is exercised
      q.zero_point = type == QuantType::u8 ? 100 : 0;
      FloatView y("y", x.size()), mean("mean", rows), rstd("rstd", rows);
      kernels::layernorm_forward(as_matrix(xd, rows, d), gd, bd, 1e-5f, as_matrix(y, rows, d), mean,
                                 rstd);
      kernels::ByteView separate("separate", x.size()), fused("fused", x.size());
      kernels::quantize(y, q, separate);
      kernels::layernorm_forward_quantized(as_matrix(xd, rows, d), gd, bd, 1e-5f, q, fused);
      const std::vector<std::uint8_t> a = bytes_of(separate), f = bytes_of(fused);
      const std::vector<float> yh = to_host(y);
      int differ = 0;
      for (std::size_t e = 0; e < a.size(); ++e) {
        if (a[e] == f[e]) continue;
        ++differ;
        const double level = static_cast<double>(yh[e]) / q.scale;
        CHECK(std::abs(level - std::floor(level) - 0.5) < 1e-3);
        CHECK(std::abs(value_of(a[e], type) - value_of(f[e], type)) == 1);
      }
      CHECK(differ <= static_cast<int>(a.size() / 100));
    }
}

// GELU and quantization in one pass (an int8 MLP's hidden layer): the level of the exact
// GELU, a level apart only within float rounding of a half step; saturation at both ends.
TEST_CASE("activation_quantize gives the level of the exact GELU, erf or tanh", "[int8]") {
  for (const kernels::Activation f : {kernels::Activation::gelu, kernels::Activation::gelu_tanh})
    for (const QuantType type : {QuantType::u8, QuantType::s8}) {
      INFO(kernels::quant_type_name(type) << " activation " << static_cast<int>(f));
      std::vector<float> z;
      for (int i = -600; i <= 600; ++i) z.push_back(0.01f * static_cast<float>(i) + 0.0013f);
      ActivationQuant q;
      q.type = type;
      q.scale = 0.02f;  // s8 saturates above 2.54, u8 (zero point 9) above 4.92
      q.zero_point = type == QuantType::u8 ? 9 : 0;
      kernels::ByteView out("out", z.size());
      kernels::activation_quantize(to_device("z", z), f, q, out);
      const std::vector<std::uint8_t> got = bytes_of(out);
      int saturated = 0;
      for (std::size_t e = 0; e < z.size(); ++e) {
        const double level = exact_activation(f, z[e]) / q.scale + q.zero_point;
        const double clamped = std::min<double>(std::max<double>(level, q.qmin()), q.qmax());
        if (clamped != level) ++saturated;
        const int tolerance = std::abs(level - std::floor(level) - 0.5) < 1e-3 ? 1 : 0;
        CHECK(std::abs(value_of(got[e], type) - std::nearbyint(clamped)) <= tolerance);
      }
      CHECK(saturated > 0);
    }
}

TEST_CASE("int8 convolution: oneDNN equals the reference and the exact sums", "[int8][conv]") {
  std::mt19937 rng(21);
  struct Case {
    int c, h, w, k, s, p, oc;
  };
  for (const Case t :
       {Case{3, 7, 6, 3, 1, 1, 5}, Case{4, 9, 9, 3, 2, 1, 6}, Case{5, 8, 8, 1, 2, 0, 7}})
    for (const QuantType type : {QuantType::u8, QuantType::s8})
      for (const kernels::Activation f : {kernels::Activation::none, kernels::Activation::relu}) {
        kernels::ConvGeometry g;
        g.channels = t.c, g.height = t.h, g.width = t.w, g.kernel = t.k, g.stride = t.s,
        g.padding = t.p;
        const int n = 3, oh = g.out_height(), ow = g.out_width();
        const std::size_t wsize = static_cast<std::size_t>(t.oc * t.c * t.k * t.k);
        std::vector<std::int8_t> w(wsize);
        std::uniform_int_distribution<int> weight(-127, 127);
        for (auto& v : w) v = static_cast<std::int8_t>(weight(rng));
        kernels::Int8View wq("w", wsize);
        {
          const auto host = Kokkos::create_mirror_view(HostSpace(), wq);
          for (std::size_t i = 0; i < wsize; ++i) host(i) = w[i];
          Kokkos::deep_copy(wq, host);
        }
        std::vector<float> ws(t.oc), b(t.oc);
        std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
        for (int o = 0; o < t.oc; ++o) ws[o] = 0.002f * (1.0f + o), b[o] = uniform(rng);
        ActivationQuant q;
        q.type = type;
        q.scale = 0.04f;
        q.zero_point = type == QuantType::u8 ? 20 : 0;
        // Inputs on the grid (x = s (v - z)), some beyond the range (saturated by both paths).
        std::uniform_int_distribution<int> value(q.qmin() - 5, q.qmax() + 5);
        const std::size_t image = static_cast<std::size_t>(t.c * t.h * t.w);
        std::vector<float> x(n * image);
        std::vector<int> v(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) {
          const int raw = value(rng);
          x[i] = q.scale * static_cast<float>(raw - q.zero_point);
          v[i] = std::min(std::max(raw, q.qmin()), q.qmax()) - q.zero_point;
        }
        const FloatView xd = to_device("x", x);
        kernels::Int8Conv2d fast("fast", g, t.oc, wq, to_device("ws", ws), to_device("b", b), q, f,
                                 n);
        kernels::Int8Conv2d reference("ref", g, t.oc, wq, to_device("ws", ws), to_device("b", b), q,
                                      f, n, kernels::Int8Backend::reference);
        const std::size_t out = static_cast<std::size_t>(t.oc * oh * ow);
        const FloatView y1("y1", n * out), y2("y2", n * out);
        fast.forward(as_matrix(xd, n, static_cast<int>(image)), n,
                     as_matrix(y1, n, static_cast<int>(out)));
        reference.forward(as_matrix(xd, n, static_cast<int>(image)), n,
                          as_matrix(y2, n, static_cast<int>(out)));
        const std::vector<float> a = to_host(y1), r = to_host(y2);
        for (int i = 0; i < n; ++i)
          for (int o = 0; o < t.oc; ++o)
            for (int yy = 0; yy < oh; ++yy)
              for (int xx = 0; xx < ow; ++xx) {
                long long sum = 0;
                for (int c = 0; c < t.c; ++c)
                  for (int ky = 0; ky < t.k; ++ky)
                    for (int kx = 0; kx < t.k; ++kx) {
                      const int iy = yy * t.s - t.p + ky, ix = xx * t.s - t.p + kx;
                      if (iy < 0 || iy >= t.h || ix < 0 || ix >= t.w) continue;
                      sum += static_cast<long long>(v[i * image + (c * t.h + iy) * t.w + ix]) *
                             w[static_cast<std::size_t>(((o * t.c + c) * t.k + ky) * t.k + kx)];
                    }
                double z = static_cast<double>(sum) * q.scale * ws[o] + b[o];
                if (f == kernels::Activation::relu) z = z > 0 ? z : 0;
                const std::size_t e = i * out + static_cast<std::size_t>((o * oh + yy) * ow + xx);
                CHECK(r[e] == Approx(z).epsilon(1e-5).margin(1e-5));
                CHECK(a[e] == Approx(r[e]).epsilon(1e-5).margin(1e-5));
              }
        // Channels-last input and output (the int8 CNN's layout): the same values, transposed.
        std::vector<float> x_nhwc(x.size());
        for (int i = 0; i < n; ++i)
          for (int c = 0; c < t.c; ++c)
            for (int p = 0; p < t.h * t.w; ++p)
              x_nhwc[i * image + static_cast<std::size_t>(p * t.c + c)] =
                  x[i * image + static_cast<std::size_t>(c * t.h * t.w + p)];
        const FloatView xl = to_device("x_nhwc", x_nhwc);
        for (const kernels::Int8Backend backend :
             {kernels::Int8Backend::automatic, kernels::Int8Backend::reference}) {
          kernels::Int8Conv2d last("last", g, t.oc, wq, to_device("ws", ws), to_device("b", b), q,
                                   f, n, backend);
          last.set_channels_last(true, true);
          const FloatView y3("y3", n * out);
          last.forward(as_matrix(xl, n, static_cast<int>(image)), n,
                       as_matrix(y3, n, static_cast<int>(out)));
          const std::vector<float> l = to_host(y3);
          for (int i = 0; i < n; ++i)
            for (int o = 0; o < t.oc; ++o)
              for (int p = 0; p < oh * ow; ++p)
                CHECK(l[i * out + static_cast<std::size_t>(p * t.oc + o)] ==
                      Approx(r[i * out + static_cast<std::size_t>(o * oh * ow + p)])
                          .epsilon(1e-5)
                          .margin(1e-5));
          if (f != kernels::Activation::none) continue;
          // Accumulating into what y holds (a residual block's shortcut), ReLU after the sum.
          kernels::Int8Conv2d residual("residual", g, t.oc, wq, to_device("ws", ws),
                                       to_device("b", b), q, kernels::Activation::relu, n, backend);
          residual.set_channels_last(true, true);
          residual.set_accumulate(true);
          std::vector<float> shortcut(n * out);
          for (float& v : shortcut) v = uniform(rng);
          const FloatView y4 = to_device("y4", shortcut);
          residual.forward(as_matrix(xl, n, static_cast<int>(image)), n,
                           as_matrix(y4, n, static_cast<int>(out)));
          const std::vector<float> acc = to_host(y4);
          for (std::size_t e = 0; e < acc.size(); ++e) {
            const float z = l[e] + shortcut[e];
            CHECK(acc[e] == Approx(z > 0 ? z : 0.0f).epsilon(1e-5).margin(1e-5));
          }
        }
      }
}
