#include "trellis/data/augment.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/rng.hpp"

#include <algorithm>
#include <sstream>

namespace trellis {

AugmentSpec parse_augment(const std::string& text, int pad) {
  AugmentSpec spec;
  spec.pad = pad;
  if (text.empty() || text == "none") return spec;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    if (item == "crop")
      spec.crop = true;
    else if (item == "flip")
      spec.flip = true;
    else
      throw ConfigError(
          "config key data.augment: expected none or a comma list of crop, flip; "
          "found '" +
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
  return draw;
}

ImageAugmenter::ImageAugmenter(AugmentSpec spec, std::uint64_t seed, const Shape& sample_shape,
                               std::vector<float> fill)
    : spec_(spec), seed_(seed) {
  if (sample_shape.size() != 3)
    throw ConfigError(
        "config key data.augment: crop and flip need image samples [C, H, W]; the "
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
    apply_one(augment_draw(spec_, seed_, epoch, sample_indices[i]), images + i * numel);
}

// Row by row: each output row is one source row (or fill), copied as one contiguous run
// (forward, or backward when flipped) with fill at the shifted-in edge; no per-pixel branches.
void ImageAugmenter::apply_one(const AugmentDraw& draw, float* image) {
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
