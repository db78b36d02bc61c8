#include "trellis/kernels/bf16_speed_probe.hpp"

#include "trellis/core/cpu_features.hpp"
#include "trellis/kernels/gemm_half.hpp"

#if TRELLIS_HAVE_ONEDNN && !defined(TRELLIS_ENABLE_CUDA)
#include <dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>
#endif

namespace trellis::kernels {

#if TRELLIS_HAVE_ONEDNN && !defined(TRELLIS_ENABLE_CUDA)
namespace {

// fp32 over bf16: the best of `rounds` timings of `repeats` runs of each matmul, alternated so
// that a noisy neighbour slows both alike; the best timing is the one nothing interrupted.
double speedup_of_bf16_matmul() {
  constexpr dnnl::memory::dim n = 256;
  constexpr int rounds = 5, repeats = 3;
  using dt = dnnl::memory::data_type;
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const dnnl::memory::dims square{n, n};
  const auto desc = [&](dt type) { return dnnl::memory::desc(square, type, {n, 1}); };
  const std::size_t count = static_cast<std::size_t>(n * n);
  std::vector<std::uint16_t> ones16(count, 0x3f80);  // bf16 1.0
  std::vector<float> ones32(count, 1.0f), c(count);
  dnnl::memory a16(desc(dt::bf16), engine, ones16.data()),
      a32(desc(dt::f32), engine, ones32.data());
  dnnl::memory out(desc(dt::f32), engine, c.data());
  const dnnl::matmul bf16(dnnl::matmul::primitive_desc(
      dnnl::matmul::desc(desc(dt::bf16), desc(dt::bf16), desc(dt::f32)), engine));
  const dnnl::matmul f32(dnnl::matmul::primitive_desc(
      dnnl::matmul::desc(desc(dt::f32), desc(dt::f32), desc(dt::f32)), engine));
  const auto seconds = [&](const dnnl::matmul& p, dnnl::memory& operand) {
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < repeats; ++r) {
      p.execute(stream,
                {{DNNL_ARG_SRC, operand}, {DNNL_ARG_WEIGHTS, operand}, {DNNL_ARG_DST, out}});
    }
    stream.wait();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  seconds(bf16, a16);  // first runs: the JIT's code and the caches warm
  seconds(f32, a32);
  double best16 = std::numeric_limits<double>::max(), best32 = best16;
  for (int round = 0; round < rounds; ++round) {
    best16 = std::min(best16, seconds(bf16, a16));
    best32 = std::min(best32, seconds(f32, a32));
  }
  return best16 > 0 ? best32 / best16 : 0.0;
}

}  // namespace
#endif

double measured_bf16_gemm_speedup() {
#if TRELLIS_HAVE_ONEDNN && !defined(TRELLIS_ENABLE_CUDA)
  static const double speedup = [] {
    // Without bf16 instructions (or with them hidden by TRELLIS_CPU_HIDE) oneDNN's bf16
    // kernels emulate them with fp32 FMAs: slower than fp32, nothing to measure.
    const CpuFeatures& cpu = host_cpu_features();
    if (!(cpu.avx512_bf16 || cpu.amx_bf16) || !native_gemm_available(Precision::bf16)) return 0.0;
    try {
      return speedup_of_bf16_matmul();
    } catch (const dnnl::error&) {
      return 0.0;  // nothing to measure: the emulated kernels run
    }
  }();
  return speedup;
#else
  return 0.0;
#endif
}

}  // namespace trellis::kernels
