#include "trellis/data/augment.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/rng.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace trellis {

namespace {
constexpr double kPi = 3.14159265358979323846;
}  // namespace

AugmentSpec parse_augment(const std::string& text, int pad, double max_scale, double max_degrees) {
  AugmentSpec spec;
  spec.pad = pad;
  spec.max_scale = max_scale;
  spec.max_degrees = max_degrees;
  if (text.empty() || text == "none") return spec;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    if (item == "crop")
      spec.crop = true;
    else if (item == "flip")
      spec.flip = true;
    else if (item == "scale")
      spec.scale = true;
    else if (item == "rotate")
      spec.rotate = true;
    else
      throw ConfigError(
          "config key data.augment: expected none or a comma list of crop, flip, scale, "
          "rotate; found '" +
          text + "'");
  }
  return spec;
}

AugmentDraw augment_draw(const AugmentSpec& spec, std::uint64_t seed, std::int64_t epoch,
                         std::int64_t sample_index) {
  static const std::uint64_t kStream = stream_from_name("data.augment");
  const Philox4x32 w = random_words(seed, stream_mix(kStream, static_cast<std::uint64_t>(epoch)),
                                    static_cast<std::uint64_t>(sample_index));
  AugmentDraw draw;
  if (spec.crop && spec.pad > 0) {
    const std::uint32_t span = 2u * static_cast<std::uint32_t>(spec.pad) + 1u;
    draw.dy = static_cast<int>(w.v[0] % span) - spec.pad;
    draw.dx = static_cast<int>(w.v[1] % span) - spec.pad;
  }
  draw.flip = spec.flip && (w.v[2] & 1u) != 0;
  if ((spec.scale && spec.max_scale > 0.0) || (spec.rotate && spec.max_degrees > 0.0)) {
    // A stream of its own: crop and flip draw exactly what they drew before scale and rotate
    // existed.
    static const std::uint64_t kAffineStream = stream_from_name("data.augment.affine");
    const Philox4x32 a =
        random_words(seed, stream_mix(kAffineStream, static_cast<std::uint64_t>(epoch)),
                     static_cast<std::uint64_t>(sample_index));
    // Uniform in [-1, 1) from the top 24 bits.
    const auto symmetric = [](std::uint32_t word) {
      return static_cast<double>(word >> 8) / 8388608.0 - 1.0;
    };
    if (spec.scale) draw.scale = static_cast<float>(1.0 + spec.max_scale * symmetric(a.v[0]));
    if (spec.rotate)
      draw.angle = static_cast<float>(spec.max_degrees * symmetric(a.v[1]) * (kPi / 180.0));
  }
  return draw;
}

ImageAugmenter::ImageAugmenter(AugmentSpec spec, std::uint64_t seed, const Shape& sample_shape,
                               std::vector<float> fill)
    : spec_(spec), seed_(seed) {
  if (sample_shape.size() != 3)
    throw ConfigError(
        "config key data.augment: image augmentation needs samples [C, H, W]; the "
        "training set has samples of " +
        shape_string(sample_shape));
  channels_ = sample_shape[0];
  height_ = sample_shape[1];
  width_ = sample_shape[2];
  TRELLIS_REQUIRE(fill.size() == 1 || static_cast<std::int64_t>(fill.size()) == channels_,
                  "augmentation fill: one value or one per channel");
  fill_.assign(static_cast<std::size_t>(channels_), fill[0]);
  if (fill.size() > 1) fill_ = std::move(fill);
  scratch_.resize(static_cast<std::size_t>(channels_ * height_ * width_));
}

void ImageAugmenter::apply(std::int64_t epoch, const std::int64_t* sample_indices,
                           std::int64_t count, float* images) {
  if (!spec_.any()) return;
  const std::int64_t numel = channels_ * height_ * width_;
  for (std::int64_t i = 0; i < count; ++i)
    apply_draw(augment_draw(spec_, seed_, epoch, sample_indices[i]), images + i * numel);
}

void ImageAugmenter::apply_draw(const AugmentDraw& draw, float* image) {
  if (draw.affine())
    resample(draw, image);
  else
    shift_and_flip(draw, image);
}

