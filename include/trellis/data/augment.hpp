// Training-time image augmentation: random crop with zero padding and horizontal flip, applied
// to normalised [C, H, W] samples after they are read (config data.augment, data.augment_pad).
//
// Every draw is a pure function of (seed, epoch, dataset index of the sample) through the
// counter-based Philox generator (core/rng.hpp), so a sample is augmented the same way whichever
// rank loads it and however many ranks there are; a new epoch gives new draws.
//
// Crop: the image is shifted by (dy, dx), each uniform in [-pad, pad]; pixels shifted in from
// outside are "zero" in the raw image, i.e. the normalised value of raw 0 per channel (fill[c] =
// -mean[c] / std[c]), as padding the raw image by `pad` and cropping H x W would give.
// Flip: with probability 1/2 the (shifted) image is mirrored left-right.
#pragma once

#include "trellis/core/shape.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

struct AugmentSpec {
  bool crop = false;
  bool flip = false;
  int pad = 0;  // crop: largest shift in pixels
  bool any() const { return crop || flip; }
};

// "none" | comma list of crop, flip. Throws ConfigError naming data.augment otherwise.
AugmentSpec parse_augment(const std::string& text, int pad);

// The draws for one sample.
struct AugmentDraw {
  int dy = 0, dx = 0;  // output(y, x) = input(y + dy, x + dx)
  bool flip = false;   // then mirrored: output(y, x) = shifted(y, W - 1 - x)
};
AugmentDraw augment_draw(const AugmentSpec& spec, std::uint64_t seed, std::int64_t epoch,
                         std::int64_t sample_index);

class ImageAugmenter {
 public:
  // sample_shape must be [C, H, W] (else ConfigError naming data.augment); fill: [1] or [C].
  ImageAugmenter(AugmentSpec spec, std::uint64_t seed, const Shape& sample_shape,
                 std::vector<float> fill);

  // Augments images [count, C, H, W] in place; image i is dataset sample sample_indices[i].
  // Does not allocate (one sample of scratch is kept).
  void apply(std::int64_t epoch, const std::int64_t* sample_indices, std::int64_t count,
             float* images);

 private:
  void apply_one(const AugmentDraw& draw, float* image);

  AugmentSpec spec_;
  std::uint64_t seed_;
  std::int64_t channels_, height_, width_;
  std::vector<float> fill_;     // [C]
  std::vector<float> scratch_;  // [C, H, W]: the input of the sample being augmented
};

}  // namespace trellis
