// Batch normalisation kernels over image rows: x [n, C*plane], plane = H*W, in NCHW or a
// channel-blocked layout (kernels/channel_layout.hpp: `layout` is the plane and the block; a
// plain plane means NCHW); statistics per channel c over all (i, p) of the call.
//
// The layer (nn/batchnorm.hpp) strings them together:
//   forward (training):  batchnorm_sums(x) -> [all-reduce over ranks] -> batchnorm_batch_stats
//                        -> batchnorm_normalize
//   forward (eval):      batchnorm_running_stats -> batchnorm_normalize
//   backward:            batchnorm_backward_sums -> batchnorm_param_grads (local sums)
//                        -> [all-reduce] -> batchnorm_backward_input
// Sums and statistics are double ([2C] buffers: first C entries one quantity, next C the
// other). Each channel is reduced in a fixed order, so results are bitwise reproducible: on a
// device by one thread in (i, p) order; on the host NCHW image by image, each contiguous plane
// in 8 interleaved double lanes (vectorised) and the plane sums in image order; on the host
// blocked, a block's B channels side by side in vector lanes, pixels in 2 interleaved partial
// sums. The two layouts' sums differ by rounding only. Elementwise passes run over every
// element, one (image, channel block) plane per work item.
//
// A ReLU after the norm (nn::BatchNorm2d with relu_after) runs inside it: normalize writes
// max(y, 0), and the backward kernels, given that output as relu_output, take dy * [y > 0] for
// dy, the values relu_backward would have written; so the results are those of the two
// layers apart, bit for bit, without the ReLU's passes and buffers.
#pragma once

#include "trellis/kernels/channel_layout.hpp"
#include "trellis/kernels/views.hpp"

namespace trellis::kernels {

using DoubleVector = Kokkos::View<double*, MemSpace, Unmanaged>;
using ConstDoubleVector = Kokkos::View<const double*, MemSpace, Unmanaged>;

// sums[c] = sum x[i, c, p],  sums[C + c] = sum x[i, c, p]^2.   sums: [>= 2C] (written)
void batchnorm_sums(ConstMatrix x, ChannelLayout layout, DoubleVector sums);

// From sums over `count` values per channel (count >= 2):
//   mean = sums[c] / count,  var = sums[C + c] / count - mean^2 (biased, clamped at 0)
//   stats[c] = mean,  stats[C + c] = 1 / sqrt(var + eps)
//   running[c]     = (1 - momentum) running[c]     + momentum mean
//   running[C + c] = (1 - momentum) running[C + c] + momentum var * count / (count - 1)
// stats: [>= 2C], running: [2C] (mean, then var; PyTorch's unbiased running variance).
void batchnorm_batch_stats(ConstDoubleVector sums, double count, float eps, float momentum,
                           DoubleVector stats, Vector running);

// Eval mode: stats[c] = running[c], stats[C + c] = 1 / sqrt(running[C + c] + eps).
void batchnorm_running_stats(ConstVector running, float eps, DoubleVector stats);

// y = (x - mean) * invstd * gamma + beta, per channel.   gamma, beta: [C]   y: [n, C*plane]
// relu: y = max(that, 0) (NaN -> 0, as relu_forward).
void batchnorm_normalize(ConstMatrix x, ChannelLayout layout, ConstDoubleVector stats,
                         ConstVector gamma, ConstVector beta, Matrix y, bool relu = false);

// With xhat = (x - mean) * invstd:
//   sums[c] = sum dy[i, c, p],  sums[C + c] = sum dy[i, c, p] * xhat[i, c, p].   (written)
// relu_output: [n, C*plane], a normalize's output with relu (empty: no ReLU); dy is then the
// ReLU's output gradient and dy * [relu_output > 0] is used in its place.
void batchnorm_backward_sums(ConstMatrix x, ConstMatrix dy, ChannelLayout layout,
                             ConstDoubleVector stats, DoubleVector sums,
                             ConstMatrix relu_output = {});

// dbeta[c] += sums[c],  dgamma[c] += sums[C + c]   (parameter gradients accumulate)
void batchnorm_param_grads(ConstDoubleVector sums, Vector dgamma, Vector dbeta);

// Input gradient (=):
//   training (batch statistics over `count` values per channel, sums over the same values):
//     dx = gamma * invstd * (dy - sums[c] / count - xhat * sums[C + c] / count)
//   eval (fixed running statistics): dx = gamma * invstd * dy   (sums, count unused)
// relu_output: as in batchnorm_backward_sums.
void batchnorm_backward_input(ConstMatrix x, ConstMatrix dy, ChannelLayout layout,
                              ConstDoubleVector stats, ConstVector gamma, ConstDoubleVector sums,
                              double count, bool training, Matrix dx, ConstMatrix relu_output = {});

}  // namespace trellis::kernels
