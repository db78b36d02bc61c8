#!/usr/bin/env bash
# The container image (Containerfile) built with podman and run: the image and its build stage
# built from a Debian 12 base made by mmdebstrap (no registry), both sizes printed; in the image
# `trellis info`, the data converter (numpy, h5py), the MLP demo on 2 ranks under the image's
# own mpirun as an arbitrary uid, and a run stopped by `podman stop` (tools/launch turns the
# SIGTERM into a checkpoint, exit 75) then resumed in a second container from that checkpoint;
# on the host, the files the containers wrote into the bind mounts: owned by the container's
# uid, never root, modes without group-write or any bit for others.
# Exits 77 (skipped) where it cannot run: no podman or mmdebstrap (`make container-test`
# installs them: tools/container/install-podman.sh), not root, podman unable to start a
# container, or TRELLIS_CONTAINER_TEST=0. TRELLIS_CONTAINER_TEST=1 turns those skips into
# failures (for a CI that must run it). Images are kept for the next run's layer cache:
# TRELLIS_CONTAINER_IMAGE (default localhost/trellis:test) and its -build tag.
source "$(dirname "$0")/../common.sh"
image=${TRELLIS_CONTAINER_IMAGE:-localhost/trellis:test}
# `make container-test` runs this script outside ctest, on the data of `make demo`.
FASHION_DIR=${TRELLIS_CONTAINER_DATA:-$FASHION_DIR}
build_image=$image-build
base=${TRELLIS_BASE_IMAGE:-localhost/debian:bookworm}
tools=$TRELLIS_SRC/tools/container
share=/opt/trellis/share/trellis  # inputs/, slurm/, tools/ in the image

skip() {
  if [[ ${TRELLIS_CONTAINER_TEST:-} == 1 ]]; then
    fail "TRELLIS_CONTAINER_TEST=1 but: $*"
  fi
  echo "SKIP: $*"
  exit 77
}
[[ ${TRELLIS_CONTAINER_TEST:-} != 0 ]] || skip "TRELLIS_CONTAINER_TEST=0"
for tool in podman mmdebstrap; do
  command -v "$tool" > /dev/null ||
    skip "$tool not found (tools/container/install-podman.sh, or make container-test, installs it)"
done
# Rootful podman only: the ownership checks chown the host directories the containers write
# into. (Rootless podman maps uids through /etc/subuid; see docs/containers.md.)
[[ $(id -u) -eq 0 ]] || skip "needs root (rootful podman)"

source "$tools/podman_host.sh"
podman_host_conf "$WORK"
start=$SECONDS
"$tools/make_base_image.sh" "$base"
probe=$(podman run --rm "$base" true 2>&1) || skip "podman cannot start a container here: $probe"

