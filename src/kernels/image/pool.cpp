#include "trellis/kernels/pool.hpp"

#include "trellis/core/code_path.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/kernel_label.hpp"

#include <string>

namespace trellis::kernels {

namespace {

void require_pool_shapes(const ConstMatrix& x, const ConstMatrix& y, const PoolGeometry& g,
                         const char* kernel) {
  const bool geometry_ok = g.channels > 0 && g.height > 0 && g.width > 0 && g.kernel > 0 &&
                           g.stride > 0 && g.kernel <= g.height && g.kernel <= g.width;
  const std::size_t in = static_cast<std::size_t>(g.channels) * g.height * g.width;
  const std::size_t out =
      geometry_ok ? static_cast<std::size_t>(g.channels) * g.out_height() * g.out_width() : 0;
  if (!geometry_ok || x.extent(1) != in || y.extent(1) != out || x.extent(0) != y.extent(0)) {
    throw Error(std::string(kernel) + ": input " + extents_string(x) + ", output " +
                extents_string(y) + " do not fit [C, H, W] = [" + std::to_string(g.channels) +
                ", " + std::to_string(g.height) + ", " + std::to_string(g.width) + "], kernel " +
                std::to_string(g.kernel) + ", stride " + std::to_string(g.stride));
  }
}

}  // namespace

void maxpool_forward(ConstMatrix x, const PoolGeometry& g, Matrix y, IntVector argmax) {
  require_pool_shapes(x, y, g, "maxpool_forward");
  TRELLIS_REQUIRE(
      argmax.extent(0) >= y.size(),
      "maxpool_forward: argmax " + extents_string(argmax) + " for output " + extents_string(y));
  const float* xp = x.data();
  float* yp = y.data();
  std::int32_t* ap = argmax.data();
  const std::int64_t k = g.kernel, s = g.stride, H = g.height, W = g.width;
  const std::int64_t Ho = g.out_height(), Wo = g.out_width();
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::maxpool::fwd"), Range(0, static_cast<std::int64_t>(y.size())),
      KOKKOS_LAMBDA(const std::int64_t e) {
        const std::int64_t ow = e % Wo, oh = (e / Wo) % Ho, ic = e / (Ho * Wo);  // ic = i*C + c
        const float* plane = xp + ic * H * W;
        std::int64_t best = oh * s * W + ow * s;
        float max = plane[best];
        for (std::int64_t kh = 0; kh < k; ++kh) {
          for (std::int64_t kw = 0; kw < k; ++kw) {
            const std::int64_t at = (oh * s + kh) * W + ow * s + kw;
            const float v = plane[at];
            if (v > max || (v != v && max == max)) {  // first maximum; a NaN wins
              max = v;
              best = at;
            }
          }
        }
        yp[e] = max;
        ap[e] = static_cast<std::int32_t>(best);
      });
}

void maxpool_backward(ConstMatrix dy, ConstIntVector argmax, const PoolGeometry& g, Matrix dx) {
  require_pool_shapes(dx, dy, g, "maxpool_backward");
  TRELLIS_REQUIRE(
      argmax.extent(0) >= dy.size(),
      "maxpool_backward: argmax " + extents_string(argmax) + " for output " + extents_string(dy));
  const float* dyp = dy.data();
  const std::int32_t* ap = argmax.data();
  float* dxp = dx.data();
  const std::int64_t k = g.kernel, s = g.stride, H = g.height, W = g.width;
  const std::int64_t Ho = g.out_height(), Wo = g.out_width();
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::maxpool::bwd"), Range(0, static_cast<std::int64_t>(dx.size())),
      KOKKOS_LAMBDA(const std::int64_t e) {
        const std::int64_t w = e % W, h = (e / W) % H, ic = e / (H * W);
        const std::int64_t at = h * W + w;
        // Windows containing (h, w): oh*s <= h < oh*s + k, likewise for w.
        const std::int64_t oh_lo = h >= k ? (h - k) / s + 1 : 0, oh_hi = h / s;
        const std::int64_t ow_lo = w >= k ? (w - k) / s + 1 : 0, ow_hi = w / s;
        float sum = 0.0f;
        for (std::int64_t oh = oh_lo; oh <= oh_hi && oh < Ho; ++oh) {
          for (std::int64_t ow = ow_lo; ow <= ow_hi && ow < Wo; ++ow) {
            const std::int64_t o = (ic * Ho + oh) * Wo + ow;
            if (ap[o] == at) sum += dyp[o];
          }
        }
        dxp[e] = sum;
      });
}

