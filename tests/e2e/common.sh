# Shared by the end-to-end scripts: where things are and how to launch ranks.
set -euo pipefail
: "${TRELLIS_BIN:?set by ctest}" "${TRELLIS_SRC:?set by ctest}" "${TRELLIS_TEST_DATA:?set by ctest}"
# Site paths, from CMake cache variables of the same names (cmake/TrellisTesting.cmake).
: "${TRELLIS_PYTHON:?set by ctest}" "${TRELLIS_FASHION_MNIST_DIR:?set by ctest}"
: "${TRELLIS_TEXT_CORPUS:?set by ctest}"
MPIEXEC=${MPIEXEC:-mpiexec}
read -r -a MPIEXEC_ARGS <<< "${MPIEXEC_FLAGS:---allow-run-as-root --oversubscribe}"
export OPENBLAS_NUM_THREADS=1
FASHION_DIR="$TRELLIS_TEST_DATA/fashion-mnist"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/trellis-e2e.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# The portable build (TRELLIS_PORTABLE_KERNELS) exchanges gradients through the communicator
# only, as a device build does: the scripts leave out their node shared-memory runs there.
if "$TRELLIS_BIN" info 2> /dev/null | grep -q "TRELLIS_PORTABLE_KERNELS=ON"; then
  SHARED_MEMORY_EXCHANGE=false
else
  SHARED_MEMORY_EXCHANGE=true
fi

# trellis_run NP ARGS...: runs the executable on NP ranks with a hard time limit.
trellis_run() {
  local np=$1
  shift
  timeout "${TRELLIS_RUN_TIMEOUT:-600}" "$MPIEXEC" "${MPIEXEC_ARGS[@]}" -n "$np" "$TRELLIS_BIN" "$@"
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# expect_exit CODE LOG cmd...: runs cmd (output into LOG), fails unless it exits with CODE.
expect_exit() {
  local want=$1 log=$2 got=0
  shift 2
  "$@" > "$log" 2>&1 || got=$?
  [[ $got -eq $want ]] || fail "exit code $got, expected $want: $* (log: $(tail -5 "$log"))"
}

# eval_field LOG FIELD: the value of FIELD (loss, accuracy) on the last `trellis eval` line.
eval_field() { sed -n "s/.*$2 \([0-9.]*\).*/\1/p" "$1" | tail -1; }
