#!/usr/bin/env bash
# Fixture: converts Debian's Fashion-MNIST idx files to HDF5 once for all e2e tests.
set -euo pipefail
out="$TRELLIS_TEST_DATA/fashion-mnist"
if [[ -f "$out/train.h5" && -f "$out/test.h5" ]]; then
  echo "already prepared: $out"
  exit 0
fi
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/idx_to_hdf5.py" --src "$TRELLIS_FASHION_MNIST_DIR" --out-dir "$out"
