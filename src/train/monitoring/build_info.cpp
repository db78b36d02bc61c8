#include "trellis/train/monitoring/build_info.hpp"

#include "trellis/core/code_path.hpp"
#include "trellis/core/cpu_features.hpp"
#include "trellis/kernels/gemm_half.hpp"
#include "trellis/kernels/host_threads.hpp"
#include "trellis/kernels/int8.hpp"

#include <hdf5.h>
#include <mpi.h>
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
      << " TRELLIS_ENABLE_ONEDNN=" << on_off(built_with("onednn"))
      << " TRELLIS_PORTABLE_KERNELS=" << on_off(TRELLIS_PORTABLE_KERNELS) << "\n";
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

}  // namespace trellis
