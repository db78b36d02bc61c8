#!/usr/bin/env bash
# Installs the Debian 12 packages Trellis needs to build, test and run its demo, then a Python
# virtual environment for the tools at ${TRELLIS_VENV:-/opt/trellis-venv}: tensorboard (the
# event-file test), Hugging Face tokenizers and pyarrow (tools/text_to_bpe.py: BPE tokenisation,
# Parquet input).
# `--bench` also installs what `make bench` compares against: current PyTorch in the venv below
# (and Debian's PyTorch 1.13, python3-torch, the fallback peer when that venv cannot be made).
# `--hf` also makes ${TRELLIS_HF_VENV:-/opt/trellis-hf-venv}: PyTorch 2.x, transformers,
# safetensors and tokenizers from PyPI, which e2e.hf_transformers and tools/bench/llama_bench.sh
# compare against (about 5 GB: PyPI's torch brings CUDA libraries; nothing in Trellis needs it
# at run time). A failed download is a warning there, and the test is then skipped.
# Idempotent: packages already installed are skipped, and apt is not touched when nothing is
# missing; the venv is left alone when it already imports all of them. Clusters provide the
# same dependencies through modules or Spack instead; see README.
set -euo pipefail

packages=(
  build-essential cmake pkg-config patchelf
  openmpi-bin libopenmpi-dev
  libhdf5-openmpi-dev hdf5-tools
  libboost-program-options-dev nlohmann-json3-dev
  catch2
  libopenblas-dev libdnnl-dev ocl-icd-opencl-dev
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev
  dataset-fashion-mnist
  python3-numpy python3-h5py python3-venv python3-matplotlib python3-pil
)
[[ "${1:-}" == "--bench" ]] && packages+=(python3-torch)
want_hf=false
# `make bench`'s peer is current PyTorch: the same venv as the Hugging Face peers'.
[[ "${1:-}" == "--hf" || "${1:-}" == "--bench" ]] && want_hf=true

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

# Runs "$@" as root: directly, or through sudo; stops with the command to run otherwise.
as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "install-deps: need root to run: $*" >&2
    exit 1
  fi
}

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# tensorboard for tests/tools/test_tensorboard_events.py, tokenizers and pyarrow for
# tools/text_to_bpe.py (neither is packaged by Debian 12). Debian's python3 is "externally
# managed" (PEP 668), so pip goes into a venv; --system-site-packages keeps Debian's numpy and
# h5py.
venv=${TRELLIS_VENV:-/opt/trellis-venv}
venv_packages=(tensorboard tokenizers "pyarrow<20")  # pyarrow 20+ wants NumPy 2; Debian 12 has 1.24
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "import tensorboard, tokenizers, pyarrow" >/dev/null 2>&1; then
  echo "install-deps: $venv already has ${venv_packages[*]}"
else
  echo "install-deps: installing ${venv_packages[*]} into $venv"
  in_venv_dir=()  # root is needed only where the venv's folder is not ours
  if ! { [[ -w "$venv" ]] || { [[ ! -e "$venv" ]] && [[ -w "$(dirname "$venv")" ]]; }; }; then
    in_venv_dir=(as_root)
  fi
  if [[ ! -x "$venv/bin/python" ]]; then
    "${in_venv_dir[@]}" /usr/bin/python3 -m venv --system-site-packages "$venv"
  fi
  "${in_venv_dir[@]}" "$venv/bin/python" -m pip install -q "${venv_packages[@]}"
  "$venv/bin/python" -c "import tensorboard, tokenizers, pyarrow; print('install-deps: tensorboard', tensorboard.__version__, 'tokenizers', tokenizers.__version__, 'pyarrow', pyarrow.__version__)"
fi

# The Hugging Face peers (--hf): a venv of its own, so the tools' venv stays small.
hf_venv=${TRELLIS_HF_VENV:-/opt/trellis-hf-venv}
if $want_hf; then
  if [[ -x "$hf_venv/bin/python" ]] &&
      "$hf_venv/bin/python" -c "import torch, transformers, safetensors, tokenizers, h5py" >/dev/null 2>&1; then
    echo "install-deps: $hf_venv already has torch, transformers, safetensors, tokenizers"
  else
    echo "install-deps: installing torch, transformers, safetensors, tokenizers into $hf_venv"
    { [[ -x "$hf_venv/bin/python" ]] || /usr/bin/python3 -m venv "$hf_venv"; } &&
      "$hf_venv/bin/python" -m pip install -q torch transformers safetensors tokenizers h5py numpy &&
      "$hf_venv/bin/python" -c "import torch, transformers; print('install-deps: torch', torch.__version__, 'transformers', transformers.__version__)" ||
      echo "install-deps: WARNING: the Hugging Face venv could not be made; e2e.hf_transformers will be skipped" >&2
  fi
fi