# Containers are named after this process, and removed on every exit path.
names=()
cleanup() {
  for name in "${names[@]}"; do podman rm -f "$name" > /dev/null 2>&1 || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# 1. The build stage (compilers, -dev packages, the tree) and the runtime image.
"$tools/build_image.sh" "$build_image" --target build > "$WORK/build-stage.log" 2>&1 ||
  fail "podman build --target build: $(tail -20 "$WORK/build-stage.log")"
"$tools/build_image.sh" "$image" > "$WORK/build.log" 2>&1 ||
  fail "podman build: $(tail -20 "$WORK/build.log")"
build_s=$((SECONDS - start))
size_mb() { echo $(($(podman image inspect --format '{{.Size}}' "$1") / 1000000)); }
echo "image sizes: runtime $image $(size_mb "$image") MB, build stage $build_image $(size_mb "$build_image") MB (built in $build_s s)"
[[ $(podman image inspect --format '{{.Config.User}}' "$image") == 1000:1000 ]] ||
  fail "the image does not run as 1000:1000"

# run NAME ARGS...: podman run, the container named and removed afterwards.
run() {
  local name=trellis-e2e-$$-$1
  shift
  names+=("$name")
  podman run --rm --name "$name" "$@"
}

# 2. Every library resolves, the installed tree is there, and `trellis info` runs as the
#    image's user.
run ldd --entrypoint sh "$image" -c "ldd /opt/trellis/bin/trellis && ls $share/slurm/train.sbatch" \
  > "$WORK/ldd.log" 2>&1 || fail "ldd, share/: $(tail -5 "$WORK/ldd.log")"
! grep "not found" "$WORK/ldd.log" || fail "libraries missing in the image"
run info "$image" info > "$WORK/info.log" 2>&1 || fail "trellis info: $(tail -5 "$WORK/info.log")"
grep -q "TRELLIS_ENABLE_ONEDNN=ON" "$WORK/info.log" || fail "no oneDNN: $(head -3 "$WORK/info.log")"
grep -q "hdf5 .*(parallel)" "$WORK/info.log" || fail "no parallel HDF5 in trellis info"
grep -q "uid=1000(trellis) gid=1000(trellis)" <(run id --entrypoint id "$image") ||
  fail "the image's default user is not trellis (1000:1000)"

# 3. The image's tools: Fashion-MNIST idx to HDF5 with the image's numpy and h5py.
mkdir "$WORK/converted"
chown 1000:1000 "$WORK/converted"
run convert -v "$TRELLIS_FASHION_MNIST_DIR:/idx:ro" -v "$WORK/converted:/out" --entrypoint python3 \
  "$image" "$share/tools/idx_to_hdf5.py" --src /idx --out-dir /out > "$WORK/convert.log" 2>&1 ||
  fail "idx_to_hdf5.py in the image: $(tail -5 "$WORK/convert.log")"
grep -q "train.h5: 60000 samples" "$WORK/convert.log" || fail "conversion: $(cat "$WORK/convert.log")"

# Ownership of what containers write into bind mounts. Rootful podman runs the container's
# uid as the same uid on the host (no user namespace), so the host directory is chowned to the
# uid the container runs as: the image's 1000:1000, or the one given with --user. Trellis adds
# 027 to the umask (the image's is 022): 0640 files, 0750 directories.
check_owner() {  # check_owner DIR UID GID
  local bad
  bad=$(find "$1" -mindepth 1 \( ! -uid "$2" -o ! -gid "$3" -o -uid 0 -o -perm /g+w,o+rwx \) -printf '%u:%g %m %p\n')
  [[ -z $bad ]] || fail "files in $1 not $2:$3 with modes <= 0750: $bad"
  echo "ownership: $(find "$1" -mindepth 1 | wc -l) entries in $(basename "$1") owned by $2:$3," \
    "modes $(find "$1" -mindepth 1 -printf '%m\n' | sort -u | tr '\n' ' ')"
}

# 4. The MLP demo on 2 ranks under the image's mpirun, as a uid the image does not know
#    (--user 4242:4242): data read-only under /work/data, runs/ bind-mounted; 1 epoch.
mkdir "$WORK/demo"
chown 4242:4242 "$WORK/demo"
run demo --user 4242:4242 -v "$FASHION_DIR:/work/data/fashion-mnist:ro" -v "$WORK/demo:/work/runs" \
  --entrypoint mpirun "$image" -n 2 trellis train --config "$share/inputs/fashion_mlp.ini" \
  --train.epochs=1 > "$WORK/demo.log" 2>&1 || fail "the demo: $(tail -5 "$WORK/demo.log")"
accuracy=$(sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$WORK/demo.log" | tail -1)
[[ -n $accuracy ]] || fail "no accuracy line: $(tail -5 "$WORK/demo.log")"
awk -v a="$accuracy" 'BEGIN { exit !(a >= 80) }' || fail "demo accuracy $accuracy% < 80% after 1 epoch"
[[ -f $WORK/demo/fashion_mlp/model.h5 ]] || fail "the demo wrote no model.h5"
echo "demo: 2 ranks in the container, 1 epoch, test accuracy $accuracy%"
check_owner "$WORK/demo" 4242 4242

# 5. Checkpoint and resume across containers, the run directory bind-mounted from the host.
#    The first container runs tools/launch (as PID 1), which turns `podman stop`'s SIGTERM
#    into SIGUSR1 for mpirun: every rank checkpoints at the next step boundary and exits 75.
mkdir "$WORK/runs"
chown 1000:1000 "$WORK/runs"
ckpt=(-v "$FASHION_DIR:/work/data/fashion-mnist:ro" -v "$WORK/runs:/work/runs"
      --entrypoint "$share/tools/launch" "$image" -n 2 train
      --config "$share/inputs/fashion_mlp.ini" --log.interval=10 --run.dir=runs/ckpt)
first=trellis-e2e-$$-first
names+=("$first")
podman run -d --name "$first" "${ckpt[@]}" --train.max_steps=1000000 > /dev/null
for _ in $(seq 240); do  # until it has logged step 50 (the start-up takes about a second)
  grep -qs '"step": \([5-9][0-9]\|[0-9]\{3,\}\),' "$WORK/runs/ckpt/metrics.jsonl" && break
  [[ $(podman inspect --format '{{.State.Running}}' "$first") == true ]] ||
    fail "the first run ended early: $(podman logs "$first" 2>&1 | tail -5)"
  sleep 0.5
done
podman stop -t 60 "$first" > /dev/null
code=$(podman wait "$first")
podman logs "$first" > "$WORK/first.log" 2>&1
[[ $code -eq 75 ]] || fail "podman stop: exit $code, expected 75: $(tail -5 "$WORK/first.log")"
latest=$(cat "$WORK/runs/ckpt/checkpoints/latest")
[[ $latest =~ ^step-0*([1-9][0-9]+)$ ]] || fail "no checkpoint after podman stop ($latest)"
step=${BASH_REMATCH[1]}
[[ -f $WORK/runs/ckpt/checkpoints/$latest/state.h5 && ! -f $WORK/runs/ckpt/model.h5 ]] ||
  fail "checkpoint $latest incomplete, or a model.h5 written by a stopped run"
grep -q "stopping at step $step on a signal" "$WORK/first.log" ||
  fail "no stop message at step $step: $(tail -3 "$WORK/first.log")"

end=$((step + 30))
run second "${ckpt[@]}" --resume auto --train.max_steps=$end > "$WORK/second.log" 2>&1 ||
  fail "the resumed run: $(tail -5 "$WORK/second.log")"
grep -q "resume: .*$latest" "$WORK/second.log" || fail "did not resume from $latest: $(grep -m3 resume "$WORK/second.log")"
# metrics.jsonl continues at the checkpoint: its step lines rise by 10 past $step up to $end.
"$TRELLIS_PYTHON" - "$WORK/runs/ckpt/metrics.jsonl" "$step" "$end" <<'PY'
import json, sys
path, step, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
steps = [r["step"] for r in map(json.loads, open(path)) if "loss" in r]
after = [s for s in steps if s > step]
assert after and after[0] <= step + 10 and after[-1] == end, f"steps after {step}: {after}"
assert after == sorted(set(after)), f"steps after {step} repeat or go back: {after}"
print(f"resume: continued at step {after[0]} after the checkpoint at {step}, ended at {end}")
PY
[[ -f $WORK/runs/ckpt/model.h5 ]] || fail "the resumed run wrote no model.h5"
check_owner "$WORK/runs" 1000 1000

echo "container test: ok in $((SECONDS - start)) s (image builds $build_s s)"
