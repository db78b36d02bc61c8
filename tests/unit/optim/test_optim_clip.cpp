// Gradient-norm clipping (torch.nn.utils.clip_grad_norm_ formula) and the finite check.
#include "catch.hpp"
#include "unit/support/optim_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/optim/clip.hpp"

#include <cmath>
#include <limits>

using optim_test::check_close;
using optim_test::mask_to_device;
using optim_test::to_device;
using optim_test::to_host;

TEST_CASE("global grad norm of a known vector", "[optim][clip]") {
  auto grads = to_device({3.f, -4.f, 0.f, 12.f});
  CHECK(trellis::grad_sum_of_squares(grads) == 169.0);
  CHECK(trellis::global_grad_norm(grads) == 13.0);
  CHECK(trellis::global_grad_norm(to_device({})) == 0.0);

  // Many elements, so the parallel reduction has work to split.
  std::vector<float> many(10007);
  double expected = 0.0;
  for (std::size_t i = 0; i < many.size(); ++i) {
    many[i] = 0.001f * static_cast<float>(static_cast<int>(i % 97) - 48);
    expected += static_cast<double>(many[i]) * many[i];
  }
  CHECK(trellis::global_grad_norm(to_device(many)) == Approx(std::sqrt(expected)).epsilon(1e-12));
}

TEST_CASE("clip_grad_norm scales only when the norm exceeds max_norm", "[optim][clip]") {
  auto grads = to_device({3.f, -4.f, 0.f, 12.f});
  CHECK(trellis::clip_grad_norm(grads, 26.0) == 13.0);  // below: untouched
  CHECK(to_host(grads) == std::vector<float>{3.f, -4.f, 0.f, 12.f});

  // Above: scaled by max_norm / (norm + 1e-6), returning the norm before clipping.
  CHECK(trellis::clip_grad_norm(grads, 6.5) == 13.0);
  const double coef = 6.5 / (13.0 + 1e-6);
  check_close(to_host(grads),
              {static_cast<float>(3 * coef), static_cast<float>(-4 * coef), 0.f,
               static_cast<float>(12 * coef)},
              1e-7);
  CHECK(trellis::global_grad_norm(grads) == Approx(6.5).epsilon(1e-6));
}

TEST_CASE("max_norm <= 0 turns clipping off", "[optim][clip]") {
  auto grads = to_device({3.f, -4.f, 0.f, 12.f});
  CHECK(trellis::clip_grad_norm(grads, 0.0) == 13.0);
  CHECK(trellis::clip_grad_norm(grads, -1.0) == 13.0);
  CHECK(to_host(grads) == std::vector<float>{3.f, -4.f, 0.f, 12.f});
  CHECK_FALSE(trellis::clip_to_norm(grads, 13.0, 0.0));
  CHECK(trellis::clip_to_norm(grads, 26.0, 13.0));  // a given (e.g. all-reduced) norm
  check_close(to_host(grads), {1.5f, -2.f, 0.f, 6.f});
}

TEST_CASE("non-finite gradients are detected and never clipped", "[optim][clip]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(trellis::all_finite(to_device({1.f, -2.f, 0.f})));
  CHECK(trellis::all_finite(to_device({})));
  CHECK(trellis::count_nonfinite(to_device({1.f, nan, -inf, inf})) == 3);
  CHECK_FALSE(trellis::all_finite(to_device({1.f, nan})));

  auto grads = to_device({3.f, inf, 4.f});
  CHECK(std::isinf(trellis::clip_grad_norm(grads, 1.0)));
  const auto after = to_host(grads);
  CHECK(after[0] == 3.f);  // torch would have made every element NaN
  CHECK(after[2] == 4.f);
  auto with_nan = to_device({3.f, nan});
  CHECK(std::isnan(trellis::clip_grad_norm(with_nan, 1.0)));
  CHECK(to_host(with_nan)[0] == 3.f);
}

TEST_CASE("NormMask sums the squares of the gradients its runs of 1s cover", "[optim][clip]") {
  // Runs of 1s at the start, in the middle (several, of odd lengths) and at the end.
  const std::size_t n = 5003;
  std::vector<float> grads(n), mask(n, 0.0f);
  double expected = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    grads[i] = 0.01f * static_cast<float>(static_cast<int>(i % 89) - 44);
    const bool counted = i < 300 || (i >= 1000 && i < 1777) || (i >= 2000 && i < 2001) ||
                         (i >= 3001 && i < 4500) || i >= 4990;
    mask[i] = counted ? 1.0f : 0.0f;
    if (counted) expected += static_cast<double>(grads[i]) * grads[i];
  }
  const auto g = to_device(grads);
  const trellis::NormMask norm_mask(mask_to_device(mask));
  CHECK(norm_mask.size() == n);
  CHECK(norm_mask.sum_of_squares(g) == Approx(expected).epsilon(1e-12));
  CHECK(norm_mask.sum_of_squares(g) ==
        Approx(trellis::grad_sum_of_squares(g, mask_to_device(mask))).epsilon(1e-12));
  // All zeros: nothing counted; all ones: the plain sum.
  CHECK(trellis::NormMask(mask_to_device(std::vector<float>(n, 0.0f))).sum_of_squares(g) == 0.0);
  CHECK(trellis::NormMask(mask_to_device(std::vector<float>(n, 1.0f))).sum_of_squares(g) ==
        Approx(trellis::grad_sum_of_squares(g)).epsilon(1e-12));
  // A mask is 0/1 only, and sized like the gradients.
  mask[7] = 2.0f;
  CHECK_THROWS_AS(trellis::NormMask(mask_to_device(mask)), trellis::Error);
  CHECK_THROWS_AS(norm_mask.sum_of_squares(to_device({1.f, 2.f})), trellis::Error);
}
