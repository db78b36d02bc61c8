#include "trellis/kernels/rmsnorm.hpp"

#include "trellis/core/code_path.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/host_vector.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/core/math.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace trellis::kernels {

namespace {

using Index = std::int64_t;

template <class V>
void check_extent(const V& v, std::size_t need, bool exact, const ConstMatrix& x, const char* who,
                  const char* what) {
  const bool ok = exact ? v.extent(0) == need : v.extent(0) >= need;
  TRELLIS_REQUIRE(ok, std::string(who) + ": " + what + " " + extents_string(v) + " for rows " +
                          extents_string(x));
}

KOKKOS_INLINE_FUNCTION float device_row_rstd(const ConstMatrix& x, std::int64_t r, std::int64_t d,
                                             float inv_d, float eps) {
  float sq = 0.0f;
  for (std::int64_t j = 0; j < d; ++j) sq += x(r, j) * x(r, j);
  return 1.0f / math::sqrt(sq * inv_d + eps);
}

// 1 / sqrt(mean(x^2) + eps) of a row, in 16 lanes (lane_sum's order) or whole vectors.
TRELLIS_HOST_INLINE float row_rstd(const float* __restrict xr, Index d, float eps) {
  const float inv_d = 1.0f / static_cast<float>(d);
#if TRELLIS_HOST_VECTORS
  if (d % simd::kWidth == 0) {
    simd::Floats16 squares{};
    for (Index j = 0; j < d; j += simd::kWidth) {
      const simd::Floats16 v = simd::load(xr + j);
      squares += v * v;
    }
    return 1.0f / std::sqrt(simd::hsum(squares) * inv_d + eps);
  }
#endif
  return 1.0f / std::sqrt(lane_sum(d, [&](Index j) { return xr[j] * xr[j]; }) * inv_d + eps);
}

TRELLIS_HOST_CLONES
void host_forward(const float* __restrict x, const float* __restrict gamma, float eps,
                  float* __restrict y, float* __restrict rstd, Index rows, Index d) {
  for (Index r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * d;
    float* __restrict yr = y + r * d;
    const float rs = row_rstd(xr, d, eps);
    for (Index j = 0; j < d; ++j) yr[j] = xr[j] * rs * gamma[j];
    rstd[r] = rs;
  }
}

// kernels::quantize's rounding, as layernorm's quantized forward.
TRELLIS_HOST_CLONES
void host_forward_quantized(const float* __restrict x, const float* __restrict gamma, float eps,
                            float inverse, float lo, float hi, int zero,
                            std::uint8_t* __restrict out, Index rows, Index d) {
  constexpr float kRoundToInteger = 12582912.0f;
  for (Index r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * d;
    std::uint8_t* __restrict qr = out + r * d;
    const float rs = row_rstd(xr, d, eps);
    for (Index j = 0; j < d; ++j) {
      float v = xr[j] * rs * gamma[j] * inverse;
      v = v < lo ? lo : v;
      v = v > hi ? hi : v;
      v = (v + kRoundToInteger) - kRoundToInteger;
      qr[j] = static_cast<std::uint8_t>(static_cast<int>(v) + zero);
    }
  }
}

TRELLIS_HOST_CLONES
void host_backward(const float* __restrict x, const float* __restrict dy,
                   const float* __restrict gamma, const float* __restrict rstd,
                   float* __restrict dx, float* __restrict dgamma, Index rows, Index d) {
  const float inv_d = 1.0f / static_cast<float>(d);
  for (Index r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * d;
    const float* __restrict dyr = dy + r * d;
    float* __restrict dxr = dx + r * d;
    const float rs = rstd[r];
    const float gx_mean =
        lane_sum(d, [&](Index j) { return dyr[j] * gamma[j] * (xr[j] * rs); }) * inv_d;
    for (Index j = 0; j < d; ++j) dxr[j] = rs * (dyr[j] * gamma[j] - xr[j] * rs * gx_mean);
  }
  constexpr Index kTile = 256;
  for (Index j0 = 0; j0 < d; j0 += kTile) {
    const Index width = std::min(kTile, d - j0);
    float dg[kTile] = {};
    for (Index r = 0; r < rows; ++r) {
      const float* __restrict xr = x + r * d + j0;
      const float* __restrict dyr = dy + r * d + j0;
      const float rs = rstd[r];
      for (Index j = 0; j < width; ++j) dg[j] += dyr[j] * (xr[j] * rs);
    }
    for (Index j = 0; j < width; ++j) dgamma[j0 + j] += dg[j];
  }
}

}  // namespace

