#include "trellis/kernels/layernorm.hpp"

#include "trellis/core/host_simd.hpp"
#include "trellis/core/host_vector.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/core/math.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace trellis::kernels {

namespace {

// Throws unless v has at least `need` elements (exactly, when exact) for a call on rows x.
template <class V>
void check_extent(const V& v, std::size_t need, bool exact, const ConstMatrix& x, const char* who,
                  const char* what) {
  const bool ok = exact ? v.extent(0) == need : v.extent(0) >= need;
  TRELLIS_REQUIRE(ok, std::string(who) + ": " + what + " " + extents_string(v) + " for rows " +
                          extents_string(x));
}

using Index = std::int64_t;

// The device kernels' row statistics: mean and 1 / sqrt(var + eps), two passes.
KOKKOS_INLINE_FUNCTION void device_row_moments(const ConstMatrix& x, std::int64_t r, std::int64_t d,
                                               float inv_d, float eps, float& mu, float& rs) {
  float sum = 0.0f;
  for (std::int64_t j = 0; j < d; ++j) sum += x(r, j);
  mu = sum * inv_d;
  float sq = 0.0f;
  for (std::int64_t j = 0; j < d; ++j) {
    const float c = x(r, j) - mu;
    sq += c * c;
  }
  rs = 1.0f / math::sqrt(sq * inv_d + eps);
}

// Mean and 1 / sqrt(var + eps) of a row: sums in 16 interleaved lanes, combined pairwise
// (lane_sum's order), on whole vectors where d allows.
struct RowMoments {
  float mean, rstd;
};

TRELLIS_HOST_INLINE RowMoments row_moments(const float* __restrict xr, Index d, float eps) {
  const float inv_d = 1.0f / static_cast<float>(d);
#if TRELLIS_HOST_VECTORS
  if (d % simd::kWidth == 0) {
    simd::Floats16 sum{};
    for (Index j = 0; j < d; j += simd::kWidth) sum += simd::load(xr + j);
    const float mu = simd::hsum(sum) * inv_d;
    simd::Floats16 squares{};
    for (Index j = 0; j < d; j += simd::kWidth) {
      const simd::Floats16 c = simd::load(xr + j) - mu;
      squares += c * c;
    }
    return RowMoments{mu, 1.0f / std::sqrt(simd::hsum(squares) * inv_d + eps)};
  }
#endif
  const float mu = lane_sum(d, [&](Index j) { return xr[j]; }) * inv_d;
  const float var = lane_sum(d, [&](Index j) { return (xr[j] - mu) * (xr[j] - mu); }) * inv_d;
  return RowMoments{mu, 1.0f / std::sqrt(var + eps)};
}

TRELLIS_HOST_CLONES
void host_forward(const float* __restrict x, const float* __restrict gamma,
                  const float* __restrict beta, float eps, float* __restrict y,
                  float* __restrict mean, float* __restrict rstd, Index rows, Index d) {
  for (Index r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * d;
    float* __restrict yr = y + r * d;
    const RowMoments m = row_moments(xr, d, eps);
    for (Index j = 0; j < d; ++j) yr[j] = (xr[j] - m.mean) * m.rstd * gamma[j] + beta[j];
    mean[r] = m.mean;
    rstd[r] = m.rstd;
  }
}

// The forward quantized as kernels::quantize does it (clamp in the float domain, round to
// nearest even by the 1.5 * 2^23 trick, add the zero point), y never stored.
TRELLIS_HOST_CLONES
void host_forward_quantized(const float* __restrict x, const float* __restrict gamma,
                            const float* __restrict beta, float eps, float inverse, float lo,
                            float hi, int zero, std::uint8_t* __restrict out, Index rows, Index d) {
  constexpr float kRoundToInteger = 12582912.0f;
  for (Index r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * d;
    std::uint8_t* __restrict qr = out + r * d;
    const RowMoments m = row_moments(xr, d, eps);
    for (Index j = 0; j < d; ++j) {
      float v = ((xr[j] - m.mean) * m.rstd * gamma[j] + beta[j]) * inverse;
      v = v < lo ? lo : v;
      v = v > hi ? hi : v;
      v = (v + kRoundToInteger) - kRoundToInteger;
      qr[j] = static_cast<std::uint8_t>(static_cast<int>(v) + zero);
    }
  }
}

// Rows outer: dx of a row needs two row sums first; the parameter gradients are accumulated
// row by row into tiles of partial sums (as kernels::column_sum_accumulate), in row order.
TRELLIS_HOST_CLONES
void host_backward(const float* __restrict x, const float* __restrict dy,
                   const float* __restrict gamma, const float* __restrict mean,
                   const float* __restrict rstd, float* __restrict dx, float* __restrict dgamma,
                   float* __restrict dbeta, Index rows, Index d) {
  const float inv_d = 1.0f / static_cast<float>(d);
  for (Index r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * d;
    const float* __restrict dyr = dy + r * d;
    float* __restrict dxr = dx + r * d;
    const float mu = mean[r], rs = rstd[r];
    const float g_mean = lane_sum(d, [&](Index j) { return dyr[j] * gamma[j]; }) * inv_d;
    const float gx_mean =
        lane_sum(d, [&](Index j) { return dyr[j] * gamma[j] * ((xr[j] - mu) * rs); }) * inv_d;
    for (Index j = 0; j < d; ++j) {
      const float xhat = (xr[j] - mu) * rs;
      dxr[j] = rs * (dyr[j] * gamma[j] - g_mean - xhat * gx_mean);
    }
  }
  constexpr Index kTile = 256;
  for (Index j0 = 0; j0 < d; j0 += kTile) {
    const Index width = std::min(kTile, d - j0);
    float dg[kTile] = {}, db[kTile] = {};
    for (Index r = 0; r < rows; ++r) {
      const float* __restrict xr = x + r * d + j0;
      const float* __restrict dyr = dy + r * d + j0;
      const float mu = mean[r], rs = rstd[r];
      for (Index j = 0; j < width; ++j) {
        dg[j] += dyr[j] * ((xr[j] - mu) * rs);
        db[j] += dyr[j];
      }
    }
    for (Index j = 0; j < width; ++j) {
      dgamma[j0 + j] += dg[j];
      dbeta[j0 + j] += db[j];
    }
  }
}

}  // namespace

