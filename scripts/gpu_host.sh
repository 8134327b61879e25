#!/bin/bash
# On the GPU host, in one or two calls: GPU tests and a sample run (`tests`), the benchmark report at
# SF 10 and 100 (`bench`), or both (no argument). Everything lands in $OUT (at most 8 files come back).
# Usage: GQUERY_COMMIT=$(git rev-parse --short HEAD) bash .device/run.sh bash scripts/gpu_host.sh [tests|bench]
set -uo pipefail
cd "$(dirname "$0")/.."
export GQUERY_DATA_DIR=${GQUERY_DATA_DIR:-/tmp/dbgen_data} OUT=${OUT:-/tmp/gquery-out}
mkdir -p "$OUT"
what=${1:-all}
rc=0
if [ "$what" != bench ]; then
  python3 -m pytest -m gpu -q -rs tests 2>&1 | tee "$OUT/gpu-tests.txt" | tail -15 || rc=1
  compute-sanitizer --tool memcheck python3 scripts/sanitize.py 2>&1 | tail -3 | tee -a "$OUT/gpu-tests.txt"
  python3 -m gquery run --sf 10 --z 30 --encoding all --explain > "$OUT/run-sf10-z30.txt" || rc=1
  tail -40 "$OUT/run-sf10-z30.txt"
fi
if [ "$what" != tests ]; then
  python3 -m gquery bench --sf 10 --sf 100 --repeat 5 --out "$OUT" > /dev/null || rc=1
  ls -la "$OUT"
  sed -n '/## Floors/,$p' "$OUT"/bench-*.md
fi
exit $rc
