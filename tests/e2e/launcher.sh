#!/usr/bin/env bash
# tools/launch, the terminal user's mpirun: Ctrl-C (SIGINT to the launcher's process group, as
# the terminal sends it) stops at the next step with a complete checkpoint and exit 75, with no
# Open MPI abort banner; a second Ctrl-C ends the run at once (exit 130); a rank killed by a
# signal is named (mpirun -q hides Open MPI's own notice). The stopped run resumes through it.
TRELLIS_RUN_TIMEOUT=120
source "$(dirname "$0")/common.sh"
launch="$TRELLIS_SRC/tools/launch"
mlp=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5"
     --data.test= --log.interval=1 --log.progress=lines)

# start_run NAME MAX_STEPS: the launcher in a process group of its own, SIGINT not ignored
# (a background job of a script starts with SIGINT ignored, a terminal's foreground job does
# not); returns once the first step is logged. Sets $launcher_pid.
start_run() {
  local name=$1 steps=$2
  TRELLIS_BIN="$TRELLIS_BIN" setsid env --default-signal=INT \
    "$launch" -n 2 "${mlp[@]}" --train.max_steps="$steps" --run.dir="$WORK/$name" \
    > "$WORK/$name.log" 2>&1 &
  launcher_pid=$!
  for _ in $(seq 600); do
    grep -q "^epoch .* step" "$WORK/$name.log" && return 0
    kill -0 "$launcher_pid" 2> /dev/null || fail "$name ended before it was signalled: $(tail -5 "$WORK/$name.log")"
    sleep 0.1
  done
  fail "$name: no training step within 60 s: $(tail -5 "$WORK/$name.log")"
}
# finish: sets $code to the launcher's exit code, failing (and killing it) after the time limit.
finish() {
  local name=$1
  for _ in $(seq $((TRELLIS_RUN_TIMEOUT * 10))); do
    kill -0 "$launcher_pid" 2> /dev/null || break
    sleep 0.1
  done
  if kill -0 "$launcher_pid" 2> /dev/null; then
    pkill -KILL -s "$launcher_pid"
    fail "$name: the launcher did not end within $TRELLIS_RUN_TIMEOUT s: $(tail -5 "$WORK/$name.log")"
  fi
  code=0
  wait "$launcher_pid" || code=$?
}
# setsid made the launcher lead its own session and process group: SIGINT to the group is
# what a terminal's Ctrl-C does.
interrupt() { kill -INT -- "-$launcher_pid"; }

# One Ctrl-C: a clean stop.
start_run stop 4000
interrupt
finish stop
[[ $code -eq 75 ]] || fail "one Ctrl-C: exit $code, expected 75: $(tail -8 "$WORK/stop.log")"
grep -q "mpirun detected\|Primary job\|abort is already" "$WORK/stop.log" &&
  fail "a planned stop printed an Open MPI abort banner: $(tail -12 "$WORK/stop.log")"
step=$(sed -n 's/^stopping at step \([0-9]*\) on a signal.*/\1/p' "$WORK/stop.log")
[[ -n $step ]] || fail "no stop message: $(tail -5 "$WORK/stop.log")"
ckpt=$(printf 'step-%07d' "$step")
[[ "$(cat "$WORK/stop/checkpoints/latest")" == "$ckpt" && -f "$WORK/stop/checkpoints/$ckpt/state.h5" ]] ||
  fail "no complete checkpoint $ckpt: $(ls -R "$WORK/stop/checkpoints")"
grep -q '"finish": "stopped on a signal' "$WORK/stop/summary.json" ||
  fail "summary.json does not say the run was stopped: $(cat "$WORK/stop/summary.json")"

# It resumes through the launcher, from the run directory alone, and finishes: 50 steps past
# the stop (on a loaded machine the stop can come hundreds of steps after the signal was sent).
end=$((step + 50))
TRELLIS_BIN="$TRELLIS_BIN" timeout "$TRELLIS_RUN_TIMEOUT" "$launch" -n 2 train --resume "$WORK/stop" \
  --train.max_steps=$end > "$WORK/resume.log" 2>&1 || fail "resume failed: $(tail -5 "$WORK/resume.log")"
grep -q "resume: .*$ckpt" "$WORK/resume.log" || fail "did not resume from $ckpt: $(head -20 "$WORK/resume.log")"
grep -q "\"steps\": $end," "$WORK/stop/summary.json" || fail "the resumed run did not finish: $(cat "$WORK/stop/summary.json")"

# Two Ctrl-C: ended at once.
start_run twice 40000
interrupt
sleep 0.2
interrupt
finish twice
[[ $code -eq 130 ]] || fail "two Ctrl-C: exit $code, expected 130: $(tail -8 "$WORK/twice.log")"
grep -q "launch: ending the run now" "$WORK/twice.log" || fail "no word on the second Ctrl-C: $(tail -5 "$WORK/twice.log")"

# A rank killed from outside: the launcher names the signal.
start_run killed 40000
rank=$(pgrep -n -f "run.dir=$WORK/killed") || fail "no rank of the killed run found"
kill -KILL "$rank"
finish killed
[[ $code -eq 137 ]] || fail "a SIGKILLed rank: exit $code, expected 137: $(tail -5 "$WORK/killed.log")"
grep -q "launch: a rank was killed by SIGKILL" "$WORK/killed.log" ||
  fail "the killed rank was not named: $(tail -5 "$WORK/killed.log")"
echo "launcher: ok (Ctrl-C stopped at step $step with exit 75 and no banner, resumed; 2x Ctrl-C 130; SIGKILL named)"
