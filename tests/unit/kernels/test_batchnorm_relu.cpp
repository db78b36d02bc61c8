// BatchNorm with its ReLU fused (kernels/batchnorm.hpp: normalize with relu, the backward
// kernels given the ReLU's output) against the two layers apart: normalize then relu_forward,
// relu_backward then the norm's backward. Bit for bit, in NCHW and in blocks 4 (the general
// kernel on the host), 8 and 16 (the host bodies); the portable build runs the device bodies.
#include "catch.hpp"
#include "unit/support/double_views.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/activation.hpp"
#include "trellis/kernels/batchnorm.hpp"

#include <vector>

using namespace trellis;
using trellis::test::doubles_to_host;
using trellis::test::DoubleView;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

constexpr int kImages = 3, kChannels = 32, kPlane = 5 * 7;  // an odd plane: the host tail runs

Matrix rows(FloatView& v) { return as_matrix(v, kImages, static_cast<int>(v.size()) / kImages); }

}  // namespace

TEST_CASE("BatchNorm with a fused ReLU computes what the norm and the ReLU apart compute",
          "[kernels][batchnorm]") {
  const std::size_t count = static_cast<std::size_t>(kImages) * kChannels * kPlane;
  // Centred data: about half of the outputs fall below zero, so both branches of the mask run.
  FloatView x = to_device("x", random_values(count, 401, -2.0f, 2.0f));
  FloatView dy = to_device("dy", random_values(count, 402, -1.0f, 1.0f));
  FloatView gamma = to_device("gamma", random_values(kChannels, 403, 0.5f, 1.5f));
  FloatView beta = to_device("beta", random_values(kChannels, 404, -0.5f, 0.5f));
  const double n_values = static_cast<double>(kImages) * kPlane;

  for (const int block : {1, 4, 8, 16}) {
    INFO("channel block " << block);
    const kernels::ChannelLayout layout(kPlane, block);
    DoubleView sums("sums", 2 * kChannels), stats("stats", 2 * kChannels);
    FloatView running("running", 2 * kChannels);
    kernels::batchnorm_sums(rows(x), layout, sums);
    kernels::batchnorm_batch_stats(sums, n_values, 1e-5f, 0.1f, stats, running);

    // Apart: y = relu(bn(x)); dr = relu'(dy); the norm's backward on dr.
    FloatView normed("normed", count), y("y", count), dr("dr", count);
    kernels::batchnorm_normalize(rows(x), layout, stats, gamma, beta, rows(normed));
    kernels::relu_forward(rows(normed), rows(y));
    kernels::relu_backward(rows(normed), rows(dy), rows(dr));
    DoubleView bsums("bsums", 2 * kChannels);
    kernels::batchnorm_backward_sums(rows(x), rows(dr), layout, stats, bsums);
    FloatView dx("dx", count), dx_eval("dx_eval", count);
    kernels::batchnorm_backward_input(rows(x), rows(dr), layout, stats, gamma, bsums, n_values,
                                      true, rows(dx));
    kernels::batchnorm_backward_input(rows(x), rows(dr), layout, stats, gamma, bsums, n_values,
                                      false, rows(dx_eval));

    // Fused.
    FloatView y_fused("y_fused", count);
    kernels::batchnorm_normalize(rows(x), layout, stats, gamma, beta, rows(y_fused), true);
    const std::vector<float> y_host = to_host(y);
    CHECK(to_host(y_fused) == y_host);
    std::size_t zeros = 0;
    for (float v : y_host) zeros += v == 0.0f ? 1 : 0;
    CHECK(zeros > count / 4);
    CHECK(zeros < 3 * count / 4);
    DoubleView bsums_fused("bsums_fused", 2 * kChannels);
    kernels::batchnorm_backward_sums(rows(x), rows(dy), layout, stats, bsums_fused, rows(y_fused));
    CHECK(doubles_to_host(bsums_fused) == doubles_to_host(bsums));
    FloatView dx_fused("dx_fused", count), dx_eval_fused("dx_eval_fused", count);
    kernels::batchnorm_backward_input(rows(x), rows(dy), layout, stats, gamma, bsums, n_values,
                                      true, rows(dx_fused), rows(y_fused));
    CHECK(to_host(dx_fused) == to_host(dx));
    kernels::batchnorm_backward_input(rows(x), rows(dy), layout, stats, gamma, bsums, n_values,
                                      false, rows(dx_eval_fused), rows(y_fused));
    CHECK(to_host(dx_eval_fused) == to_host(dx_eval));
  }
}

TEST_CASE("BatchNorm's backward refuses a ReLU output of another shape", "[kernels][batchnorm]") {
  FloatView x("x", 2 * 4 * 6), dy("dy", 2 * 4 * 6), other("other", 3 * 4 * 6);
  DoubleView sums("sums", 8), stats("stats", 8);
  FloatView gamma("gamma", 4), dx("dx", 2 * 4 * 6);
  const Matrix xm = as_matrix(x, 2, 24), dym = as_matrix(dy, 2, 24);
  CHECK_THROWS_AS(
      kernels::batchnorm_backward_sums(xm, dym, 6, stats, sums, as_matrix(other, 3, 24)), Error);
  CHECK_THROWS_AS(kernels::batchnorm_backward_input(xm, dym, 6, stats, gamma, sums, 12.0, true,
                                                    as_matrix(dx, 2, 24), as_matrix(other, 3, 24)),
                  Error);
}
