#!/usr/bin/env bash
# tools/gpu_check.sh [DIR] [REPORT]: the first minutes on a GPU node, in one command (about 5
# minutes on one H100). DIR is a bundle (make bundle; bin/, lib/, data/) or a CUDA build
# directory (default: the bundle this script sits in). Runs, each part PASS, FAIL or SKIP:
#   1. node      the GPU (nvidia-smi), `trellis info`, and libraries the node lacks
#   2. unit      the unit tests (all but [alloc], as in the portable build)
#   3. mpi       the MPI tests at 1 rank
#   4. vendor    cuBLAS (GEMM tests), cuDNN (convolution tests), cuBLASLt/GemmEx (16-bit
#                casts and GEMMs), NCCL (a 1-rank training run with parallel.backend = nccl)
#   5. training  inputs/gpt_small.ini (GPT-2 small, 124M parameters, T=1024) in fp32 and bf16
#                on byte tokens, and inputs/fashion_cnn.ini: tokens or samples/s, TFLOP/s, MFU
#                against the data-sheet peak, GPU memory, the step-time split
#   6. calibrate `trellis plan --calibrate` on the GPU: a machine type for the planner
#                (docs/planning.md), written as REPORT with .ini for .md (default
#                gpu_check_report.ini), from inputs/clusters/onprem.ini's first section
# and writes REPORT (default gpu_check_report.md here) with a line per part and the logs'
# tails. Exit code: 0 when nothing failed, 1 otherwise. Environment: MPIEXEC (default mpirun),
# CHECK_STEPS (training steps per run, default 30), GPU_PEAK_TFLOPS="fp32 bf16" to override the
# data-sheet table.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$(realpath "${1:-$here/..}")
report=$(realpath -m "${2:-gpu_check_report.md}")
steps=${CHECK_STEPS:-30}
if [[ -x $dir/bin/trellis ]]; then
  bin=$dir/bin tests=$dir/bin data=$dir/data inputs=$dir/inputs
elif [[ -x $dir/trellis ]]; then
  src=$(cd "$here/.." && pwd)
  bin=$dir tests=$dir/tests data=$src/data inputs=$src/inputs
else
  echo "gpu_check: $dir is neither a bundle (bin/trellis) nor a build directory (trellis)" >&2
  exit 2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mpiexec=${MPIEXEC:-mpirun}
mpi_flags=()
[[ $(id -u) -eq 0 ]] && mpi_flags+=(--allow-run-as-root)

results=() failed=0 details=""
record() {  # record PART STATUS TEXT
  results+=("| $1 | $2 | $3 |")
  [[ $2 == FAIL ]] && failed=1
  printf '%-9s %-4s %s\n' "$1" "$2" "$3"
}
detail() {  # detail TITLE FILE: the tail of a log, in the report
  details+=$'\n'"### $1"$'\n\n```\n'"$(tail -n 15 "$2")"$'\n```\n'
}
run_timed() {  # run_timed LIMIT LOG CMD...: 0 on success
  local limit=$1 log=$2
  shift 2
  timeout "$limit" "$@" > "$log" 2>&1
}

# 1. The node.
gpu=none
if command -v nvidia-smi > /dev/null && nvidia-smi -L > "$work/smi.log" 2>&1; then
  gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
fi
missing=$(ldd "$bin/trellis" "$tests/trellis_unit_tests" 2> /dev/null | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
"$bin/trellis" info > "$work/info.log" 2>&1
cuda_build=false
grep -q "TRELLIS_ENABLE_CUDA=ON" "$work/info.log" && cuda_build=true
if [[ -n $missing ]]; then
  record node FAIL "libraries the node lacks: $missing(load the CUDA and MPI modules)"
elif [[ $gpu == none ]]; then
  record node SKIP "no NVIDIA GPU visible (nvidia-smi); the CPU parts below still run"
else
  record node PASS "$gpu; $(sed -n 2p "$work/info.log" | sed 's/^ *options: //')"
fi
detail "trellis info" "$work/info.log"
[[ -n $missing ]] && { printf '%s\n' "${results[@]}"; exit 1; }
have_gpu=false
[[ $gpu != none ]] && $cuda_build && have_gpu=true

# 2. Unit tests.
if run_timed 600 "$work/unit.log" "$tests/trellis_unit_tests" "~[alloc]~[.]"; then
  record unit PASS "$(grep -E "^All tests passed" "$work/unit.log")"
else
  record unit FAIL "$(grep -E "^test cases:" "$work/unit.log" | tail -1)"
  detail "unit tests" "$work/unit.log"
fi

# 3. MPI tests at 1 rank.
launcher=()
command -v "$mpiexec" > /dev/null && launcher=("$mpiexec" "${mpi_flags[@]}" -n 1)
if run_timed 600 "$work/mpi.log" "${launcher[@]}" "$tests/trellis_mpi_tests"; then
  record mpi PASS "1 rank: $(grep -E "All tests passed" "$work/mpi.log" | head -1 | sed "s/\x1b\[[0-9;]*m//g")"
else
  record mpi FAIL "1 rank: see the log below"
  detail "MPI tests, 1 rank" "$work/mpi.log"
fi

# 4. The vendor libraries.
if ! $have_gpu; then
  record vendor SKIP "needs a CUDA build on a GPU (this is $($cuda_build && echo "a CUDA build without a GPU" || echo "a host build"))"
else
  vendor_ok=true
  for tag in "[gemm]" "[conv]" "[precision]"; do
    run_timed 300 "$work/vendor.log" "$tests/trellis_unit_tests" "$tag" || {
      vendor_ok=false
      detail "unit tests $tag" "$work/vendor.log"
    }
  done
  run_timed 300 "$work/nccl.log" "${launcher[@]}" "$bin/trellis" train \
    --config "$inputs/fashion_mlp.ini" --data.train="$data/fashion-mnist/test.h5" --data.test= \
    --train.max_steps=20 --parallel.backend=nccl --run.dir="$work/nccl" || {
    vendor_ok=false
    detail "NCCL run" "$work/nccl.log"
  }
  $vendor_ok && record vendor PASS "cuBLAS GEMM, cuDNN convolution, 16-bit casts/GemmEx tests; a NCCL-backed run" ||
    record vendor FAIL "see the logs below"
fi

# 5. Training runs. Data-sheet dense peaks (TFLOP/s): fp32 without tensor cores, bf16 tensor.
read -r peak_fp32 peak_bf16 <<< "${GPU_PEAK_TFLOPS:-}"
if [[ -z ${peak_fp32:-} ]]; then
  case $gpu in
    *H100*PCIe*) peak_fp32=51.2 peak_bf16=756 ;;
    *H100* | *H200* | *GH200*) peak_fp32=66.9 peak_bf16=989.4 ;;
    *A100*) peak_fp32=19.5 peak_bf16=312 ;;
    *L40S*) peak_fp32=91.6 peak_bf16=362 ;;
    *) peak_fp32="" peak_bf16="" ;;
  esac
