// NCHW <-> channel-blocked rows (kernels/channel_layout.hpp) on the host, for tests that run a
// layer or kernel in both layouts and compare.
#pragma once

#include <cstddef>
#include <vector>

namespace trellis::test {

// x: n images of C channels of `plane` pixels, NCHW -> nChw{B}c (C a multiple of B).
inline std::vector<float> to_blocked(const std::vector<float>& x, int n, int channels, int plane,
                                     int block) {
  std::vector<float> out(x.size());
  const int blocks = channels / block;
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < channels; ++c)
      for (int p = 0; p < plane; ++p) {
        const std::size_t blocked =
            ((static_cast<std::size_t>(i) * blocks + c / block) * plane + p) * block + c % block;
        out[blocked] = x[(static_cast<std::size_t>(i) * channels + c) * plane + p];
      }
  return out;
}

// The inverse: nChw{B}c -> NCHW.
inline std::vector<float> from_blocked(const std::vector<float>& x, int n, int channels, int plane,
                                       int block) {
  std::vector<float> out(x.size());
  const int blocks = channels / block;
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < channels; ++c)
      for (int p = 0; p < plane; ++p) {
        const std::size_t blocked =
            ((static_cast<std::size_t>(i) * blocks + c / block) * plane + p) * block + c % block;
        out[(static_cast<std::size_t>(i) * channels + c) * plane + p] = x[blocked];
      }
  return out;
}

}  // namespace trellis::test
