// The single-thread SGEMM rate on the GEMMs of one MLP training step, through the same
// kernels::gemm the step calls: the ceiling the step's compute can reach, so that
// run_bench.sh can report what fraction of its step time the MLP spends outside GEMM.
//
//   trellis_gemm_rate [--batch 256] [--widths 784,1024,1024,10] [--repeats 20]
//
// Per layer (in -> out, n = batch): forward y = x W^T, weight gradient dW = dy^T x, and the
// input gradient dx = dy W for every layer but the first (nothing upstream needs it). Prints one
// JSON line: the GEMM FLOPs of one step, the median time of the whole set and its rate.
#include "trellis/kernels/gemm.hpp"
#include "trellis/kernels/host_threads.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Options {
  int batch = 256;
  std::vector<int> widths{784, 1024, 1024, 10};
  int repeats = 20;
};

std::vector<int> parse_widths(const std::string& text) {
  std::vector<int> widths;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    widths.push_back(std::stoi(text.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  return widths;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--batch")
      o.batch = std::stoi(value);
    else if (key == "--widths")
      o.widths = parse_widths(value);
    else if (key == "--repeats")
      o.repeats = std::stoi(value);
    else
      throw std::invalid_argument("unknown option " + key);
  }
  if (o.batch <= 0 || o.widths.size() < 2 || o.repeats <= 0)
    throw std::invalid_argument("need --batch > 0, at least two --widths and --repeats > 0");
  return o;
}

using trellis::FloatView;
using trellis::Matrix;

struct LayerBuffers {
  int in, out;
  FloatView x, w, y, dw, dx;  // x, dx: [n, in]  w, dw: [out, in]  y (also dy): [n, out]
};

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  trellis::kernels::configure_host_threads();
  Options opt;
  try {
    opt = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trellis_gemm_rate: %s\n", e.what());
    return 2;
  }
  const int n = opt.batch;
  std::vector<LayerBuffers> layers;
  double flops = 0.0;
  for (std::size_t l = 0; l + 1 < opt.widths.size(); ++l) {
    const int in = opt.widths[l], out = opt.widths[l + 1];
    LayerBuffers b{in,
                   out,
                   FloatView("x", std::size_t(n) * in),
                   FloatView("w", std::size_t(out) * in),
                   FloatView("y", std::size_t(n) * out),
                   FloatView("dw", std::size_t(out) * in),
                   FloatView("dx", std::size_t(n) * in)};
    Kokkos::deep_copy(b.x, 0.5f);
    Kokkos::deep_copy(b.w, 0.01f);
    Kokkos::deep_copy(b.y, 0.25f);
    layers.push_back(b);
    flops += 2.0 * n * in * out * (l == 0 ? 2 : 3);
  }
  const auto one_step = [&] {
    for (const LayerBuffers& b : layers) {
      trellis::kernels::gemm(false, true, 1.0f, Matrix(b.x.data(), n, b.in),
                             Matrix(b.w.data(), b.out, b.in), 0.0f, Matrix(b.y.data(), n, b.out));
    }
    for (std::size_t l = layers.size(); l-- > 0;) {
      const LayerBuffers& b = layers[l];
      trellis::kernels::gemm(true, false, 1.0f, Matrix(b.y.data(), n, b.out),
                             Matrix(b.x.data(), n, b.in), 0.0f, Matrix(b.dw.data(), b.out, b.in));
      if (l > 0) {
        trellis::kernels::gemm(false, false, 1.0f, Matrix(b.y.data(), n, b.out),
                               Matrix(b.w.data(), b.out, b.in), 0.0f, Matrix(b.dx.data(), n, b.in));
      }
    }
    Kokkos::fence();
  };
  one_step();  // warm-up: BLAS buffers, page faults
  std::vector<double> seconds;
  for (int r = 0; r < opt.repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    one_step();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  std::printf(
      "{\"batch\": %d, \"gemm_flops_per_step\": %.0f, \"gemm_seconds_per_step\": %.6g, "
      "\"gemm_gflops\": %.4g}\n",
      n, flops, median, flops / median * 1e-9);
  return 0;
}
