// Whether 16-bit arithmetic pays on this CPU, measured rather than assumed. The instruction
// sets do not say it: with AVX512-BF16 but no AMX, an Intel Xeon issues VDPBF16PS on one port
// and its FMAs on two (bf16 at half the fp32 rate, tools/bench/NOTES.md), while AMD Zen 4
// runs bf16 GEMMs faster than fp32 ones. precision.kernels = auto asks this probe on hosts.
#pragma once

namespace trellis::kernels {

// The fp32 time over the bf16 time of oneDNN's own matmul on one [256 x 256] x [256 x 256]
// problem (bf16 x bf16 -> f32 against f32 x f32 -> f32), the best of several alternating
// timings, measured at the first call (about 20 ms) and cached for the process. > 1: bf16
// GEMMs are faster here. 0 where there is no native bf16 GEMM to measure (no oneDNN, no
// AVX-512, or a CUDA build, whose choice needs no probe).
double measured_bf16_gemm_speedup();

// What auto asks of the probe: a speedup below this keeps the emulated kernels (fp32
// arithmetic), whose rounding passes cost little; above it, 16-bit storage and arithmetic.
constexpr double kNativeBf16MinSpeedup = 1.2;

}  // namespace trellis::kernels
