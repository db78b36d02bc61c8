// Finite-difference checks of the CNN layers and the whole Cnn: for L = sum(w * y) with fixed
// random w, the analytic gradients w.r.t. the input and every parameter must match central
// differences (test_nn_util.hpp).
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/kernels/views.hpp"
#include "trellis/nn/batchnorm.hpp"
#include "trellis/nn/cnn.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/pool.hpp"
#include "trellis/nn/residual.hpp"

#include <functional>
#include <string>
#include <vector>

using namespace trellis;
using trellis::kernels::first_rows;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;
using trellis::test::weighted_sum;

namespace {

struct Tolerance {
  float eps = 1e-3f;
  double rel = 1e-2, abs = 1e-3;
};

// Like test::check_gradient, but an element whose central difference with step eps misses is
// retried with step eps / 10 (tolerance abs * 3 for the larger float noise of the smaller
// step). Networks of BatchNorm + ReLU on tiny batches have ReLU kinks and strong curvature
// within 1e-3 of many parameters; a wrong analytic gradient fails at both steps.
void check_gradient_two_step(const std::string& what, const FloatView& values,
                             const std::vector<float>& analytic,
                             const std::function<double()>& loss, Tolerance tol) {
  REQUIRE(analytic.size() == values.size());
  auto numeric = [&](std::size_t i, float eps) {
    const float x = test::get(values, i);
    test::set(values, i, x + eps);
    const double up = loss();
    test::set(values, i, x - eps);
    const double down = loss();
    test::set(values, i, x);
    return (up - down) / (2.0 * static_cast<double>(eps));
  };
  int retried = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double coarse = numeric(i, tol.eps);
    if (test::close(analytic[i], coarse, tol.rel, tol.abs)) continue;
    ++retried;
    const double fine = numeric(i, tol.eps / 10.0f);
    INFO(what << "[" << i << "]: analytic " << analytic[i] << ", numeric " << coarse << " (step "
              << tol.eps << "), " << fine << " (step " << tol.eps / 10.0f << ")");
    CHECK(test::close(analytic[i], fine, tol.rel, 3.0 * tol.abs));
  }
  // A handful of kinks is expected; a systematic error would show up everywhere.
  INFO(what << ": " << retried << " of " << values.size() << " elements needed the finer step");
  CHECK(retried <= static_cast<int>(values.size() / 4 + 2));
}

// Checks dL/dx and dL/dparam of one layer on n rows of x_host ([n, in_features]), retrying
// elements near ReLU/max kinks with a finer step (check_gradient_two_step).
void gradcheck_layer(nn::Layer& layer, nn::ParameterStore& store, int n,
                     const std::vector<float>& x_host, const nn::StepContext& ctx,
                     Tolerance tol = {}) {
  trellis::test::gradcheck_layer_with(
      layer, store, n, x_host, ctx,
      [&tol](const std::string& what, const FloatView& values, const std::vector<float>& analytic,
             const std::function<double()>& loss) {
        check_gradient_two_step(what, values, analytic, loss, tol);
      });
}

// Gives BatchNorm parameters values away from their (1, 0) init, so gamma != 1 is exercised.
void randomize_params(nn::ParameterStore& store, std::uint64_t stream) {
  for (std::size_t i = 0; i < store.size(); ++i) {
    const auto& info = store.info(i);
    if (info.name.find(".bn") == std::string::npos && info.name.find("bn.") == std::string::npos)
      continue;
    const bool is_weight =
        info.name.size() > 7 && info.name.substr(info.name.size() - 7) == ".weight";
    const auto v =
        random_values(info.numel, stream + i, is_weight ? 0.5f : -0.5f, is_weight ? 1.5f : 0.5f);
    Kokkos::deep_copy(store.param(i), to_device("p", v));
  }
}

}  // namespace

TEST_CASE("Conv2d gradients match finite differences", "[cnn][gradcheck]") {
  struct Case {
    int in, out, k, stride, pad, h, w;
  };
  for (const Case c :
       {Case{2, 3, 3, 1, 0, 5, 5}, Case{2, 3, 3, 1, 1, 5, 4}, Case{2, 3, 3, 2, 0, 6, 5},
        Case{2, 3, 3, 2, 1, 5, 5}, Case{3, 2, 1, 1, 0, 3, 3}, Case{2, 2, 1, 2, 0, 5, 5}}) {
    INFO("conv in " << c.in << " out " << c.out << " k " << c.k << " s " << c.stride << " p "
                    << c.pad << " image " << c.h << "x" << c.w);
    nn::ParameterStore store;
    nn::Conv2d conv(store, "conv", c.in, c.out, c.k, c.stride, c.pad, c.h, c.w, /*capacity=*/3,
                    /*bias=*/true);
    store.finalize(5);
    const int n = 2;
    gradcheck_layer(conv, store, n,
                    random_values(static_cast<std::size_t>(n * c.in * c.h * c.w), 21), {});
  }
}

TEST_CASE("MaxPool2d and GlobalAvgPool gradients match finite differences", "[cnn][gradcheck]") {
  nn::ParameterStore store;
  store.finalize(0);
  nn::MaxPool2d pool("pool", 2, 6, 5, /*kernel=*/2, /*stride=*/2, 3);
  gradcheck_layer(pool, store, 2, random_values(2 * 2 * 6 * 5, 31), {});
  nn::MaxPool2d overlapping("pool_overlap", 2, 5, 5, /*kernel=*/3, /*stride=*/2, 3);
  gradcheck_layer(overlapping, store, 2, random_values(2 * 2 * 5 * 5, 32), {});
  nn::GlobalAvgPool avg("avg", 3, 4, 3, 3);
  gradcheck_layer(avg, store, 3, random_values(3 * 3 * 4 * 3, 33), {});
}

