#include "trellis/kernels/conv.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/kernel_label.hpp"

namespace trellis::kernels {

void ConvGeometry::validate(const std::string& what) const {
  if (channels <= 0 || height <= 0 || width <= 0 || kernel <= 0 || stride <= 0 || padding < 0) {
    throw Error(what + ": bad convolution geometry " + describe() +
                " (channels, height, width, kernel, stride must be positive, padding >= 0)");
  }
  if (height + 2 * padding < kernel || width + 2 * padding < kernel) {
    throw Error(what + ": kernel " + std::to_string(kernel) + " does not fit the padded image " +
                describe());
  }
}

std::string ConvGeometry::describe() const {
  std::string text = "[" + std::to_string(channels) + ", " + std::to_string(height) + ", " +
                     std::to_string(width) + "] k" + std::to_string(kernel) + " s" +
                     std::to_string(stride) + " p" + std::to_string(padding);
  if (stride > 0 && height + 2 * padding >= kernel && width + 2 * padding >= kernel) {
    text += " -> [*, " + std::to_string(out_height()) + ", " + std::to_string(out_width()) + "]";
  }
  return text;
}

namespace {

void require_cols(const ConstMatrix& cols, int count, const ConvGeometry& g, const char* kernel) {
  if (cols.extent(0) != static_cast<std::size_t>(count * g.col_rows()) ||
      cols.extent(1) != static_cast<std::size_t>(g.col_cols())) {
    throw Error(std::string(kernel) + ": cols " + extents_string(cols) + " for " +
                std::to_string(count) + " images of " + g.describe() + ", need [" +
                std::to_string(count * g.col_rows()) + ", " + std::to_string(g.col_cols()) + "]");
  }
}

template <class M>
void require_images(const M& images, int count, const ConvGeometry& g, const char* kernel) {
  if (count < 0 || images.extent(0) < static_cast<std::size_t>(count) ||
      images.extent(1) != static_cast<std::size_t>(g.image_size())) {
    throw Error(std::string(kernel) + ": images " + extents_string(images) + " for " +
                std::to_string(count) + " images of " + g.describe());
  }
}

}  // namespace

// Both kernels run one work item per output row segment (no integer division in the inner
// loops, which dominated a per-element version 10:1 over the GEMMs on the host).

void im2col(ConstMatrix images, int count, const ConvGeometry& g, Matrix cols) {
  require_images(images, count, g, "im2col");
  require_cols(cols, count, g, "im2col");
  const float* x = images.data();
  float* out = cols.data();
  const std::int64_t k = g.kernel, s = g.stride, p = g.padding, H = g.height, W = g.width;
  const std::int64_t Ho = g.out_height(), Wo = g.out_width();
  const std::int64_t rows = g.col_rows(), image = g.image_size();
  // Work item (j, r, oh): cols row r = (c*k + kh)*k + kw of image j, output row oh, all ow.
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::conv::im2col"), Range(0, count * rows * Ho),
      KOKKOS_LAMBDA(const std::int64_t item) {
        const std::int64_t oh = item % Ho, r = (item / Ho) % rows, j = item / (Ho * rows);
        const std::int64_t kw = r % k, kh = (r / k) % k, c = r / (k * k);
        float* dst = out + item * Wo;  // = ((j*rows + r)*Ho + oh)*Wo
        const std::int64_t h = oh * s - p + kh;
        if (h < 0 || h >= H) {
          for (std::int64_t ow = 0; ow < Wo; ++ow) dst[ow] = 0.0f;
          return;
        }
        const float* src = x + j * image + (c * H + h) * W - p + kw;  // src[ow*s] = x[.., w]
        // Output columns whose input column w = ow*s - p + kw lies inside [0, W).
        const std::int64_t lo_raw = p > kw ? (p - kw + s - 1) / s : 0;
        const std::int64_t lo = lo_raw < Wo ? lo_raw : Wo;
        const std::int64_t hi = (W + p - kw + s - 1) / s;
        const std::int64_t end = hi < lo ? lo : (hi < Wo ? hi : Wo);
        for (std::int64_t ow = 0; ow < lo; ++ow) dst[ow] = 0.0f;
        if (s == 1) {
          for (std::int64_t ow = lo; ow < end; ++ow) dst[ow] = src[ow];
        } else {
          for (std::int64_t ow = lo; ow < end; ++ow) dst[ow] = src[ow * s];
        }
        for (std::int64_t ow = end; ow < Wo; ++ow) dst[ow] = 0.0f;
      });
}

