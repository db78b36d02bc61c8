// Image augmentation (data.augment): crop shifts pixels in with the fill value, flip mirrors,
// and the draws depend only on (seed, epoch, sample index).
#include "catch.hpp"

#include "trellis/core/error.hpp"
#include "trellis/data/augment.hpp"

#include <algorithm>
#include <vector>

namespace {

using namespace trellis;

// A [C, H, W] image whose pixel (c, y, x) is 100 c + 10 y + x + 1 (never the fill value 0 or -7).
std::vector<float> ramp(int C, int H, int W) {
  std::vector<float> img(static_cast<std::size_t>(C * H * W));
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x)
        img[static_cast<std::size_t>((c * H + y) * W + x)] = 100.0f * c + 10.0f * y + x + 1;
  return img;
}

float pixel(const std::vector<float>& img, int H, int W, int c, int y, int x) {
  return img[static_cast<std::size_t>((c * H + y) * W + x)];
}

// Finds a sample index whose draw is `want` (searching the first indices).
std::int64_t index_with(const AugmentSpec& spec, std::uint64_t seed, std::int64_t epoch,
                        bool (*want)(const AugmentDraw&)) {
  for (std::int64_t i = 0; i < 10000; ++i)
    if (want(augment_draw(spec, seed, epoch, i))) return i;
  FAIL("no sample index with the wanted draw");
  return -1;
}

}  // namespace

TEST_CASE("data.augment parses none and comma lists, and rejects anything else", "[augment]") {
  CHECK_FALSE(parse_augment("none", 4).any());
  CHECK_FALSE(parse_augment("", 4).any());
  const AugmentSpec both = parse_augment("crop,flip", 2);
  CHECK(both.crop);
  CHECK(both.flip);
  CHECK(both.pad == 2);
  CHECK(parse_augment("flip", 4).flip);
  CHECK_FALSE(parse_augment("flip", 4).crop);
  const AugmentSpec affine = parse_augment("scale,rotate", 0, 0.2, 15.0);
  CHECK(affine.scale);
  CHECK(affine.rotate);
  CHECK_FALSE(affine.crop);
  CHECK(affine.max_scale == 0.2);
  CHECK(affine.max_degrees == 15.0);
  CHECK(affine.any());
  CHECK_THROWS_AS(parse_augment("crop,shear", 4), ConfigError);
  CHECK_THROWS_WITH(parse_augment("crop,shear", 4), Catch::Matchers::Contains("data.augment") &&
                                                        Catch::Matchers::Contains("crop,shear"));
}

TEST_CASE("augmenting non-image samples is a ConfigError", "[augment]") {
  CHECK_THROWS_AS(ImageAugmenter(parse_augment("flip", 4), 1, Shape{784}, {0.0f}), ConfigError);
  CHECK_THROWS_WITH(ImageAugmenter(parse_augment("flip", 4), 1, Shape{784}, {0.0f}),
                    Catch::Matchers::Contains("[C, H, W]"));
}

TEST_CASE("crop shifts the image and pads with the fill value", "[augment]") {
  const int C = 2, H = 5, W = 6, pad = 2;
  const AugmentSpec spec = parse_augment("crop", pad);
  const std::int64_t index =
      index_with(spec, 9, 0, [](const AugmentDraw& d) { return d.dy == 1 && d.dx == -2; });
  ImageAugmenter augmenter(spec, 9, Shape{C, H, W}, {-7.0f, -8.0f});
  const std::vector<float> original = ramp(C, H, W);
  std::vector<float> img = original;
  augmenter.apply(0, &index, 1, img.data());
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        const int sy = y + 1, sx = x - 2;
        const float want =
            (sy >= H || sx < 0) ? (c == 0 ? -7.0f : -8.0f) : pixel(original, H, W, c, sy, sx);
        CHECK(pixel(img, H, W, c, y, x) == want);
      }
}

