#include "trellis/train/plan/calibration.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/timer.hpp"
#include "trellis/kernels/attention/flash_attention.hpp"
#include "trellis/kernels/bf16_speed_probe.hpp"
#include "trellis/kernels/gemm.hpp"
#include "trellis/kernels/gemm_half.hpp"
#include "trellis/kernels/precision_cast.hpp"
#include "trellis/kernels/vector_ops.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace trellis {

namespace {

constexpr int kRows = 2048;
const std::vector<int> kDims = {32, 64, 128, 256, 512, 1024};

// Best rate (FLOP/s) of `run` doing `flops` per call, over about `seconds`.
template <class Run>
double best_rate(double flops, double seconds, Run run) {
  run();  // warm-up: first touch, primitive creation
  Kokkos::fence();
  double best = 0;
  Stopwatch total;
  do {
    Stopwatch one;
    run();
    const double t = one.fenced_seconds();
    if (t > 0) best = std::max(best, flops / t);
  } while (total.seconds() < seconds);
  return best;
}

double gemm_rate(int d, bool half, double seconds) {
  const int m = std::max(kRows, d);
  FloatView a("trellis::calibrate::a", static_cast<std::size_t>(m) * d),
      b("trellis::calibrate::b", static_cast<std::size_t>(d) * d),
      c("trellis::calibrate::c", static_cast<std::size_t>(m) * d);
  kernels::fill(a, 0.5f);
  kernels::fill(b, 0.25f);
  const double flops = 2.0 * m * d * static_cast<double>(d);
  if (!half)
    return best_rate(flops, seconds, [&] {
      kernels::gemm(false, false, 1.0f, as_matrix(a, m, d), as_matrix(b, d, d), 0.0f,
                    as_matrix(c, m, d));
    });
  kernels::HalfView a16("trellis::calibrate::a16", a.size()),
      b16("trellis::calibrate::b16", b.size());
  kernels::to_half(Precision::bf16, a, a16);
  kernels::to_half(Precision::bf16, b, b16);
  const auto ao = kernels::GemmOperand::half(a16.data(), Precision::bf16, m, d);
  const auto bo = kernels::GemmOperand::half(b16.data(), Precision::bf16, d, d);
  return best_rate(flops, seconds,
                   [&] { kernels::gemm(false, false, ao, bo, 0.0f, as_matrix(c, m, d)); });
}

// The flash kernels' forward + backward at T = 256, 4 heads of 64, 8 sequences, counted as the
// models count them (12 T d per row, the full square).
double attention_rate(double seconds) {
  const int T = 256, heads = 4, hd = 64, d = heads * hd, n = 8 * T;
  FloatView qkv("trellis::calibrate::qkv", static_cast<std::size_t>(n) * 3 * d),
      out("trellis::calibrate::out", static_cast<std::size_t>(n) * d),
      dout("trellis::calibrate::dout", static_cast<std::size_t>(n) * d),
      lse("trellis::calibrate::lse", static_cast<std::size_t>(n) * heads),
      delta("trellis::calibrate::delta", static_cast<std::size_t>(n) * heads),
      dqkv("trellis::calibrate::dqkv", static_cast<std::size_t>(n) * 3 * d);
  kernels::fill(qkv, 0.01f);
  kernels::fill(dout, 0.01f);
  const kernels::FlashAttentionShape shape{heads, T, heads};
  const kernels::DropoutMask none{};
  const double flops = 12.0 * T * d * n;
  return best_rate(flops, seconds, [&] {
    kernels::flash_attention_forward(as_matrix(qkv, n, 3 * d), shape, as_matrix(out, n, d), lse,
                                     none);
    kernels::flash_attention_backward(as_matrix(qkv, n, 3 * d), as_matrix(out, n, d),
                                      as_matrix(dout, n, d), lse, shape, delta,
                                      as_matrix(dqkv, n, 3 * d), none);
  });
}

// Bytes per second of a = b + s c over 3 x 32 MiB (two reads, one write per element).
double memory_bandwidth(double seconds) {
  const std::size_t n = 8u << 20;
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  float* pa = a.data();
  const float *pb = b.data(), *pc = c.data();
  return best_rate(12.0 * n, seconds, [&] {
    for (std::size_t i = 0; i < n; ++i) pa[i] = pb[i] + 0.5f * pc[i];
    asm volatile("" : : "r"(pa) : "memory");
  });
}

// Ping-pong between world ranks `a` and `b` (others wait at the barrier): one-way latency in
// microseconds for 8 bytes and bandwidth in GB/s for 8 MiB. Collective over world.
LinkSpec ping_pong(MPI_Comm world, int a, int b) {
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(world, &rank));
  LinkSpec link;
  std::vector<char> buffer(8u << 20);
  const auto exchange = [&](int bytes, int repeats) {
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
      TRELLIS_MPI(MPI_Barrier(world));
      const double start = MPI_Wtime();
      if (rank == a) {
        TRELLIS_MPI(MPI_Send(buffer.data(), bytes, MPI_CHAR, b, 7, world));
        TRELLIS_MPI(MPI_Recv(buffer.data(), bytes, MPI_CHAR, b, 7, world, MPI_STATUS_IGNORE));
      } else if (rank == b) {
        TRELLIS_MPI(MPI_Recv(buffer.data(), bytes, MPI_CHAR, a, 7, world, MPI_STATUS_IGNORE));
        TRELLIS_MPI(MPI_Send(buffer.data(), bytes, MPI_CHAR, a, 7, world));
      }
      best = std::min(best, (MPI_Wtime() - start) / 2);
    }
    return best;
  };
  const double small = exchange(8, 200);
  const double large = exchange(static_cast<int>(buffer.size()), 10);
  double measured[2] = {small * 1e6,
                        static_cast<double>(buffer.size()) / std::max(large - small, 1e-9) / 1e9};
  TRELLIS_MPI(MPI_Bcast(measured, 2, MPI_DOUBLE, a, world));
  link.latency_us = measured[0];
  link.bandwidth_gbs = measured[1];
  return link;
}

