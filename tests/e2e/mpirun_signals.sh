#!/usr/bin/env bash
# The supported way to stop an mpirun job early: SIGUSR1 to mpirun, which Open MPI forwards to
# every rank (SIGTERM it handles itself: it kills the ranks and exits 1, see docs/checkpoints-and-faults.md). Two
# signals in quick succession, as an impatient user or a scheduler sends them: the second one,
# arriving while the checkpoint is written, must change nothing. mpirun exits 75, the
# checkpoint is complete, and a resumed run continues from it.
TRELLIS_RUN_TIMEOUT=120
source "$(dirname "$0")/common.sh"
mlp=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5"
     --data.test= --train.max_steps=400 --log.interval=1 --log.progress=lines --run.dir="$WORK/run")

# Signalled as soon as the first step is logged (400 steps take seconds).
# (Not trellis_run: a function in the background is a subshell, and mpirun its grandchild.)
timeout "$TRELLIS_RUN_TIMEOUT" "$MPIEXEC" "${MPIEXEC_ARGS[@]}" -n 2 "$TRELLIS_BIN" "${mlp[@]}" \
  > "$WORK/run.log" 2>&1 &
launcher=$!  # `timeout`; mpirun is its child
for _ in $(seq 600); do
  grep -q "^epoch .* step" "$WORK/run.log" && break
  kill -0 "$launcher" 2> /dev/null || fail "the run ended before it was signalled: $(tail -5 "$WORK/run.log")"
  sleep 0.1
done
grep -q "^epoch .* step" "$WORK/run.log" || fail "no training step within 60 s: $(tail -5 "$WORK/run.log")"
mpirun_pid=$(pgrep -P "$launcher")
[[ -n $mpirun_pid ]] || fail "no mpirun under pid $launcher"
kill -USR1 "$mpirun_pid"
sleep 0.05
kill -USR1 "$mpirun_pid"
code=0
wait "$launcher" || code=$?
[[ $code -eq 75 ]] || fail "mpirun exited $code after SIGUSR1, expected 75: $(tail -8 "$WORK/run.log")"
step=$(sed -n 's/^stopping at step \([0-9]*\) on a signal.*/\1/p' "$WORK/run.log")
[[ -n $step ]] || fail "no stop message: $(tail -5 "$WORK/run.log")"
ckpt=$(printf 'step-%07d' "$step")
[[ "$(cat "$WORK/run/checkpoints/latest")" == "$ckpt" && -f "$WORK/run/checkpoints/$ckpt/state.h5" ]] ||
  fail "no complete checkpoint $ckpt: $(ls -R "$WORK/run/checkpoints")"
ls -d "$WORK/run/checkpoints"/*.tmp 2> /dev/null && fail "a partial checkpoint was left behind"

# Resume from it and run to the end.
trellis_run 2 "${mlp[@]}" --resume auto > "$WORK/resume.log" 2>&1 ||
  fail "resume failed: $(tail -5 "$WORK/resume.log")"
grep -q "resume: .*$ckpt" "$WORK/resume.log" || fail "did not resume from $ckpt: $(head -20 "$WORK/resume.log")"
grep -q '"steps": 400' "$WORK/run/summary.json" || fail "the resumed run did not finish: $(cat "$WORK/run/summary.json")"
echo "mpirun signals: ok (stopped at step $step, exit 75, resumed)"
