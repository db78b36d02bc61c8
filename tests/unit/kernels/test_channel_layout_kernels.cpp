// The kernels that index channels, on channel-blocked rows (kernels/channel_layout.hpp) against
// the same data in NCHW: BatchNorm's sums, normalisation and backward, the global average
// pool, a convolution's bias. Blocks 8 and 16 take the host bodies on host builds, 4 the
// general kernel; the portable build runs the device bodies for all of them.
#include "catch.hpp"
#include "unit/support/channel_blocks.hpp"
#include "unit/support/double_views.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/kernels/batchnorm.hpp"
#include "trellis/kernels/conv.hpp"
#include "trellis/kernels/pool.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace trellis;
using trellis::test::doubles_to_host;
using trellis::test::DoubleView;
using trellis::test::from_blocked;
using trellis::test::random_values;
using trellis::test::to_blocked;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

constexpr int kImages = 3, kChannels = 32, kPlane = 5 * 7;  // an odd plane: the host tail runs

// Sums of the same values in different orders: equal to double rounding.
void check_close(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(what << "[" << i << "]: " << a[i] << " vs " << b[i]);
    CHECK(std::fabs(a[i] - b[i]) <= 1e-12 * std::max(1.0, std::fabs(b[i])));
  }
}

// The same float expression per element, contracted to an FMA in one build of it and not in
// another: equal to a float rounding of the largest magnitude.
void check_float_close(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  REQUIRE(a.size() == b.size());
  float scale = 1e-6f;
  for (float v : b) scale = std::max(scale, std::fabs(v));
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(what << "[" << i << "]: " << a[i] << " vs " << b[i]);
    CHECK(std::fabs(a[i] - b[i]) <= 4e-7f * scale);
  }
}

Matrix rows(FloatView& v, int n) { return as_matrix(v, n, static_cast<int>(v.size()) / n); }

}  // namespace

TEST_CASE("BatchNorm kernels give the same results on channel-blocked rows",
          "[kernels][batchnorm][layout]") {
  const std::size_t count = static_cast<std::size_t>(kImages) * kChannels * kPlane;
  const std::vector<float> x = random_values(count, 301, -2.0f, 3.0f);
  const std::vector<float> dy = random_values(count, 302, -1.0f, 1.0f);
  const std::vector<float> gamma = random_values(kChannels, 303, 0.5f, 1.5f);
  const std::vector<float> beta = random_values(kChannels, 304, -0.5f, 0.5f);
  FloatView gamma_d = to_device("gamma", gamma), beta_d = to_device("beta", beta);

  // The NCHW reference.
  FloatView x_n = to_device("x", x), dy_n = to_device("dy", dy), y_n("y", count), dx_n("dx", count);
  DoubleView sums_n("sums", 2 * kChannels), stats("stats", 2 * kChannels),
      bsums_n("bsums", 2 * kChannels);
  FloatView running("running", 2 * kChannels);
  kernels::batchnorm_sums(rows(x_n, kImages), kPlane, sums_n);
  const double n_values = static_cast<double>(kImages) * kPlane;
  kernels::batchnorm_batch_stats(sums_n, n_values, 1e-5f, 0.1f, stats, running);
  kernels::batchnorm_normalize(rows(x_n, kImages), kPlane, stats, gamma_d, beta_d,
                               rows(y_n, kImages));
  kernels::batchnorm_backward_sums(rows(x_n, kImages), rows(dy_n, kImages), kPlane, stats, bsums_n);
  kernels::batchnorm_backward_input(rows(x_n, kImages), rows(dy_n, kImages), kPlane, stats, gamma_d,
                                    bsums_n, n_values, true, rows(dx_n, kImages));
  FloatView dx_eval_n("dx_eval", count);
  kernels::batchnorm_backward_input(rows(x_n, kImages), rows(dy_n, kImages), kPlane, stats, gamma_d,
                                    bsums_n, n_values, false, rows(dx_eval_n, kImages));

  for (const int block : {4, 8, 16}) {
    INFO("channel block " << block);
    const kernels::ChannelLayout layout(kPlane, block);
    FloatView x_b = to_device("xb", to_blocked(x, kImages, kChannels, kPlane, block));
    FloatView dy_b = to_device("dyb", to_blocked(dy, kImages, kChannels, kPlane, block));
    FloatView y_b("yb", count), dx_b("dxb", count), dx_eval_b("dxb_eval", count);
    DoubleView sums_b("sums_b", 2 * kChannels), bsums_b("bsums_b", 2 * kChannels);
    kernels::batchnorm_sums(rows(x_b, kImages), layout, sums_b);
    check_close(doubles_to_host(sums_b), doubles_to_host(sums_n), "sums");
    // The rest from the reference's statistics and sums: each kernel on its own.
    kernels::batchnorm_normalize(rows(x_b, kImages), layout, stats, gamma_d, beta_d,
                                 rows(y_b, kImages));
    check_float_close(from_blocked(to_host(y_b), kImages, kChannels, kPlane, block), to_host(y_n),
                      "y");
    kernels::batchnorm_backward_sums(rows(x_b, kImages), rows(dy_b, kImages), layout, stats,
                                     bsums_b);
    check_close(doubles_to_host(bsums_b), doubles_to_host(bsums_n), "backward sums");
    kernels::batchnorm_backward_input(rows(x_b, kImages), rows(dy_b, kImages), layout, stats,
                                      gamma_d, bsums_n, n_values, true, rows(dx_b, kImages));
    check_float_close(from_blocked(to_host(dx_b), kImages, kChannels, kPlane, block), to_host(dx_n),
                      "dx (training)");
    kernels::batchnorm_backward_input(rows(x_b, kImages), rows(dy_b, kImages), layout, stats,
                                      gamma_d, bsums_n, n_values, false, rows(dx_eval_b, kImages));
    check_float_close(from_blocked(to_host(dx_eval_b), kImages, kChannels, kPlane, block),
                      to_host(dx_eval_n), "dx (eval)");
  }
}

