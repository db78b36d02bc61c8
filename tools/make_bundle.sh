#!/usr/bin/env bash
# tools/make_bundle.sh BUILD_DIR OUT_DIR: one relocatable folder to copy to a node that has no
# compiler and no development packages (a GPU node, typically), and run tools/gpu_check.sh there:
#
#   OUT_DIR/bin/      trellis, trellis_unit_tests, trellis_mpi_tests (stripped; RUNPATH $ORIGIN/../lib)
#   OUT_DIR/lib/      the shared libraries they need that a compute node may lack (HDF5, Boost,
#                     Kokkos, OpenBLAS, libstdc++, ... each with RUNPATH $ORIGIN)
#   OUT_DIR/inputs/   the configurations; OUT_DIR/data/ small data for the check's runs
#   OUT_DIR/tools/    gpu_check.sh and launch
#   OUT_DIR/MANIFEST  what is in it, and what must come from the node
#
# Not bundled, because they must match the node: the C library, the MPI library and its hwloc
# and libevent (they must match the node's mpirun; load the node's Open MPI 4.x/5.x, whose libmpi.so.40 is the same ABI), and
# the NVIDIA driver and CUDA libraries (libcudart, cuBLAS/cuBLASLt, cuDNN, NCCL: hundreds of MB,
# and the node's CUDA module provides them). gpu_check.sh reports any that the node lacks.
# Needs patchelf (tools/install-deps.sh installs it). Data: data/austen and data/fashion-mnist
# when they exist (make demo-gpt / make demo prepare them).
set -euo pipefail

[[ $# -eq 2 ]] || {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
  exit 2
}
build=$(realpath "$1")
out=$2
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v patchelf > /dev/null || {
  echo "make_bundle: patchelf is missing (apt-get install patchelf, or tools/install-deps.sh)" >&2
  exit 2
}
binaries=("$build/trellis" "$build/tests/trellis_unit_tests" "$build/tests/trellis_mpi_tests")
for b in "${binaries[@]}"; do
  [[ -x $b ]] || {
    echo "make_bundle: $b is missing: build it first (make build)" >&2
    exit 2
  }
done

# Libraries left to the node (see above), by file name.
from_node='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux.*|linux-vdso)\.so|'
from_node+='^lib(mpi|mpi_cxx|open-rte|open-pal|pmix|ucp|ucs|uct|ucm|hwloc|event_core-.*|event_pthreads-.*)\.so|'
from_node+='^lib(cuda|cudart|cublas|cublasLt|cudnn.*|nccl|nvidia-.*|nvrtc|nvJitLink|cufft|curand|cusparse|cusolver)\.so'

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/tools" "$out/data"
for b in "${binaries[@]}"; do
  cp "$b" "$out/bin/"
done

declare -A bundled=() left=()
while read -r name path; do
  if [[ $name =~ $from_node ]]; then
    left[$name]=1
  elif [[ $path == "not" ]]; then
    echo "make_bundle: $name is not found on this machine (ldd); fix the build first" >&2
    exit 1
  elif [[ -z ${bundled[$name]:-} ]]; then
    cp -L "$path" "$out/lib/$name"
    bundled[$name]=1
  fi
done < <(for b in "${binaries[@]}"; do ldd "$b"; done | awk '$2 == "=>" {print $1, $3}' | sort -u)

for f in "$out"/bin/*; do
  strip --strip-unneeded "$f"
  patchelf --set-rpath '$ORIGIN/../lib' "$f"
done
for f in "$out"/lib/*; do
  chmod u+w "$f"
  patchelf --set-rpath '$ORIGIN' "$f"
done

cp -r "$src/inputs" "$out/"
cp "$src/tools/gpu_check.sh" "$src/tools/launch" "$out/tools/"
for d in austen fashion-mnist; do
  [[ -d $src/data/$d ]] && mkdir -p "$out/data/$d"
done
[[ -f $src/data/austen/val.h5 ]] && cp "$src/data/austen/val.h5" "$out/data/austen/"
[[ -f $src/data/fashion-mnist/test.h5 ]] && cp "$src/data/fashion-mnist/test.h5" "$out/data/fashion-mnist/"

{
  echo "Trellis bundle of $build, made $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname)"
  "$build/trellis" info 2> /dev/null | sed -n '1,2p' || true  # (a CUDA build without a GPU cannot start)
  echo
  echo "bin/: ${binaries[*]##*/}"
  echo "lib/ (bundled): ${!bundled[*]}"
  echo "from the node: ${!left[*]}"
  echo "data/: $(cd "$out/data" && find . -name '*.h5' | sort | tr '\n' ' ')"
  echo
  echo "size: $(du -sh "$out" | cut -f1)"
} > "$out/MANIFEST"
cat "$out/MANIFEST"
