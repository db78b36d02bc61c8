// The CNN with its activations in oneDNN's channel-blocked layout (kernels/channel_layout.hpp,
// kernels.conv_layout) against the same model in NCHW: a Conv2d on blocked rows computes the
// same bits as on NCHW rows, with no reorder around the convolution in the layout oneDNN
// prefers; the whole Cnn trains and evaluates alike (BatchNorm sums in another order: equal to
// rounding), pruned blocks whose widths the block does not divide included; and its gradients
// match finite differences. Needs oneDNN convolutions: elsewhere it says so and passes.
#include "catch.hpp"
#include "unit/support/channel_blocks.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/precision.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/autocast.hpp"
#include "trellis/nn/cnn.hpp"
#include "trellis/nn/conv2d.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace trellis;
using trellis::kernels::first_rows;
using trellis::test::from_blocked;
using trellis::test::random_values;
using trellis::test::to_blocked;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

// The block oneDNN's convolutions want here, or 0 (with a warning) where there are none.
int preferred_block() {
  nn::ParameterStore store;
  const int block =
      nn::conv_channel_block(nn::ConvLayout::automatic, nn::ConvImpl::automatic, store);
  if (block == 1) WARN("no oneDNN convolution in a channel-blocked layout here: nothing to test");
  return block == 1 ? 0 : block;
}

void check_close(const std::vector<float>& a, const std::vector<float>& b, float rel,
                 const std::string& what) {
  REQUIRE(a.size() == b.size());
  float scale = 1e-6f;
  for (float v : b) scale = std::max(scale, std::fabs(v));
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(what << "[" << i << "]: " << a[i] << " vs " << b[i]);
    CHECK(std::fabs(a[i] - b[i]) <= rel * scale);
  }
}

nn::CnnSpec small_cnn(int block) {
  nn::CnnSpec spec;
  spec.channels = 1;
  spec.height = 12;
  spec.width = 12;
  spec.classes = 5;
  spec.widths = {block, 2 * block};
  spec.blocks_per_stage = 2;
  spec.capacity = 8;
  return spec;
}

}  // namespace

TEST_CASE("Conv2d on channel-blocked rows computes what it computes on NCHW rows",
          "[cnn][conv][layout]") {
  const int preferred = preferred_block();
  if (preferred == 0) return;
  struct Case {
    int in, out, k, stride, pad, hw;
    bool bias;
  };
  for (const int block : {4, 8, 16}) {
    for (const Case c : {Case{16, 32, 3, 1, 1, 9, false}, Case{16, 32, 1, 2, 0, 9, false},
                         Case{1, 16, 3, 1, 1, 10, false}, Case{16, 16, 3, 2, 1, 7, true}}) {
      const int in_block = kernels::channel_block_for(c.in, block);
      INFO("block " << block << ", conv " << c.in << " -> " << c.out << " k " << c.k << " s "
                    << c.stride << ", input block " << in_block);
      nn::Conv2dSpec spec;
      spec.in_channels = c.in;
      spec.out_channels = c.out;
      spec.kernel = c.k;
      spec.stride = c.stride;
      spec.padding = c.pad;
      spec.height = spec.width = c.hw;
      spec.bias = c.bias;
      spec.impl = nn::ConvImpl::vendor;
      nn::ParameterStore store_p, store_b;
      nn::Conv2d plain(store_p, "conv", spec, 6);
      spec.in_block = in_block;
      spec.out_block = block;
      nn::Conv2d blocked(store_b, "conv", spec, 6);
      store_p.finalize(5);
      store_b.finalize(5);
      if (block == preferred && c.in > 1) CHECK(blocked.activation_reorders() == 0);
      if (block == preferred) CHECK(plain.activation_reorders() > 0);
      const int n = 5, in = plain.in_features(), out = plain.out_features();
      const int in_plane = c.hw * c.hw, out_plane = out / c.out;
      const std::vector<float> x = random_values(static_cast<std::size_t>(n) * in, 11);
      const std::vector<float> dy = random_values(static_cast<std::size_t>(n) * out, 12);
      FloatView x_p = to_device("x", x), dy_p = to_device("dy", dy);
      FloatView x_b = to_device("xb", to_blocked(x, n, c.in, in_plane, in_block));
      FloatView dy_b = to_device("dyb", to_blocked(dy, n, c.out, out_plane, block));
      plain.forward(as_matrix(x_p, n, in), n, {});
      plain.backward(as_matrix(dy_p, n, out), n);
      blocked.forward(as_matrix(x_b, n, in), n, {});
      blocked.backward(as_matrix(dy_b, n, out), n);
      // The same primitive on the same values: a layout reorder is exact.
      CHECK(from_blocked(to_host(first_rows(blocked.output(), n)), n, c.out, out_plane, block) ==
            to_host(first_rows(plain.output(), n)));
      CHECK(from_blocked(to_host(first_rows(blocked.input_grad(), n)), n, c.in, in_plane,
                         in_block) == to_host(first_rows(plain.input_grad(), n)));
      CHECK(to_host(store_b.grad(blocked.weight_index())) ==
            to_host(store_p.grad(plain.weight_index())));
      if (c.bias) {
        CHECK(to_host(store_b.grad(*blocked.bias_index())) ==
              to_host(store_p.grad(*plain.bias_index())));
      }
    }
  }
}

