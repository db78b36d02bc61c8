#include "trellis/kernels/gemm.hpp"

#include "trellis/core/code_path.hpp"
#include "trellis/core/error.hpp"
#include "trellis/kernels/vector_ops.hpp"
#include "trellis/kernels/views.hpp"

#include <KokkosBlas3_gemm.hpp>

#if TRELLIS_HAVE_ONEDNN
#include <dnnl.h>
#endif

#include <string>
#include <type_traits>

#ifndef TRELLIS_HOST_BLAS
#define TRELLIS_HOST_BLAS 0
#endif
// The Fortran BLAS entry point that every BLAS (OpenBLAS, MKL, BLIS, vendor) provides and that
// KokkosKernels' host TPL layer calls itself.
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c, const int* ldc);

namespace trellis::kernels {

namespace {

#if TRELLIS_HAVE_ONEDNN
// oneDNN's sgemm: row-major like ours, and JIT-compiled for the host's instruction set at run
// time (AVX-512 where present). Debian's OpenBLAS picks its kernels by CPU model and falls back
// to its generic SSE3 ("Prescott") kernels on CPU models it does not know, which includes the
// virtualised Xeons of cloud HPC nodes: measured 6x slower there (tools/bench/NOTES.md).
void host_gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
               int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha,
                                          a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) {
    throw Error("dnnl_sgemm failed with status " + std::to_string(static_cast<int>(status)) +
                " for m = " + std::to_string(m) + ", n = " + std::to_string(n) +
                ", k = " + std::to_string(k));
  }
}
#elif !TRELLIS_HOST_BLAS
// CUDA builds link no host BLAS: their GEMMs run on the device (kHostKernels is false).
void host_gemm(bool, bool, int, int, int, float, const float*, int, const float*, int, float,
               float*, int) {
  throw Error("gemm: this build has no host BLAS (CUDA builds run GEMMs on the device)");
}
#else
// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the same buffers with the
// operands swapped, so no transposed copies are made.
void host_gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
               int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  const char op_b = trans_b ? 'T' : 'N', op_a = trans_a ? 'T' : 'N';
  sgemm_(&op_b, &op_a, &n, &m, &k, &alpha, b, &ldb, a, &lda, &beta, c, &ldc);
}
#endif

}  // namespace

void gemm(bool trans_a, bool trans_b, float alpha, ConstMatrix a, ConstMatrix b, float beta,
          Matrix c) {
  const std::size_t m = trans_a ? a.extent(1) : a.extent(0);
  const std::size_t k = trans_a ? a.extent(0) : a.extent(1);
  const std::size_t k_b = trans_b ? b.extent(1) : b.extent(0);
  const std::size_t n = trans_b ? b.extent(0) : b.extent(1);
  if (k != k_b || m != c.extent(0) || n != c.extent(1)) {
    throw Error(std::string("gemm: shapes do not fit: op(A) = ") + (trans_a ? "A^T" : "A") +
                " with A " + extents_string(a) + ", op(B) = " + (trans_b ? "B^T" : "B") +
                " with B " + extents_string(b) + ", C " + extents_string(c) +
                "; need op(A) [m, k], op(B) [k, n], C [m, n]");
  }
  if (m == 0 || n == 0) return;
  if (k == 0) {  // empty sum: KokkosBlas returns early here without applying beta
    scale(flat(c), beta);
    return;
  }
  if constexpr (kHostKernels) {
    // Host memory: call oneDNN's or the BLAS's sgemm directly. KokkosBlas::gemm would reach the
    // same sgemm_, but its TPL layer (Kokkos Kernels 3.x) builds a std::string profiling-region
    // name on every call, and the training step must not allocate.
    const auto dim = [](std::size_t v) { return static_cast<int>(v); };
    host_gemm(trans_a, trans_b, dim(m), dim(n), dim(k), alpha, a.data(), dim(a.extent(1)), b.data(),
              dim(b.extent(1)), beta, c.data(), dim(c.extent(1)));
  } else {
    // Device memory (and the portable build): KokkosBlas dispatches to the vendor library
    // (cuBLAS TPL on CUDA builds; the BLAS TPL or Kokkos Kernels' own GEMM on the host).
    KokkosBlas::gemm(trans_a ? "T" : "N", trans_b ? "T" : "N", alpha, a, b, beta, c);
  }
}

}  // namespace trellis::kernels
