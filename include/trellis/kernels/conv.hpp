// 2-D convolution building blocks on NCHW images stored as rows: image i of a batch is row i of
// a row-major [n, C*H*W] matrix, element (c, h, w) at column (c*H + h)*W + w.
//
// Geometry (square kernel k, stride s, zero padding p, PyTorch's convention):
//   H' = (H + 2p - k) / s + 1,   W' = (W + 2p - k) / s + 1
// im2col unrolls one image into cols [C*k*k, H'*W'] with
//   cols[(c*k + kh)*k + kw, oh*W' + ow] = x[c, oh*s - p + kh, ow*s - p + kw]   (0 outside)
// so that a convolution is one GEMM per image: y[C', H'*W'] = W[C', C*k*k] cols.
// col2im is its adjoint: dx[c, h, w] = sum of the dcols entries im2col read x[c, h, w] into.
// One work item owns one input row dx[j, c, h, :] and adds into it in a fixed order (no
// atomics), so it is deterministic on any backend. im2col's work item is one output row
// segment cols[r, oh*W' .. oh*W' + W'); neither divides integers in its inner loop.
#pragma once

#include "trellis/kernels/channel_layout.hpp"
#include "trellis/kernels/views.hpp"

#include <cstdint>
#include <string>

namespace trellis::kernels {

struct ConvGeometry {
  int channels = 0, height = 0, width = 0;  // input image [C, H, W]
  int kernel = 1, stride = 1, padding = 0;

  KOKKOS_INLINE_FUNCTION int out_height() const {
    return (height + 2 * padding - kernel) / stride + 1;
  }
  KOKKOS_INLINE_FUNCTION int out_width() const {
    return (width + 2 * padding - kernel) / stride + 1;
  }
  std::int64_t image_size() const {  // C*H*W
    return static_cast<std::int64_t>(channels) * height * width;
  }
  std::int64_t col_rows() const {  // C*k*k
    return static_cast<std::int64_t>(channels) * kernel * kernel;
  }
  std::int64_t col_cols() const {  // H'*W'
    return static_cast<std::int64_t>(out_height()) * out_width();
  }
  // im2col is the identity (1x1, stride 1, no padding): the image itself is its cols.
  bool is_pointwise() const { return kernel == 1 && stride == 1 && padding == 0; }
  // Throws trellis::Error naming `what` unless all sizes are positive, padding >= 0 and the
  // kernel fits the padded image.
  void validate(const std::string& what) const;
  std::string describe() const;  // "[3, 28, 28] k3 s1 p1 -> [*, 28, 28]"
};

// cols (=) for `count` consecutive images.
//   images: [>= count, C*H*W] (rows [0, count) used)   cols: [count * C*k*k, H'*W']
// Image j's cols are rows [j*C*k*k, (j+1)*C*k*k) of cols.
void im2col(ConstMatrix images, int count, const ConvGeometry& g, Matrix cols);

// dimages (=) from the cols gradients of `count` images (the adjoint of im2col).
//   cols: [count * C*k*k, H'*W']   dimages: [>= count, C*H*W] (rows [0, count) written)
void col2im(ConstMatrix cols, int count, const ConvGeometry& g, Matrix dimages);

// Per-channel bias of image rows (NCHW or channel-blocked, kernels/channel_layout.hpp):
// y[i, c, p] += bias[c].   y: [n, C*plane]   bias: [C]
void channel_bias_add(Matrix y, ConstVector bias, ChannelLayout layout);

// grad[c] += sum over i, p of dy[i, c, p].   dy: [n, C*plane] in `layout`   grad: [C]
// One thread per channel sums in (i, p) order: bitwise reproducible, the same in every layout.
void channel_sum_accumulate(ConstMatrix dy, Vector grad, ChannelLayout layout);

}  // namespace trellis::kernels
