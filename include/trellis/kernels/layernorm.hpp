// Layer normalisation over the last dimension of a row-major matrix, forward and backward
// (Ba et al. 2016; PyTorch nn.LayerNorm(d, eps) with its elementwise affine).
//
//   x, y, dy, dx: [n, d]     gamma, beta, dgamma, dbeta: [d]     mean, rstd: [>= n]
// forward:   mean_r = sum_j x_rj / d
//            var_r  = sum_j (x_rj - mean_r)^2 / d        (biased, as PyTorch; two passes, so
//                                                          no E[x^2] - E[x]^2 cancellation)
//            rstd_r = 1 / sqrt(var_r + eps)
//            xhat_rj = (x_rj - mean_r) rstd_r,   y_rj = xhat_rj gamma_j + beta_j
// backward:  g_rj = dy_rj gamma_j
//            dx_rj = rstd_r (g_rj - mean_k g_rk - xhat_rj mean_k (g_rk xhat_rk))   written (=)
//            dgamma_j += sum_r dy_rj xhat_rj,   dbeta_j += sum_r dy_rj          accumulated (+=)
// Loop order. Host: rows outer; each row's sums run over the contiguous row in 16 interleaved
// partial sums (vectorised; core/host_simd.hpp lane_sum), and the parameter gradients
// stream the rows through a tile of per-column partial sums (no strided column walk). Device:
// one thread per row for the row kernels, one thread per column for the parameter gradients
// (a warp reads consecutive columns of a row). Both are deterministic; the parameter gradients
// are summed in row order on both.
#pragma once

#include "trellis/kernels/int8.hpp"
#include "trellis/kernels/views.hpp"

namespace trellis::kernels {

// Writes y and the per-row statistics mean[0, n), rstd[0, n) that backward needs.
void layernorm_forward(ConstMatrix x, ConstVector gamma, ConstVector beta, float eps, Matrix y,
                       Vector mean, Vector rstd);

// Int8 inference: the forward's y quantized with q (kernels::quantize's rounding) into
// out [>= rows * d] bytes, the next int8 Linear's input; y and the statistics not written.
void layernorm_forward_quantized(ConstMatrix x, ConstVector gamma, ConstVector beta, float eps,
                                 const ActivationQuant& q, ByteView out);

// x, mean, rstd as the forward saw/wrote them. dx written; dgamma, dbeta accumulated.
void layernorm_backward(ConstMatrix x, ConstMatrix dy, ConstVector gamma, ConstVector mean,
                        ConstVector rstd, Matrix dx, Vector dgamma, Vector dbeta);

}  // namespace trellis::kernels
