// How the rows of an image layer hold C channels of `plane` = H*W pixels.
//
//   block 1 (NCHW):              x[i, c * plane + p]
//   block B (oneDNN's nChw{B}c): x[i, ((c / B) * plane + p) * B + c % B]     (C a multiple of B)
//
// Both hold C*plane floats per image, so a row is a row whatever its layout: only the layers
// that index channels (convolution, BatchNorm, pooling, a convolution's bias) need to know it;
// element-wise ones (ReLU, the residual add, autocast's rounding) do not. oneDNN's direct
// convolutions run on the blocked layout (B = 8 with AVX2, 16 with AVX-512: one vector of
// channels per pixel), so a CNN whose activations stay blocked between its convolutions needs
// no reorder around them (nn/cnn.hpp, kernels/conv_onednn.hpp).
#pragma once

#include "trellis/core/error.hpp"

#include <string>

namespace trellis::kernels {

struct ChannelLayout {
  int plane = 0;  // H*W
  int block = 1;  // channels per group: 1 = NCHW

  // Implicit from a plane: every caller that passes H*W alone means NCHW.
  ChannelLayout(int plane_pixels, int channel_block = 1)  // NOLINT(google-explicit-constructor)
      : plane(plane_pixels), block(channel_block) {}

  bool blocked() const { return block > 1; }
  // Throws naming `what` unless plane and block are positive and block divides `channels`.
  void require_fits(long long channels, const char* what) const {
    if (plane <= 0 || block <= 0 || channels % block != 0) {
      throw Error(std::string(what) + ": " + std::to_string(channels) + " channels of " +
                  std::to_string(plane) + " pixels in blocks of " + std::to_string(block) +
                  " (need a positive plane and block, and channels a multiple of the block)");
    }
  }
};

// The block a tensor of `channels` gets when `preferred` is what the convolutions want:
// preferred where it divides channels, NCHW (1) otherwise.
inline int channel_block_for(int channels, int preferred) {
  return preferred > 1 && channels % preferred == 0 ? preferred : 1;
}

}  // namespace trellis::kernels
