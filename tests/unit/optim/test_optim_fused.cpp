// The fused optimizer passes against a naive per-element reference written out here, over
// several steps: decay masks with several runs (weights decayed, biases and padding not), SGD
// with and without momentum / Nesterov, Adam and AdamW bias correction, RMSprop with and
// without momentum, clipping folded in as grad_scale, and steps over a sub-range (ZeRO-1).
#include "catch.hpp"
#include "unit/support/optim_helpers.hpp"

#include "trellis/optim/clip.hpp"
#include "trellis/optim/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

using optim_test::check_close;
using optim_test::mask_to_device;
using optim_test::to_device;
using optim_test::to_host;

namespace {

// Runs of 37 decayed, 5 not, 64 decayed, 3 not, ...: odd lengths so every run has a vector
// body and a scalar tail.
std::vector<float> layered_mask(std::size_t n) {
  std::vector<float> mask(n);
  const std::size_t runs[] = {37, 5, 64, 3, 19, 1};
  std::size_t i = 0, k = 0;
  while (i < n) {
    const std::size_t len = runs[k % 6];
    for (std::size_t j = 0; j < len && i < n; ++j, ++i) mask[i] = k % 2 == 0 ? 1.0f : 0.0f;
    ++k;
  }
  return mask;
}

std::vector<float> ramp(std::size_t n, float scale, int salt) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = scale * std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(salt));
  return v;
}

// The reference: torch's single-tensor formulas, one element at a time, on host vectors.
struct Reference {
  trellis::OptimizerSpec spec;
  std::vector<float> mask, a,
      b;  // a: momentum buffer / exp_avg / square_avg; b: exp_avg_sq / rmsprop buffer
  int t = 0;

  void step(std::vector<float>& p, const std::vector<float>& grads, float lr, float scale,
            std::size_t begin, std::size_t end) {
    ++t;
    const float wd = spec.weight_decay;
    const double bc1 = 1.0 - std::pow(static_cast<double>(spec.beta1), t);
    const double bc2 = 1.0 - std::pow(static_cast<double>(spec.beta2), t);
    for (std::size_t i = begin; i < end; ++i) {
      float g = grads[i] * scale;
      const bool decay = mask[i] != 0.0f;
      if (spec.type == trellis::OptimizerType::sgd) {
        if (decay) g += wd * p[i];
        if (spec.momentum != 0.0f) {
          a[i] = spec.momentum * a[i] + g;
          g = spec.nesterov ? g + spec.momentum * a[i] : a[i];
        }
        p[i] -= lr * g;
      } else if (spec.type == trellis::OptimizerType::rmsprop) {
        if (decay) g += wd * p[i];
        a[i] = spec.alpha * a[i] + (1.0f - spec.alpha) * g * g;
        const float avg = std::sqrt(a[i]) + spec.eps;
        if (spec.momentum > 0.0f) {
          b[i] = spec.momentum * b[i] + g / avg;
          p[i] -= lr * b[i];
        } else {
          p[i] -= lr * (g / avg);
        }
      } else {
        if (decay && spec.type == trellis::OptimizerType::adamw)
          p[i] *= static_cast<float>(1.0 - double(lr) * wd);
        if (decay && spec.type == trellis::OptimizerType::adam) g += wd * p[i];
        a[i] += (1.0f - spec.beta1) * (g - a[i]);
        b[i] = spec.beta2 * b[i] + (1.0f - spec.beta2) * g * g;
        const float denom = std::sqrt(b[i]) / static_cast<float>(std::sqrt(bc2)) + spec.eps;
        p[i] -= static_cast<float>(lr / bc1) * (a[i] / denom);
      }
    }
  }
};

trellis::OptimizerSpec spec_of(const std::string& type, float momentum, bool nesterov) {
  trellis::OptimizerSpec spec;
  spec.type = trellis::parse_optimizer_type(type);
  spec.momentum = momentum;
  spec.nesterov = nesterov;
  spec.weight_decay = 0.05f;
  spec.beta1 = 0.9f;
  spec.beta2 = 0.99f;
  spec.eps = 1e-8f;
  spec.alpha = 0.95f;
  return spec;
}

// Five steps of the fused optimizer against the reference over [begin, end) of n elements,
// with grad_scale `scale` (1: no clipping); elements outside the range must stay untouched.
void compare(const trellis::OptimizerSpec& spec, std::size_t n, std::size_t begin, std::size_t end,
             float scale) {
  const std::vector<float> mask = layered_mask(n);
  auto opt = trellis::make_optimizer(spec, n, mask_to_device(mask));
  Reference ref{spec, mask, std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f)};
  std::vector<float> expected = ramp(n, 1.0f, 0);
  trellis::FloatView params = to_device(expected);
  for (int t = 1; t <= 5; ++t) {
    const std::vector<float> grads = ramp(n, 0.5f, t);
    const float lr = 0.01f * static_cast<float>(t);
    opt->step(params, to_device(grads), lr, scale, begin, end);
    ref.step(expected, grads, lr, scale, begin, end);
    INFO(trellis::optimizer_type_name(spec.type) << " step " << t);
    check_close(to_host(params), expected);
  }
}

}  // namespace

