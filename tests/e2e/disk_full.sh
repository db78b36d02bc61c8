#!/usr/bin/env bash
# A full disk during a checkpoint, at 1 and 2 ranks: the job prints the write error and exits 1
# (no SIGSEGV: HDF5 used to crash in MPI_Finalize on the file whose close had failed), the .tmp
# step directory is gone, `latest` still names the last complete checkpoint, and that
# checkpoint resumes. The checkpoint directory is a 3 MiB tmpfs mounted in a private mount
# namespace (root only: exits 77 otherwise).
source "$(dirname "$0")/common.sh"
if ! unshare --mount --propagation private true 2> /dev/null; then
  echo "SKIP: needs a private mount namespace (root) for a small tmpfs"
  exit 77
fi
mlp=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5"
     --data.test= --model.hidden=128 --sched.warmup_steps=0 --ckpt.interval_steps=5
     --ckpt.keep=0 --data.cache=memory --train.max_steps=40)

for np in 1 2; do
  run="$WORK/np$np"
  mkdir -p "$run/full"
  # Inside the namespace: mount, train until the disk fills, keep a copy of what is left.
  got=0
  unshare --mount --propagation private bash -c '
    set -u
    mount -t tmpfs -o size=3M tmpfs "$1/full" || exit 90
    shift
    "$@"
    code=$?
    cp -a "'"$run"'/full/ck" "'"$run"'/left" || exit 91
    exit $code' _ "$run" timeout 600 "$MPIEXEC" "${MPIEXEC_ARGS[@]}" -n "$np" "$TRELLIS_BIN" \
    "${mlp[@]}" --ckpt.dir="$run/full/ck" --run.dir="$run/dir" > "$run/log" 2>&1 || got=$?
  [[ $got -eq 1 ]] || fail "np=$np: exit code $got, expected 1 (log: $(tail -5 "$run/log"))"
  ! grep -qi "segmentation fault\|signal 11" "$run/log" || fail "np=$np: crashed: $(tail -5 "$run/log")"
  ! grep -q "could not be closed" "$run/log" || fail "np=$np: the failed file stayed open"
  grep -q "error: .*step-[0-9]*.tmp/state.h5: .*\(write failed\|No space\)" "$run/log" \
    || fail "np=$np: no write error naming the file: $(grep error "$run/log" | head -3)"
  latest=$(cat "$run/left/latest")
  [[ -f "$run/left/$latest/state.h5" ]] || fail "np=$np: latest = $latest has no state.h5"
  ! ls -d "$run/left/"*.tmp > /dev/null 2>&1 || fail "np=$np: a .tmp step directory was left"
  # The last complete checkpoint resumes (on a disk with room) and trains 5 more steps.
  step=$((10#${latest#step-}))
  trellis_run "$np" "${mlp[@]}" --ckpt.dir="$run/left" --run.dir="$run/resumed" --resume auto \
    --train.max_steps=$((step + 5)) > "$run/resume.log" 2>&1 \
    || fail "np=$np: resume from $latest failed: $(tail -5 "$run/resume.log")"
  grep -q "resume: .*$latest" "$run/resume.log" || fail "np=$np: did not resume from $latest"
  echo "np=$np: disk full after $latest: exit 1 with the write error; $latest resumed"
done