TEST_CASE("a native bf16 Conv2d on channel-blocked rows computes what it does on NCHW rows",
          "[cnn][conv][layout][autocast]") {
  nn::Autocast native;
  native.mode = Precision::bf16;
  native.native = true;
  nn::ParameterStore probe;
  probe.set_autocast(native);
  const int block =
      nn::conv_channel_block(nn::ConvLayout::automatic, nn::ConvImpl::automatic, probe);
  nn::Conv2dSpec spec;
  spec.in_channels = 32;
  spec.out_channels = 32;
  spec.height = spec.width = 7;
  spec.padding = 1;
  spec.bias = true;
  spec.impl = nn::ConvImpl::automatic;
  nn::ParameterStore store_p, store_b;
  store_p.set_autocast(native);
  store_b.set_autocast(native);
  nn::Conv2d plain(store_p, "conv", spec, 4);
  if (block == 1 || !plain.half_operands()) {
    WARN("no oneDNN bf16 convolution in a channel-blocked layout here: nothing to compare");
    return;
  }
  spec.in_block = spec.out_block = block;
  nn::Conv2d blocked(store_b, "conv", spec, 4);
  store_p.finalize(9);
  store_b.finalize(9);
  const int n = 3, plane = 49, in = plain.in_features(), out = plain.out_features();
  const std::vector<float> x = random_values(static_cast<std::size_t>(n) * in, 21);
  const std::vector<float> dy = random_values(static_cast<std::size_t>(n) * out, 22);
  FloatView x_p = to_device("x", x), dy_p = to_device("dy", dy);
  FloatView x_b = to_device("xb", to_blocked(x, n, 32, plane, block));
  FloatView dy_b = to_device("dyb", to_blocked(dy, n, 32, plane, block));
  plain.forward(as_matrix(x_p, n, in), n, {});
  plain.backward(as_matrix(dy_p, n, out), n);
  blocked.forward(as_matrix(x_b, n, in), n, {});
  blocked.backward(as_matrix(dy_b, n, out), n);
  // Both convert x and dy to bf16 in a reorder (round to nearest even) and run one primitive.
  CHECK(from_blocked(to_host(first_rows(blocked.output(), n)), n, 32, plane, block) ==
        to_host(first_rows(plain.output(), n)));
  CHECK(from_blocked(to_host(first_rows(blocked.input_grad(), n)), n, 32, plane, block) ==
        to_host(first_rows(plain.input_grad(), n)));
  CHECK(to_host(store_b.grad(blocked.weight_index())) ==
        to_host(store_p.grad(plain.weight_index())));
}

TEST_CASE("Cnn in the channel-blocked layout trains and evaluates like the NCHW one",
          "[cnn][model][layout]") {
  const int block = preferred_block();
  if (block == 0) return;
  for (const bool pruned : {false, true}) {
    INFO((pruned ? "pruned inner widths (not multiples of the block)" : "full widths"));
    nn::CnnSpec spec = small_cnn(block);
    if (pruned) spec.block_widths = {block - 3, block, 2 * block - 5, 2 * block};
    nn::ParameterStore store_p, store_b;
    spec.conv_layout = nn::ConvLayout::nchw;
    nn::Cnn plain(spec, store_p);
    spec.conv_layout = nn::ConvLayout::blocked;
    nn::Cnn blocked(spec, store_b);
    CHECK(plain.channel_block() == 1);
    CHECK(blocked.channel_block() == block);
    store_p.finalize(31);
    store_b.finalize(31);
    const int in = spec.channels * spec.height * spec.width;
    for (const int n : {8, 5}) {
      INFO("batch " << n);
      FloatView x = to_device("x", random_values(static_cast<std::size_t>(n) * in, 40 + n));
      FloatView dlogits =
          to_device("dl", random_values(static_cast<std::size_t>(n) * spec.classes, 50 + n));
      store_p.zero_grads();
      store_b.zero_grads();
      nn::StepContext train;
      check_close(to_host(blocked.forward(as_matrix(x, n, in), n, train)),
                  to_host(plain.forward(as_matrix(x, n, in), n, train)), 2e-5f, "logits");
      blocked.backward(as_matrix(dlogits, n, spec.classes), n);
      plain.backward(as_matrix(dlogits, n, spec.classes), n);
      for (std::size_t i = 0; i < store_p.size(); ++i) {
        check_close(to_host(store_b.grad(i)), to_host(store_p.grad(i)), 1e-4f,
                    store_p.info(i).name);
      }
      nn::StepContext eval;
      eval.training = false;
      check_close(to_host(blocked.forward(as_matrix(x, n, in), n, eval)),
                  to_host(plain.forward(as_matrix(x, n, in), n, eval)), 2e-5f, "eval logits");
    }
    const auto buffers_p = plain.buffers(), buffers_b = blocked.buffers();
    REQUIRE(buffers_p.size() == buffers_b.size());
    for (std::size_t i = 0; i < buffers_p.size(); ++i) {
      check_close(to_host(buffers_b[i].data), to_host(buffers_p[i].data), 1e-5f, buffers_p[i].name);
    }
  }
}

TEST_CASE("the kernels.conv_layout choices resolve as documented", "[cnn][layout][config]") {
  nn::ParameterStore store;
  CHECK(nn::parse_conv_layout("auto") == nn::ConvLayout::automatic);
  CHECK(nn::parse_conv_layout("nchw") == nn::ConvLayout::nchw);
  CHECK(nn::parse_conv_layout("blocked") == nn::ConvLayout::blocked);
  CHECK_THROWS_WITH(nn::parse_conv_layout("nhwc"), Catch::Contains("kernels.conv_layout"));
  CHECK(nn::conv_channel_block(nn::ConvLayout::nchw, nn::ConvImpl::automatic, store) == 1);
  CHECK(nn::conv_channel_block(nn::ConvLayout::automatic, nn::ConvImpl::im2col, store) == 1);
  CHECK_THROWS_WITH(
      nn::conv_channel_block(nn::ConvLayout::blocked, nn::ConvImpl::im2col, store),
      Catch::Contains("kernels.conv_layout = blocked") && Catch::Contains("expected auto or nchw"));
}
