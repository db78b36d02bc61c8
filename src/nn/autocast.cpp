#include "trellis/nn/autocast.hpp"

#include "trellis/core/cpu_features.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/kernels/precision_cast.hpp"

namespace trellis::nn {

Autocast resolve_autocast(Precision mode, const std::string& kernels, std::string& notice) {
  Autocast autocast;
  autocast.mode = mode;
  notice.clear();
  if (mode == Precision::fp32) return autocast;
  if (kernels == "native")
    throw ConfigError(
        "precision.kernels = native: 16-bit GEMM kernels are not built into this version; use "
        "emulated (fp32 arithmetic on 16-bit-rounded operands) or auto");
  const std::string name = precision_name(mode);
  const std::string prefix =
      "precision: " + name + " with emulated kernels (fp32 arithmetic on " + name +
      "-rounded operands): ";
  if (kernels == "emulated") {
    notice = prefix + "asked for by precision.kernels";
  } else if (!kHostMemory) {
    notice = prefix + "16-bit device kernels (cuBLAS GemmEx) are not built yet";
  } else {
    const CpuFeatures& cpu = host_cpu_features();
    const std::string hidden = cpu.hidden.empty() ? "" : " (TRELLIS_CPU_HIDE=" + cpu.hidden + ")";
    if (mode == Precision::bf16 && !cpu.avx512_bf16)
      notice = prefix + "this CPU has no AVX512-BF16 instructions" + hidden;
    else if (mode == Precision::bf16 && !cpu.amx_bf16)
      notice = prefix + "without AMX, bf16 matmul (VDPBF16PS) peaks at half the fp32 FMA rate "
                        "on this CPU";
    else if (mode == Precision::fp16)
      notice = prefix + "fp16 products with fp32 accumulation have no faster CPU path than fp32";
    else
      notice = prefix + "16-bit host kernels (oneDNN bf16 matmul on AMX) are not built yet";
  }
  return autocast;
}

AutocastOperand::AutocastOperand(const Autocast& autocast, const std::string& label,
                                 std::size_t capacity_elements)
    : mode_(autocast.mode) {
  if (autocast.active()) buffer_ = FloatView("trellis::autocast::" + label, capacity_elements);
}

ConstMatrix AutocastOperand::round(const ConstMatrix& m) {
  if (mode_ == Precision::fp32) return last_ = m;
  const std::size_t n = m.extent(0) * m.extent(1);
  TRELLIS_REQUIRE(n <= buffer_.extent(0), "AutocastOperand " + buffer_.label() + ": " +
                                              std::to_string(n) + " elements, capacity " +
                                              std::to_string(buffer_.extent(0)));
  const kernels::Vector out(buffer_.data(), n);
  kernels::round_to(mode_, kernels::ConstVector(m.data(), n), out);
  return last_ = ConstMatrix(buffer_.data(), m.extent(0), m.extent(1));
}

void round_in_place(const Autocast& autocast, const Matrix& m) {
  if (!autocast.active()) return;
  const kernels::Vector v(m.data(), m.extent(0) * m.extent(1));
  kernels::round_to(autocast.mode, v, v);
}

}  // namespace trellis::nn
