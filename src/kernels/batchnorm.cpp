#include "trellis/kernels/batchnorm.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/core/math.hpp"

#include <string>

namespace trellis::kernels {

namespace {

// Number of channels C of x [n, C*plane]; throws unless plane divides the row.
std::int64_t channels_of(const ConstMatrix& x, int plane, const char* kernel) {
  if (plane <= 0 || x.extent(1) % static_cast<std::size_t>(plane) != 0) {
    throw Error(std::string(kernel) + ": rows " + extents_string(x) + " are not whole planes of " +
                std::to_string(plane));
  }
  return static_cast<std::int64_t>(x.extent(1)) / plane;
}

template <class V>
void require_length(const V& v, std::int64_t at_least, const char* kernel, const char* what) {
  if (static_cast<std::int64_t>(v.extent(0)) < at_least) {
    throw Error(std::string(kernel) + ": " + what + " " + extents_string(v) + " shorter than " +
                std::to_string(at_least));
  }
}

using Index = std::int64_t;

// Host: channel outer, images inner; each (image, channel) plane is contiguous, summed in
// vector lanes of doubles.
TRELLIS_HOST_CLONES
void host_sums(const float* __restrict x, double* __restrict s, Index n, Index C, Index pl) {
  for (Index c = 0; c < C; ++c) {
    double sum = 0.0, sum_sq = 0.0;
    for (Index i = 0; i < n; ++i) {
      const float* __restrict src = x + (i * C + c) * pl;
      double plane_sum = 0.0, plane_sq = 0.0;
      lane_sums_double(
          pl, [&](Index q) { return static_cast<double>(src[q]); },
          [&](Index q) { return static_cast<double>(src[q]) * static_cast<double>(src[q]); },
          plane_sum, plane_sq);
      sum += plane_sum;
      sum_sq += plane_sq;
    }
    s[c] = sum;
    s[C + c] = sum_sq;
  }
}

TRELLIS_HOST_CLONES
void host_backward_sums(const float* __restrict x, const float* __restrict dy,
                        const double* __restrict st, double* __restrict s, Index n, Index C,
                        Index pl) {
  for (Index c = 0; c < C; ++c) {
    const double mean = st[c], invstd = st[C + c];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (Index i = 0; i < n; ++i) {
      const float* __restrict xs = x + (i * C + c) * pl;
      const float* __restrict ds = dy + (i * C + c) * pl;
      double plane_dy = 0.0, plane_dy_xhat = 0.0;
      lane_sums_double(
          pl, [&](Index q) { return static_cast<double>(ds[q]); },
          [&](Index q) { return static_cast<double>(ds[q]) * (xs[q] - mean) * invstd; }, plane_dy,
          plane_dy_xhat);
      sum_dy += plane_dy;
      sum_dy_xhat += plane_dy_xhat;
    }
    s[c] = sum_dy;
    s[C + c] = sum_dy_xhat;
  }
}

}  // namespace

void batchnorm_sums(ConstMatrix x, int plane, DoubleVector sums) {
  const std::int64_t C = channels_of(x, plane, "batchnorm_sums");
  require_length(sums, 2 * C, "batchnorm_sums", "sums");
  const float* xp = x.data();
  double* s = sums.data();
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0)), pl = plane;
  if constexpr (kHostKernels) {
    host_sums(xp, s, n, C, pl);
    return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::batchnorm::sums"), Range(0, C),
      KOKKOS_LAMBDA(const std::int64_t c) {
        double sum = 0.0, sum_sq = 0.0;
        for (std::int64_t i = 0; i < n; ++i) {
          const float* src = xp + (i * C + c) * pl;
          for (std::int64_t q = 0; q < pl; ++q) {
            const double v = src[q];
            sum += v;
            sum_sq += v * v;
          }
        }
        s[c] = sum;
        s[C + c] = sum_sq;
      });
}

void batchnorm_batch_stats(ConstDoubleVector sums, double count, float eps, float momentum,
                           DoubleVector stats, Vector running) {
  TRELLIS_REQUIRE(count >= 2.0, "batchnorm: training needs more than one value per channel, got " +
                                    std::to_string(count));
  const std::int64_t C = static_cast<std::int64_t>(running.extent(0)) / 2;
  require_length(sums, 2 * C, "batchnorm_batch_stats", "sums");
  require_length(stats, 2 * C, "batchnorm_batch_stats", "stats");
  const double* s = sums.data();
  double* st = stats.data();
  float* run = running.data();
  const double m = momentum, e = eps;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::batchnorm::stats"), Range(0, C),
      KOKKOS_LAMBDA(const std::int64_t c) {
        const double mean = s[c] / count;
        double var = s[C + c] / count - mean * mean;
        if (var < 0.0) var = 0.0;
        st[c] = mean;
        st[C + c] = 1.0 / math::sqrt(var + e);
        run[c] = static_cast<float>((1.0 - m) * run[c] + m * mean);
        run[C + c] = static_cast<float>((1.0 - m) * run[C + c] + m * var * count / (count - 1.0));
      });
}

void batchnorm_running_stats(ConstVector running, float eps, DoubleVector stats) {
  const std::int64_t C = static_cast<std::int64_t>(running.extent(0)) / 2;
  require_length(stats, 2 * C, "batchnorm_running_stats", "stats");
  const float* run = running.data();
  double* st = stats.data();
  const double e = eps;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::batchnorm::eval_stats"), Range(0, C),
      KOKKOS_LAMBDA(const std::int64_t c) {
        st[c] = run[c];
        st[C + c] = 1.0 / math::sqrt(static_cast<double>(run[C + c]) + e);
      });
}

