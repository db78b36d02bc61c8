// CNN layers and model beyond gradients: Conv2d against a direct convolution loop for many
// geometries and workspace block sizes, parameter registration and init, pooling semantics,
// BatchNorm modes, and the Cnn's shapes, FLOPs, description and spec validation.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/batchnorm.hpp"
#include "trellis/nn/cnn.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/pool.hpp"
#include "trellis/nn/residual.hpp"

#include <cmath>
#include <string>
#include <vector>

using namespace trellis;
using trellis::kernels::first_rows;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

// y[i, o, oh, ow] = b[o] + sum_{c, kh, kw} W[o, c, kh, kw] x[i, c, oh*s - p + kh, ow*s - p + kw]
std::vector<double> direct_conv(const std::vector<float>& x, const std::vector<float>& w,
                                const std::vector<float>& b, int n, const nn::Conv2dSpec& s) {
  const int ho = (s.height + 2 * s.padding - s.kernel) / s.stride + 1;
  const int wo = (s.width + 2 * s.padding - s.kernel) / s.stride + 1;
  std::vector<double> y(static_cast<std::size_t>(n * s.out_channels * ho * wo));
  std::size_t e = 0;
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < s.out_channels; ++o)
      for (int oh = 0; oh < ho; ++oh)
        for (int ow = 0; ow < wo; ++ow, ++e) {
          double sum = b.empty() ? 0.0 : b[static_cast<std::size_t>(o)];
          for (int c = 0; c < s.in_channels; ++c)
            for (int kh = 0; kh < s.kernel; ++kh)
              for (int kw = 0; kw < s.kernel; ++kw) {
                const int h = oh * s.stride - s.padding + kh, ww = ow * s.stride - s.padding + kw;
                if (h < 0 || h >= s.height || ww < 0 || ww >= s.width) continue;
                sum += static_cast<double>(w[static_cast<std::size_t>(
                           ((o * s.in_channels + c) * s.kernel + kh) * s.kernel + kw)]) *
                       x[static_cast<std::size_t>(
                           ((i * s.in_channels + c) * s.height + h) * s.width + ww)];
              }
          y[e] = sum;
        }
  return y;
}

void check_close(const std::vector<float>& actual, const std::vector<double>& expected,
                 double rel = 1e-5, double abs = 1e-5) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i << ": " << actual[i] << " vs " << expected[i]);
    CHECK(test::close(actual[i], expected[i], rel, abs));
  }
}

nn::CnnSpec mnist_spec() {
  nn::CnnSpec spec;
  spec.channels = 1;
  spec.height = 28;
  spec.width = 28;
  spec.classes = 10;
  spec.widths = {32, 64, 128};
  spec.blocks_per_stage = 1;
  spec.capacity = 4;
  return spec;
}

}  // namespace

// im2col always; the vendor convolution (oneDNN or cuDNN) too where the build has one.
static std::vector<nn::ConvImpl> conv_impls() {
  std::vector<nn::ConvImpl> impls{nn::ConvImpl::im2col};
  if (*nn::vendor_conv_name() != '\0') impls.push_back(nn::ConvImpl::vendor);
  return impls;
}

TEST_CASE("Conv2d forward equals a direct convolution for many geometries", "[cnn][conv]") {
  struct Case {
    int in, out, k, stride, pad, h, w;
    bool bias;
  };
  for (const Case c : {Case{1, 2, 3, 1, 1, 5, 5, true}, Case{3, 4, 3, 2, 1, 8, 7, true},
                       Case{2, 3, 5, 3, 2, 9, 11, false}, Case{2, 5, 1, 2, 0, 6, 6, false},
                       Case{4, 3, 1, 1, 0, 3, 5, true}, Case{2, 2, 4, 1, 0, 4, 4, true},
                       Case{3, 2, 2, 2, 1, 5, 6, true}}) {
    nn::Conv2dSpec s;
    s.in_channels = c.in;
    s.out_channels = c.out;
    s.kernel = c.k;
    s.stride = c.stride;
    s.padding = c.pad;
    s.height = c.h;
    s.width = c.w;
    s.bias = c.bias;
    const int n = 5, in = c.in * c.h * c.w;
    const std::vector<float> x = random_values(static_cast<std::size_t>(n * in), 3);
    // The im2col path with several workspace sizes, and the build's vendor convolution.
    for (const nn::ConvImpl impl : conv_impls()) {
      for (std::int64_t workspace :
           {std::int64_t{0}, std::int64_t{1},
            std::int64_t{2} * c.in * c.k * c.k * ((c.h + 2 * c.pad - c.k) / c.stride + 1) *
                ((c.w + 2 * c.pad - c.k) / c.stride + 1)}) {
        INFO("impl " << (impl == nn::ConvImpl::vendor ? nn::vendor_conv_name() : "im2col")
                     << ", conv in " << c.in << " out " << c.out << " k " << c.k << " s "
                     << c.stride << " p " << c.pad << " image " << c.h << "x" << c.w
                     << ", workspace " << workspace);
        if (impl == nn::ConvImpl::vendor && workspace != 0) continue;
        s.max_workspace_floats = workspace;
        s.impl = impl;
        nn::ParameterStore store;
        nn::Conv2d conv(store, "conv", s, /*capacity=*/6);
        store.finalize(13);
        CHECK(conv.uses_vendor() == (impl == nn::ConvImpl::vendor));
        if (impl == nn::ConvImpl::im2col && workspace == 1 && !conv.geometry().is_pointwise())
          CHECK(conv.block() == 1);
        if (impl == nn::ConvImpl::im2col && workspace > 1 && !conv.geometry().is_pointwise())
          CHECK(conv.block() == 2);
        FloatView xd = to_device("x", x);
        conv.forward(as_matrix(xd, n, in), n, {});
        const std::vector<float> w = to_host(store.param(conv.weight_index()));
        const std::vector<float> b =
            c.bias ? to_host(store.param(*conv.bias_index())) : std::vector<float>{};
        check_close(to_host(first_rows(conv.output(), n)), direct_conv(x, w, b, n, s));
      }
    }
  }
}

