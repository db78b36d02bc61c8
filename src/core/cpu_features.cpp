#include "trellis/core/cpu_features.hpp"

#include <cstdint>
#include <cstdlib>
#include <sstream>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace trellis {

namespace {

#if defined(__x86_64__) || defined(__i386__)
std::uint64_t read_xcr0() {
  std::uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<std::uint64_t>(edx) << 32) | eax;
}
#endif

bool listed(const std::string& list, const char* name) {
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ','))
    if (item == name) return true;
  return false;
}

}  // namespace

CpuFeatures detect_cpu_features(const std::string& hide) {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(1, 0, a, b, c, d);
    const bool osxsave = (c >> 27) & 1u;
    const std::uint64_t xcr0 = osxsave ? read_xcr0() : 0;
    const bool avx_state = (xcr0 & 0x6u) == 0x6u;          // XMM, YMM
    const bool avx512_state = (xcr0 & 0xe6u) == 0xe6u;     // + opmask, ZMM halves
    const bool amx_state = (xcr0 & 0x60000u) == 0x60000u;  // XTILECFG, XTILEDATA
    f.f16c = avx_state && ((c >> 29) & 1u);
    __cpuid_count(7, 0, a, b, c, d);
    f.avx512f = avx512_state && ((b >> 16) & 1u);
    f.avx512_fp16 = f.avx512f && ((d >> 23) & 1u);
    f.amx_bf16 = amx_state && ((d >> 22) & 1u);
    f.amx_int8 = amx_state && ((d >> 25) & 1u);
    f.avx512_vnni = f.avx512f && ((c >> 11) & 1u);
    const unsigned max_subleaf = a;
    if (max_subleaf >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      f.avx512_bf16 = f.avx512f && ((a >> 5) & 1u);
      f.avx_vnni = avx_state && ((a >> 4) & 1u);
    }
  }
#endif
  f.hidden = hide;
  if (listed(hide, "avx512f")) f.avx512f = f.avx512_bf16 = f.avx512_fp16 = f.avx512_vnni = false;
  if (listed(hide, "avx512_vnni")) f.avx512_vnni = false;
  if (listed(hide, "avx_vnni")) f.avx_vnni = false;
  if (listed(hide, "avx512_bf16")) f.avx512_bf16 = false;
  if (listed(hide, "avx512_fp16")) f.avx512_fp16 = false;
  if (listed(hide, "f16c")) f.f16c = false;
  if (listed(hide, "amx_bf16")) f.amx_bf16 = false;
  if (listed(hide, "amx_int8")) f.amx_int8 = false;
  return f;
}

const CpuFeatures& host_cpu_features() {
  static const CpuFeatures features = [] {
    const char* hide = std::getenv("TRELLIS_CPU_HIDE");
    return detect_cpu_features(hide != nullptr ? hide : "");
  }();
  return features;
}

std::string CpuFeatures::describe() const {
  std::string out;
  const auto add = [&out](bool present, const char* name) {
    if (!present) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(avx512f, "avx512f");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_fp16, "avx512_fp16");
  add(f16c, "f16c");
  add(amx_bf16, "amx_bf16");
  add(amx_int8, "amx_int8");
  add(avx512_vnni, "avx512_vnni");
  add(avx_vnni, "avx_vnni");
  return out.empty() ? "none" : out;
}

}  // namespace trellis
