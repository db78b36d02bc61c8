#!/usr/bin/env bash
# Trellis against its honest peer, side by side in one invocation (`make bench`):
#   1 rank   vs PyTorch, 1 process x 1 thread
#   2 ranks  vs PyTorch DistributedDataParallel over gloo, 2 processes x 1 thread
# each precision (PRECISIONS, default "fp32 bf16": Trellis precision.mode against PyTorch under
# torch.autocast("cpu", dtype=torch.bfloat16)) and each PyTorch mode: eager, and with PyTorch 2
# torch.compile (compiled in the warm-up steps, outside the timing). Same model, global batch
# and optimizer, data in memory for both (Trellis: data.cache=memory). Models: the MLP
# 784-1024-1024-10 (batch 256), inputs/fashion_cnn.ini and inputs/gpt_char.ini. The runs
# alternate (Trellis first, then the peer, and the other way round in the next repetition)
# and repeat, so drift on a shared machine hits both sides; summarize.py prints one table per
# precision: the median and spread of each side, the per-repetition ratios, the 2-rank
# data-parallel efficiency and the MLP step's share of the single-thread SGEMM rate.
#
# The peer is current PyTorch from PyPI, in the venv tools/install-deps.sh --bench makes
# (PEER_PYTHON, default /opt/trellis-hf-venv/bin/python); without it, Debian's PyTorch 1.13
# (eager only), named as the fallback in the output.
#
# usage: tools/bench/run_bench.sh [repeats=3]
# env:   TRELLIS_BIN (build/trellis), GEMM_RATE_BIN (build/trellis_gemm_rate),
#        BASELINE_BIN (another trellis binary to measure in the same rounds, e.g. an older
#        commit's), MODELS ("mlp cnn gpt"), RANKS ("1 2"), PRECISIONS ("fp32 bf16"),
#        COMPILE (1: also torch.compile; 0: eager only), PEER_PYTHON,
#        STEPS_MLP/STEPS_CNN/STEPS_GPT,
#        FASHION_DIR (data/fashion-mnist), TEXT_DIR (data/austen), BENCH_OUT (keep raw results)
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=${1:-3}
bin=${TRELLIS_BIN:-build/trellis}
gemm_bin=${GEMM_RATE_BIN:-build/trellis_gemm_rate}
baseline=${BASELINE_BIN:-}
models=${MODELS:-mlp cnn gpt}
ranks=${RANKS:-1 2}
precisions=${PRECISIONS:-fp32 bf16}
fashion=${FASHION_DIR:-data/fashion-mnist}
text=${TEXT_DIR:-data/austen}
python=${PYTHON:-/usr/bin/python3}
out=${BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
mpi_flags=(--oversubscribe --bind-to core)
[[ $(id -u) -eq 0 ]] && mpi_flags+=(--allow-run-as-root)

peer_python=${PEER_PYTHON:-/opt/trellis-hf-venv/bin/python}
compile=${COMPILE:-1}
if "$peer_python" -c "import torch, h5py; assert int(torch.__version__.split('.')[0]) >= 2" 2>/dev/null; then
  echo "PyTorch $("$peer_python" -c 'import torch; print(torch.__version__)') ($peer_python)" > "$out/peer"
elif "$python" -c "import torch" 2>/dev/null; then
  peer_python=$python compile=0
  echo "PyTorch $("$python" -c 'import torch; print(torch.__version__)') ($python): the FALLBACK" \
    "peer, Debian's; current PyTorch (tools/install-deps.sh --bench) was not found" > "$out/peer"
else
  echo "run_bench: PyTorch is missing: tools/install-deps.sh --bench installs it" >&2
  exit 1
fi
cat "$out/peer" >&2
for f in "$bin" "$gemm_bin" "$fashion/train.h5" "$text/train.h5"; do
  [[ -e "$f" ]] || { echo "run_bench: missing $f (make build, make demo / demo-gpt data)" >&2; exit 1; }
done

# Per model: Trellis overrides, the PyTorch peer's data file, steps, the throughput field.
trellis_args() {
  case $1 in
    mlp) echo "--config inputs/fashion_mlp.ini --model.hidden=1024,1024 --train.global_batch=256" \
              "--data.train=$fashion/train.h5 --sched.type=constant --train.max_steps=${STEPS_MLP:-100}" ;;
    cnn) echo "--config inputs/fashion_cnn.ini --data.train=$fashion/train.h5" \
              "--sched.type=constant --train.max_steps=${STEPS_CNN:-30}" ;;
    gpt) echo "--config inputs/gpt_char.ini --data.train=$text/train.h5" \
              "--sched.warmup_steps=5 --train.max_steps=${STEPS_GPT:-30}" ;;
  esac
}
peer_data() { [[ $1 == gpt ]] && echo "$text/train.h5" || echo "$fashion/train.h5"; }
peer_steps() { case $1 in mlp) echo "${STEPS_MLP:-100}" ;; cnn) echo "${STEPS_CNN:-30}" ;; gpt) echo "${STEPS_GPT:-30}" ;; esac; }
field() { [[ $1 == gpt ]] && echo tokens_per_sec || echo samples_per_sec; }

