#!/usr/bin/env bash
# Installs the Debian 12 packages Trellis needs to build, test and run its demo.
# Idempotent: packages already installed are skipped, and apt is not touched when nothing is
# missing. Clusters provide the same dependencies through modules or Spack instead; see README.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  openmpi-bin libopenmpi-dev
  libhdf5-openmpi-dev hdf5-tools
  libboost-program-options-dev
  catch2
  libopenblas-dev
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev
  dataset-fashion-mnist
  python3-numpy python3-h5py
)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install-deps: not a Debian-based system; install MPI, parallel HDF5, Kokkos(+Kernels)," >&2
  echo "install-deps: Boost.Program_options, Catch2 and BLAS with your module system or Spack." >&2
  exit 1
fi

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "install-deps: need root to run: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
"${SUDO[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