void batchnorm_normalize(ConstMatrix x, int plane, ConstDoubleVector stats, ConstVector gamma,
                         ConstVector beta, Matrix y) {
  require_same_shape(x, y, "batchnorm_normalize");
  const std::int64_t C = channels_of(x, plane, "batchnorm_normalize");
  require_length(stats, 2 * C, "batchnorm_normalize", "stats");
  require_length(gamma, C, "batchnorm_normalize", "gamma");
  require_length(beta, C, "batchnorm_normalize", "beta");
  const float* xp = x.data();
  float* yp = y.data();
  const double* st = stats.data();
  const float* g = gamma.data();
  const float* b = beta.data();
  const std::int64_t pl = plane;
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  // Work item (i, c): one channel plane of one image, so no division per element.
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::batchnorm::fwd"), Range(0, n * C),
      KOKKOS_LAMBDA(const std::int64_t item) {
        const std::int64_t c = item % C;
        const float mean = static_cast<float>(st[c]);
        const float scale = static_cast<float>(st[C + c] * g[c]);
        const float shift = b[c];
        const float* src = xp + item * pl;
        float* dst = yp + item * pl;
        for (std::int64_t q = 0; q < pl; ++q) dst[q] = (src[q] - mean) * scale + shift;
      });
}

void batchnorm_backward_sums(ConstMatrix x, ConstMatrix dy, int plane, ConstDoubleVector stats,
                             DoubleVector sums) {
  require_same_shape(x, dy, "batchnorm_backward_sums");
  const std::int64_t C = channels_of(x, plane, "batchnorm_backward_sums");
  require_length(stats, 2 * C, "batchnorm_backward_sums", "stats");
  require_length(sums, 2 * C, "batchnorm_backward_sums", "sums");
  const float* xp = x.data();
  const float* dyp = dy.data();
  const double* st = stats.data();
  double* s = sums.data();
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0)), pl = plane;
  if constexpr (kHostKernels) {
    host_backward_sums(xp, dyp, st, s, n, C, pl);
    return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::batchnorm::bwd_sums"), Range(0, C),
      KOKKOS_LAMBDA(const std::int64_t c) {
        const double mean = st[c], invstd = st[C + c];
        double sum_dy = 0.0, sum_dy_xhat = 0.0;
        for (std::int64_t i = 0; i < n; ++i) {
          const std::int64_t base = (i * C + c) * pl;
          for (std::int64_t q = 0; q < pl; ++q) {
            const double d = dyp[base + q];
            sum_dy += d;
            sum_dy_xhat += d * (xp[base + q] - mean) * invstd;
          }
        }
        s[c] = sum_dy;
        s[C + c] = sum_dy_xhat;
      });
}

void batchnorm_param_grads(ConstDoubleVector sums, Vector dgamma, Vector dbeta) {
  require_same_shape(dgamma, dbeta, "batchnorm_param_grads");
  const std::int64_t C = static_cast<std::int64_t>(dgamma.extent(0));
  require_length(sums, 2 * C, "batchnorm_param_grads", "sums");
  const double* s = sums.data();
  float* dg = dgamma.data();
  float* db = dbeta.data();
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::batchnorm::param_grads"), Range(0, C),
      KOKKOS_LAMBDA(const std::int64_t c) {
        db[c] += static_cast<float>(s[c]);
        dg[c] += static_cast<float>(s[C + c]);
      });
}

void batchnorm_backward_input(ConstMatrix x, ConstMatrix dy, int plane, ConstDoubleVector stats,
                              ConstVector gamma, ConstDoubleVector sums, double count,
                              bool training, Matrix dx) {
  require_same_shape(x, dy, "batchnorm_backward_input");
  require_same_shape(x, dx, "batchnorm_backward_input");
  const std::int64_t C = channels_of(x, plane, "batchnorm_backward_input");
  require_length(stats, 2 * C, "batchnorm_backward_input", "stats");
  require_length(gamma, C, "batchnorm_backward_input", "gamma");
  require_length(sums, training ? 2 * C : 0, "batchnorm_backward_input", "sums");
  TRELLIS_REQUIRE(!training || count > 0.0, "batchnorm_backward_input: count must be positive");
  const float* xp = x.data();
  const float* dyp = dy.data();
  const double* st = stats.data();
  const float* g = gamma.data();
  const double* s = sums.data();
  float* dxp = dx.data();
  const std::int64_t pl = plane;
  const double inv_count = training ? 1.0 / count : 0.0;
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  // Work item (i, c). Per channel, dx = a * dy + b * (x - mean) + d with
  //   training: a = gamma*invstd, b = -a * invstd * S2/N, d = -a * S1/N
  //   eval:     a = gamma*invstd, b = d = 0
  // (coefficients in double, the per-element update in float on the centred input).
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::batchnorm::bwd"), Range(0, n * C),
      KOKKOS_LAMBDA(const std::int64_t item) {
        const std::int64_t c = item % C;
        const double invstd = st[C + c];
        const double a = static_cast<double>(g[c]) * invstd;
        double b = 0.0, d = 0.0;
        if (training) {
          b = -a * invstd * s[C + c] * inv_count;
          d = -a * s[c] * inv_count;
        }
        const float af = static_cast<float>(a), bf = static_cast<float>(b),
                    df = static_cast<float>(d);
        const float mean = static_cast<float>(st[c]);
        const float* xsrc = xp + item * pl;
        const float* dysrc = dyp + item * pl;
        float* dst = dxp + item * pl;
        for (std::int64_t q = 0; q < pl; ++q) dst[q] = af * dysrc[q] + bf * (xsrc[q] - mean) + df;
      });
}

}  // namespace trellis::kernels
