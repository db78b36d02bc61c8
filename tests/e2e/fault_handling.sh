#!/usr/bin/env bash
# Faults end the whole job quickly and loudly, never hang it: an exception on one of 4 ranks,
# a hung rank (the watchdog, fault.timeout_s), a time limit (checkpoint, exit 75); non-finite
# gradients are skipped with a warning, or abort (fault.nonfinite = abort); a truncated data
# file is refused on every rank with exit 3; a disk that fills up during a 2-rank checkpoint
# ends the job (message naming the file, .tmp removed, `latest` untouched; needs root for a
# small tmpfs, skipped otherwise).
TRELLIS_RUN_TIMEOUT=90  # a hang must fail the test quickly, not after the default 600 s
source "$(dirname "$0")/common.sh"
mlp=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5"
     --data.test= --train.max_steps=20 --train.global_batch=64 --log.interval=1 --sched.warmup_steps=2)
# timed NP LOG SECONDS_MAX ARGS...: runs, expects a non-zero exit within SECONDS_MAX.
timed_failure() {
  local np=$1 log=$2 limit=$3 start end code=0
  shift 3
  start=$(date +%s)
  trellis_run "$np" "$@" > "$log" 2>&1 || code=$?
  end=$(date +%s)
  [[ $code -ne 0 ]] || fail "expected a failure: $*"
  (( end - start <= limit )) || fail "took $((end - start)) s (limit $limit s): $*"
  echo "exit $code after $((end - start)) s"
}

# An exception on rank 2 of 4 at step 5 ends every rank, with the message.
timed_failure 4 "$WORK/throw.log" 30 "${mlp[@]}" --fault.inject=2:5:throw --run.dir="$WORK/throw"
grep -q "rank 2.*injected failure on rank 2 at step 5" "$WORK/throw.log" || fail "no message from rank 2: $(cat "$WORK/throw.log")"

# Rank 3 hangs at step 5: the others wait in a collective until the watchdog ends the job.
timed_failure 4 "$WORK/hang.log" 40 "${mlp[@]}" --fault.inject=3:5:hang --fault.timeout_s=5 --run.dir="$WORK/hang"
grep -q "watchdog: no progress" "$WORK/hang.log" || fail "no watchdog message: $(cat "$WORK/hang.log")"

# A NaN on rank 1 at step 4: skipped with a warning, training goes on and finishes.
trellis_run 2 "${mlp[@]}" --fault.inject=1:4:nan --run.dir="$WORK/nan" > "$WORK/nan.log" 2>&1
grep -q "non-finite .* at step 4: step skipped" "$WORK/nan.log" || fail "no skip warning: $(cat "$WORK/nan.log")"
grep -q '"steps": 20' "$WORK/nan/summary.json" || fail "the run with a skipped step did not finish"
# ... or ends the run when fault.nonfinite = abort.
timed_failure 2 "$WORK/nan-abort.log" 30 "${mlp[@]}" --fault.inject=1:4:nan --fault.nonfinite=abort --run.dir="$WORK/nan-abort"
grep -q "fault.nonfinite = abort" "$WORK/nan-abort.log" || fail "no abort message"

# A time limit: stop before it with a checkpoint and exit 75.
code=0
# Epochs enough that max_steps governs: 3 epochs of the MLP finished inside 4 s on a fast host
# (Intel AMX, 2026-12-05) and the run ended with 0 before the limit.
trellis_run 2 "${mlp[@]}" --train.max_steps=100000 --train.epochs=1000 --train.time_limit=4 \
  --ckpt.margin_s=1 --run.dir="$WORK/limit" > "$WORK/limit.log" 2>&1 || code=$?
[[ $code -eq 75 ]] || fail "time limit: exit $code, expected 75: $(tail -3 "$WORK/limit.log")"
grep -q "on a time limit" "$WORK/limit.log" || fail "no time-limit message"
[[ -f "$WORK/limit/checkpoints/latest" ]] || fail "no checkpoint at the time limit"

# A truncated data file: exit 3 on every rank, naming the file.
head -c 100000 "$FASHION_DIR/train.h5" > "$WORK/truncated.h5"
code=0
trellis_run 2 "${mlp[@]}" --data.train="$WORK/truncated.h5" --run.dir="$WORK/trunc" > "$WORK/trunc.log" 2>&1 || code=$?
[[ $code -eq 3 ]] || fail "truncated file: exit $code, expected 3: $(cat "$WORK/trunc.log")"
[[ $(grep -c "truncated.h5" "$WORK/trunc.log") -ge 2 ]] || fail "not every rank named the file: $(cat "$WORK/trunc.log")"
# A full disk during a checkpoint at 2 ranks: before the fix one rank left the tensor loop and
# the other waited in the next collective H5Dcreate forever.
small="$WORK/small"
mkdir -p "$small"
if [[ $(id -u) -eq 0 ]] && mount -t tmpfs -o size=3M tmpfs "$small" 2> /dev/null; then
  trap 'umount "$small" 2> /dev/null || true; rm -rf "$WORK"' EXIT
  timed_failure 2 "$WORK/full.log" 60 "${mlp[@]}" --sched.warmup_steps=0 --model.hidden=128 \
    --ckpt.interval_steps=5 --ckpt.keep=0 --train.max_steps=40 --ckpt.dir="$small/ck" --run.dir="$WORK/full"
  [[ $(grep -c "error: $small/ck/step-[0-9]*.tmp/state.h5" "$WORK/full.log") -ge 2 ]] \
    || fail "full disk: not every rank named the file: $(tail -5 "$WORK/full.log")"
  ! ls -d "$small"/ck/*.tmp > /dev/null 2>&1 || fail "full disk: a .tmp directory was left"
  latest=$(cat "$small/ck/latest")
  [[ -f "$small/ck/$latest/state.h5" ]] || fail "full disk: latest ($latest) is not a complete checkpoint"
  umount "$small"
else
  echo "full-disk check skipped (needs root to mount a small tmpfs)"
fi
echo "fault handling: ok"
