#!/usr/bin/env bash
# Ctrl-C keeps the work: a run started without mpirun (one process) stops at the next step
# boundary on the first SIGINT, says so, writes a checkpoint and exits 75, and a resumed run
# continues from it; a second SIGINT ends it at once with 130. (Under mpirun, Ctrl-C reaches
# mpirun only, which sends its ranks SIGTERM: docs/checkpoints-and-faults.md.)
source "$(dirname "$0")/common.sh"
mlp=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5"
     --data.test= --train.max_steps=100000 --log.interval=1 --log.progress=lines)

# start NAME: the process in the background, once its first step is logged; its pid in $pid.
start() {
  "$TRELLIS_BIN" "${mlp[@]}" --run.dir="$WORK/$1" > "$WORK/$1.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    grep -q "^epoch .* step" "$WORK/$1.log" && return
    kill -0 "$pid" 2> /dev/null || fail "$1: ended before it was interrupted: $(tail -5 "$WORK/$1.log")"
    sleep 0.1
  done
  kill -9 "$pid"
  fail "$1: no training step within 60 s"
}
# finish: waits up to 60 s for $pid; its exit code in $code.
finish() {
  for _ in $(seq 600); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2> /dev/null && { kill -9 "$pid"; fail "still running 60 s after the interrupt"; }
  code=0
  wait "$pid" || code=$?
}

start once
kill -INT "$pid"
finish
[[ $code -eq 75 ]] || fail "one Ctrl-C: exit $code, expected 75: $(tail -5 "$WORK/once.log")"
grep -q "interrupted: stopping at the next step with a checkpoint" "$WORK/once.log" || fail "no message on the first Ctrl-C"
step=$(sed -n 's/^stopping at step \([0-9]*\) on a signal.*/\1/p' "$WORK/once.log")
[[ -n $step && -f "$WORK/once/checkpoints/$(printf 'step-%07d' "$step")/state.h5" ]] ||
  fail "no checkpoint after one Ctrl-C: $(tail -5 "$WORK/once.log")"
grep -q '"finish": "stopped on a signal"' "$WORK/once/summary.json" || fail "no summary of the stopped run"
[[ ! -e "$WORK/once/model.h5" ]] || fail "a stopped run wrote model.h5"
"$TRELLIS_BIN" "${mlp[@]}" --run.dir="$WORK/once" --resume auto --train.max_steps=$((step + 3)) > "$WORK/resume.log" 2>&1 ||
  fail "resume after Ctrl-C: $(tail -5 "$WORK/resume.log")"
grep -q "resume: .*step-" "$WORK/resume.log" || fail "did not resume: $(head -20 "$WORK/resume.log")"
# The stopped run said so in summary.json; the resumed one reports its own steps and the run's.
grep -q "done: 3 steps (steps $((step + 1))-$((step + 3)); the run has $((step + 3)))" "$WORK/resume.log" ||
  fail "done line of the resumed run: $(grep done: "$WORK/resume.log")"
grep -q '"finish": "completed"' "$WORK/once/summary.json" || fail "resumed summary: $(cat "$WORK/once/summary.json")"

start twice
kill -INT "$pid"
sleep 0.01
kill -INT "$pid"
finish
[[ $code -eq 130 ]] || fail "two Ctrl-C: exit $code, expected 130: $(tail -5 "$WORK/twice.log")"
grep -q "interrupted: exiting now" "$WORK/twice.log" || fail "no message on the second Ctrl-C"
echo "interrupt: one Ctrl-C stopped at step $step with a checkpoint (75) and resumed; two ended at once (130)"
