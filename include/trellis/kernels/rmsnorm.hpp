// Root-mean-square layer normalisation over the last dimension of a row-major matrix, forward
// and backward (Zhang & Sennrich 2019; Llama's RMSNorm, Hugging Face's LlamaRMSNorm):
// LayerNorm without the centring and without the bias.
//
//   x, y, dy, dx: [n, d]     gamma, dgamma: [d]     rstd: [>= n]
// forward:   rstd_r = 1 / sqrt(sum_j x_rj^2 / d + eps)
//            xhat_rj = x_rj rstd_r,   y_rj = xhat_rj gamma_j
// backward:  g_rj = dy_rj gamma_j
//            dx_rj = rstd_r (g_rj - xhat_rj mean_k (g_rk xhat_rk))          written (=)
//            dgamma_j += sum_r dy_rj xhat_rj                                  accumulated (+=)
// Loop order and determinism as kernels/layernorm.hpp: host rows outer with 16-lane row sums
// and tiled column sums in row order; device one thread per row, then one per column.
#pragma once

#include "trellis/kernels/int8.hpp"
#include "trellis/kernels/views.hpp"

namespace trellis::kernels {

// Writes y and rstd[0, n) that backward needs.
void rmsnorm_forward(ConstMatrix x, ConstVector gamma, float eps, Matrix y, Vector rstd);

// Int8 inference: y quantized with q into out [>= rows * d] bytes (as
// layernorm_forward_quantized); y and rstd not written.
void rmsnorm_forward_quantized(ConstMatrix x, ConstVector gamma, float eps,
                               const ActivationQuant& q, ByteView out);

// x and rstd as the forward saw/wrote them. dx written; dgamma accumulated.
void rmsnorm_backward(ConstMatrix x, ConstMatrix dy, ConstVector gamma, ConstVector rstd, Matrix dx,
                      Vector dgamma);

}  // namespace trellis::kernels