run_trellis() {  # binary label model np [precision]
  local run="$out/run-$2"
  # shellcheck disable=SC2046
  mpiexec "${mpi_flags[@]}" -n "$4" "$1" train $(trellis_args "$3") --data.test= \
    --data.cache=memory --log.interval=100000 --precision.mode="${5:-fp32}" \
    --run.dir="$run" --run.overwrite=true > "$out/last.log" 2>&1 || { cat "$out/last.log" >&2; exit 1; }
  "$python" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" \
    "$run/summary.json" "$(field "$3")" >> "$out/$2-$3-np$4"
}

run_peer() {  # model np precision compiled(0|1)
  local port=$((29500 + RANDOM % 1000)) pids=() r flags=()
  [[ $4 == 1 ]] && flags+=(--compile --warmup 8)
  for ((r = 0; r < $2; r++)); do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=$2 taskset -c "$r" \
      "$peer_python" tools/bench/torch_peer.py --model "$1" --data "$(peer_data "$1")" \
      --steps "$(peer_steps "$1")" --autocast "$3" "${flags[@]}" \
      > "$out/peer-$r.json" 2> "$out/peer-$r.log" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || { cat "$out"/peer-*.log >&2; exit 1; }; done
  local label=pytorch
  [[ $4 == 1 ]] && label=pytorch_compiled
  [[ $3 != fp32 ]] && label=${label}_$3
  "$python" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" \
    "$out/peer-0.json" "$(field "$1")" >> "$out/$label-$1-np$2"
}

echo "run_bench: $repeats repetitions of: ${models} at ${ranks} rank(s), ${precisions}," \
  "PyTorch eager$([[ $compile == 1 ]] && echo " and compiled"); raw results in $out" >&2
for ((rep = 0; rep < repeats; rep++)); do
  for model in $models; do
    for np in $ranks; do
      for precision in $precisions; do
        echo "run_bench: repetition $((rep + 1))/$repeats, $model, $np rank(s), $precision" >&2
        label=trellis
        [[ $precision != fp32 ]] && label=trellis_$precision
        # Alternate which side goes first, so a slow phase of the machine does not always land
        # on the same one.
        if ((rep % 2 == 0)); then
          run_trellis "$bin" "$label" "$model" "$np" "$precision"
          run_peer "$model" "$np" "$precision" 0
          if [[ $compile == 1 ]]; then run_peer "$model" "$np" "$precision" 1; fi
        else
          if [[ $compile == 1 ]]; then run_peer "$model" "$np" "$precision" 1; fi
          run_peer "$model" "$np" "$precision" 0
          run_trellis "$bin" "$label" "$model" "$np" "$precision"
        fi
        if [[ -n $baseline && $precision == fp32 ]]; then
          run_trellis "$baseline" baseline "$model" "$np"
        fi
      done
    done
  done
  "$gemm_bin" --batch 256 --widths 784,1024,1024,10 >> "$out/gemm-rate"
done
"$python" tools/bench/summarize.py "$out"
