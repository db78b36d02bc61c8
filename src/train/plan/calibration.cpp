#include "trellis/train/plan/calibration.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/timer.hpp"
#include "trellis/kernels/attention/flash_attention.hpp"
#include "trellis/kernels/bf16_speed_probe.hpp"
#include "trellis/kernels/bias.hpp"
#include "trellis/kernels/gemm.hpp"
#include "trellis/kernels/gemm_half.hpp"
#include "trellis/kernels/layernorm.hpp"
#include "trellis/kernels/precision_cast.hpp"
#include "trellis/kernels/vector_ops.hpp"
#include "trellis/nn/autocast.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

namespace {

#if defined(TRELLIS_ENABLE_CUDA)
constexpr bool kDeviceBuild = true;  // the kernels below run on the GPU
#else
constexpr bool kDeviceBuild = false;
#endif

constexpr int kRows = 2048;
const std::vector<int> kDims = {32, 64, 128, 256, 512, 1024};

// The sustained rate (FLOP/s) of `run` doing `flops` per call: as many calls as fit in
// `seconds`, every rank of `world` starting together, so that ranks sharing cores, caches or
// memory bandwidth measure what each gets while the others run too (what a training step
// sees); a per-call timing would catch a rank alone on its core.
template <class Run>
double sustained_rate(double flops, double seconds, MPI_Comm world, Run run) {
  run();  // warm-up: first touch, primitive creation
  Kokkos::fence();
  TRELLIS_MPI(MPI_Barrier(world));
  Stopwatch total;
  long calls = 0;
  do {
    run();
    ++calls;
  } while (total.seconds() < seconds || calls < 3);
  const double elapsed = total.fenced_seconds();
  TRELLIS_MPI(MPI_Barrier(world));
  return calls * flops / elapsed;
}

// A Linear's three GEMMs on [rows x D] activations and a [D x D] weight, as nn/linear.hpp runs
// them: y = x W^T, dW = dy^T x, dx = dy W (no transposed copies), 6 rows D^2 FLOPs in all.
double gemm_rate(int d, bool half, double seconds, MPI_Comm world) {
  const int m = std::max(kRows, d);
  const auto floats = [](int r, int c) { return static_cast<std::size_t>(r) * c; };
  FloatView x("trellis::calibrate::x", floats(m, d)), w("trellis::calibrate::w", floats(d, d)),
      y("trellis::calibrate::y", floats(m, d)), dw("trellis::calibrate::dw", floats(d, d));
  kernels::fill(x, 0.5f);
  kernels::fill(w, 0.25f);
  const double flops = 6.0 * m * d * static_cast<double>(d);
  if (!half)
    return sustained_rate(flops, seconds, world, [&] {
      const ConstMatrix xm = as_matrix(x, m, d), wm = as_matrix(w, d, d);
      kernels::gemm(false, true, 1.0f, xm, wm, 0.0f, as_matrix(y, m, d));
      kernels::gemm(true, false, 1.0f, xm, xm, 1.0f, as_matrix(dw, d, d));
      kernels::gemm(false, false, 1.0f, xm, wm, 0.0f, as_matrix(y, m, d));
    });
  kernels::HalfView x16("trellis::calibrate::x16", x.size()),
      w16("trellis::calibrate::w16", w.size());
  kernels::to_half(Precision::bf16, x, x16);
  kernels::to_half(Precision::bf16, w, w16);
  const auto xo = kernels::GemmOperand::half(x16.data(), Precision::bf16, m, d);
  const auto wo = kernels::GemmOperand::half(w16.data(), Precision::bf16, d, d);
  return sustained_rate(flops, seconds, world, [&] {
    kernels::gemm(false, true, xo, wo, 0.0f, as_matrix(y, m, d));
    kernels::gemm(true, false, xo, xo, 1.0f, as_matrix(dw, d, d));
    kernels::gemm(false, false, xo, wo, 0.0f, as_matrix(y, m, d));
  });
}

// The flash kernels' forward + backward at T = 256 and width 256 in heads of head_dim, 8
// sequences, counted as the models count them (12 T d per row, the full square).
double attention_rate(int head_dim, double seconds, MPI_Comm world) {
  const int T = 256, d = 256, heads = d / head_dim, n = 8 * T;
  const auto floats = [](int r, int c) { return static_cast<std::size_t>(r) * c; };
  FloatView qkv("trellis::calibrate::qkv", floats(n, 3 * d)),
      out("trellis::calibrate::out", floats(n, d)), dout("trellis::calibrate::dout", floats(n, d)),
      lse("trellis::calibrate::lse", floats(n, heads)),
      delta("trellis::calibrate::delta", floats(n, heads)),
      dqkv("trellis::calibrate::dqkv", floats(n, 3 * d));
  kernels::fill(qkv, 0.01f);
  kernels::fill(dout, 0.01f);
  const kernels::FlashAttentionShape shape{heads, T, heads};
  const kernels::DropoutMask none{};
  return sustained_rate(12.0 * T * d * n, seconds, world, [&] {
    kernels::flash_attention_forward(as_matrix(qkv, n, 3 * d), shape, as_matrix(out, n, d), lse,
                                     none);
    kernels::flash_attention_backward(as_matrix(qkv, n, 3 * d), as_matrix(out, n, d),
                                      as_matrix(dout, n, d), lse, shape, delta,
                                      as_matrix(dqkv, n, 3 * d), none);
  });
}

const std::vector<int> kConvChannels = {16, 32, 64, 128, 256};

// A 3x3 convolution (stride 1, padding 1) from C to C channels on 16 x 16 images, forward and
// backward through nn::Conv2d as the CNN's blocks run it: the vendor path where the build has
// one, on activations in its own layout (kernels.conv_layout = auto), and with `half` the bf16
// operands native autocast gives it. About 0.5 GFLOP per call.
double conv_rate(int channels, bool half, double seconds, MPI_Comm world) {
  nn::Conv2dSpec spec;
  spec.in_channels = spec.out_channels = channels;
  spec.kernel = 3, spec.stride = 1, spec.padding = 1;
  spec.height = spec.width = 16;
  spec.bias = false;
  const double per_image = 6.0 * 9 * spec.height * spec.width * channels * channels;
  const int n = std::clamp(static_cast<int>(5e8 / per_image), 1, 64);
  nn::ParameterStore store;
  if (half) {  // before the layer: it picks its operands from the store's autocast
    std::string notice;
    store.set_autocast(nn::resolve_autocast(Precision::bf16, "native", notice));
  }
  spec.in_block = spec.out_block = kernels::channel_block_for(
      channels, nn::conv_channel_block(nn::ConvLayout::automatic, nn::ConvImpl::automatic, store));
  nn::Conv2d conv(store, "trellis::calibrate::conv", spec, n);
  store.finalize(1);
  const int in = conv.in_features(), out = conv.out_features();
  FloatView x("trellis::calibrate::cx", static_cast<std::size_t>(n) * in),
      dy("trellis::calibrate::cdy", static_cast<std::size_t>(n) * out);
  kernels::fill(x, 0.5f);
  kernels::fill(dy, 0.01f);
  return sustained_rate(static_cast<double>(conv.flops_per_sample()) * n, seconds, world, [&] {
    conv.forward(as_matrix(x, n, in), n, {});
    conv.backward(as_matrix(dy, n, out), n);
  });
}

// Bytes per second of the element-wise kernels a block runs, counted as model_work.hpp counts
// them: a LayerNorm forward (2 floats per element) and backward (4), a bias + GELU forward (3)
// and backward (3), and a residual add (3), on [2048 x 512].
double elementwise_rate(double seconds, MPI_Comm world) {
  const int n = kRows, d = 512;
  const std::size_t size = static_cast<std::size_t>(n) * d;
  FloatView x("trellis::calibrate::ex", size), y("trellis::calibrate::ey", size),
      dy("trellis::calibrate::edy", size), dx("trellis::calibrate::edx", size),
      gamma("trellis::calibrate::gamma", d), beta("trellis::calibrate::beta", d),
      dgamma("trellis::calibrate::dgamma", d), dbeta("trellis::calibrate::dbeta", d),
      mean("trellis::calibrate::mean", n), rstd("trellis::calibrate::rstd", n);
  kernels::fill(x, 0.5f);
  kernels::fill(dy, 0.01f);
  kernels::fill(gamma, 1.0f);
  const double floats = 15.0 * static_cast<double>(size);
  return sustained_rate(4 * floats, seconds, world, [&] {
    kernels::layernorm_forward(as_matrix(x, n, d), gamma, beta, 1e-5f, as_matrix(y, n, d), mean,
                               rstd);
    kernels::layernorm_backward(as_matrix(x, n, d), as_matrix(dy, n, d), gamma, mean, rstd,
                                as_matrix(dx, n, d), dgamma, dbeta);
    kernels::bias_activation_forward(as_matrix(y, n, d), beta, kernels::Activation::gelu,
                                     as_matrix(dx, n, d));
    kernels::bias_activation_backward(as_matrix(y, n, d), as_matrix(dy, n, d),
                                      kernels::Activation::gelu, as_matrix(dx, n, d), dbeta);
    kernels::add(x, dy, y);
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

// The all-reduce of every rank of `world` as the alpha-beta link that predicts it: alpha from an
// 8-byte sum (2 (p - 1) alpha), beta from a 4 MiB one (2 (p - 1) / p bytes / beta). Measured,
// not derived from a ping-pong, since the reduction's own arithmetic and the ranks' skew are
// part of what a step waits for.
LinkSpec all_reduce_link(MPI_Comm world) {
  int size = 1;
  TRELLIS_MPI(MPI_Comm_size(world, &size));
  std::vector<float> data(1u << 20, 1.0f), sum(data.size());
  const auto timed = [&](int count, int repeats) {
    std::vector<double> times;
    for (int r = 0; r < repeats; ++r) {
      TRELLIS_MPI(MPI_Barrier(world));
      const double start = MPI_Wtime();
      TRELLIS_MPI(MPI_Allreduce(data.data(), sum.data(), count, MPI_FLOAT, MPI_SUM, world));
      times.push_back(MPI_Wtime() - start);
    }
    std::nth_element(times.begin(), times.begin() + repeats / 2, times.end());
    double median = times[static_cast<std::size_t>(repeats / 2)];
    TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, &median, 1, MPI_DOUBLE, MPI_MAX, world));
    return median;
  };
  const double small = timed(2, 200), large = timed(static_cast<int>(data.size()), 20);
  const double p = size, bytes = 4.0 * static_cast<double>(data.size());
  LinkSpec link;
  link.latency_us = small / (2 * (p - 1)) * 1e6;
  link.bandwidth_gbs = 2 * (p - 1) / p * bytes / std::max(large - small, 1e-9) / 1e9;
  return link;
}

double slowest(double value, MPI_Comm world) {
  double out = 0;
  TRELLIS_MPI(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MIN, world));
  return out;
}

// The logical CPUs this rank may run on, OR-ed over `world`: on one node, the CPUs its ranks
// share (a launcher that binds each rank to a core gives one each).
int cpus_of_ranks(MPI_Comm world) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  std::vector<std::uint64_t> bits(CPU_SETSIZE / 64, 0);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) bits[static_cast<std::size_t>(cpu / 64)] |= 1ull << (cpu % 64);
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, bits.data(), static_cast<int>(bits.size()), MPI_UINT64_T,
                            MPI_BOR, world));
  int count = 0;
  for (std::uint64_t word : bits) count += __builtin_popcountll(word);
  return count;
}

}  // namespace