// Per output pixel: its source point (the formula in the header), then the four taps around
// it, each read from the image or, outside it, the fill value. The source point moves by a
// constant step along a row, so the row loop adds instead of recomputing the rotation.
void ImageAugmenter::resample(const AugmentDraw& draw, float* image) {
  std::copy_n(image, scratch_.size(), scratch_.data());
  const std::int64_t H = height_, W = width_;
  const double cy = 0.5 * static_cast<double>(H - 1), cx = 0.5 * static_cast<double>(W - 1);
  const double inv = 1.0 / static_cast<double>(draw.scale);
  const double cos_a = std::cos(static_cast<double>(draw.angle)) * inv;
  const double sin_a = std::sin(static_cast<double>(draw.angle)) * inv;
  // Source (sy, sx) = c + R(-a) (p - c) / s with p = (py, px):
  //   sy = cy + cos_a (py - cy) - sin_a (px - cx),  sx = cx + sin_a (py - cy) + cos_a (px - cx).
  // Along an output row px moves by +1 (or -1 when flipped).
  const double step = draw.flip ? -1.0 : 1.0;
  for (std::int64_t c = 0; c < channels_; ++c) {
    const float fill = fill_[static_cast<std::size_t>(c)];
    const float* in = scratch_.data() + c * H * W;
    float* out = image + c * H * W;
    const auto tap = [&](std::int64_t y, std::int64_t x) {
      return (y < 0 || y >= H || x < 0 || x >= W) ? fill : in[y * W + x];
    };
    for (std::int64_t y = 0; y < H; ++y) {
      const double py = static_cast<double>(y + draw.dy) - cy;
      const double px0 = static_cast<double>((draw.flip ? W - 1 : 0) + draw.dx) - cx;
      double sy = cy + cos_a * py - sin_a * px0, sx = cx + sin_a * py + cos_a * px0;
      const double dsy = -sin_a * step, dsx = cos_a * step;
      for (std::int64_t x = 0; x < W; ++x, sy += dsy, sx += dsx) {
        const double fy = std::floor(sy), fx = std::floor(sx);
        const auto y0 = static_cast<std::int64_t>(fy), x0 = static_cast<std::int64_t>(fx);
        const float wy = static_cast<float>(sy - fy), wx = static_cast<float>(sx - fx);
        const float top = tap(y0, x0) + wx * (tap(y0, x0 + 1) - tap(y0, x0));
        const float bottom = tap(y0 + 1, x0) + wx * (tap(y0 + 1, x0 + 1) - tap(y0 + 1, x0));
        out[y * W + x] = top + wy * (bottom - top);
      }
    }
  }
}

// Row by row: each output row is one source row (or fill), copied as one contiguous run
// (forward, or backward when flipped) with fill at the shifted-in edge; no per-pixel branches.
void ImageAugmenter::shift_and_flip(const AugmentDraw& draw, float* image) {
  if (draw.dy == 0 && draw.dx == 0 && !draw.flip) return;
  std::copy_n(image, scratch_.size(), scratch_.data());
  const std::int64_t H = height_, W = width_;
  // Output columns [x0, x1) of the shifted image come from source columns [x0 + dx, x1 + dx).
  const std::int64_t x0 = std::clamp<std::int64_t>(-draw.dx, 0, W);
  const std::int64_t x1 = std::clamp<std::int64_t>(W - draw.dx, 0, W);
  for (std::int64_t c = 0; c < channels_; ++c) {
    const float fill = fill_[static_cast<std::size_t>(c)];
    const float* in = scratch_.data() + c * H * W;
    float* out = image + c * H * W;
    for (std::int64_t y = 0; y < H; ++y) {
      float* row = out + y * W;
      const std::int64_t sy = y + draw.dy;
      if (sy < 0 || sy >= H || x0 >= x1) {
        std::fill_n(row, W, fill);
        continue;
      }
      const float* first = in + sy * W + x0 + draw.dx;  // the shifted image's column x0
      const std::int64_t n = x1 - x0;
      if (!draw.flip) {
        std::fill(row, row + x0, fill);
        std::copy(first, first + n, row + x0);
        std::fill(row + x1, row + W, fill);
      } else {  // mirrored: row[W - 1 - x] = shifted[x]
        std::fill(row, row + (W - x1), fill);
        std::reverse_copy(first, first + n, row + (W - x1));
        std::fill(row + (W - x0), row + W, fill);
      }
    }
  }
}

}  // namespace trellis
