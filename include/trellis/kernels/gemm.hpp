// GEMM on row-major matrices, dispatched through KokkosBlas::gemm to the vendor BLAS
// (OpenBLAS/MKL on the host TPL, cuBLAS on CUDA builds with the cuBLAS TPL).
#pragma once

#include "trellis/core/kokkos_types.hpp"

namespace trellis::kernels {

// C = alpha * op(A) * op(B) + beta * C, all row-major (LayoutRight), where op(X) is X or X^T.
//   op(A): [m, k]   op(B): [k, n]   C: [m, n]
// Throws trellis::Error naming all three shapes when they do not fit. With beta == 0, C is
// overwritten without being read (BLAS semantics: NaNs already in C do not propagate).
// k == 0 is allowed and gives C = beta * C (KokkosBlas itself would leave C untouched).
void gemm(bool trans_a, bool trans_b, float alpha, ConstMatrix a, ConstMatrix b, float beta,
          Matrix c);

}  // namespace trellis::kernels
