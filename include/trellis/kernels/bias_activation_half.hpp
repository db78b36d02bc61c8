// The fused epilogue of a Linear whose output is stored in 16 bits (mixed precision with
// native kernels, nn/linear.hpp: Linear::Buffers::half_output), format p = bf16 | fp16. As
// under PyTorch's autocast, the Linear's output z is a 16-bit tensor and the activation reads
// and writes 16 bits, with fp32 arithmetic in between:
//
//   forward    s = round(z + b)                 z: [n, cols] the fp32 GEMM output
//              z16 = s         (only where f keeps its pre-activation: gelu, gelu_tanh)
//              y16 = round(f(s))
//   recompute  y16 = round(f(z16))              bit for bit what forward wrote
//   backward   dz = dy * f'(saved16) in fp32    saved16: z16, or y16 for relu and none
//              grad += colsum(dz)               (fp32, rows in order as column_sum_accumulate)
//              dz16 = round(dz)                 the weight and input gradient GEMMs' operand
//
// 16-bit buffers are flat [n * cols] words, row-major like the matrices. Round to nearest even.
#pragma once

#include "trellis/core/precision.hpp"
#include "trellis/kernels/bias.hpp"
#include "trellis/kernels/precision_cast.hpp"
#include "trellis/kernels/views.hpp"

namespace trellis::kernels {

// z16 is read only where keeps_pre_activation(f) (may be empty otherwise).
void bias_activation_forward_half(Precision p, ConstMatrix z, ConstVector bias, Activation f,
                                  HalfVector z16, HalfVector y16);
// f keeps its pre-activation; z16, y16: [n * cols].
void activation_forward_half(Precision p, ConstHalfVector z16, Activation f, HalfVector y16);
// f none: dz = dy (saved16 not read, may be empty).
void bias_activation_backward_half(Precision p, ConstHalfVector saved16, ConstMatrix dy,
                                   Activation f, HalfVector dz16, Vector grad);

}  // namespace trellis::kernels