double slowest(double value, MPI_Comm world) {
  double out = 0;
  TRELLIS_MPI(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MIN, world));
  return out;
}

}  // namespace

MachineType calibrate_machine(MPI_Comm world, int node_local_size, int node_count,
                              const MachineType& base, const CalibrationOptions& options) {
  int rank = 0, size = 1;
  TRELLIS_MPI(MPI_Comm_rank(world, &rank));
  TRELLIS_MPI(MPI_Comm_size(world, &size));
  const double s = options.seconds_per_measurement;
  const bool half = kernels::native_gemm_available(Precision::bf16) &&
                    kernels::measured_bf16_gemm_speedup() >= kernels::kNativeBf16MinSpeedup;
  const int total = static_cast<int>(kDims.size()) * (half ? 2 : 1) + 4;
  int done = 0;
  const auto step = [&](const std::string& what) {
    ++done;
    if (rank == 0 && options.progress) options.progress(static_cast<double>(done) / total, what);
  };
  MachineType m = base;
  m.name = options.name;
  m.calibrated = true;
  m.cpu_ranks = true;
  m.devices_per_node = node_local_size;
  std::vector<double> fp32, bf16;
  for (int d : kDims) {
    fp32.push_back(slowest(gemm_rate(d, false, s), world));
    step("GEMM fp32 [2048 x " + std::to_string(d) + "] x [" + std::to_string(d) + " x " +
         std::to_string(d) + "]");
  }
  if (half)
    for (int d : kDims) {
      bf16.push_back(slowest(gemm_rate(d, true, s), world));
      step("GEMM bf16 [2048 x " + std::to_string(d) + "]");
    }
  const double peak32 = *std::max_element(fp32.begin(), fp32.end());
  m.peak_tflops_fp32 = peak32 * 1e-12;
  m.gemm_efficiency_fp32.clear();
  for (std::size_t i = 0; i < kDims.size(); ++i)
    m.gemm_efficiency_fp32.emplace_back(kDims[i], fp32[i] / peak32);
  // Without a native 16-bit GEMM that pays, bf16 runs emulated: fp32 GEMMs on rounded operands.
  const std::vector<double>& rates16 = half ? bf16 : fp32;
  const double peak16 = *std::max_element(rates16.begin(), rates16.end());
  m.peak_tflops_bf16 = m.peak_tflops_fp16 = peak16 * 1e-12;
  m.gemm_efficiency_bf16.clear();
  for (std::size_t i = 0; i < kDims.size(); ++i)
    m.gemm_efficiency_bf16.emplace_back(kDims[i], rates16[i] / peak16);
  const double attention = slowest(attention_rate(s), world);
  step("flash attention forward + backward");
  m.attention_efficiency_fp32 = attention / peak32;
  m.attention_efficiency_bf16 = attention / peak16;  // the flash kernels compute in fp32
  m.memory_bandwidth_gbs = slowest(memory_bandwidth(s), world) * 1e-9;
  step("memory bandwidth (triad)");
  if (size > 1) m.intra_node = ping_pong(world, 0, 1);
  step("MPI latency and bandwidth in the node");
  if (node_count > 1 && size > node_local_size) m.inter_node = ping_pong(world, 0, node_local_size);
  step("MPI latency and bandwidth between nodes");
  m.description = "measured by trellis plan --calibrate on " + std::to_string(size) + " rank(s), " +
                  std::to_string(node_count) + " node(s)" +
                  (half ? "; bf16: native GEMMs" : "; bf16: emulated (fp32 GEMMs)");
  return m;
}

}  // namespace trellis
