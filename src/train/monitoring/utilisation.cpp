#include "trellis/train/monitoring/utilisation.hpp"

#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/timer.hpp"
#include "trellis/kernels/gemm.hpp"
#include "trellis/kernels/vector_ops.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace trellis {

double known_peak_tflops(const std::string& device_name, const std::string& precision) {
  struct Row {
    const char* part;
    double bf16, fp16, tf32, fp32;
  };
  static const Row table[] = {
      {"A100", 312.0, 312.0, 156.0, 19.5},
      {"H100", 989.0, 989.0, 495.0, 67.0},
      {"H200", 989.0, 989.0, 495.0, 67.0},
  };
  for (const Row& row : table) {
    if (device_name.find(row.part) == std::string::npos) continue;
    if (precision == "bf16") return row.bf16;
    if (precision == "fp16") return row.fp16;
    if (precision == "tf32") return row.tf32;
    if (precision == "fp32") return row.fp32;
  }
  return 0.0;
}

double measure_gemm_tflops(int n, double seconds) {
  const auto size = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  FloatView a("trellis::peak::a", size), b("trellis::peak::b", size), c("trellis::peak::c", size);
  kernels::fill(a, 0.5f);
  kernels::fill(b, 0.25f);
  const Matrix am = as_matrix(a, n, n), bm = as_matrix(b, n, n), cm = as_matrix(c, n, n);
  kernels::gemm(false, false, 1.0f, am, bm, 0.0f, cm);  // warm-up (first-touch, threads)
  Kokkos::fence();
  const double flops = 2.0 * n * static_cast<double>(n) * n;
  double best = 0.0;
  Stopwatch total;
  while (total.seconds() < seconds) {
    Stopwatch one;
    kernels::gemm(false, false, 1.0f, am, bm, 0.0f, cm);
    const double t = one.fenced_seconds();
    if (t > 0) best = std::max(best, flops / t);
  }
  return best * 1e-12;
}

double model_flops_utilisation(double flops_per_sample, double samples_per_second, int devices,
                               double peak_tflops_per_device) {
  if (peak_tflops_per_device <= 0 || devices <= 0) return 0.0;
  return flops_per_sample * samples_per_second / devices / (peak_tflops_per_device * 1e12);
}

std::int64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long long pages_total = 0, pages_resident = 0;
  const int read = std::fscanf(f, "%lld %lld", &pages_total, &pages_resident);
  std::fclose(f);
  if (read != 2) return 0;
  return static_cast<std::int64_t>(pages_resident) * sysconf(_SC_PAGESIZE);
}

CostEstimate estimate_cost(double elapsed_s, std::int64_t steps_done, std::int64_t total_steps,
                           int devices, double price_per_device_hour,
                           double spot_price_per_device_hour) {
  CostEstimate c;
  c.device_hours = elapsed_s / 3600.0 * devices;
  c.on_demand = c.device_hours * price_per_device_hour;
  c.spot = c.device_hours * spot_price_per_device_hour;
  const double scale =
      steps_done > 0 ? static_cast<double>(total_steps) / static_cast<double>(steps_done) : 0.0;
  c.projected_on_demand = c.on_demand * scale;
  c.projected_spot = c.spot * scale;
  return c;
}

}  // namespace trellis