TEST_CASE("fused step matches the per-element reference over several steps", "[optim][fused]") {
  const std::size_t n = 1000;
  const float scale = GENERATE(1.0f, 0.3f);  // clipping off / folded in
  SECTION("sgd") { compare(spec_of("sgd", 0.0f, false), n, 0, n, scale); }
  SECTION("sgd momentum") { compare(spec_of("sgd", 0.9f, false), n, 0, n, scale); }
  SECTION("sgd nesterov") { compare(spec_of("sgd", 0.9f, true), n, 0, n, scale); }
  SECTION("adam") { compare(spec_of("adam", 0.0f, false), n, 0, n, scale); }
  SECTION("adamw") { compare(spec_of("adamw", 0.0f, false), n, 0, n, scale); }
  SECTION("rmsprop") { compare(spec_of("rmsprop", 0.0f, false), n, 0, n, scale); }
  SECTION("rmsprop momentum") { compare(spec_of("rmsprop", 0.5f, false), n, 0, n, scale); }
}

TEST_CASE("fused step over a sub-range touches only that range", "[optim][fused]") {
  // A range that starts and ends inside decay runs, as a ZeRO-1 shard piece can.
  const std::size_t n = 700, begin = 40, end = 517;
  SECTION("sgd nesterov") { compare(spec_of("sgd", 0.9f, true), n, begin, end, 0.5f); }
  SECTION("adamw") { compare(spec_of("adamw", 0.0f, false), n, begin, end, 1.0f); }
  SECTION("rmsprop momentum") { compare(spec_of("rmsprop", 0.5f, false), n, begin, end, 1.0f); }
}

TEST_CASE("decay runs cover the mask in order", "[optim][fused]") {
  const std::vector<float> mask = {0, 0, 1, 1, 1, 0, 1};
  auto opt =
      trellis::make_optimizer(spec_of("sgd", 0.0f, false), mask.size(), mask_to_device(mask));
  const auto& runs = opt->decay_runs();
  REQUIRE(runs.size() == 4);
  CHECK((runs[0].begin == 0 && runs[0].end == 2 && !runs[0].decay));
  CHECK((runs[1].begin == 2 && runs[1].end == 5 && runs[1].decay));
  CHECK((runs[2].begin == 5 && runs[2].end == 6 && !runs[2].decay));
  CHECK((runs[3].begin == 6 && runs[3].end == 7 && runs[3].decay));
}

TEST_CASE("grad_scale = clip_coefficient gives the clip-then-step result", "[optim][fused][clip]") {
  const std::size_t n = 300;
  const std::vector<float> mask = layered_mask(n);
  const std::vector<float> p0 = ramp(n, 1.0f, 0), grads = ramp(n, 2.0f, 1);
  const double norm = trellis::global_grad_norm(to_device(grads));
  const double max_norm = norm / 3.0;
  CHECK(trellis::clip_coefficient(norm, max_norm) < 1.0f);
  CHECK(trellis::clip_coefficient(norm, 2.0 * norm) == 1.0f);
  CHECK(trellis::clip_coefficient(norm, 0.0) == 1.0f);
  CHECK(trellis::clip_coefficient(std::nan(""), 1.0) == 1.0f);

  auto fused = trellis::make_optimizer(spec_of("adamw", 0.0f, false), n, mask_to_device(mask));
  auto separate = trellis::make_optimizer(spec_of("adamw", 0.0f, false), n, mask_to_device(mask));
  trellis::FloatView p_fused = to_device(p0), p_separate = to_device(p0);
  trellis::FloatView g_fused = to_device(grads), g_separate = to_device(grads);
  fused->step(p_fused, g_fused, 0.1f, trellis::clip_coefficient(norm, max_norm));
  REQUIRE(trellis::clip_to_norm(g_separate, norm, max_norm));
  separate->step(p_separate, g_separate, 0.1f);
  check_close(to_host(p_fused), to_host(p_separate));
  CHECK(to_host(g_fused) == grads);  // the fused path leaves the gradients as they were
}

TEST_CASE("sum of squares: blocks of 256 in 8 lanes, the order the device kernel uses",
          "[optim][fused][clip]") {
  // Bit-identical to this scalar spelling of the order, weighted and not, with a short tail.
  const std::size_t n = 256 * 5 + 13;
  const std::vector<float> grads = ramp(n, 3.0f, 2), mask = layered_mask(n);
  for (const bool weighted : {false, true}) {
    double expected = 0.0;
    for (std::size_t begin = 0; begin < n; begin += 256) {
      const std::size_t end = std::min(begin + 256, n);
      double lane[8] = {};
      std::size_t i = begin;
      for (; i + 8 <= end; i += 8)
        for (std::size_t l = 0; l < 8; ++l) {
          const double g = grads[i + l];
          lane[l] += weighted ? g * g * mask[i + l] : g * g;
        }
      for (; i < end; ++i) {
        const double g = grads[i];
        lane[0] += weighted ? g * g * mask[i] : g * g;
      }
      double block = 0.0;
      for (double partial : lane) block += partial;
      expected += block;
    }
    INFO("weighted " << weighted);
    CHECK((weighted ? trellis::grad_sum_of_squares(to_device(grads), mask_to_device(mask))
                    : trellis::grad_sum_of_squares(to_device(grads))) == expected);
  }
}
