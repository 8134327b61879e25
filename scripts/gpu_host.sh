#!/bin/bash
# On the GPU host: the GPU tests, compute-sanitizer and sample runs (`tests`), the mission benchmark at SF 10
# and 100 (`bench`), the queries report (`queries`, SF 10 and 100 unless QUERY_SF says otherwise), or `tests`
# and `bench` (no argument). Everything lands in $OUT (at most 8 files come back).
# Usage: GQUERY_COMMIT=$(git rev-parse --short HEAD) bash .device/run.sh bash scripts/gpu_host.sh [tests|bench|queries]
set -uo pipefail
cd "$(dirname "$0")/.."
export GQUERY_DATA_DIR=${GQUERY_DATA_DIR:-/tmp/dbgen_data} OUT=${OUT:-/tmp/gquery-out}
mkdir -p "$OUT"
what=${1:-all}
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  python3 -m pytest -m gpu -q -rs -W error::pytest.PytestUnraisableExceptionWarning tests 2>&1 | tee "$OUT/gpu-tests.txt" | tail -15 || rc=1
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool --error-exitcode 9 python3 scripts/sanitize_fused.py 2>&1 | tail -4 | tee -a "$OUT/gpu-tests.txt" || rc=1
  done
  compute-sanitizer --tool memcheck python3 scripts/sanitize.py 2>&1 | tail -3 | tee -a "$OUT/gpu-tests.txt"
  python3 -m gquery run --sf 10 --query q1 --explain > "$OUT/run-sf10-q1.txt" 2>&1 || rc=1
  tail -60 "$OUT/run-sf10-q1.txt"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  python3 -m gquery bench --sf 10 --sf 100 --repeat 5 --out "$OUT" > /dev/null || rc=1
  ls -la "$OUT"
  sed -n '/## Floors/,$p' "$OUT"/bench-*.md
fi
if [ "$what" = queries ]; then
  sfs=""
  for sf in ${QUERY_SF:-10 100}; do sfs="$sfs --sf $sf"; done
  python3 -m gquery bench --queries $sfs --repeat 5 --out "$OUT" > "$OUT/queries-log.txt" 2>&1 || rc=1
  tail -5 "$OUT/queries-log.txt"
  sed -n '/## Runs/,$p' "$OUT"/queries-*.md
fi
exit $rc
