// BLAS-1 style operations on flat buffers (gradients, parameters, activations).
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

}  // namespace trellis::kernels
