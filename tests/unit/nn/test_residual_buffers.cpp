// The residual block's backward buffers (nn/residual.hpp): its input gradient is conv1's, its
// norms' input gradients share one buffer and its inner convolutions' another, a layer built
// to take its input gradient from its owner (nn/layer.hpp InputGradsFromOwner) refuses a
// backward before it has one, and BatchNorm2d::backward_through_relu gives the bits backward
// gives on the masked gradient.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/memory_ledger.hpp"
#include "trellis/kernels/activation.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/batchnorm.hpp"
#include "trellis/nn/buffer_pool.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/residual.hpp"

#include <functional>
#include <memory>
#include <vector>

using namespace trellis;
using trellis::kernels::first_rows;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

const float* grad_data(const nn::Layer& layer) { return layer.input_grad().data(); }

}  // namespace

TEST_CASE("BasicBlock's parts write their input gradients into three buffers", "[cnn][memory]") {
  for (const bool projection : {false, true}) {
    INFO("projection " << projection);
    nn::ParameterStore store;
    nn::BasicBlock block(store, "block", projection ? 2 : 4, 4, projection ? 2 : 1, 6, 6, 3,
                         nullptr, nn::ConvImpl::im2col);
    store.finalize(1);
    CHECK(grad_data(block) == grad_data(block.conv1()));
    const std::vector<const nn::BatchNorm2d*> norms = block.batchnorms();
    REQUIRE(norms.size() == (projection ? 3u : 2u));
    for (const nn::BatchNorm2d* norm : norms) CHECK(grad_data(*norm) == grad_data(*norms[0]));
    CHECK(grad_data(block.conv2()) != grad_data(*norms[0]));
    CHECK(grad_data(block.conv2()) != grad_data(block));
    if (projection) CHECK(grad_data(*block.shortcut_conv()) == grad_data(block.conv2()));

    // A forward and backward through the shared buffers stay finite and fill dx.
    const int n = 3;
    FloatView x =
        to_device("x", random_values(static_cast<std::size_t>(n) * block.in_features(), 1));
    FloatView dy =
        to_device("dy", random_values(static_cast<std::size_t>(n) * block.out_features(), 2));
    block.forward(as_matrix(x, n, block.in_features()), n, {});
    block.backward(as_matrix(dy, n, block.out_features()), n);
    int nonzero = 0;
    for (float v : to_host(first_rows(block.input_grad(), n))) {
      CHECK(std::isfinite(v));
      nonzero += v != 0.0f;
    }
    CHECK(nonzero > 0);
  }
}

TEST_CASE("a block's backward scratch is counted as three buffers", "[cnn][memory]") {
  const int cap = 5;
  auto workspace = [](const std::function<void()>& build) {
    MemoryLedger census;
    {
      const nn::BufferCensus counting(census);
      build();
    }
    return census.snapshot().current[static_cast<int>(MemoryCategory::workspace)];
  };
  // 2 -> 4 channels, stride 2 on 6x6: in 72 features, mid = out = 36.
  const std::int64_t block = workspace([&] {
    nn::ParameterStore store;
    nn::BasicBlock b(store, "block", 2, 4, 2, 6, 6, cap, nullptr, nn::ConvImpl::im2col);
  });
  // The convolutions' own workspace (im2col columns), without any input gradient.
  const std::int64_t convolutions = workspace([&] {
    nn::ParameterStore store;
    const nn::InputGradsFromOwner no_input_grads;
    auto spec = [](int in, int kernel, int stride, int padding, int size) {
      nn::Conv2dSpec s;
      s.in_channels = in;
      s.out_channels = 4;
      s.kernel = kernel;
      s.stride = stride;
      s.padding = padding;
      s.height = s.width = size;
      s.bias = false;
      s.impl = nn::ConvImpl::im2col;
      return s;
    };
    nn::Conv2d conv1(store, "c1", spec(2, 3, 2, 1, 6), cap);
    nn::Conv2d conv2(store, "c2", spec(4, 3, 1, 1, 3), cap);
    nn::Conv2d shortcut(store, "sc", spec(2, 1, 2, 0, 6), cap);
  });
  // dx (conv1's), the norms' [max(mid, out)] and the convolutions' [max(mid, in)].
  const std::int64_t in = 72, out = 36;
  CHECK(block - convolutions == 4 * cap * (in + out + in));
}

