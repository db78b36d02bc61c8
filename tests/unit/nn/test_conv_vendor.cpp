// The vendor convolution (oneDNN on host builds, cuDNN on CUDA builds) against the portable
// im2col + GEMM path, forward and backward, as two Conv2d layers with the same parameters: the
// outputs, input gradients and weight/bias gradients agree, also for a batch smaller than the
// capacity (the vendor path builds primitives for it at first use) and when called twice (the
// weight gradient accumulates). And with bf16 operands (native autocast kernels on a CPU with a
// oneDNN bf16 convolution), the same layer against the emulated bf16 one.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/precision.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/autocast.hpp"
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

  nn::Conv2dSpec spec(nn::ConvImpl impl) const {
    nn::Conv2dSpec s;
    s.in_channels = in;
    s.out_channels = out;
    s.kernel = k;
    s.stride = stride;
    s.padding = pad;
    s.height = h;
    s.width = w;
    s.bias = bias;
    s.impl = impl;
    return s;
  }
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
      nn::ParameterStore store_v, store_r;
      nn::Conv2d vendor(store_v, "conv", c.spec(nn::ConvImpl::vendor), capacity);
      nn::Conv2d im2col(store_r, "conv", c.spec(nn::ConvImpl::im2col), capacity);
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

namespace {

// Where native autocast gives the vendor convolution bf16 operands.
bool vendor_takes_bf16() {
#if defined(TRELLIS_ENABLE_CUDNN)
  return true;
#elif TRELLIS_HAVE_ONEDNN
  return kernels::OnednnConvolution::bf16_available();
#else
  return false;
#endif
}

#if defined(TRELLIS_ENABLE_CUDNN)
constexpr bool kWeightGradientIn16Bits = true;  // cuDNN's pseudo-bf16 configuration
#else
constexpr bool kWeightGradientIn16Bits = false;
#endif

}  // namespace

TEST_CASE("the vendor bf16 convolution matches the emulated bf16 one",
          "[cnn][conv][vendor][autocast]") {
  if (!vendor_takes_bf16()) {
    WARN(
        "no vendor bf16 convolution here (no vendor library, or a CPU with neither "
        "AVX512-BF16 nor AMX-BF16)");
    return;
  }
  const int capacity = 5;
  const auto bf16 = [](std::vector<float> v) {
    for (float& x : v) x = round_to(Precision::bf16, x);
    return v;
  };
  for (const Case c : {Case{1, 16, 3, 1, 1, 28, 28, true}, Case{16, 32, 3, 2, 1, 14, 14, false},
                       Case{17, 5, 3, 1, 1, 9, 7, true}, Case{32, 64, 3, 1, 1, 7, 7, true}}) {
    for (const int n : {capacity, 2}) {
      INFO("conv in " << c.in << " out " << c.out << " k " << c.k << " s " << c.stride << " p "
                      << c.pad << " image " << c.h << "x" << c.w << ", n " << n);
      const nn::Conv2dSpec s = c.spec(nn::ConvImpl::vendor);
      nn::ParameterStore native_store, emulated_store;
      nn::Autocast native, emulated;
      native.mode = emulated.mode = Precision::bf16;
      native.native = true;
      native_store.set_autocast(native);
      emulated_store.set_autocast(emulated);
      nn::Conv2d a(native_store, "conv", s, capacity), b(emulated_store, "conv", s, capacity);
      native_store.finalize(3);
      emulated_store.finalize(3);
      REQUIRE(a.half_operands());
      REQUIRE_FALSE(b.half_operands());
      // bf16 inputs (what an autocast network feeds a convolution): both paths then read the
      // same operands, and the bias gradient sums the same dy.
      const int in = a.in_features(), out = a.out_features();
      const FloatView x = to_device("x", bf16(random_values(std::size_t(n) * in, 8, -2.f, 2.f)));
      const FloatView dy = to_device("dy", bf16(random_values(std::size_t(n) * out, 9)));
      for (nn::Conv2d* conv : {&a, &b}) {
        for (int pass = 0; pass < 2; ++pass) {
          conv->forward(as_matrix(x, n, in), n, {});
          conv->backward(as_matrix(dy, n, out), n);
        }
      }
      // y and dx: fp32 sums in different orders, then rounded to bf16, so at most one bf16
      // step apart (an ulp: at most 2^-7 relative) plus the fp32 order noise where a sum cancels.
      const auto rounded_agree = [](const std::vector<float>& p, const std::vector<float>& q,
                                    const char* what, bool both_rounded = true) {
        REQUIRE(p.size() == q.size());
        float scale = 1e-6f;
        for (float v : q) scale = std::max(scale, std::fabs(v));
        std::size_t apart = 0;
        for (std::size_t i = 0; i < p.size(); ++i) {
          INFO(what << " element " << i << ": " << p[i] << " vs " << q[i]);
          CHECK(std::fabs(p[i] - q[i]) <= std::ldexp(1.0f, -7) * std::fabs(q[i]) + 2e-5f * scale);
          apart += p[i] != q[i];
        }
        // Both rounded from nearly equal sums: nearly all equal exactly.
        if (both_rounded) CHECK(apart * 20 < p.size());
      };
      // (cuDNN writes y in bf16 before the bias is added: rounded twice, more ties apart.)
      rounded_agree(to_host(first_rows(a.output(), n)), to_host(first_rows(b.output(), n)), "y",
                    !(kWeightGradientIn16Bits && c.bias));
      rounded_agree(to_host(first_rows(a.input_grad(), n)), to_host(first_rows(b.input_grad(), n)),
                    "dx");
      // dW and db stay fp32: sums of the same exact products in different orders (cuDNN:
      // each call's dW rounded to bf16 before it is added, so a bf16 step per call).
      if (kWeightGradientIn16Bits) {
        rounded_agree(to_host(native_store.grad(a.weight_index())),
                      to_host(emulated_store.grad(b.weight_index())), "dW", false);
      } else {
        check_agree(to_host(native_store.grad(a.weight_index())),
                    to_host(emulated_store.grad(b.weight_index())), "dW");
      }
      if (c.bias) {
        check_agree(to_host(native_store.grad(*a.bias_index())),
                    to_host(emulated_store.grad(*b.bias_index())), "db");
      }
    }
  }
}