void global_avgpool_forward(ConstMatrix x, ChannelLayout layout, Matrix y) {
  const int plane = layout.plane;
  TRELLIS_REQUIRE(plane > 0 && x.extent(0) == y.extent(0) &&
                      x.extent(1) == y.extent(1) * static_cast<std::size_t>(plane),
                  "global_avgpool_forward: input " + extents_string(x) + ", output " +
                      extents_string(y) + ", plane " + std::to_string(plane));
  layout.require_fits(static_cast<long long>(y.extent(1)), "global_avgpool_forward");
  const float* xp = x.data();
  float* yp = y.data();
  const std::int64_t pl = plane, B = layout.block;
  const std::int64_t C = static_cast<std::int64_t>(y.extent(1));
  const float inv = 1.0f / static_cast<float>(plane);
  // Output e = (i, c), c = cb * B + l: pixels of x[i, cb, :, l], B apart (B = 1: NCHW).
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::avgpool::fwd"), Range(0, static_cast<std::int64_t>(y.size())),
      KOKKOS_LAMBDA(const std::int64_t e) {
        const std::int64_t i = e / C, c = e % C;
        const float* src = xp + i * C * pl + (c / B) * pl * B + c % B;
        float sum = 0.0f;
        for (std::int64_t q = 0; q < pl; ++q) sum += src[q * B];
        yp[e] = sum * inv;
      });
}

void global_avgpool_forward_channels_last(ConstMatrix x, int plane, Matrix y) {
  TRELLIS_REQUIRE(plane > 0 && x.extent(0) == y.extent(0) &&
                      x.extent(1) == y.extent(1) * static_cast<std::size_t>(plane),
                  "global_avgpool_forward_channels_last: input " + extents_string(x) + ", output " +
                      extents_string(y) + ", plane " + std::to_string(plane));
  const std::int64_t pl = plane, channels = static_cast<std::int64_t>(y.extent(1));
  const float inv = 1.0f / static_cast<float>(plane);
  // One (image, channel) per iteration; consecutive channels read consecutive floats.
  using Tiles = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::avgpool::fwd_nhwc"),
      Tiles({0, 0}, {static_cast<std::int64_t>(y.extent(0)), channels}),
      KOKKOS_LAMBDA(const std::int64_t i, const std::int64_t c) {
        float sum = 0.0f;
        for (std::int64_t q = 0; q < pl; ++q) sum += x(i, q * channels + c);
        y(i, c) = sum * inv;
      });
}

void global_avgpool_backward(ConstMatrix dy, ChannelLayout layout, Matrix dx) {
  const int plane = layout.plane;
  TRELLIS_REQUIRE(plane > 0 && dx.extent(0) == dy.extent(0) &&
                      dx.extent(1) == dy.extent(1) * static_cast<std::size_t>(plane),
                  "global_avgpool_backward: output grad " + extents_string(dy) + ", input grad " +
                      extents_string(dx) + ", plane " + std::to_string(plane));
  layout.require_fits(static_cast<long long>(dy.extent(1)), "global_avgpool_backward");
  const float* dyp = dy.data();
  float* dxp = dx.data();
  const std::int64_t pl = plane, B = layout.block;
  const std::int64_t C = static_cast<std::int64_t>(dy.extent(1));
  const float inv = 1.0f / static_cast<float>(plane);
  if constexpr (kHostKernels) {  // no division per element
    const std::int64_t n = static_cast<std::int64_t>(dx.extent(0));
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t cb = 0; cb < C / B; ++cb) {
        const float* grad = dyp + i * C + cb * B;
        float* out = dxp + (i * C + cb * B) * pl;
        for (std::int64_t q = 0; q < pl; ++q)
          for (std::int64_t l = 0; l < B; ++l) out[q * B + l] = grad[l] * inv;
      }
    }
    return;
  }
  // Element e of image i: channel block r / (pl * B), lane r % B (r = e within the image).
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::avgpool::bwd"), Range(0, static_cast<std::int64_t>(dx.size())),
      KOKKOS_LAMBDA(const std::int64_t e) {
        const std::int64_t i = e / (C * pl), r = e % (C * pl);
        const std::int64_t c = (r / (pl * B)) * B + r % B;
        dxp[e] = dyp[i * C + c] * inv;
      });
}

}  // namespace trellis::kernels
