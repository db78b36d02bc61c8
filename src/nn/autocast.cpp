#include "trellis/nn/autocast.hpp"

#include "trellis/core/cpu_features.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/kernels/bf16_speed_probe.hpp"
#include "trellis/kernels/precision_cast.hpp"

namespace trellis::nn {

Autocast resolve_autocast(Precision mode, const std::string& kernels, std::string& notice,
                          const AgreeOnMinimum& agree) {
  Autocast autocast;
  autocast.mode = mode;
  notice.clear();
  if (mode == Precision::fp32) return autocast;
  const std::string name = precision_name(mode);
  const bool available = kernels::native_gemm_available(mode);
  if (kernels == "native" && !available)
    throw ConfigError("precision.kernels = native: " +
                      kernels::native_gemm_unavailable_reason(mode) + "; use emulated or auto");
  // Hosts: measured (0 where there is no native GEMM), the same choice on every rank.
  double speedup = 0;
  if (kHostKernels && kernels == "auto" && mode == Precision::bf16) {
    speedup = kernels::measured_bf16_gemm_speedup();
    if (agree) speedup = agree(speedup);
  }
  const bool pays = kHostKernels ? speedup >= kernels::kNativeBf16MinSpeedup : true;
  autocast.native = kernels == "native" || (kernels == "auto" && available && pays);
  const std::string measured = "oneDNN's bf16 GEMM measured " + format_text("%.2f", speedup) +
                               "x its fp32 GEMM here" +
                               (agree ? " (the least over all ranks)" : "");
  if (autocast.native) {
    notice = "precision: " + name + " with native kernels (" + name +
             " operands, fp32 "
             "accumulation: " +
             (kHostKernels ? "oneDNN matmul and convolutions" : "cuBLAS GemmEx, cuDNN") + ")" +
             (kernels == "native" ? ", asked for by precision.kernels"
              : kHostKernels      ? ": " + measured
                                  : "");
    return autocast;
  }
  const std::string prefix = "precision: " + name + " with emulated kernels (fp32 arithmetic on " +
                             name + "-rounded operands): ";
  if (kernels == "emulated") {
    notice = prefix + "asked for by precision.kernels";
  } else {
    const CpuFeatures& cpu = host_cpu_features();
    const std::string hidden = cpu.hidden.empty() ? "" : " (TRELLIS_CPU_HIDE=" + cpu.hidden + ")";
    if (mode == Precision::bf16 && !cpu.avx512_bf16)
      notice = prefix + "this CPU has no AVX512-BF16 instructions" + hidden;
    else if (mode == Precision::bf16 && available)
      notice = prefix + measured + ", under the " +
               format_text("%.1f", kernels::kNativeBf16MinSpeedup) +
               "x that pays for 16-bit kernels; precision.kernels = native forces them";
    else if (mode == Precision::fp16)
      notice = prefix + "fp16 products with fp32 accumulation have no faster CPU path than fp32";
    else
      notice = prefix + "this build has no oneDNN";
  }
  return autocast;
}

AutocastOperand::AutocastOperand(const Autocast& autocast, const std::string& label,
                                 std::size_t capacity_elements, BufferRole role, bool emulated_only)
    : mode_(autocast.mode) {
  if (!autocast.active()) return;
  if (autocast.native && !emulated_only)
    half_ = layer_half_buffer(role, "trellis::autocast::" + label, capacity_elements);
  else
    buffer_ = layer_buffer(role, "trellis::autocast::" + label, capacity_elements);
}

kernels::GemmOperand AutocastOperand::round(const ConstMatrix& m) {
  if (mode_ == Precision::fp32) return last_ = kernels::GemmOperand::of(m);
  const std::size_t n = m.extent(0) * m.extent(1);
  const std::size_t capacity = half_.size() > 0 ? half_.extent(0) : buffer_.extent(0);
  TRELLIS_REQUIRE(n <= capacity, "AutocastOperand: " + std::to_string(n) + " elements, capacity " +
                                     std::to_string(capacity));
  const kernels::ConstVector src(m.data(), n);
  if (half_.size() > 0) {
    kernels::to_half(mode_, src, kernels::HalfVector(half_.data(), n));
    return last_ = kernels::GemmOperand::half(half_.data(), mode_, m.extent(0), m.extent(1));
  }
  kernels::round_to(mode_, src, kernels::Vector(buffer_.data(), n));
  return last_ = kernels::GemmOperand::of(ConstMatrix(buffer_.data(), m.extent(0), m.extent(1)));
}

kernels::HalfVector AutocastOperand::half_words(std::size_t count) const {
  TRELLIS_REQUIRE(half_.size() > 0 && count <= half_.extent(0),
                  "AutocastOperand: " + std::to_string(count) + " 16-bit words of " +
                      std::to_string(half_.extent(0)) + " (native 16-bit storage only)");
  return kernels::HalfVector(half_.data(), count);
}

const kernels::GemmOperand& AutocastOperand::written(std::size_t rows, std::size_t cols) {
  half_words(rows * cols);  // checks
  return last_ = kernels::GemmOperand::half(half_.data(), mode_, rows, cols);
}

ConstMatrix AutocastOperand::round_matrix(const ConstMatrix& m) {
  round(m);
  return last_matrix();
}

ConstMatrix AutocastOperand::last_matrix() const {
  TRELLIS_REQUIRE(!last_.is_half(), "AutocastOperand: a 16-bit operand has no fp32 matrix");
  return ConstMatrix(last_.f32, last_.rows, last_.cols);
}

void round_in_place(const Autocast& autocast, const Matrix& m) {
  if (!autocast.active()) return;
  const kernels::Vector v(m.data(), m.extent(0) * m.extent(1));
  kernels::round_to(autocast.mode, v, v);
}

}  // namespace trellis::nn