fi
train_run() {  # train_run NAME PEAK ARGS...
  local name=$1 peak=$2
  shift 2
  local log=$work/$name.log
  if ! run_timed 900 "$log" "${launcher[@]}" "$bin/trellis" train "$@" --train.max_steps="$steps" \
    --log.interval=10 --log.progress=lines --data.test= --run.dir="$work/$name"; then
    record "$name" FAIL "see the log below"
    detail "$name" "$log"
    return
  fi
  local done_line tflops rate mfu memory split
  done_line=$(grep "^done:" "$log" | tail -1)
  tflops=$(sed -n 's/.*after the first step, \([0-9.e+]*\) TFLOP\/s.*/\1/p' <<< "$done_line")
  rate="$(sed -n 's/.* \([0-9.e+]*\) samples\/s after the first step.*/\1/p' <<< "$done_line") samples/s"
  local tokens
  tokens=$(sed -n 's/.*"tokens_per_sec": \([0-9.e+]*\).*/\1/p' "$work/$name/metrics.jsonl" | tail -1)
  [[ -n $tokens && $tokens != 0 ]] && rate+=" ($(awk -v t="$tokens" 'BEGIN {printf "%.0f", t}') tokens/s)"
  mfu="MFU n/a (no data-sheet peak for this device)"
  [[ -n $peak && -n $tflops ]] && mfu="MFU $(awk -v a="$tflops" -v p="$peak" 'BEGIN {printf "%.1f%%", 100 * a / p}') of $peak TFLOP/s (data sheet)"
  memory=$(sed -n 's/.*"\(gpu_memory_used_bytes\|device_memory_used_bytes\)": \([0-9.e+]*\).*/\2/p' "$work/$name/metrics.jsonl" | sort -g | tail -1)
  [[ -n $memory ]] && memory="GPU memory $(awk -v b="$memory" 'BEGIN {printf "%.2f GiB", b / 2^30}')" || memory="GPU memory n/a"
  split=$(grep "^time per step:" "$log" | tail -1 | sed 's/^time per step: //')
  record "$name" PASS "$rate, $tflops TFLOP/s, $mfu; $memory; step: $split"
}
if ! $have_gpu; then
  record training SKIP "GPT-2 small and CNN runs need a CUDA build on a GPU"
else
  gpt=(--config "$inputs/gpt_small.ini" --data.train="$data/austen/val.h5" --train.global_batch=8
       --train.micro_batch=8)
  train_run gpt_fp32 "$peak_fp32" "${gpt[@]}"
  train_run gpt_bf16 "$peak_bf16" "${gpt[@]}" --precision.mode=bf16
  train_run cnn "$peak_fp32" --config "$inputs/fashion_cnn.ini" --data.train="$data/fashion-mnist/test.h5"
fi

# 6. The planner's calibration of this GPU.
calibration=${report%.md}.ini
[[ $calibration == "$report" ]] && calibration=$report.ini
if ! $have_gpu; then
  record calibrate SKIP "the planner's calibration needs a CUDA build on a GPU"
elif run_timed 300 "$work/calibrate.log" "${launcher[@]}" "$bin/trellis" plan --calibrate \
  --cluster "$inputs/clusters/onprem.ini" --name "$(hostname)-gpu" --out "$calibration"; then
  record calibrate PASS "$calibration: $(grep -m1 '^peak_tflops_bf16' "$calibration"), $(grep -m1 '^gemm_efficiency_bf16' "$calibration")"
else
  record calibrate FAIL "trellis plan --calibrate"
  detail "calibrate" "$work/calibrate.log"
fi

{
  echo "# Trellis GPU check: $(hostname), $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "GPU: $gpu; checked: $dir"
  echo
  echo "| part | result | details |"
  echo "|---|---|---|"
  printf '%s\n' "${results[@]}"
  echo "$details"
} > "$report"
echo "gpu_check: report in $report"
rm -rf "$work"
exit "$failed"