TEST_CASE("pooling and a convolution's bias give the same bits on channel-blocked rows",
          "[kernels][pool][layout]") {
  const std::size_t count = static_cast<std::size_t>(kImages) * kChannels * kPlane;
  const std::vector<float> x = random_values(count, 311, -2.0f, 2.0f);
  const std::vector<float> dy = random_values(kImages * kChannels, 312);
  const std::vector<float> bias = random_values(kChannels, 313);
  FloatView x_n = to_device("x", x), dy_d = to_device("dy", dy), bias_d = to_device("bias", bias);
  FloatView y_n("y", kImages * kChannels), dx_n("dx", count), grad_n("grad", kChannels);
  kernels::global_avgpool_forward(rows(x_n, kImages), kPlane, rows(y_n, kImages));
  kernels::global_avgpool_backward(rows(dy_d, kImages), kPlane, rows(dx_n, kImages));
  kernels::channel_sum_accumulate(rows(x_n, kImages), grad_n, kPlane);
  kernels::channel_bias_add(rows(x_n, kImages), bias_d, kPlane);  // x_n += bias from here on

  for (const int block : {4, 8, 16}) {
    INFO("channel block " << block);
    const kernels::ChannelLayout layout(kPlane, block);
    FloatView x_b = to_device("xb", to_blocked(x, kImages, kChannels, kPlane, block));
    FloatView y_b("yb", kImages * kChannels), dx_b("dxb", count), grad_b("grad_b", kChannels);
    kernels::global_avgpool_forward(rows(x_b, kImages), layout, rows(y_b, kImages));
    CHECK(to_host(y_b) == to_host(y_n));  // each mean sums its pixels in the same order
    kernels::global_avgpool_backward(rows(dy_d, kImages), layout, rows(dx_b, kImages));
    CHECK(from_blocked(to_host(dx_b), kImages, kChannels, kPlane, block) == to_host(dx_n));
    kernels::channel_sum_accumulate(rows(x_b, kImages), grad_b, layout);
    CHECK(to_host(grad_b) == to_host(grad_n));
    kernels::channel_bias_add(rows(x_b, kImages), bias_d, layout);
    CHECK(from_blocked(to_host(x_b), kImages, kChannels, kPlane, block) == to_host(x_n));
  }
}

TEST_CASE("channel-indexing kernels refuse a block that does not divide the channels",
          "[kernels][layout]") {
  FloatView x("x", 2 * 12 * 4), y("y", 2 * 12);
  DoubleView sums("sums", 24);
  const kernels::ChannelLayout layout(4, 8);  // 12 channels in blocks of 8
  CHECK_THROWS_WITH(kernels::batchnorm_sums(rows(x, 2), layout, sums),
                    Catch::Contains("batchnorm_sums") && Catch::Contains("blocks of 8"));
  CHECK_THROWS_WITH(kernels::global_avgpool_forward(rows(x, 2), layout, rows(y, 2)),
                    Catch::Contains("global_avgpool_forward"));
  CHECK(kernels::channel_block_for(12, 8) == 1);
  CHECK(kernels::channel_block_for(16, 8) == 8);
  CHECK(kernels::channel_block_for(16, 1) == 1);
}
