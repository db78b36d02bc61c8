// What oneDNN does on this host, one thread (the rates issue 13's bf16 and issue 15's int8
// paths start from): the matmul primitive in f32 and bf16 (f32 output), and the GEMM entry
// points sgemm, u8s8s32 and s8s8s32, on [M, 1024] x [1024, 1024] for M = 128, 256, 1024.
// Each rate is the best of 3 runs of 20 calls after a warm-up call. Prints one JSON line per
// shape, after the ISA oneDNN dispatches to.
//
// usage: OMP_NUM_THREADS=1 taskset -c 0 build/trellis_onednn_rates
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr int kN = 1024, kK = 1024, kCalls = 20, kRounds = 3;

// Operations per second of `call` (2 M N K operations per call).
double rate(int m, const std::function<void()>& call) {
  call();
  double best = 1e30;
  for (int round = 0; round < kRounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) call();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count() / kCalls);
  }
  return 2.0 * m * kN * kK / best;
}

// The ISA oneDNN dispatches to (the names both 2.x and 3.x define), else its value in hex.
std::string isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      break;
  }
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%x", static_cast<unsigned>(isa));
  return hex;
}

void check(dnnl_status_t status, const char* call) {
  if (status != dnnl_success)
    throw std::runtime_error(std::string(call) + " failed with status " +
                             std::to_string(static_cast<int>(status)));
}

// The matmul primitive: src [m, K] and weights [K, N] of `type` (weights in the layout the
// primitive picks, reordered outside the timing), f32 destination.
double matmul_rate(int m, dnnl::memory::data_type type, std::string& impl) {
  using dnnl::memory;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc src({m, kK}, type, memory::format_tag::ab);
  const memory::desc weights({kK, kN}, type, memory::format_tag::any);
  const memory::desc dst({m, kN}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, dst), engine);
  impl = pd.impl_info_str();
  memory src_mem(src, engine), weights_mem(pd.weights_desc(), engine), dst_mem(dst, engine);
  const dnnl::matmul matmul(pd);
  return rate(m, [&] {
    matmul.execute(
        stream,
        {{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, weights_mem}, {DNNL_ARG_DST, dst_mem}});
    stream.wait();
  });
}

}  // namespace

int main() {
  try {
    std::printf("{\"onednn_isa\": \"%s\"}\n", isa_name(dnnl_get_effective_cpu_isa()).c_str());
    for (const int m : {128, 256, 1024}) {
      std::vector<float> af(std::size_t(m) * kK, 0.5f), bf(std::size_t(kK) * kN, 0.25f),
          cf(std::size_t(m) * kN);
      std::vector<std::uint8_t> au(std::size_t(m) * kK, 1);
      std::vector<std::int8_t> as(std::size_t(m) * kK, 1), bs(std::size_t(kK) * kN, 1);
      std::vector<std::int32_t> ci(std::size_t(m) * kN);
      const std::int32_t offset_c = 0;
      const double sgemm = rate(m, [&] {
        check(dnnl_sgemm('N', 'N', m, kN, kK, 1.0f, af.data(), kK, bf.data(), kN, 0.0f, cf.data(),
                         kN),
              "dnnl_sgemm");
      });
      const double u8s8 = rate(m, [&] {
        check(dnnl_gemm_u8s8s32('N', 'N', 'F', m, kN, kK, 1.0f, au.data(), kK, 0, bs.data(), kN, 0,
                                0.0f, ci.data(), kN, &offset_c),
              "dnnl_gemm_u8s8s32");
      });
      const double s8s8 = rate(m, [&] {
        check(dnnl_gemm_s8s8s32('N', 'N', 'F', m, kN, kK, 1.0f, as.data(), kK, 0, bs.data(), kN, 0,
                                0.0f, ci.data(), kN, &offset_c),
              "dnnl_gemm_s8s8s32");
      });
      std::string f32_impl, bf16_impl;
      const double f32 = matmul_rate(m, dnnl::memory::data_type::f32, f32_impl);
      const double bf16 = matmul_rate(m, dnnl::memory::data_type::bf16, bf16_impl);
      std::printf(
          "{\"m\": %d, \"n\": %d, \"k\": %d, \"sgemm_gflops\": %.1f, \"u8s8s32_gops\": %.1f, "
          "\"s8s8s32_gops\": %.1f, \"matmul_f32_gflops\": %.1f, \"matmul_bf16_gflops\": %.1f, "
          "\"matmul_f32_impl\": \"%s\", \"matmul_bf16_impl\": \"%s\"}\n",
          m, kN, kK, sgemm * 1e-9, u8s8 * 1e-9, s8s8 * 1e-9, f32 * 1e-9, bf16 * 1e-9,
          f32_impl.c_str(), bf16_impl.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trellis_onednn_rates: %s\n", e.what());
    return 1;
  }
  return 0;
}
