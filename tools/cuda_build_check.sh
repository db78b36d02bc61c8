#!/usr/bin/env bash
# tools/cuda_build_check.sh KOKKOS_PREFIX [KOKKOS_KERNELS_PREFIX] [BUILD_DIR]
#
# Builds the CUDA configuration (CUDA + cuDNN + NCCL, warnings as errors) of this checkout:
# `trellis`, `trellis_unit_tests` and `trellis_mpi_tests`. CI cannot (no CUDA-enabled Kokkos
# comes from any package registry), so run it before landing a change to device code: kernels,
# nn, optim, parallel or comm. It needs no GPU, only the CUDA toolkit (nvcc, cuBLAS, cuDNN,
# NCCL) and an installed CUDA Kokkos and Kokkos Kernels (Spack, modules, or your own build:
# Kokkos with -DKokkos_ENABLE_CUDA=ON and the GPU's architecture, e.g. -DKokkos_ARCH_HOPPER90=ON).
# KOKKOS_KERNELS_PREFIX defaults to KOKKOS_PREFIX; BUILD_DIR to build-cuda. Exits non-zero on
# the first configuration or compile error and prints the failing lines.
# Environment: JOBS (default nproc), CUDNN_ROOT (when cuDNN is not in the CUDA toolkit).
set -euo pipefail

if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
  [[ $# -ge 1 ]] && exit 0 || exit 2
fi
kokkos=$(realpath "$1")
kernels=$(realpath "${2:-$1}")
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${3:-$src/build-cuda}
wrapper="$kokkos/bin/nvcc_wrapper"

[[ -x $wrapper ]] || {
  echo "cuda_build_check: $wrapper not found: KOKKOS_PREFIX must be a Kokkos install built with CUDA" >&2
  exit 2
}
grep -rqs "KOKKOS_ENABLE_CUDA" "$kokkos"/include/KokkosCore_config.h || {
  echo "cuda_build_check: $kokkos/include/KokkosCore_config.h does not enable CUDA" >&2
  exit 2
}
command -v nvcc > /dev/null || {
  echo "cuda_build_check: nvcc not on PATH (load the CUDA toolkit)" >&2
  exit 2
}

mkdir -p "$build"
echo "cuda_build_check: $(nvcc --version | tail -1); Kokkos $kokkos; building in $build"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$wrapper" -DKokkos_ROOT="$kokkos" -DKokkosKernels_ROOT="$kernels" \
  -DTRELLIS_ENABLE_CUDA=ON -DTRELLIS_ENABLE_CUDNN=ON -DTRELLIS_ENABLE_NCCL=ON \
  -DTRELLIS_WERROR=ON > "$build/configure.log" 2>&1 || {
  tail -30 "$build/configure.log" >&2
  echo "cuda_build_check: configuration failed (log: $build/configure.log)" >&2
  exit 1
}
start=$SECONDS
if ! cmake --build "$build" -j "${JOBS:-$(nproc)}" \
  --target trellis trellis_unit_tests trellis_mpi_tests > "$build/build.log" 2>&1; then
  grep -E "error|Error" "$build/build.log" | head -40 >&2
  echo "cuda_build_check: the CUDA build FAILED (log: $build/build.log)" >&2
  exit 1
fi
echo "cuda_build_check: trellis, trellis_unit_tests and trellis_mpi_tests built in $((SECONDS - start)) s"