TEST_CASE("flip mirrors each row, also after a shift", "[augment]") {
  const int C = 1, H = 4, W = 5;
  const AugmentSpec flip_only = parse_augment("flip", 0);
  const std::int64_t index =
      index_with(flip_only, 3, 2, [](const AugmentDraw& d) { return d.flip; });
  ImageAugmenter augmenter(flip_only, 3, Shape{C, H, W}, {0.0f});
  const std::vector<float> original = ramp(C, H, W);
  std::vector<float> img = original;
  augmenter.apply(2, &index, 1, img.data());
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x)
      CHECK(pixel(img, H, W, 0, y, x) == pixel(original, H, W, 0, y, W - 1 - x));

  const AugmentSpec both = parse_augment("crop,flip", 1);
  const std::int64_t shifted =
      index_with(both, 3, 0, [](const AugmentDraw& d) { return d.flip && d.dx == 1 && d.dy == 0; });
  ImageAugmenter crop_flip(both, 3, Shape{C, H, W}, {0.0f});
  img = original;
  crop_flip.apply(0, &shifted, 1, img.data());
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      const int sx = (W - 1 - x) + 1;  // mirrored column of the shifted image
      CHECK(pixel(img, H, W, 0, y, x) == (sx >= W ? 0.0f : pixel(original, H, W, 0, y, sx)));
    }
}

TEST_CASE("augmentation is a pure function of (seed, epoch, sample index)", "[augment]") {
  const int C = 1, H = 8, W = 8;
  const AugmentSpec spec = parse_augment("crop,flip", 2);
  ImageAugmenter a(spec, 11, Shape{C, H, W}, {0.0f}), b(spec, 11, Shape{C, H, W}, {0.0f});
  std::vector<std::int64_t> indices(64);
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<std::int64_t>(i * 37);
  auto run = [&](ImageAugmenter& aug, std::int64_t epoch) {
    std::vector<float> batch;
    for (std::size_t i = 0; i < indices.size(); ++i) {
      const std::vector<float> img = ramp(C, H, W);
      batch.insert(batch.end(), img.begin(), img.end());
    }
    aug.apply(epoch, indices.data(), static_cast<std::int64_t>(indices.size()), batch.data());
    return batch;
  };
  const std::vector<float> first = run(a, 0);
  CHECK(run(b, 0) == first);  // another augmenter, same draws
  CHECK(run(a, 0) == first);  // repeated: no hidden state
  CHECK(run(a, 1) != first);  // a new epoch, new draws
  // Draws cover the whole range, both flips, and are not all the same.
  int flips = 0, min_dx = 0, max_dx = 0;
  for (std::int64_t i = 0; i < 200; ++i) {
    const AugmentDraw d = augment_draw(spec, 11, 0, i);
    flips += d.flip;
    min_dx = std::min(min_dx, d.dx);
    max_dx = std::max(max_dx, d.dx);
  }
  CHECK(flips > 60);
  CHECK(flips < 140);
  CHECK(min_dx == -2);
  CHECK(max_dx == 2);
}