TEST_CASE("a layer built to take its input gradient from its owner refuses to run without it",
          "[cnn][batchnorm]") {
  nn::ParameterStore store;
  std::unique_ptr<nn::BatchNorm2d> lent;
  {
    const nn::InputGradsFromOwner from_owner;
    lent = std::make_unique<nn::BatchNorm2d>(store, "lent", 2, 1, 2, 3);
  }
  nn::BatchNorm2d own(store, "own", 2, 1, 2, 3);
  store.finalize(1);
  CHECK(lent->input_grad().size() == 0);
  CHECK(own.input_grad().size() == 3u * 4);
  FloatView x = to_device("x", {1, 3, 2, 2, 5, 7, 2, 2});
  lent->forward(as_matrix(x, 2, 4), 2, {});
  CHECK_THROWS_WITH(lent->backward(as_matrix(x, 2, 4), 2),
                    Catch::Contains("\"lent\"") && Catch::Contains("input-gradient buffer"));
  // A composite lends; only the owner's test double can reach the protected call here.
  struct Owner : nn::Layer {
    Owner() : nn::Layer("owner", 1, 1, 1) {}
    void forward(ConstMatrix, int, const nn::StepContext&) override {}
    void backward(ConstMatrix, int) override {}
    void lend(nn::Layer& part, const FloatView& buffer) const { lend_input_grad_to(part, buffer); }
  } owner;
  CHECK_THROWS_WITH(owner.lend(*lent, FloatView("small", 11)), Catch::Contains("11 floats"));
  CHECK_THROWS_WITH(owner.lend(own, FloatView("any", 12)),
                    Catch::Contains("not built to take its input gradient"));
  owner.lend(*lent, FloatView("big", 20));
  lent->backward(as_matrix(x, 2, 4), 2);
  CHECK(lent->input_grad().extent(0) == 3);
  CHECK(lent->input_grad().extent(1) == 4);
}

TEST_CASE("BatchNorm2d backward through a later ReLU equals backward of the masked gradient",
          "[cnn][batchnorm]") {
  const int n = 4, channels = 3, plane = 5;
  const std::size_t size = static_cast<std::size_t>(n) * channels * plane;
  nn::ParameterStore store;
  nn::BatchNorm2d fused(store, "fused", channels, 1, plane, n);
  nn::BatchNorm2d apart(store, "apart", channels, 1, plane, n);
  store.finalize(1);
  FloatView x = to_device("x", random_values(size, 3, -2.0f, 2.0f));
  FloatView s = to_device("s", random_values(size, 4));
  FloatView dy = to_device("dy", random_values(size, 5));
  const int features = channels * plane;
  fused.forward(as_matrix(x, n, features), n, {});
  apart.forward(as_matrix(x, n, features), n, {});
  FloatView y("y", size), masked("masked", size);
  const Matrix y_rows = as_matrix(y, n, features);
  kernels::add_relu_forward(first_rows(fused.output(), n), as_matrix(s, n, features), y_rows);
  kernels::relu_backward(y_rows, as_matrix(dy, n, features), as_matrix(masked, n, features));
  fused.backward_through_relu(as_matrix(dy, n, features), y_rows, n);
  apart.backward(as_matrix(masked, n, features), n);
  CHECK(to_host(first_rows(fused.input_grad(), n)) == to_host(first_rows(apart.input_grad(), n)));
  CHECK(to_host(store.grad_vector(fused.weight_index())) ==
        to_host(store.grad_vector(apart.weight_index())));
  CHECK(to_host(store.grad_vector(fused.bias_index())) ==
        to_host(store.grad_vector(apart.bias_index())));
  CHECK_THROWS_WITH(
      fused.backward_through_relu(as_matrix(dy, n, features), as_matrix(y, n - 1, features), n),
      Catch::Contains("ReLU output"));
}