TEST_CASE("BatchNorm2d gradients match finite differences", "[cnn][gradcheck]") {
  nn::ParameterStore store;
  nn::BatchNorm2d bn(store, "bn", 3, 3, 4, /*capacity=*/5);
  store.finalize(3);
  randomize_params(store, 40);
  SECTION("training mode: batch statistics") {
    gradcheck_layer(bn, store, 4, random_values(4 * 3 * 12, 41, -2.0f, 2.0f), {});
  }
  SECTION("eval mode: running statistics") {
    nn::StepContext train;
    FloatView warm = to_device("warm", random_values(5 * 36, 42, -1.0f, 3.0f));
    bn.forward(as_matrix(warm, 5, 36), 5, train);  // moves the running stats off (0, 1)
    nn::StepContext eval;
    eval.training = false;
    gradcheck_layer(bn, store, 3, random_values(3 * 36, 43, -2.0f, 2.0f), eval);
  }
}

// With its ReLU fused (the stem's and each block's first norm): inputs spread wide enough
// that few outputs sit near the kink, where a finite difference is not a derivative.
TEST_CASE("BatchNorm2d with a fused ReLU matches finite differences", "[cnn][gradcheck]") {
  for (const int block : {1, 4}) {
    INFO("channel block " << block);
    nn::ParameterStore store;
    nn::BatchNorm2d bn(store, "bn", 4, 3, 4, /*capacity=*/5, 0.1f, 1e-5f, nullptr, block,
                       /*relu_after=*/true);
    store.finalize(3);
    randomize_params(store, 70);
    gradcheck_layer(bn, store, 4, random_values(4 * 4 * 12, 71, -2.0f, 2.0f), {});
  }
}

TEST_CASE("BasicBlock gradients match finite differences", "[cnn][gradcheck]") {
  SECTION("identity shortcut") {
    nn::ParameterStore store;
    nn::BasicBlock block(store, "block", 3, 3, 1, 4, 4, /*capacity=*/3);
    REQUIRE_FALSE(block.has_projection());
    store.finalize(8);
    randomize_params(store, 50);
    gradcheck_layer(block, store, 3, random_values(3 * 3 * 16, 51, -2.0f, 2.0f), {});
  }
  SECTION("projection shortcut (stride 2, wider)") {
    nn::ParameterStore store;
    nn::BasicBlock block(store, "block", 2, 4, 2, 5, 5, /*capacity=*/3);
    REQUIRE(block.has_projection());
    CHECK(block.out_features() == 4 * 3 * 3);
    store.finalize(9);
    randomize_params(store, 60);
    gradcheck_layer(block, store, 3, random_values(3 * 2 * 25, 61, -2.0f, 2.0f), {});
  }
}

namespace {

// dL/dinput and dL/dparam of a whole Cnn on 3 images against central differences.
void gradcheck_cnn(nn::CnnSpec spec) {
  spec.input_grad = true;
  nn::ParameterStore store;
  nn::Cnn model(spec, store);
  store.finalize(17);
  randomize_params(store, 70);
  const int n = 3, in = spec.channels * spec.height * spec.width;
  FloatView x = to_device("x", random_values(static_cast<std::size_t>(n * in), 71, -2.0f, 2.0f));
  const std::vector<float> w = random_values(static_cast<std::size_t>(n * spec.classes), 72);
  nn::StepContext ctx;
  auto loss = [&] { return weighted_sum(model.forward(as_matrix(x, n, in), n, ctx), w); };
  store.zero_grads();
  loss();
  FloatView dy = to_device("dy", w);
  model.backward(as_matrix(dy, n, spec.classes), n);
  check_gradient_two_step("cnn.input", x, to_host(first_rows(model.input_grad(), n)), loss, {});
  for (std::size_t i = 0; i < store.size(); ++i) {
    check_gradient_two_step(store.info(i).name, store.param(i), to_host(store.grad(i)), loss, {});
  }
}

nn::CnnSpec tiny_cnn() {
  nn::CnnSpec spec;
  spec.channels = 2;
  spec.height = 6;
  spec.width = 6;
  spec.classes = 3;
  spec.widths = {3, 4};
  spec.blocks_per_stage = 1;
  spec.capacity = 4;
  return spec;
}

}  // namespace

TEST_CASE("Cnn gradients match finite differences on a tiny input", "[cnn][gradcheck]") {
  gradcheck_cnn(tiny_cnn());
}

// The layers that index channels themselves, on channel-blocked rows (kernels/channel_layout.hpp),
// with blocks 8 (the general kernels on the host) and 4. The convolution on blocked rows
// computes the same bits as on NCHW rows, and the blocks and the whole Cnn in that layout are
// compared with the NCHW ones (test_cnn_blocked_layout.cpp): at the 8 or 16 channels a block
// needs, a residual block's finite differences here sit too close to ReLU kinks, in either
// layout, to tell a wrong gradient from curvature.
TEST_CASE("channel-blocked BatchNorm2d and GlobalAvgPool match finite differences",
          "[cnn][gradcheck][layout]") {
  for (const int b : {4, 8}) {
    INFO("channel block " << b);
    const int channels = 2 * b;
    nn::ParameterStore store;
    nn::BatchNorm2d bn(store, "bn", channels, 3, 4, /*capacity=*/4, 0.1f, 1e-5f, nullptr, b);
    nn::GlobalAvgPool pool("pool", channels, 3, 4, 4, b);
    store.finalize(3);
    randomize_params(store, 40);
    gradcheck_layer(bn, store, 4, random_values(4 * channels * 12, 41, -2.0f, 2.0f), {});
    gradcheck_layer(pool, store, 3, random_values(3 * channels * 12, 44), {});
  }
}
