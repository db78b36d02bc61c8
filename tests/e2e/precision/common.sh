# Shared by the mixed-precision scripts: the loss-curve comparison and the models' arguments.
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
py=$TRELLIS_PYTHON
compare=("$py" "$TRELLIS_SRC/tools/compare_losses.py" --steps 300 --window 50)
mlp=(--config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5")
# The CNN at batch 32 under the demo's onecycle schedule (peak lr 0.1) is chaotic: there fp32
# against fp32 with another convolution summation order (kernels.conv=im2col) differed by 4.3%
# and an fp16 run by 17% after one gradient spike (2026-12-04, AMD EPYC). At lr 0.02 with a
# cosine schedule the curves measure precision, not chaos.
cnn=(--config "$TRELLIS_SRC/inputs/fashion_cnn.ini" --data.train="$FASHION_DIR/train.h5"
     --train.global_batch=32 --optim.lr=0.02 --sched.type=cosine --sched.warmup_steps=30)

# curves NAME TOLERANCE ARGS...: fp32, bf16 and fp16 runs of 300 steps, compared.
curves() {
  local name=$1 rtol=$2
  shift 2
  # Emulated kernels everywhere: auto picks the native ones on AMX hosts (curves_mlp_cnn.sh
  # tests those), and the forced fallback is compared with these runs bit for bit.
  for mode in fp32 bf16 fp16; do
    local kernels=()
    [[ $mode == fp32 ]] || kernels=(--precision.kernels=emulated)
    trellis_run 1 train "$@" --train.max_steps=300 --log.interval=1 --data.test= \
      --precision.mode=$mode "${kernels[@]}" --run.dir="$WORK/$name-$mode" > "$WORK/$name-$mode.log"
  done
  grep -q "precision: bf16 with emulated kernels" "$WORK/$name-bf16.log" || fail "$name: no bf16 notice"
  grep -q "loss scaling: dynamic, scale 65536" "$WORK/$name-fp16.log" || fail "$name: no loss scaling"
  "${compare[@]}" --rtol "$rtol" "$WORK/$name-fp32" "$WORK/$name-bf16" "$WORK/$name-fp16"
}