void rmsnorm_forward(ConstMatrix x, ConstVector gamma, float eps, Matrix y, Vector rstd) {
  require_same_shape(x, y, "rmsnorm_forward");
  const char* who = "rmsnorm_forward";
  check_extent(gamma, x.extent(1), true, x, who, "gamma");
  check_extent(rstd, x.extent(0), false, x, who, "rstd");
  const std::int64_t d = static_cast<std::int64_t>(x.extent(1));
  if constexpr (kHostKernels) {
    host_forward(x.data(), gamma.data(), eps, y.data(), rstd.data(),
                 static_cast<Index>(x.extent(0)), d);
    return;
  }
  const float inv_d = 1.0f / static_cast<float>(d);
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::rmsnorm::fwd"),
      Range(0, static_cast<std::int64_t>(x.extent(0))), KOKKOS_LAMBDA(const std::int64_t r) {
        const float rs = device_row_rstd(x, r, d, inv_d, eps);
        for (std::int64_t j = 0; j < d; ++j) y(r, j) = x(r, j) * rs * gamma(j);
        rstd(r) = rs;
      });
}

void rmsnorm_forward_quantized(ConstMatrix x, ConstVector gamma, float eps,
                               const ActivationQuant& q, ByteView out) {
  const char* who = "rmsnorm_forward_quantized";
  check_extent(gamma, x.extent(1), true, x, who, "gamma");
  check_extent(out, x.size(), false, x, who, "output bytes");
  TRELLIS_REQUIRE(q.scale > 0.0f, "rmsnorm_forward_quantized: scale must be positive");
  const std::int64_t d = static_cast<std::int64_t>(x.extent(1));
  const float inverse = 1.0f / q.scale;
  if constexpr (kHostKernels) {
    host_forward_quantized(x.data(), gamma.data(), eps, inverse,
                           static_cast<float>(q.qmin() - q.zero_point),
                           static_cast<float>(q.qmax() - q.zero_point), q.zero_point, out.data(),
                           static_cast<Index>(x.extent(0)), d);
    return;
  }
  const float inv_d = 1.0f / static_cast<float>(d);
  const ActivationQuant quant = q;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::rmsnorm::fwd_quantized"),
      Range(0, static_cast<std::int64_t>(x.extent(0))), KOKKOS_LAMBDA(const std::int64_t r) {
        const float rs = device_row_rstd(x, r, d, inv_d, eps);
        for (std::int64_t j = 0; j < d; ++j) {
          const float y = x(r, j) * rs * gamma(j);
          const int v = static_cast<int>(rintf(y * inverse)) + quant.zero_point;
          const int level = v < quant.qmin() ? quant.qmin() : v > quant.qmax() ? quant.qmax() : v;
          out(r * d + j) = static_cast<std::uint8_t>(level & 0xff);
        }
      });
}

void rmsnorm_backward(ConstMatrix x, ConstMatrix dy, ConstVector gamma, ConstVector rstd, Matrix dx,
                      Vector dgamma) {
  require_same_shape(x, dy, "rmsnorm_backward");
  require_same_shape(x, dx, "rmsnorm_backward");
  const char* who = "rmsnorm_backward";
  check_extent(gamma, x.extent(1), true, x, who, "gamma");
  check_extent(dgamma, x.extent(1), true, x, who, "dgamma");
  check_extent(rstd, x.extent(0), false, x, who, "rstd");
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  const std::int64_t d = static_cast<std::int64_t>(x.extent(1));
  if constexpr (kHostKernels) {
    host_backward(x.data(), dy.data(), gamma.data(), rstd.data(), dx.data(), dgamma.data(), rows,
                  d);
    return;
  }
  const float inv_d = 1.0f / static_cast<float>(d);
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::rmsnorm::bwd_input"), Range(0, rows),
      KOKKOS_LAMBDA(const std::int64_t r) {
        const float rs = rstd(r);
        float gx_sum = 0.0f;
        for (std::int64_t j = 0; j < d; ++j) gx_sum += dy(r, j) * gamma(j) * x(r, j) * rs;
        const float gx_mean = gx_sum * inv_d;
        for (std::int64_t j = 0; j < d; ++j)
          dx(r, j) = rs * (dy(r, j) * gamma(j) - x(r, j) * rs * gx_mean);
      });
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::rmsnorm::bwd_params"), Range(0, d),
      KOKKOS_LAMBDA(const std::int64_t j) {
        float dg = 0.0f;
        for (std::int64_t r = 0; r < rows; ++r) dg += dy(r, j) * x(r, j) * rstd(r);
        dgamma(j) += dg;
      });
}

}  // namespace trellis::kernels