void layernorm_forward(ConstMatrix x, ConstVector gamma, ConstVector beta, float eps, Matrix y,
                       Vector mean, Vector rstd) {
  require_same_shape(x, y, "layernorm_forward");
  const char* who = "layernorm_forward";
  check_extent(gamma, x.extent(1), true, x, who, "gamma");
  check_extent(beta, x.extent(1), true, x, who, "beta");
  check_extent(mean, x.extent(0), false, x, who, "mean");
  check_extent(rstd, x.extent(0), false, x, who, "rstd");
  const std::int64_t d = static_cast<std::int64_t>(x.extent(1));
  if constexpr (kHostKernels) {
    host_forward(x.data(), gamma.data(), beta.data(), eps, y.data(), mean.data(), rstd.data(),
                 static_cast<Index>(x.extent(0)), d);
    return;
  }
  const float inv_d = 1.0f / static_cast<float>(d);
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::layernorm::fwd"),
      Range(0, static_cast<std::int64_t>(x.extent(0))), KOKKOS_LAMBDA(const std::int64_t r) {
        float mu, rs;
        device_row_moments(x, r, d, inv_d, eps, mu, rs);
        for (std::int64_t j = 0; j < d; ++j) y(r, j) = (x(r, j) - mu) * rs * gamma(j) + beta(j);
        mean(r) = mu;
        rstd(r) = rs;
      });
}

