// The vendor convolution (oneDNN on host builds, cuDNN on CUDA builds) against the portable
// im2col + GEMM path, forward and backward, as two Conv2d layers with the same parameters: the
// outputs, input gradients and weight/bias gradients agree, also for a batch smaller than the
// capacity (the vendor path builds primitives for it at first use) and when called twice (the
// weight gradient accumulates).
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/kernels/views.hpp"
#include "trellis/nn/conv2d.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace trellis;
using trellis::kernels::first_rows;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

struct Case {
  int in, out, k, stride, pad, h, w;
  bool bias;
};

// Both paths sum the same products in different orders (oneDNN blocks channels by 16 and
// splits the reduction differently), so they agree to fp32 rounding of sums of in*k*k (or
// n*H'*W' for the weight gradient) terms: relative to the largest magnitude of the tensor.
void check_agree(const std::vector<float>& vendor, const std::vector<float>& im2col,
                 const char* what) {
  REQUIRE(vendor.size() == im2col.size());
  float scale = 1e-6f;
  for (float v : im2col) scale = std::max(scale, std::fabs(v));
  for (std::size_t i = 0; i < vendor.size(); ++i) {
    INFO(what << " element " << i);
    CHECK(std::fabs(vendor[i] - im2col[i]) <= 2e-5f * scale);
  }
}

}  // namespace

TEST_CASE("vendor convolution agrees with im2col forward and backward", "[cnn][conv][vendor]") {
  if (*nn::vendor_conv_name() == '\0') {
    WARN("this build has no vendor convolution: nothing to compare");
    return;
  }
  const int capacity = 6;
  for (const Case c : {Case{1, 16, 3, 1, 1, 28, 28, false}, Case{16, 32, 3, 2, 1, 14, 14, false},
                       Case{17, 5, 3, 1, 1, 9, 7, true}, Case{16, 32, 1, 2, 0, 14, 14, false},
                       Case{3, 24, 5, 2, 2, 11, 13, true}, Case{32, 64, 3, 1, 1, 7, 7, true}}) {
    for (const int n : {capacity, 3}) {
      INFO(nn::vendor_conv_name() << " vs im2col: conv in " << c.in << " out " << c.out << " k "
                                  << c.k << " s " << c.stride << " p " << c.pad << " image " << c.h
                                  << "x" << c.w << ", n " << n);
      nn::Conv2dSpec s;
      s.in_channels = c.in;
      s.out_channels = c.out;
      s.kernel = c.k;
      s.stride = c.stride;
      s.padding = c.pad;
      s.height = c.h;
      s.width = c.w;
      s.bias = c.bias;
      nn::ParameterStore store_v, store_r;
      s.impl = nn::ConvImpl::vendor;
      nn::Conv2d vendor(store_v, "conv", s, capacity);
      s.impl = nn::ConvImpl::im2col;
      nn::Conv2d im2col(store_r, "conv", s, capacity);
      store_v.finalize(21);
      store_r.finalize(21);  // same names, same seed: the same parameters
      REQUIRE(vendor.uses_vendor());
      REQUIRE_FALSE(im2col.uses_vendor());

      const int in = vendor.in_features(), out = vendor.out_features();
      FloatView x = to_device("x", random_values(static_cast<std::size_t>(n) * in, 5));
      FloatView dy = to_device("dy", random_values(static_cast<std::size_t>(n) * out, 6));
      for (nn::Conv2d* conv : {&vendor, &im2col}) {
        for (int pass = 0; pass < 2; ++pass) {  // twice: parameter gradients accumulate
          conv->forward(as_matrix(x, n, in), n, {});
          conv->backward(as_matrix(dy, n, out), n);
        }
      }
      check_agree(to_host(first_rows(vendor.output(), n)), to_host(first_rows(im2col.output(), n)),
                  "y");
      check_agree(to_host(first_rows(vendor.input_grad(), n)),
                  to_host(first_rows(im2col.input_grad(), n)), "dx");
      check_agree(to_host(store_v.grad(vendor.weight_index())),
                  to_host(store_r.grad(im2col.weight_index())), "dW");
      if (c.bias) {
        check_agree(to_host(store_v.grad(*vendor.bias_index())),
                    to_host(store_r.grad(*im2col.bias_index())), "db");
      }
    }
  }
}
