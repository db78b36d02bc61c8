#include "trellis/kernels/gemm.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/vector_ops.hpp"
#include "trellis/kernels/views.hpp"

#include <KokkosBlas3_gemm.hpp>

#include <string>

namespace trellis::kernels {

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
  // LayoutRight views go straight to the TPL, which calls the column-major BLAS as
  // C^T = op(B)^T op(A)^T: no transposed copies.
  KokkosBlas::gemm(trans_a ? "T" : "N", trans_b ? "T" : "N", alpha, a, b, beta, c);
}

}  // namespace trellis::kernels
