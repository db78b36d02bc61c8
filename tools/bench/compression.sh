#!/usr/bin/env bash
# Model compression, measured: for the MLP (inputs/fashion_mlp.ini), the CNN
# (inputs/fashion_cnn.ini) and the GPT (inputs/gpt_char.ini), the dense fp32 model, 50% and
# 90% unstructured magnitude pruning, structured pruning exported smaller (MLP neurons, CNN
# block channels; `trellis export --prune`) and int8 (`trellis quantize`, entropy
# calibration), with test accuracy (validation loss for the GPT), file size and the
# `trellis eval --cache` throughput on 1 rank (data read into memory first, so the figure is
# the model's). The eval runs of one model alternate over the variants and repeat, so drift on
# a shared machine hits all of them; the table has the median [min .. max] of each and its
# ratio to dense fp32 (median of the per-round ratios).
#
# usage: tools/bench/compression.sh OUT_DIR [repeats=5]
# Trains what OUT_DIR does not hold yet (2 ranks; the MLP in seconds, the CNN and the GPT in
# minutes each); a second call only measures.
# env: TRELLIS_BIN (build/trellis), MODELS ("mlp cnn gpt"), VARIANTS (all; e.g. "int8": that
#      and dense), FASHION_DIR (data/fashion-mnist), TEXT_DIR (data/austen), RANKS (2, for
#      training)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: compression.sh OUT_DIR [repeats]}
repeats=${2:-5}
bin=${TRELLIS_BIN:-build/trellis}
models=${MODELS:-mlp cnn gpt}
fashion=${FASHION_DIR:-data/fashion-mnist}
text=${TEXT_DIR:-data/austen}
ranks=${RANKS:-2}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mpi=(mpiexec --oversubscribe --bind-to none)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
mkdir -p "$out"

config_of() { case $1 in mlp) echo inputs/fashion_mlp.ini ;; cnn) echo inputs/fashion_cnn.ini ;; gpt) echo inputs/gpt_char.ini ;; esac; }
data_of() {  # data_of MODEL train|test
  if [[ $1 == gpt ]]; then [[ $2 == train ]] && echo "$text/train.h5" || echo "$text/val.h5"
  else echo "$fashion/$2.h5"; fi
}
eval_batch() { [[ $1 == gpt ]] && echo 16 || echo 500; }
# The pruning schedules: the sparsity ramps over the middle of the run, then fine-tunes.
prune_args() {  # prune_args MODEL VARIANT
  local steps
  case $1 in mlp) steps="--prune.start_step=200 --prune.end_step=1000" ;;
             cnn) steps="--prune.start_step=200 --prune.end_step=900" ;;
             gpt) steps="--prune.start_step=200 --prune.end_step=1000" ;; esac
  case $2 in
    sparse50) echo "--prune.method=magnitude --prune.final_sparsity=0.5 $steps" ;;
    sparse90) echo "--prune.method=magnitude --prune.final_sparsity=0.9 $steps" ;;
    structured) echo "--prune.method=structured --prune.final_sparsity=0.5 $steps" ;;
  esac
}
variants_of() {  # the model's variants, only those in VARIANTS when set (dense always: the base)
  local all
  case $1 in gpt) all="dense sparse50 sparse90 int8" ;; *) all="dense sparse50 sparse90 structured int8" ;; esac
  [[ -z ${VARIANTS:-} ]] && { echo "$all"; return; }
  for v in $all; do [[ $v == dense || " $VARIANTS " == *" $v "* ]] && echo -n "$v "; done; echo
}
train() {  # train MODEL VARIANT: OUT/MODEL-VARIANT/model.h5
  local model=$1 variant=$2 dir=$out/$1-$2
  [[ -f $dir/model.h5 ]] && return
  echo "training $model $variant ..." >&2
  # shellcheck disable=SC2046
  "${mpi[@]}" -n "$ranks" "$bin" train --config "$(config_of "$model")" \
    --data.train="$(data_of "$model" train)" --data.test="$(data_of "$model" test)" \
    --log.progress=lines --run.dir="$dir" --run.overwrite=true $(prune_args "$model" "$variant") > "$dir.log" 2>&1
}
# The file each variant evaluates.
weights_of() {  # weights_of MODEL VARIANT
  local model=$1 variant=$2
  case $variant in
    dense | sparse50 | sparse90) train "$model" "$variant"; echo "$out/$model-$variant/model.h5" ;;
    structured)
      train "$model" structured
      [[ -f $out/$model-structured/small.h5 ]] || "${mpi[@]}" -n 1 "$bin" export --prune \
        --weights "$out/$model-structured/model.h5" --out "$out/$model-structured/small.h5" >&2
      echo "$out/$model-structured/small.h5" ;;
    int8)
      train "$model" dense
      [[ -f $out/$model-dense/int8.h5 ]] || "${mpi[@]}" -n 1 "$bin" quantize --method entropy \
        --weights "$out/$model-dense/model.h5" --calib "$(data_of "$model" train)" \
        --batch "$(eval_batch "$model")" --out "$out/$model-dense/int8.h5" >&2
      echo "$out/$model-dense/int8.h5" ;;
  esac
}

results=$out/results.jsonl
: > "$results"
for model in $models; do
  declare -A file=()
  for v in $(variants_of "$model"); do file[$v]=$(weights_of "$model" "$v"); done
  for round in $(seq "$repeats"); do
    for v in $(variants_of "$model"); do
      line=$("${mpi[@]}" -n 1 "$bin" eval --weights "${file[$v]}" --data "$(data_of "$model" test)" \
        --batch "$(eval_batch "$model")" --cache 2>&1 | grep "^eval " | tail -1)
      printf '{"model": "%s", "variant": "%s", "round": %d, "bytes": %d, "line": "%s"}\n' "$model" "$v" \
        "$round" "$(stat -c %s "${file[$v]}")" "${line//\"/\'}" >> "$results"
    done
  done
  unset file
done

/usr/bin/python3 - "$results" <<'PY'
import sys, json, re, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
def field(line, name):
    m = re.search(name + r" ([0-9.]+)", line)
    return float(m.group(1)) if m else float("nan")
print(f"{'model':5} {'variant':11} {'accuracy':>8} {'loss':>8} {'bytes':>9} {'samples/s median [min .. max]':>32} {'vs dense':>8}")
for model in dict.fromkeys(r["model"] for r in rows):
    mine = [r for r in rows if r["model"] == model]
    rate = lambda r: float(re.search(r"([0-9.]+) samples/s", r["line"]).group(1))
    base = {r["round"]: rate(r) for r in mine if r["variant"] == "dense"}
    for variant in dict.fromkeys(r["variant"] for r in mine):
        rs = [r for r in mine if r["variant"] == variant]
        rates = [rate(r) for r in rs]
        ratios = [rate(r) / base[r["round"]] for r in rs]
        print(f"{model:5} {variant:11} {field(rs[0]['line'], 'accuracy'):8.4f} {field(rs[0]['line'], 'loss'):8.4f} "
              f"{rs[0]['bytes']:9d} {statistics.median(rates):10.0f} [{min(rates):.0f} .. {max(rates):.0f}]"
              f"{'':>4} {statistics.median(ratios):8.2f}")
PY
