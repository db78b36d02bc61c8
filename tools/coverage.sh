#!/usr/bin/env bash
# tools/coverage.sh [OUT_DIR]: line coverage of the device-facing code (src/kernels, src/optim,
# src/nn, src/parallel) in the normal build and in the portable build (TRELLIS_PORTABLE_KERNELS,
# the device code path), both running the same tests: the unit tests, the MPI tests at 1, 2 and
# 4 ranks, and the layout-equivalence scripts (the portable build's ctest set). Writes to
# OUT_DIR (default build-coverage):
#   normal/, portable/     the two gcov builds (-O1 --coverage; only what the tests need)
#   coverage.md            per folder: lines, covered in normal, in portable, in either
#   never_executed.txt     by file, the lines neither build executes
# Needs gcovr (apt-get install gcovr). About 40 minutes on 2 cores.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$(realpath -m "${1:-$src/build-coverage}")
command -v gcovr > /dev/null || {
  echo "coverage: gcovr is missing (apt-get install gcovr)" >&2
  exit 2
}
jobs=${JOBS:-$(nproc)}
folders=(kernels optim nn parallel)
mkdir -p "$out"

for variant in normal portable; do
  build=$out/$variant
  portable=OFF
  [[ $variant == portable ]] && portable=ON
  echo "coverage: building $variant in $build"
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="-O1 --coverage" \
    -DCMAKE_EXE_LINKER_FLAGS=--coverage -DTRELLIS_PORTABLE_KERNELS=$portable > "$build.configure.log"
  cmake --build "$build" -j "$jobs" --target trellis trellis_unit_tests trellis_mpi_tests > "$build.build.log"
  find "$build" -name '*.gcda' -delete
  echo "coverage: testing $variant"
  # The same tests in both: the unit and MPI tests, and the equivalence scripts.
  (cd "$build" && ctest -j "$jobs" --timeout 1800 \
    -R '^unit$|^mpi\.|e2e\.(prepare_data|dp_equivalence|parallel_equivalence|cnn_equivalence|gpt_equivalence|precision_.*)$' \
    > "$build.test.log" 2>&1) || {
    tail -20 "$build.test.log" >&2
    echo "coverage: tests failed in the $variant build (log: $build.test.log)" >&2
    exit 1
  }
  filters=()
  for f in "${folders[@]}"; do filters+=(--filter "$src/src/$f/"); done
  gcovr --root "$src" --object-directory "$build" "${filters[@]}" --json "$out/$variant.json" \
    > /dev/null
done

python3 - "$src" "$out" "${folders[@]}" << 'PY'
import json, sys, collections
src, out, folders = sys.argv[1], sys.argv[2], sys.argv[3:]
def lines(variant):
    data = json.load(open(f"{out}/{variant}.json"))
    result = {}
    for f in data["files"]:
        name = f["file"]
        result[name] = {l["line_number"]: l["count"] > 0 for l in f["lines"] if not l.get("gcovr/noncode")}
    return result
normal, portable = lines("normal"), lines("portable")
rows, never = collections.OrderedDict(), collections.defaultdict(list)
for name in sorted(set(normal) | set(portable)):
    folder = name.split("/")[1] if name.startswith("src/") else "?"
    a, b = normal.get(name, {}), portable.get(name, {})
    total = set(a) | set(b)
    row = rows.setdefault(folder, [0, 0, 0, 0])
    row[0] += len(total)
    row[1] += sum(1 for l in total if a.get(l))
    row[2] += sum(1 for l in total if b.get(l))
    row[3] += sum(1 for l in total if a.get(l) or b.get(l))
    never[name] = sorted(l for l in total if not a.get(l) and not b.get(l))
with open(f"{out}/coverage.md", "w") as md:
    md.write("| folder | lines | normal build | portable build | either |\n|---|---|---|---|---|\n")
    all_rows = [0, 0, 0, 0]
    for folder in folders:
        r = rows.get(folder, [0, 0, 0, 0])
        all_rows = [x + y for x, y in zip(all_rows, r)]
        pct = lambda k: f"{100 * r[k] / r[0]:.1f}%" if r[0] else "-"
        md.write(f"| src/{folder} | {r[0]} | {pct(1)} | {pct(2)} | {pct(3)} |\n")
    r = all_rows
    md.write(f"| all four | {r[0]} | {100*r[1]/r[0]:.1f}% | {100*r[2]/r[0]:.1f}% | {100*r[3]/r[0]:.1f}% |\n")
def ranges(ls):
    out, start, prev = [], None, None
    for l in ls:
        if start is None: start = prev = l
        elif l == prev + 1: prev = l
        else: out.append((start, prev)); start = prev = l
    if start is not None: out.append((start, prev))
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)
with open(f"{out}/never_executed.txt", "w") as txt:
    for name, ls in sorted(never.items()):
        if ls: txt.write(f"{name} ({len(ls)} lines): {ranges(ls)}\n")
print(open(f"{out}/coverage.md").read())
print(f"never executed, by file: {out}/never_executed.txt")
PY
