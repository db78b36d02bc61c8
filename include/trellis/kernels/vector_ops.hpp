// BLAS-1 style operations on flat buffers (gradients, parameters, activations).
//
// Loop order: one flat index, contiguous; the host bodies are plain __restrict loops that GCC
// vectorises (core/host_simd.hpp), a device gives consecutive threads consecutive
// elements (coalesced).
#pragma once

#include "trellis/kernels/views.hpp"

namespace trellis::kernels {

// x[i] = value
void fill(Vector x, float value);
// x[i] *= alpha; alpha == 0 writes exact zeros (NaN/Inf in x do not survive, like BLAS beta = 0).
void scale(Vector x, float alpha);
// y[i] += alpha * x[i]; x and y: same length.
void axpy(float alpha, ConstVector x, Vector y);
// y = x; same length.
void copy(ConstVector x, Vector y);
// out[i] = a[i] + b[i] in one pass (a residual add: no copy-then-axpy); same lengths. out may
// be a or b.
void add(ConstVector a, ConstVector b, Vector out);

}  // namespace trellis::kernels
