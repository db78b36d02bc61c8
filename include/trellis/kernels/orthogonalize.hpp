// Orthonormal columns for PowerSGD's low-rank factor P [n, r] (r small): modified Gram-Schmidt,
// column by column with reorthogonalisation (each projection done twice), dot products
// accumulated in double, each column divided by (norm + 1e-8)
// as PyTorch's powerSGD_hook does. A column that keeps less than 1e-3 of its norm after the
// projections (dependent on the earlier ones: P of rank below r) is set to zero instead, where
// PyTorch would normalise its rounding noise into a meaningless direction.
#pragma once

#include "trellis/kernels/views.hpp"

namespace trellis::kernels {

// p [n, r] row-major: its columns made orthonormal in place, or zero where dependent.
void orthonormalize_columns(Matrix p);

}  // namespace trellis::kernels
