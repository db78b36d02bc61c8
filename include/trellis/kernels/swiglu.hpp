// SwiGLU, the gated activation of Llama's MLP (Shazeer 2020): h = silu(gate) * up, with gate and
// up the two column blocks of one fused projection (c_fc = [gate_proj; up_proj]).
//
//   gate_up [n, 2f]: gate = columns [0, f), up = columns [f, 2f)   (under tensor parallelism
//                    this rank's f/tp columns of each: c_fc split in two sections)
//   h       [n, f]   h = silu(gate) * up,  silu(x) = x sigmoid(x)
// backward:  dgate = dh * up * silu'(gate),  silu'(x) = s (1 + x (1 - s)), s = sigmoid(x)
//            dup   = dh * silu(gate)                              dgate_up [n, 2f] written
// sigmoid(x) = 1 / (1 + exp(-x)) with math::fast_exp (vectorises on the host, relative error
// < 3e-7; it clamps its argument to [-87.3, 88.3], so s stays in [5e-39, 1] and never divides
// inf by inf).
#pragma once

#include "trellis/core/precision.hpp"
#include "trellis/kernels/precision_cast.hpp"
#include "trellis/kernels/views.hpp"

#include <cstddef>

namespace trellis::kernels {

void swiglu_forward(ConstMatrix gate_up, Matrix h);
void swiglu_backward(ConstMatrix gate_up, ConstMatrix dh, Matrix dgate_up);

// The same with gate_up and h stored in 16 bits of format p (mixed precision's native kernels,
// nn/transformer.hpp): gate_up16 [rows * 2f] and h16 [rows * f] words, row-major; fp32
// arithmetic, h16 = round(h). dh and dgate_up stay fp32.
void swiglu_forward_half(Precision p, ConstHalfVector gate_up16, std::size_t rows, HalfVector h16);
void swiglu_backward_half(Precision p, ConstHalfVector gate_up16, ConstMatrix dh, Matrix dgate_up);

}  // namespace trellis::kernels