TEST_CASE("rotate and scale resample about the centre, bilinearly", "[augment]") {
  const int C = 2, H = 5, W = 5;
  const std::vector<float> original = ramp(C, H, W);
  ImageAugmenter augmenter(parse_augment("scale,rotate", 0), 1, Shape{C, H, W}, {-7.0f, -8.0f});

  // A quarter turn of a square image: output(y, x) = input(4 - x, y) (clockwise as displayed).
  AugmentDraw quarter;
  quarter.angle = static_cast<float>(3.14159265358979323846 / 2);
  std::vector<float> img = original;
  augmenter.apply_draw(quarter, img.data());
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x)
        CHECK(pixel(img, H, W, c, y, x) == Approx(pixel(original, H, W, c, 4 - x, y)).margin(1e-3));

  // Zoom by 2: the centre stays, its neighbours come from half a pixel away (the mean of two
  // pixels), and nothing is read from outside (no fill) when zooming in.
  AugmentDraw zoom;
  zoom.scale = 2.0f;
  img = original;
  augmenter.apply_draw(zoom, img.data());
  CHECK(pixel(img, H, W, 1, 2, 2) == pixel(original, H, W, 1, 2, 2));
  CHECK(pixel(img, H, W, 1, 2, 3) ==
        Approx(0.5f * (pixel(original, H, W, 1, 2, 2) + pixel(original, H, W, 1, 2, 3))));
  CHECK(pixel(img, H, W, 0, 0, 0) == Approx(pixel(original, H, W, 0, 1, 1)));
  CHECK(pixel(img, H, W, 0, 1, 1) ==
        Approx(0.25f * (pixel(original, H, W, 0, 1, 1) + pixel(original, H, W, 0, 1, 2) +
                        pixel(original, H, W, 0, 2, 1) + pixel(original, H, W, 0, 2, 2))));
  // Zoom out by 2: the corners sample outside the image and read the channel's fill.
  AugmentDraw shrink;
  shrink.scale = 0.5f;
  img = original;
  augmenter.apply_draw(shrink, img.data());
  CHECK(pixel(img, H, W, 0, 0, 0) == -7.0f);
  CHECK(pixel(img, H, W, 1, 4, 4) == -8.0f);
  CHECK(pixel(img, H, W, 1, 2, 2) == pixel(original, H, W, 1, 2, 2));
}

TEST_CASE("the resampling path composes shift and flip like the row-copy path", "[augment]") {
  const int C = 1, H = 6, W = 7;
  const std::vector<float> original = ramp(C, H, W);
  ImageAugmenter augmenter(parse_augment("crop,flip,rotate", 2), 1, Shape{C, H, W}, {-7.0f});
  for (const bool flip : {false, true})
    for (const int dy : {-2, 0, 1})
      for (const int dx : {-1, 0, 2}) {
        INFO("flip " << flip << ", dy " << dy << ", dx " << dx);
        AugmentDraw exact;
        exact.dy = dy;
        exact.dx = dx;
        exact.flip = flip;
        AugmentDraw resampled = exact;
        resampled.angle = 1e-7f;  // takes the bilinear path, a rotation of nothing
        std::vector<float> a = original, b = original;
        augmenter.apply_draw(exact, a.data());
        augmenter.apply_draw(resampled, b.data());
        for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == Approx(a[i]).margin(1e-3));
      }
}

TEST_CASE("scale and rotate draws cover their ranges and leave crop and flip as they were",
          "[augment]") {
  const AugmentSpec crop_flip = parse_augment("crop,flip", 2);
  const AugmentSpec all = parse_augment("crop,flip,scale,rotate", 2, 0.2, 15.0);
  float min_scale = 2, max_scale = 0, min_angle = 1, max_angle = -1;
  for (std::int64_t i = 0; i < 500; ++i) {
    const AugmentDraw before = augment_draw(crop_flip, 5, 3, i);
    const AugmentDraw d = augment_draw(all, 5, 3, i);
    CHECK(d.dy == before.dy);
    CHECK(d.dx == before.dx);
    CHECK(d.flip == before.flip);
    CHECK_FALSE(before.affine());
    min_scale = std::min(min_scale, d.scale);
    max_scale = std::max(max_scale, d.scale);
    min_angle = std::min(min_angle, d.angle);
    max_angle = std::max(max_angle, d.angle);
  }
  const float degree = static_cast<float>(3.14159265358979323846 / 180);
  CHECK(min_scale >= 0.8f);
  CHECK(min_scale < 0.82f);
  CHECK(max_scale <= 1.2f);
  CHECK(max_scale > 1.18f);
  CHECK(min_angle >= -15 * degree);
  CHECK(min_angle < -14 * degree);
  CHECK(max_angle <= 15 * degree);
  CHECK(max_angle > 14 * degree);
}