TEST_CASE("Conv2d registers PyTorch-shaped parameters with PyTorch's default init", "[cnn][conv]") {
  nn::ParameterStore store;
  nn::Conv2d conv(store, "c1", 3, 16, 3, 1, 1, 8, 8, 2);
  nn::Conv2d nobias(store, "c2", 16, 8, 1, 2, 0, 8, 8, 2, /*bias=*/false);
  store.finalize(99);
  const auto& w = store.info(store.index("c1.weight"));
  CHECK(w.shape == Shape{16, 3, 3, 3});
  CHECK(w.weight_decay);
  const auto& b = store.info(store.index("c1.bias"));
  CHECK(b.shape == Shape{16});
  CHECK_FALSE(b.weight_decay);
  CHECK_FALSE(store.find("c2.bias").has_value());
  CHECK(conv.in_features() == 3 * 64);
  CHECK(conv.out_features() == 16 * 64);
  CHECK(nobias.out_features() == 8 * 16);
  CHECK(conv.flops_per_sample() == 6LL * 16 * 64 * 27);
  const double bound = 1.0 / std::sqrt(27.0);
  CHECK(w.init.uniform_bound() == Approx(bound));
  for (const char* name : {"c1.weight", "c1.bias"}) {
    const std::vector<float> v = to_host(store.param(store.index(name)));
    float lo = 1.0f, hi = -1.0f;
    for (float e : v) {
      lo = std::min(lo, e);
      hi = std::max(hi, e);
    }
    CHECK(lo >= -bound);
    CHECK(hi <= bound);
    CHECK(hi - lo > bound);  // actually spread over the interval
  }
  CHECK_THROWS_AS(nn::Conv2d(store, "bad", 3, 4, 5, 1, 0, 4, 4, 2), Error);  // kernel > image
  CHECK_THROWS_AS(nn::Conv2d(store, "bad", 3, 0, 3, 1, 1, 4, 4, 2), Error);  // no outputs
  CHECK_THROWS_AS(nn::Conv2d(store, "bad", 3, 4, 3, 0, 1, 4, 4, 2), Error);  // stride 0
}

TEST_CASE("MaxPool2d routes gradients to the first maximum of each window", "[cnn][pool]") {
  nn::MaxPool2d pool("pool", 1, 2, 4, 2, 2, 1);
  // Window 0 holds a tie (5 at (0,0) and (1,1)); window 1 has its maximum at (1,3).
  FloatView x = to_device("x", {5, 1, 0, 2, 3, 5, -1, 7});
  pool.forward(as_matrix(x, 1, 8), 1, {});
  CHECK(to_host(first_rows(pool.output(), 1)) == std::vector<float>{5, 7});
  FloatView dy = to_device("dy", {10, 20});
  pool.backward(as_matrix(dy, 1, 2), 1);
  CHECK(to_host(first_rows(pool.input_grad(), 1)) == std::vector<float>{10, 0, 0, 0, 0, 0, 0, 20});
  CHECK(pool.out_features() == 2);
  CHECK_THROWS_AS(nn::MaxPool2d("bad", 1, 2, 2, 3, 1, 1), Error);
}

