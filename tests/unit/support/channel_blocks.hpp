// NCHW <-> channel-blocked rows (kernels/channel_layout.hpp) on the host, for tests that run a
// layer or kernel in both layouts and compare.
#pragma once

#include <cstddef>
#include <vector>

namespace trellis::test {

namespace detail {

// Copies n images of C channels of `plane` pixels between NCHW and nChw{B}c (C a multiple of
// B), either way.
inline std::vector<float> reblock(const std::vector<float>& x, int n, int channels, int plane,
                                  int block, bool to_blocked) {
  std::vector<float> out(x.size());
  const int blocks = channels / block;
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < channels; ++c)
      for (int p = 0; p < plane; ++p) {
        const std::size_t blocked =
            ((static_cast<std::size_t>(i) * blocks + c / block) * plane + p) * block + c % block;
        const std::size_t nchw = (static_cast<std::size_t>(i) * channels + c) * plane + p;
        if (to_blocked) {
          out[blocked] = x[nchw];
        } else {
          out[nchw] = x[blocked];
        }
      }
  return out;
}

}  // namespace detail

inline std::vector<float> to_blocked(const std::vector<float>& x, int n, int channels, int plane,
                                     int block) {
  return detail::reblock(x, n, channels, plane, block, true);
}

inline std::vector<float> from_blocked(const std::vector<float>& x, int n, int channels,
                                       int plane, int block) {
  return detail::reblock(x, n, channels, plane, block, false);
}

}  // namespace trellis::test