void col2im(ConstMatrix cols, int count, const ConvGeometry& g, Matrix dimages) {
  require_images(dimages, count, g, "col2im");
  require_cols(cols, count, g, "col2im");
  const float* dc = cols.data();
  float* dx = dimages.data();
  const std::int64_t k = g.kernel, s = g.stride, p = g.padding, H = g.height, W = g.width;
  const std::int64_t Ho = g.out_height(), Wo = g.out_width();
  const std::int64_t plane_out = g.col_cols(), rows = g.col_rows(), C = g.channels;
  // Work item (j, c, h) owns the input row dx[j, c, h, :]: it gathers every cols entry that
  // im2col read from that row, in a fixed order (deterministic, no atomics).
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::conv::col2im"), Range(0, count * C * H),
      KOKKOS_LAMBDA(const std::int64_t item) {
        const std::int64_t h = item % H, c = (item / H) % C, j = item / (H * C);
        float* dst = dx + item * W;  // = ((j*C + c)*H + h)*W
        for (std::int64_t w = 0; w < W; ++w) dst[w] = 0.0f;
        const float* base = dc + j * rows * plane_out;
        for (std::int64_t kh = 0; kh < k; ++kh) {
          const std::int64_t hp = h + p - kh;  // = oh * s when input row h fed output row oh
          if (hp < 0 || hp % s != 0 || hp / s >= Ho) continue;
          const std::int64_t oh = hp / s;
          for (std::int64_t kw = 0; kw < k; ++kw) {
            const float* src = base + ((c * k + kh) * k + kw) * plane_out + oh * Wo;
            // ow with 0 <= ow*s - p + kw < W
            const std::int64_t lo = p > kw ? (p - kw + s - 1) / s : 0;
            const std::int64_t hi_excl = (W + p - kw + s - 1) / s;  // first ow with w >= W
            const std::int64_t end = hi_excl < Wo ? hi_excl : Wo;
            for (std::int64_t ow = lo; ow < end; ++ow) dst[ow * s - p + kw] += src[ow];
          }
        }
      });
}

void channel_bias_add(Matrix y, ConstVector bias, ChannelLayout layout) {
  const int plane = layout.plane;
  TRELLIS_REQUIRE(plane > 0 && y.extent(1) == bias.extent(0) * static_cast<std::size_t>(plane),
                  "channel_bias_add: bias " + extents_string(bias) + " and plane " +
                      std::to_string(plane) + " for rows " + extents_string(y));
  layout.require_fits(static_cast<long long>(bias.extent(0)), "channel_bias_add");
  float* yp = y.data();
  const float* b = bias.data();
  const std::int64_t channels = static_cast<std::int64_t>(bias.extent(0)), pl = plane;
  const std::int64_t B = layout.block;
  // Element e: channel block (e / (pl * B)) % (C / B), lane e % B (B = 1: NCHW).
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::conv::bias_fwd"),
      Range(0, static_cast<std::int64_t>(y.size())), KOKKOS_LAMBDA(const std::int64_t e) {
        yp[e] += b[((e / (pl * B)) % (channels / B)) * B + e % B];
      });
}

void channel_sum_accumulate(ConstMatrix dy, Vector grad, ChannelLayout layout) {
  const int plane = layout.plane;
  TRELLIS_REQUIRE(plane > 0 && dy.extent(1) == grad.extent(0) * static_cast<std::size_t>(plane),
                  "channel_sum_accumulate: grad " + extents_string(grad) + " and plane " +
                      std::to_string(plane) + " for rows " + extents_string(dy));
  layout.require_fits(static_cast<long long>(grad.extent(0)), "channel_sum_accumulate");
  const float* d = dy.data();
  float* gp = grad.data();
  const std::int64_t n = static_cast<std::int64_t>(dy.extent(0));
  const std::int64_t row = static_cast<std::int64_t>(dy.extent(1)), pl = plane;
  const std::int64_t B = layout.block;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::conv::bias_bwd"),
      Range(0, static_cast<std::int64_t>(grad.extent(0))), KOKKOS_LAMBDA(const std::int64_t c) {
        double sum = 0.0;
        for (std::int64_t i = 0; i < n; ++i) {
          const float* src = d + i * row + (c / B) * pl * B + c % B;
          for (std::int64_t q = 0; q < pl; ++q) sum += src[q * B];
        }
        gp[c] += static_cast<float>(sum);
      });
}

}  // namespace trellis::kernels
