#include "trellis/kernels/batchnorm.hpp"

#include "batchnorm_blocked.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/core/math.hpp"

#include <string>

namespace trellis::kernels {

namespace {

// Number of channels C of x [n, C*plane]; throws unless plane divides the row and the block
// divides C.
std::int64_t channels_of(const ConstMatrix& x, const ChannelLayout& layout, const char* kernel) {
  if (layout.plane <= 0 || x.extent(1) % static_cast<std::size_t>(layout.plane) != 0) {
    throw Error(std::string(kernel) + ": rows " + extents_string(x) + " are not whole planes of " +
                std::to_string(layout.plane));
  }
  const std::int64_t channels = static_cast<std::int64_t>(x.extent(1)) / layout.plane;
  layout.require_fits(channels, kernel);
  return channels;
}

detail::BlockedShape blocked_shape(const ConstMatrix& x, const ChannelLayout& layout,
                                   std::int64_t channels) {
  detail::BlockedShape s;
  s.n = static_cast<std::int64_t>(x.extent(0));
  s.blocks = channels / layout.block;
  s.plane = layout.plane;
  s.block = layout.block;
  return s;
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

// relu_output (nullptr: none): dy * [relu_output > 0] in place of dy.
template <bool Masked>
TRELLIS_HOST_INLINE void host_backward_sums_body(const float* __restrict x,
                                                 const float* __restrict dy,
                                                 const float* __restrict relu_output,
                                                 const double* __restrict st, double* __restrict s,
                                                 Index n, Index C, Index pl) {
  for (Index c = 0; c < C; ++c) {
    const double mean = st[c], invstd = st[C + c];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (Index i = 0; i < n; ++i) {
      const float* __restrict xs = x + (i * C + c) * pl;
      const float* __restrict ds = dy + (i * C + c) * pl;
      const float* __restrict ms = Masked ? relu_output + (i * C + c) * pl : nullptr;
      const auto grad = [&](Index q) {
        return static_cast<double>(Masked ? (ms[q] > 0.0f ? ds[q] : 0.0f) : ds[q]);
      };
      double plane_dy = 0.0, plane_dy_xhat = 0.0;
      lane_sums_double(
          pl, grad, [&](Index q) { return grad(q) * (xs[q] - mean) * invstd; }, plane_dy,
          plane_dy_xhat);
      sum_dy += plane_dy;
      sum_dy_xhat += plane_dy_xhat;
    }
    s[c] = sum_dy;
    s[C + c] = sum_dy_xhat;
  }
}

TRELLIS_HOST_CLONES
void host_backward_sums(const float* x, const float* dy, const float* relu_output, const double* st,
                        double* s, Index n, Index C, Index pl) {
  if (relu_output == nullptr)
    host_backward_sums_body<false>(x, dy, relu_output, st, s, n, C, pl);
  else
    host_backward_sums_body<true>(x, dy, relu_output, st, s, n, C, pl);
}

// The mask operand of the backward kernels: null for no ReLU, else checked against x.
const float* relu_mask(const ConstMatrix& relu_output, const ConstMatrix& x, const char* kernel) {
  if (relu_output.data() == nullptr) return nullptr;
  require_same_shape(x, relu_output, kernel);
  return relu_output.data();
}

}  // namespace

void batchnorm_sums(ConstMatrix x, ChannelLayout layout, DoubleVector sums) {
  const std::int64_t C = channels_of(x, layout, "batchnorm_sums");
  require_length(sums, 2 * C, "batchnorm_sums", "sums");
  const float* xp = x.data();
  double* s = sums.data();
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0)), pl = layout.plane;
  const std::int64_t B = layout.block, CB = C / B;
  if constexpr (kHostKernels) {
    if (B == 1) {
      host_sums(xp, s, n, C, pl);
      return;
    }
    if (detail::blocked_sums(xp, s, blocked_shape(x, layout, C))) return;
  }
  // Channel c = cb * B + l reads x[i, cb, q, l]; B = 1 is NCHW.
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::batchnorm::sums"), Range(0, C),
      KOKKOS_LAMBDA(const std::int64_t c) {
        const std::int64_t cb = c / B, l = c % B;
        double sum = 0.0, sum_sq = 0.0;
        for (std::int64_t i = 0; i < n; ++i) {
          const float* src = xp + (i * CB + cb) * pl * B + l;
          for (std::int64_t q = 0; q < pl; ++q) {
            const double v = src[q * B];
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

void batchnorm_normalize(ConstMatrix x, ChannelLayout layout, ConstDoubleVector stats,
                         ConstVector gamma, ConstVector beta, Matrix y, bool relu) {
  require_same_shape(x, y, "batchnorm_normalize");
  const std::int64_t C = channels_of(x, layout, "batchnorm_normalize");
  require_length(stats, 2 * C, "batchnorm_normalize", "stats");
  require_length(gamma, C, "batchnorm_normalize", "gamma");
  require_length(beta, C, "batchnorm_normalize", "beta");
  const float* xp = x.data();
  float* yp = y.data();
  const double* st = stats.data();
  const float* g = gamma.data();
  const float* b = beta.data();
  const std::int64_t pl = layout.plane, B = layout.block, CB = C / B;
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  if constexpr (kHostKernels) {
    if (B > 1 && detail::blocked_normalize(xp, st, g, b, relu, yp, blocked_shape(x, layout, C))) {
      return;
    }
  }
  // Work item (i, cb): one channel block plane of one image, so no division per element.
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::batchnorm::fwd"), Range(0, n * CB),
      KOKKOS_LAMBDA(const std::int64_t item) {
        const float* src = xp + item * pl * B;
        float* dst = yp + item * pl * B;
        for (std::int64_t l = 0; l < B; ++l) {
          const std::int64_t c = (item % CB) * B + l;
          const float mean = static_cast<float>(st[c]);
          const float scale = static_cast<float>(st[C + c] * g[c]);
          const float shift = b[c];
          for (std::int64_t q = 0; q < pl; ++q) {
            const float v = (src[q * B + l] - mean) * scale + shift;
            dst[q * B + l] = relu ? (v > 0.0f ? v : 0.0f) : v;
          }
        }
      });
}

void batchnorm_backward_sums(ConstMatrix x, ConstMatrix dy, ChannelLayout layout,
                             ConstDoubleVector stats, DoubleVector sums, ConstMatrix relu_output) {
  require_same_shape(x, dy, "batchnorm_backward_sums");
  const float* mp = relu_mask(relu_output, x, "batchnorm_backward_sums");
  const std::int64_t C = channels_of(x, layout, "batchnorm_backward_sums");
  require_length(stats, 2 * C, "batchnorm_backward_sums", "stats");
  require_length(sums, 2 * C, "batchnorm_backward_sums", "sums");
  const float* xp = x.data();
  const float* dyp = dy.data();
  const double* st = stats.data();
  double* s = sums.data();
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0)), pl = layout.plane;
  const std::int64_t B = layout.block, CB = C / B;
  if constexpr (kHostKernels) {
    if (B == 1) {
      host_backward_sums(xp, dyp, mp, st, s, n, C, pl);
      return;
    }
    if (detail::blocked_backward_sums(xp, dyp, mp, st, s, blocked_shape(x, layout, C))) return;
  }
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::batchnorm::bwd_sums"), Range(0, C),
      KOKKOS_LAMBDA(const std::int64_t c) {
        const double mean = st[c], invstd = st[C + c];
        const std::int64_t cb = c / B, l = c % B;
        double sum_dy = 0.0, sum_dy_xhat = 0.0;
        for (std::int64_t i = 0; i < n; ++i) {
          const std::int64_t base = (i * CB + cb) * pl * B + l;
          for (std::int64_t q = 0; q < pl; ++q) {
            const std::int64_t e = base + q * B;
            const double d = (mp == nullptr || mp[e] > 0.0f) ? dyp[e] : 0.0f;
            sum_dy += d;
            sum_dy_xhat += d * (xp[base + q * B] - mean) * invstd;
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

void batchnorm_backward_input(ConstMatrix x, ConstMatrix dy, ChannelLayout layout,
                              ConstDoubleVector stats, ConstVector gamma, ConstDoubleVector sums,
                              double count, bool training, Matrix dx, ConstMatrix relu_output) {
  require_same_shape(x, dy, "batchnorm_backward_input");
  require_same_shape(x, dx, "batchnorm_backward_input");
  const float* mp = relu_mask(relu_output, x, "batchnorm_backward_input");
  const std::int64_t C = channels_of(x, layout, "batchnorm_backward_input");
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
  const std::int64_t pl = layout.plane, B = layout.block, CB = C / B;
  const double inv_count = training ? 1.0 / count : 0.0;
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  if constexpr (kHostKernels) {
    if (B > 1 && detail::blocked_backward_input(xp, dyp, mp, st, g, s, inv_count, training, dxp,
                                                blocked_shape(x, layout, C))) {
      return;
    }
  }
  // Work item (i, cb), its B channels one after the other (detail::input_grad_coefficients).
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::batchnorm::bwd"), Range(0, n * CB),
      KOKKOS_LAMBDA(const std::int64_t item) {
        const float* xsrc = xp + item * pl * B;
        const float* dysrc = dyp + item * pl * B;
        const float* msrc = mp == nullptr ? nullptr : mp + item * pl * B;
        float* dst = dxp + item * pl * B;
        for (std::int64_t l = 0; l < B; ++l) {
          const detail::InputGradCoefficients k = detail::input_grad_coefficients(
              st, g, s, inv_count, training, (item % CB) * B + l, C);
          for (std::int64_t q = 0; q < pl; ++q) {
            const std::int64_t e = q * B + l;
            const float d = (msrc == nullptr || msrc[e] > 0.0f) ? dysrc[e] : 0.0f;
            dst[e] = k.a * d + k.b * (xsrc[e] - k.mean) + k.d;
          }
        }
      });
}

}  // namespace trellis::kernels