MachineType calibrate_machine(MPI_Comm world, int node_local_size, int node_count,
                              const MachineType& base, const CalibrationOptions& options) {
  int rank = 0, size = 1;
  TRELLIS_MPI(MPI_Comm_rank(world, &rank));
  TRELLIS_MPI(MPI_Comm_size(world, &size));
  const double s = options.seconds_per_measurement;
  // A CUDA build measures the device (cuBLAS, cuDNN, the flash kernels), whose bf16 GEMMs are
  // native; a host build takes them where oneDNN's pay, as precision.kernels = auto does.
  const bool half =
      kernels::native_gemm_available(Precision::bf16) &&
      (kDeviceBuild || kernels::measured_bf16_gemm_speedup() >= kernels::kNativeBf16MinSpeedup);
  const std::vector<int> head_dims = {32, 64, 128};
  const int total = static_cast<int>(kDims.size() + kConvChannels.size()) * (half ? 2 : 1) +
                    static_cast<int>(head_dims.size()) + 3;
  int done = 0;
  const auto step = [&](const std::string& what) {
    ++done;
    if (rank == 0 && options.progress) options.progress(static_cast<double>(done) / total, what);
  };
  MachineType m = base;
  m.name = options.name;
  m.calibrated = true;
  m.cpu_ranks = !kDeviceBuild;
  m.devices_per_node = node_local_size;
  // More ranks than CPUs (one node; nodes alike): the ranks share them, and every rate below is
  // what each gets while all of them run.
  const int cpus = m.cpu_ranks && node_count == 1 ? cpus_of_ranks(world) : 0;
  m.cpus_per_node = cpus > 0 && cpus < node_local_size ? cpus : 0;
  std::vector<double> fp32, bf16;
  for (int d : kDims) {
    fp32.push_back(slowest(gemm_rate(d, false, s, world), world));
    step("GEMM fp32 [2048 x " + std::to_string(d) + "] x [" + std::to_string(d) + " x " +
         std::to_string(d) + "]");
  }
  if (half)
    for (int d : kDims) {
      bf16.push_back(slowest(gemm_rate(d, true, s, world), world));
      step("GEMM bf16 [2048 x " + std::to_string(d) + "]");
    }
  std::vector<double> conv32, conv16;
  for (int c : kConvChannels) {
    conv32.push_back(slowest(conv_rate(c, false, s, world), world));
    step("3x3 convolution fp32, " + std::to_string(c) + " channels");
  }
  if (half)
    for (int c : kConvChannels) {
      conv16.push_back(slowest(conv_rate(c, true, s, world), world));
      step("3x3 convolution bf16, " + std::to_string(c) + " channels");
    }
  // The peak: the fastest GEMM or convolution measured, so their efficiencies are at most 1
  // (the attention's, on its nominal full-attention FLOPs, may exceed 1: machine_type.cpp).
  const double peak32 = std::max(*std::max_element(fp32.begin(), fp32.end()),
                                 *std::max_element(conv32.begin(), conv32.end()));
  m.peak_tflops_fp32 = peak32 * 1e-12;
  m.gemm_efficiency_fp32.clear();
  for (std::size_t i = 0; i < kDims.size(); ++i)
    m.gemm_efficiency_fp32.emplace_back(kDims[i], fp32[i] / peak32);
  // Without a native 16-bit GEMM that pays, bf16 runs emulated: fp32 GEMMs on rounded operands.
  const std::vector<double>& rates16 = half ? bf16 : fp32;
  const std::vector<double>& convs16 = half ? conv16 : conv32;
  const double peak16 = std::max(*std::max_element(rates16.begin(), rates16.end()),
                                 *std::max_element(convs16.begin(), convs16.end()));
  m.peak_tflops_bf16 = m.peak_tflops_fp16 = peak16 * 1e-12;
  m.gemm_efficiency_bf16.clear();
  for (std::size_t i = 0; i < kDims.size(); ++i)
    m.gemm_efficiency_bf16.emplace_back(kDims[i], rates16[i] / peak16);
  m.attention_efficiency_fp32.clear();
  m.attention_efficiency_bf16.clear();
  for (int head_dim : head_dims) {
    const double rate = slowest(attention_rate(head_dim, s, world), world);
    m.attention_efficiency_fp32.emplace_back(head_dim, rate / peak32);
    m.attention_efficiency_bf16.emplace_back(head_dim, rate / peak16);  // fp32 flash kernels
    step("flash attention forward + backward, head dim " + std::to_string(head_dim));
  }
  m.conv_efficiency_fp32.clear();
  m.conv_efficiency_bf16.clear();
  for (std::size_t i = 0; i < kConvChannels.size(); ++i) {
    m.conv_efficiency_fp32.emplace_back(kConvChannels[i], conv32[i] / peak32);
    m.conv_efficiency_bf16.emplace_back(kConvChannels[i], (half ? conv16 : conv32)[i] / peak16);
  }
  m.memory_bandwidth_gbs = slowest(elementwise_rate(s, world), world) * 1e-9;
  step("element-wise kernels (norm, GELU, residual add)");
  if (size > 1) m.intra_node = node_count > 1 ? ping_pong(world, 0, 1) : all_reduce_link(world);
  step("MPI latency and bandwidth in the node");
  if (node_count > 1 && size > node_local_size) m.inter_node = ping_pong(world, 0, node_local_size);
  step("MPI latency and bandwidth between nodes");
  m.description = "measured by trellis plan --calibrate on " + std::to_string(size) + " rank(s), " +
                  std::to_string(node_count) + " node(s)" +
                  (half ? "; bf16: native GEMMs" : "; bf16: emulated (fp32 GEMMs)") +
                  (kDeviceBuild ? "; GPU kernels, links by host MPI (not NCCL)" : "");
  return m;
}

}  // namespace trellis