TEST_CASE("GlobalAvgPool averages each channel's plane", "[cnn][pool]") {
  nn::GlobalAvgPool avg("avg", 2, 1, 3, 2);
  FloatView x = to_device("x", {1, 2, 3, 10, 20, 30});
  avg.forward(as_matrix(x, 1, 6), 1, {});
  CHECK(to_host(first_rows(avg.output(), 1)) == std::vector<float>{2, 20});
  FloatView dy = to_device("dy", {3, 6});
  avg.backward(as_matrix(dy, 1, 2), 1);
  CHECK(to_host(first_rows(avg.input_grad(), 1)) == std::vector<float>{1, 1, 1, 2, 2, 2});
}

TEST_CASE("BatchNorm2d normalises per channel in training and uses running stats in eval",
          "[cnn][batchnorm]") {
  nn::ParameterStore store;
  nn::BatchNorm2d bn(store, "bn", 2, 1, 2, /*capacity=*/3);
  store.finalize(1);
  CHECK(store.info(bn.weight_index()).init.kind == nn::InitSpec::Kind::constant);
  CHECK_FALSE(store.info(bn.weight_index()).weight_decay);
  CHECK_FALSE(store.info(bn.bias_index()).weight_decay);
  CHECK(to_host(bn.running_mean()) == std::vector<float>{0, 0});
  CHECK(to_host(bn.running_var()) == std::vector<float>{1, 1});
  // Channel 0 values {1, 3, 5, 7}: mean 4, biased var 5, unbiased 20/3.
  // Channel 1 values {2, 2, 2, 2}: mean 2, var 0 -> output beta = 0.
  FloatView x = to_device("x", {1, 3, 2, 2, 5, 7, 2, 2});
  bn.forward(as_matrix(x, 2, 4), 2, {});
  const std::vector<float> y = to_host(first_rows(bn.output(), 2));
  const double inv = 1.0 / std::sqrt(5.0 + 1e-5);
  check_close(y, {-3 * inv, -1 * inv, 0, 0, 1 * inv, 3 * inv, 0, 0});
  check_close(to_host(bn.running_mean()), {0.4, 0.2});
  check_close(to_host(bn.running_var()), {0.9 + 0.1 * 20.0 / 3.0, 0.9});
  CHECK(bn.batch_count() == 4.0);

  nn::StepContext eval;
  eval.training = false;
  FloatView one = to_device("one", {0.4f, 0.4f, 1.2f, 1.2f});
  bn.forward(as_matrix(one, 1, 4), 1, eval);  // one image is fine in eval mode
  const double inv0 = 1.0 / std::sqrt(0.9 + 0.1 * 20.0 / 3.0 + 1e-5);
  const double inv1 = 1.0 / std::sqrt(0.9 + 1e-5);
  check_close(to_host(first_rows(bn.output(), 1)),
              {0.0, 0.0, (1.2 - 0.2) * inv1, (1.2 - 0.2) * inv1}, 1e-5, 1e-6);
  FloatView ones = to_device("ones", {1, 1, 1, 1});
  bn.backward(as_matrix(ones, 1, 4), 1);  // eval: dx = gamma * invstd * dy
  check_close(to_host(first_rows(bn.input_grad(), 1)), {inv0, inv0, inv1, inv1});
  check_close(to_host(bn.running_mean()), {0.4, 0.2});  // eval leaves the running stats alone

  // Training on a single value per channel is undefined (PyTorch refuses too).
  nn::ParameterStore other;
  nn::BatchNorm2d tiny(other, "tiny", 2, 1, 1, 1);
  other.finalize(1);
  FloatView single = to_device("single", {1, 2});
  CHECK_THROWS_AS(tiny.forward(as_matrix(single, 1, 2), 1, {}), Error);
}

