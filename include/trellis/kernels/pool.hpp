// Pooling kernels on NCHW images stored as rows ([n, C*H*W], see kernels/conv.hpp).
//
// Max pooling, square window k, stride s, no padding (PyTorch MaxPool2d(k, s)):
//   H' = (H - k) / s + 1,  W' = (W - k) / s + 1
//   y[i, c, oh, ow] = max over the window at (oh*s, ow*s); argmax[i, c, oh, ow] = h*W + w of the
//   first maximum in row-major window order (ties -> first, NaN wins, as PyTorch's CPU kernel).
//   backward: dx[i, c, h, w] = sum of dy over the windows whose argmax is (h, w) (=), gathered
//   per input element, so overlapping windows (s < k) need no atomics.
// Global average pooling: y[i, c] = mean over the plane of x[i, c, :, :];
//   backward: dx[i, c, h, w] = dy[i, c] / (H*W) (=).
#pragma once

#include "trellis/kernels/channel_layout.hpp"
#include "trellis/kernels/views.hpp"

#include <cstdint>

namespace trellis::kernels {

using IntVector = Kokkos::View<std::int32_t*, MemSpace, Unmanaged>;
using ConstIntVector = Kokkos::View<const std::int32_t*, MemSpace, Unmanaged>;

struct PoolGeometry {
  int channels = 0, height = 0, width = 0;  // input [C, H, W]
  int kernel = 2, stride = 2;

  KOKKOS_INLINE_FUNCTION int out_height() const { return (height - kernel) / stride + 1; }
  KOKKOS_INLINE_FUNCTION int out_width() const { return (width - kernel) / stride + 1; }
};

// x: [n, C*H*W]   y: [n, C*H'*W']   argmax: [>= n*C*H'*W'] (written)
void maxpool_forward(ConstMatrix x, const PoolGeometry& g, Matrix y, IntVector argmax);
// dy: [n, C*H'*W']   argmax from the forward   dx: [n, C*H*W] (=)
void maxpool_backward(ConstMatrix dy, ConstIntVector argmax, const PoolGeometry& g, Matrix dx);

// x: [n, C*plane] in NCHW or channel-blocked (kernels/channel_layout.hpp)   y: [n, C]
// Each mean sums its pixels in order, so both layouts give the same bits.
void global_avgpool_forward(ConstMatrix x, ChannelLayout layout, Matrix y);
// The same over channels-last (NHWC) rows, x [n, H*W*C]: y[i, c] = mean_p x[i, p * C + c]
// (the int8 CNN's activations, int8/classifiers.hpp).
void global_avgpool_forward_channels_last(ConstMatrix x, int plane, Matrix y);
// dy: [n, C]   dx: [n, C*plane] (=), in `layout`
void global_avgpool_backward(ConstMatrix dy, ChannelLayout layout, Matrix dx);

}  // namespace trellis::kernels
