# Shared by the end-to-end scripts on the namespaced test cluster (tests/cluster/testcluster.sh), after
# common.sh: exits 77 (skip) when not root; starts TESTCLUSTER_NODES nodes (default 2; set it
# before sourcing, and TESTCLUSTER_ELASTIC=1 for an elastic cloud partition) that see this
# test's files (and the build and data, when they are under /tmp, which every node has its
# own of); stops the cluster on exit. Sets: cluster (the
# script), client CMD... (a Slurm client on the head node), sub (the submit directory, also
# the working directory).
if [[ $(id -u) != 0 ]]; then
  echo "SKIP: tests/cluster/testcluster.sh needs root (network namespaces, munge key)"
  exit 77
fi
[[ -f "$FASHION_DIR/train.h5" ]] || fail "no Fashion-MNIST data in \$TRELLIS_TEST_DATA/fashion-mnist"
cluster="$TRELLIS_SRC/tests/cluster/testcluster.sh"
export TRELLIS_TESTCLUSTER_STATE=${TRELLIS_TESTCLUSTER_STATE:-/var/tmp/trellis-testcluster-e2e}
shared=$WORK
for p in "$TRELLIS_SRC" "$(dirname "$TRELLIS_BIN")" "$TRELLIS_TEST_DATA"; do
  [[ $p == /tmp/* ]] && shared+=":$p"
done
export TRELLIS_TESTCLUSTER_SHARED=$shared
trap '"$cluster" stop > /dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$cluster" stop > /dev/null 2>&1 || true  # what a killed earlier run left
"$cluster" start "${TESTCLUSTER_NODES:-2}" ${TESTCLUSTER_ELASTIC:+--elastic}
export TRELLIS_BIN
client() { "$cluster" run "$@"; }
sub="$WORK/submit"
mkdir -p "$sub"
cd "$sub" || fail "cd $sub"
