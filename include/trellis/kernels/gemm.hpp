// GEMM on row-major matrices, on the vendor BLAS: host memory calls the BLAS that
// KokkosKernels' TPL is built against (OpenBLAS, MKL, ...) directly, without per-call
// allocation; device memory goes through KokkosBlas::gemm (cuBLAS TPL on CUDA builds).
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
