// The host CPU's instruction sets that decide kernel paths at run time (never the build
// host's): read with CPUID and checked against what the OS enabled (XGETBV), once.
//
// TRELLIS_CPU_HIDE (environment, comma-separated feature names as in /proc/cpuinfo:
// avx512_bf16, avx512_fp16, amx_bf16, amx_int8, avx512_vnni, avx_vnni, avx512f, f16c) makes
// features look absent,
// so the fallback paths of a host without them can be tested on one that has them.
#pragma once

#include <string>

namespace trellis {

struct CpuFeatures {
  bool avx512f = false;
  bool avx512_bf16 = false;  // VCVTNE2PS2BF16, VDPBF16PS
  bool avx512_fp16 = false;  // fp16 arithmetic
  bool f16c = false;         // fp16 <-> fp32 conversion
  bool amx_bf16 = false;     // tile matrix multiply in bf16 (needs the OS's AMX state)
  bool amx_int8 = false;
  // u8 x s8 dot products into int32 (VPDPBUSD). Without them oneDNN's int8 GEMMs multiply with
  // VPMADDUBSW, whose int16 pair sums saturate on full-range operands (wrong results).
  bool avx512_vnni = false;
  bool avx_vnni = false;
  std::string hidden;  // what TRELLIS_CPU_HIDE removed, as given

  // "avx512f avx512_bf16 ..." of the features present (after hiding); "none" if none.
  std::string describe() const;
};

// The host's features, detected on first call (thread-safe) with TRELLIS_CPU_HIDE applied.
const CpuFeatures& host_cpu_features();

// Detection without the cache, hiding the features named in `hide` (for tests).
CpuFeatures detect_cpu_features(const std::string& hide);

}  // namespace trellis
