// The 16-bit-output epilogue of a Linear (kernels/bias_activation_half.hpp) against the fp32
// epilogue on the same values, rounded: pre-activations bit for bit, activations and input
// gradients within one step of the 16-bit format (GELU's clones and a scalar reference may
// differ by 1e-6 before rounding), the bias gradient as the fp32 column sums of dz.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/precision.hpp"
#include "trellis/kernels/activation.hpp"
#include "trellis/kernels/bias.hpp"
#include "trellis/kernels/bias_activation_half.hpp"

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

using namespace trellis;
using trellis::kernels::Activation;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

const std::vector<std::pair<int, int>> kShapes{{1, 1}, {3, 15}, {4, 255}, {5, 257}, {9, 64}};

float reference_activation(Activation f, float v) {
  switch (f) {
    case Activation::relu:
      return v > 0.0f ? v : 0.0f;
    case Activation::gelu:
      return kernels::gelu(v);
    case Activation::gelu_tanh:
      return kernels::gelu_tanh(v);
    case Activation::none:
      break;
  }
  return v;
}
float reference_backward(Activation f, float saved, float dy) {
  switch (f) {
    case Activation::relu:
      return saved > 0.0f ? dy : 0.0f;
    case Activation::gelu:
      return dy * kernels::gelu_grad(saved);
    case Activation::gelu_tanh:
      return dy * kernels::gelu_tanh_grad(saved);
    case Activation::none:
      break;
  }
  return dy;
}

std::vector<std::uint16_t> host_words(const kernels::HalfView& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<std::uint16_t>(h.data(), h.data() + h.extent(0));
}
// |got - want| within one step of the format at want (the reference rounded the other way).
void check_within_one_step(Precision p, std::uint16_t got, float want) {
  const float g = half_bits_to_float(p, got);
  const float r = half_bits_to_float(p, to_half_bits(p, want));
  const float step = std::fabs(half_bits_to_float(p, to_half_bits(p, want) + 1) - r);
  REQUIRE(std::fabs(g - r) <= step * 1.0001f + 1e-30f);
}

}  // namespace

TEST_CASE("the 16-bit epilogue rounds what the fp32 epilogue computes", "[kernels][fused][half]") {
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    for (Activation f :
         {Activation::none, Activation::relu, Activation::gelu, Activation::gelu_tanh}) {
      for (auto [rows, cols] : kShapes) {
        INFO(precision_name(p) << " activation " << static_cast<int>(f) << " shape " << rows << "x"
                               << cols);
        const std::size_t size = static_cast<std::size_t>(rows) * cols;
        const auto z0 = random_values(size, 3, -3.0f, 3.0f);
        const auto b = random_values(static_cast<std::size_t>(cols), 4, -1.0f, 1.0f);
        const auto dy = random_values(size, 5, -2.0f, 2.0f);
        const FloatView z = to_device("z", z0), bias = to_device("b", b);
        kernels::HalfView z16("z16", size), y16("y16", size);
        kernels::bias_activation_forward_half(p, as_matrix(z, rows, cols), bias, f, z16, y16);
        const auto zh = host_words(z16), yh = host_words(y16);
        std::vector<float> saved(size);  // what backward reads, widened
        for (std::size_t i = 0; i < size; ++i) {
          const std::uint16_t s = to_half_bits(p, z0[i] + b[i % cols]);
          if (kernels::keeps_pre_activation(f)) REQUIRE(zh[i] == s);
          check_within_one_step(p, yh[i], reference_activation(f, half_bits_to_float(p, s)));
          saved[i] = kernels::keeps_pre_activation(f) ? half_bits_to_float(p, s)
                                                      : half_bits_to_float(p, yh[i]);
        }
        if (kernels::keeps_pre_activation(f)) {  // recomputation: what forward wrote, exactly
          kernels::HalfView again("again", size);
          kernels::activation_forward_half(p, z16, f, again);
          CHECK(host_words(again) == yh);
        }
        // Backward: dz16 = round(dy * f'(saved)), grad += the fp32 column sums of dz.
        const FloatView dyv = to_device("dy", dy);
        const FloatView grad = to_device("grad", std::vector<float>(cols, 0.5f));
        kernels::HalfView dz16("dz16", size);
        const kernels::HalfView& s16 = kernels::keeps_pre_activation(f) ? z16 : y16;
        kernels::bias_activation_backward_half(p, s16, as_matrix(dyv, rows, cols), f, dz16, grad);
        const auto dzh = host_words(dz16);
        std::vector<double> sums(cols, 0.5);
        for (std::size_t i = 0; i < size; ++i) {
          const float d = reference_backward(f, saved[i], dy[i]);
          check_within_one_step(p, dzh[i], d);
          sums[i % cols] += d;
        }
        const auto gh = to_host(grad);
        for (int j = 0; j < cols; ++j)
          REQUIRE(gh[j] == Approx(sums[j]).epsilon(1e-5).margin(1e-5 * rows));
      }
    }
  }
}

TEST_CASE("the 16-bit epilogue checks its buffers", "[kernels][fused][half]") {
  const FloatView z("z", 12), bias("b", 4);
  kernels::HalfView short16("short", 11), y16("y16", 12), z16("z16", 12);
  CHECK_THROWS_AS(kernels::bias_activation_forward_half(Precision::fp32, as_matrix(z, 3, 4), bias,
                                                        Activation::gelu, z16, y16),
                  Error);
  CHECK_THROWS_AS(kernels::bias_activation_forward_half(Precision::bf16, as_matrix(z, 3, 4), bias,
                                                        Activation::gelu, short16, y16),
                  Error);
  CHECK_THROWS_AS(kernels::bias_activation_forward_half(Precision::bf16, as_matrix(z, 3, 4), bias,
                                                        Activation::none, z16, short16),
                  Error);
  CHECK_THROWS_AS(kernels::activation_forward_half(Precision::bf16, z16, Activation::relu, y16),
                  Error);
  CHECK_THROWS_AS(kernels::bias_activation_backward_half(Precision::bf16, z16, as_matrix(z, 3, 4),
                                                         Activation::gelu, short16, bias),
                  Error);
}