TEST_CASE("Cnn builds the documented ResNet layout for 28x28x1 and 32x32x3", "[cnn][model]") {
  nn::CnnSpec spec = mnist_spec();
  nn::ParameterStore store;
  nn::Cnn model(spec, store);
  CHECK(model.describe() == "cnn 32-64-128 x1 (28x28x1)");
  CHECK(model.classes() == 10);
  CHECK(model.capacity() == 4);
  // stem conv, bn (its ReLU fused); 3 blocks; pool; head
  CHECK(model.num_layers() == 7);
  CHECK(model.layer(2).out_features() == 32 * 28 * 28);
  CHECK(model.layer(3).out_features() == 64 * 14 * 14);
  CHECK(model.layer(4).out_features() == 128 * 7 * 7);
  CHECK(model.layer(5).out_features() == 128);
  // FLOPs: 6 * MACs of every conv and the head.
  const std::int64_t stem = 6LL * 32 * 784 * 9;
  const std::int64_t stage1 = 2 * 6LL * 32 * 784 * 288;
  const std::int64_t stage2 = 6LL * 64 * 196 * (288 + 576 + 32);
  const std::int64_t stage3 = 6LL * 128 * 49 * (576 + 1152 + 64);
  CHECK(model.flops_per_sample() == stem + stage1 + stage2 + stage3 + 6LL * 128 * 10);
  CHECK(model.flops_per_sample() == 222939648);
  for (const char* name : {"stem.conv.weight", "stem.bn.weight", "stage1.block1.conv1.weight",
                           "stage2.block1.shortcut.conv.weight", "stage3.block1.bn2.bias",
                           "head.weight", "head.bias"}) {
    INFO(name);
    CHECK(store.find(name).has_value());
  }
  CHECK_FALSE(store.find("stage1.block1.shortcut.conv.weight").has_value());  // identity
  CHECK(model.buffers().size() == 2 * (1 + 2 + 3 + 3));
  CHECK(model.buffers().front().name == "stem.bn.running_mean");
  store.finalize(3);

  nn::CnnSpec cifar = mnist_spec();
  cifar.channels = 3;
  cifar.height = cifar.width = 32;
  cifar.widths = {8, 16};
  cifar.blocks_per_stage = 2;
  cifar.classes = 7;
  cifar.input_grad = true;
  nn::ParameterStore cstore;
  nn::Cnn small(cifar, cstore);
  cstore.finalize(4);
  CHECK(small.describe() == "cnn 8-16 x2 (32x32x3)");
  CHECK(small.layer(small.num_layers() - 2).in_features() == 16 * 16 * 16);
  const int n = 3;
  FloatView x = to_device("x", random_values(static_cast<std::size_t>(n * 3 * 32 * 32), 5));
  nn::StepContext ctx;
  const ConstMatrix logits = small.forward(as_matrix(x, n, 3 * 32 * 32), n, ctx);
  CHECK(logits.extent(0) == 3);
  CHECK(logits.extent(1) == 7);
  for (float v : to_host(logits)) CHECK(std::isfinite(v));
  FloatView dy = to_device("dy", random_values(static_cast<std::size_t>(n * 7), 6));
  small.backward(as_matrix(dy, n, 7), n);
  for (float v : to_host(first_rows(small.input_grad(), n))) CHECK(std::isfinite(v));

  // Eval mode: each image's logits are independent of the rest of the batch.
  ctx.training = false;
  const std::vector<float> batch = to_host(small.forward(as_matrix(x, n, 3 * 32 * 32), n, ctx));
  const std::vector<float> first = to_host(small.forward(as_matrix(x, 1, 3 * 32 * 32), 1, ctx));
  for (std::size_t j = 0; j < first.size(); ++j) CHECK(first[j] == Approx(batch[j]).margin(1e-6));
}

TEST_CASE("Cnn spec validation names the configuration keys", "[cnn][model]") {
  auto expect = [](nn::CnnSpec spec, const std::string& key) {
    INFO("expect a ConfigError naming " << key);
    try {
      validate(spec);
      FAIL("no error");
    } catch (const ConfigError& e) {
      CHECK(std::string(e.what()).find(key) != std::string::npos);
    }
  };
  nn::CnnSpec spec = mnist_spec();
  CHECK_NOTHROW(validate(spec));
  nn::CnnSpec s = spec;
  s.widths = {};
  expect(s, "model.widths");
  s = spec;
  s.widths = {32, 0};
  expect(s, "model.widths");
  s = spec;
  s.blocks_per_stage = 0;
  expect(s, "model.blocks");
  s = spec;
  s.classes = 0;
  expect(s, "classes");
  s = spec;
  s.capacity = 0;
  expect(s, "capacity");
  s = spec;
  s.height = 0;
  expect(s, "image");
  nn::ParameterStore store;
  CHECK_THROWS_AS(nn::Cnn(s, store), ConfigError);
}

// Training needs no gradient w.r.t. the images: by default the stem convolution skips its
// backward-data pass, which must leave every parameter gradient exactly as it was.
TEST_CASE("Cnn skips the input gradient unless asked, with the same parameter gradients",
          "[cnn][conv]") {
  const int n = 3;
  std::vector<std::vector<float>> grads;
  for (const bool input_grad : {true, false}) {
    nn::CnnSpec spec;
    spec.channels = 2;
    spec.height = spec.width = 8;
    spec.classes = 4;
    spec.widths = {4, 8};
    spec.capacity = n;
    spec.input_grad = input_grad;
    nn::ParameterStore store;
    nn::Cnn model(spec, store);
    store.finalize(17);
    FloatView x = to_device("x", random_values(static_cast<std::size_t>(n * 2 * 64), 8));
    FloatView dy = to_device("dy", random_values(static_cast<std::size_t>(n * 4), 9));
    model.forward(as_matrix(x, n, 2 * 64), n, {});
    model.backward(as_matrix(dy, n, 4), n);
    grads.push_back(to_host(store.grads()));
    if (!input_grad) CHECK_THROWS_AS(model.input_grad(), Error);
  }
  CHECK(grads[0] == grads[1]);
}
