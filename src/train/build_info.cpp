#include "trellis/train/build_info.hpp"

#include "trellis/comm/grid_layout.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/cpu_features.hpp"
#include "trellis/kernels/gemm_half.hpp"
#include "trellis/kernels/host_threads.hpp"
#include "trellis/kernels/int8.hpp"

#include <hdf5.h>
#include <Kokkos_Core.hpp>

#if defined(TRELLIS_ENABLE_NCCL)
#include <nccl.h>
#endif

#include <cstdio>
#include <cstring>
#include <sstream>
#include <vector>

#ifndef TRELLIS_COMPILER
#define TRELLIS_COMPILER "unknown"
#endif
#ifndef TRELLIS_BLAS
#define TRELLIS_BLAS "unknown"
#endif
#ifndef TRELLIS_BUILD_TYPE
#define TRELLIS_BUILD_TYPE "unknown"
#endif

namespace trellis {

namespace {
const char* on_off(bool on) { return on ? "ON" : "OFF"; }

bool built_with(const char* option) {
  const std::string name = option;
#if defined(TRELLIS_ENABLE_CUDA)
  if (name == "cuda") return true;
#endif
#if defined(TRELLIS_ENABLE_NCCL)
  if (name == "nccl") return true;
#endif
#if defined(TRELLIS_ENABLE_CUDNN)
  if (name == "cudnn") return true;
#endif
#if TRELLIS_HAVE_ONEDNN
  if (name == "onednn") return true;
#endif
  return false;
}
}  // namespace

std::string build_summary() {
  std::ostringstream out;
  out << "trellis " << TRELLIS_VERSION << " (" << TRELLIS_BUILD_TYPE << ", " << TRELLIS_COMPILER
      << ")\n";
  out << "  options: TRELLIS_ENABLE_CUDA=" << on_off(built_with("cuda"))
      << " TRELLIS_ENABLE_NCCL=" << on_off(built_with("nccl"))
      << " TRELLIS_ENABLE_CUDNN=" << on_off(built_with("cudnn"))
      << " TRELLIS_ENABLE_ONEDNN=" << on_off(built_with("onednn")) << "\n";
  out << "  kokkos " << KOKKOS_VERSION / 10000 << "." << KOKKOS_VERSION / 100 % 100 << "."
      << KOKKOS_VERSION % 100 << ", execution space " << Kokkos::DefaultExecutionSpace::name()
      << ", concurrency " << Kokkos::DefaultExecutionSpace().concurrency() << "\n";
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(mpi_version, &length);
  std::string mpi(mpi_version, static_cast<std::size_t>(length));
  if (auto newline = mpi.find_first_of("\r\n,"); newline != std::string::npos) mpi.resize(newline);
  out << "  mpi: " << mpi << "\n";
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  out << "  hdf5 " << major << "." << minor << "." << release
#if defined(H5_HAVE_PARALLEL)
      << " (parallel)"
#endif
      << "\n";
  out << "  blas: " << TRELLIS_BLAS << "\n";
  out << "  host gemm: " << kernels::host_gemm_description() << "\n";
  const CpuFeatures& cpu = host_cpu_features();
  out << "  cpu features: " << cpu.describe()
      << (cpu.hidden.empty() ? "" : " (TRELLIS_CPU_HIDE=" + cpu.hidden + ")")
      << "; native 16-bit GEMM:" << (kernels::native_gemm_available(Precision::bf16) ? " bf16" : "")
      << (kernels::native_gemm_available(Precision::fp16) ? " fp16" : "")
      << (kernels::native_gemm_available(Precision::bf16) ||
                  kernels::native_gemm_available(Precision::fp16)
              ? ""
              : " none")
      << "; int8 GEMM: " << (kernels::int8_onednn_available() ? "oneDNN" : "reference kernel")
      << "\n";
#if defined(TRELLIS_ENABLE_NCCL)
  out << "  nccl " << NCCL_MAJOR << "." << NCCL_MINOR << "." << NCCL_PATCH << "\n";
#endif
  return out.str();
}

void print_info(MPI_Comm world, const TrainConfig& config, const NodeBinding& node,
                const Logger& log) {
  int rank = 0, size = 1;
  TRELLIS_MPI(MPI_Comm_rank(world, &rank));
  TRELLIS_MPI(MPI_Comm_size(world, &size));
  const GridLayout layout = GridLayout::from_world(size, config.parallel.tp, config.parallel.pp);
  const GridCoords c = layout.coords(rank);

  // Fixed-width records so one MPI_Gather collects every rank's line.
  constexpr int kLine = 256;
  char line[kLine] = {};
  std::snprintf(line, kLine,
                "  rank %4d  host %-20s local rank %d/%d  device %s  grid dp=%d tp=%d pp=%d", rank,
                node.hostname.c_str(), node.local_rank, node.local_size,
                node.device >= 0 ? std::to_string(node.device).c_str() : "host", c.dp, c.tp, c.pp);
  std::vector<char> lines(rank == 0 ? static_cast<std::size_t>(kLine) * size : 0);
  TRELLIS_MPI(MPI_Gather(line, kLine, MPI_CHAR, lines.data(), kLine, MPI_CHAR, 0, world));

  std::string text = build_summary();
  text += "  ranks: " + std::to_string(size) + " on " + std::to_string(node.node_count) +
          " node(s); grid " + layout.describe() + "\n";
  for (int r = 0; r < size && rank == 0; ++r)
    text += std::string(&lines[static_cast<std::size_t>(r) * kLine]) + "\n";
  if (!text.empty() && text.back() == '\n') text.pop_back();
  log.info(text);
}

}  // namespace trellis