void layernorm_forward_quantized(ConstMatrix x, ConstVector gamma, ConstVector beta, float eps,
                                 const ActivationQuant& q, ByteView out) {
  const char* who = "layernorm_forward_quantized";
  check_extent(gamma, x.extent(1), true, x, who, "gamma");
  check_extent(beta, x.extent(1), true, x, who, "beta");
  check_extent(out, x.size(), false, x, who, "output bytes");
  TRELLIS_REQUIRE(q.scale > 0.0f, "layernorm_forward_quantized: scale must be positive");
  const std::int64_t d = static_cast<std::int64_t>(x.extent(1));
  const float inverse = 1.0f / q.scale;
  if constexpr (kHostKernels) {
    host_forward_quantized(x.data(), gamma.data(), beta.data(), eps, inverse,
                           static_cast<float>(q.qmin() - q.zero_point),
                           static_cast<float>(q.qmax() - q.zero_point), q.zero_point, out.data(),
                           static_cast<Index>(x.extent(0)), d);
    return;
  }
  const float inv_d = 1.0f / static_cast<float>(d);
  const ActivationQuant quant = q;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::layernorm::fwd_quantized"),
      Range(0, static_cast<std::int64_t>(x.extent(0))), KOKKOS_LAMBDA(const std::int64_t r) {
        float mu, rs;
        device_row_moments(x, r, d, inv_d, eps, mu, rs);
        for (std::int64_t j = 0; j < d; ++j) {
          const float y = (x(r, j) - mu) * rs * gamma(j) + beta(j);
          const int v = static_cast<int>(rintf(y * inverse)) + quant.zero_point;
          const int level = v < quant.qmin() ? quant.qmin() : v > quant.qmax() ? quant.qmax() : v;
          out(r * d + j) = static_cast<std::uint8_t>(level & 0xff);
        }
      });
}

void layernorm_backward(ConstMatrix x, ConstMatrix dy, ConstVector gamma, ConstVector mean,
                        ConstVector rstd, Matrix dx, Vector dgamma, Vector dbeta) {
  require_same_shape(x, dy, "layernorm_backward");
  require_same_shape(x, dx, "layernorm_backward");
  const char* who = "layernorm_backward";
  check_extent(gamma, x.extent(1), true, x, who, "gamma");
  check_extent(dgamma, x.extent(1), true, x, who, "dgamma");
  check_extent(dbeta, x.extent(1), true, x, who, "dbeta");
  check_extent(mean, x.extent(0), false, x, who, "mean");
  check_extent(rstd, x.extent(0), false, x, who, "rstd");
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  const std::int64_t d = static_cast<std::int64_t>(x.extent(1));
  if constexpr (kHostKernels) {
    host_backward(x.data(), dy.data(), gamma.data(), mean.data(), rstd.data(), dx.data(),
                  dgamma.data(), dbeta.data(), rows, d);
    return;
  }
  const float inv_d = 1.0f / static_cast<float>(d);
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::layernorm::bwd_input"), Range(0, rows),
      KOKKOS_LAMBDA(const std::int64_t r) {
        const float mu = mean(r), rs = rstd(r);
        float g_sum = 0.0f, gx_sum = 0.0f;
        for (std::int64_t j = 0; j < d; ++j) {
          const float g = dy(r, j) * gamma(j);
          g_sum += g;
          gx_sum += g * (x(r, j) - mu) * rs;
        }
        const float g_mean = g_sum * inv_d, gx_mean = gx_sum * inv_d;
        for (std::int64_t j = 0; j < d; ++j) {
          const float xhat = (x(r, j) - mu) * rs;
          dx(r, j) = rs * (dy(r, j) * gamma(j) - g_mean - xhat * gx_mean);
        }
      });
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::layernorm::bwd_params"), Range(0, d),
      KOKKOS_LAMBDA(const std::int64_t j) {
        float dg = 0.0f, db = 0.0f;
        for (std::int64_t r = 0; r < rows; ++r) {
          dg += dy(r, j) * (x(r, j) - mean(r)) * rstd(r);
          db += dy(r, j);
        }
        dgamma(j) += dg;
        dbeta(j) += db;
      });
}

}  // namespace trellis::kernels
