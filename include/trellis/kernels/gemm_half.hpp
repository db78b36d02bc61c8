// GEMM on 16-bit operands with fp32 accumulation and an fp32 result, for mixed precision's
// native kernels (nn/autocast.hpp):
//   host   oneDNN's matmul primitive (bf16 x bf16 -> f32: AMX tiles where the CPU has them,
//          AVX512-BF16 VDPBF16PS otherwise), one primitive per shape, created at first use
//   CUDA   cublasGemmEx with CUDA_R_16BF / CUDA_R_16F inputs, CUDA_R_32F output and
//          CUBLAS_COMPUTE_32F (Kokkos Kernels sends no 16-bit GEMM to cuBLAS)
// A GemmOperand names either kind of buffer, so a layer calls one gemm() whatever its
// operands are; fp32 operands go to kernels::gemm.
#pragma once

#include "trellis/core/precision.hpp"
#include "trellis/kernels/views.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace trellis::kernels {

// A row-major [rows, cols] matrix: fp32 (f32 set) or 16-bit words of `format` (h16 set).
struct GemmOperand {
  const float* f32 = nullptr;
  const std::uint16_t* h16 = nullptr;
  Precision format = Precision::fp32;
  std::size_t rows = 0, cols = 0;

  static GemmOperand of(const ConstMatrix& m) {
    GemmOperand o;
    o.f32 = m.data();
    o.rows = m.extent(0), o.cols = m.extent(1);
    return o;
  }
  static GemmOperand half(const std::uint16_t* data, Precision format, std::size_t rows,
                          std::size_t cols) {
    GemmOperand o;
    o.h16 = data;
    o.format = format;
    o.rows = rows, o.cols = cols;
    return o;
  }
  bool is_half() const { return h16 != nullptr; }
  // The first n rows.
  GemmOperand first_rows(std::size_t n) const {
    GemmOperand o = *this;
    o.rows = n;
    return o;
  }
};

// C = op(A) op(B) + beta C (alpha 1), shapes as kernels::gemm. Both operands fp32: that gemm;
// both 16-bit of one format: the native kernel above (Error where the build has none, see
// native_gemm_available). Anything else throws Error naming the shapes and kinds.
void gemm(bool trans_a, bool trans_b, const GemmOperand& a, const GemmOperand& b, float beta,
          Matrix c);

// Whether this build, on this machine, has a native 16-bit GEMM for `format`: CUDA builds for
// bf16 and fp16; host builds with oneDNN for bf16 where oneDNN has a bf16 matmul for the CPU
// (asked of oneDNN at run time: it needs AVX-512; oneDNN 2.x has no f16 matmul on CPUs).
bool native_gemm_available(Precision format);
// Why not, in a phrase for messages ("" when it is available).
std::string native_gemm_unavailable_reason(Precision format);

}  // namespace trellis::kernels
