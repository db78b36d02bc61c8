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
// Scale / rotate: the image is zoomed by a factor s uniform in [1 - max_scale, 1 + max_scale]
// and turned by an angle a uniform in [-max_degrees, max_degrees] about its centre
// c = ((H - 1) / 2, (W - 1) / 2), sampled bilinearly (a tap outside the image reads the fill
// value), before the shift and the flip: output(y, x) = input(sy, sx) with
//   py = y + dy,  px = (flip ? W - 1 - x : x) + dx,
//   sy = cy + ((py - cy) cos a - (px - cx) sin a) / s,
//   sx = cx + ((py - cy) sin a + (px - cx) cos a) / s
// (a positive angle turns the picture clockwise as displayed, rows running down). Images whose
// draw is s = 1, a = 0 take the exact row-copy path of crop and flip.
#pragma once

#include "trellis/core/shape.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

struct AugmentSpec {
  bool crop = false;
  bool flip = false;
  bool scale = false;
  bool rotate = false;
  int pad = 0;               // crop: largest shift in pixels
  double max_scale = 0.0;    // scale: largest relative zoom (0.1: factors in [0.9, 1.1])
  double max_degrees = 0.0;  // rotate: largest angle either way
  bool any() const { return crop || flip || scale || rotate; }
};

// "none" | comma list of crop, flip, scale, rotate. Throws ConfigError naming data.augment
// otherwise.
AugmentSpec parse_augment(const std::string& text, int pad, double max_scale = 0.1,
                          double max_degrees = 10.0);

// The draws for one sample.
struct AugmentDraw {
  int dy = 0, dx = 0;  // output(y, x) = input(y + dy, x + dx)
  bool flip = false;   // then mirrored: output(y, x) = shifted(y, W - 1 - x)
  float scale = 1.0f;  // zoom factor s (see above)
  float angle = 0.0f;  // radians
  bool affine() const { return scale != 1.0f || angle != 0.0f; }
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
  // One image [C, H, W] in place, with the given draws.
  void apply_draw(const AugmentDraw& draw, float* image);

 private:
  void shift_and_flip(const AugmentDraw& draw, float* image);
  void resample(const AugmentDraw& draw, float* image);

  AugmentSpec spec_;
  std::uint64_t seed_;
  std::int64_t channels_, height_, width_;
  std::vector<float> fill_;     // [C]
  std::vector<float> scratch_;  // [C, H, W]: the input of the sample being augmented
};

}  // namespace trellis
