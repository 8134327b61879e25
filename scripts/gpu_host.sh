#!/bin/bash
# On the GPU host: the GPU tests and compute-sanitizer's memcheck (`tests`), its racecheck and a sample run
# (`sanitize`: apart, as the three took more than one 600 s call on a slow host), the queries report (`queries`,
# SF 10 and 100 unless QUERY_SF says otherwise; SF 100's three designs take more than one 600 s call: run
# them apart with QUERY_DESIGNS, and QUERY_ADD_FROM naming the earlier call's report, carried over; QUERY_NAMES names
# the queries, as `gquery bench --query` does: then no 8 threads and no cold compiles, which the first call's report
# holds already: at 4e645c0 SF 100 as generated with them ran past 600 s in its 8-thread step), a fused query's chunk-by-chunk timeline at several chunk
# sizes (`timeline`: TIMELINE_SF, TIMELINE_DESIGN, TIMELINE_QUERY, TIMELINE_CHUNKS), or `tests`, `sanitize` and
# `queries` (no argument). Everything lands in $OUT.
# Usage (the commit named here, in the command's text: the lent host's copy of .git may not be this checkout's):
#   run(command=f"GQUERY_COMMIT={git rev-parse --short HEAD, here} bash .device/run.sh bash scripts/gpu_host.sh [tests|sanitize|queries|timeline]")
set -uo pipefail
cd "$(dirname "$0")/.."
export GQUERY_DATA_DIR=${GQUERY_DATA_DIR:-/tmp/dbgen_data} OUT=${OUT:-/tmp/gquery-out}
mkdir -p "$OUT"
what=${1:-all}
rc=0
# SF's parquet as tpchgen-cli's parts of SF 10 (16 cores: SF 100 in about 70 s), where none is there yet: the
# benchmarks then encode the parts in parallel processes (gquery generate encodes part after part: 13 min at SF 100)
tpch_parts() {
  local sf=$1 parts
  ls -d "$GQUERY_DATA_DIR/sf$sf"/lineitem* > /dev/null 2>&1 && return 0
  parts=$(python3 -c "import math; print(max(1, math.ceil($sf / 10)))")
  [ "$parts" -gt 1 ] || return 0  # one file: gquery generate writes it as the benchmarks expect
  tpchgen-cli parquet -s "$sf" --tables lineitem -o "/tmp/tg$sf" --parts "$parts" --no-progress || return 1
  mkdir -p "$GQUERY_DATA_DIR/sf$sf" && mv "/tmp/tg$sf"/* "$GQUERY_DATA_DIR/sf$sf/"
}
if [ "$what" = tests ] || [ "$what" = all ]; then
  python3 -m pytest -m gpu -q -rs -W error::pytest.PytestUnraisableExceptionWarning tests 2>&1 | tee "$OUT/gpu-tests.txt" | tail -15 || rc=1
  compute-sanitizer --tool memcheck --error-exitcode 9 python3 scripts/sanitize_fused.py 2>&1 | tail -4 | tee -a "$OUT/gpu-tests.txt" || rc=1
fi
if [ "$what" = sanitize ] || [ "$what" = all ]; then
  compute-sanitizer --tool racecheck --error-exitcode 9 python3 scripts/sanitize_fused.py 2>&1 | tail -4 | tee -a "$OUT/gpu-sanitize.txt" || rc=1
  python3 -m gquery run --sf 10 --query q1 --explain > "$OUT/run-sf10-q1.txt" 2>&1 || rc=1
  tail -60 "$OUT/run-sf10-q1.txt"
fi
if [ "$what" = queries ] || [ "$what" = all ]; then
  sfs=""
  for sf in ${QUERY_SF:-10 100}; do sfs="$sfs --sf $sf"; tpch_parts "$sf" || rc=1; done
  designs=""  # QUERY_DESIGNS="clustered:l_shipdate" QUERY_ADD_FROM=<an earlier call's report, carried>: added to it
  for d in ${QUERY_DESIGNS:-}; do designs="$designs --design $d"; done
  names=""  # QUERY_NAMES="mission q6 first-answer": those queries alone (gquery bench --query)
  for q in ${QUERY_NAMES:-}; do names="$names --query $q"; done
  [ -n "${QUERY_ADD_FROM:-}" ] && cp "$QUERY_ADD_FROM" "$OUT/"
  python3 -m gquery bench $sfs $designs $names ${QUERY_ADD_FROM:+--add} --repeat 7 --out "$OUT" > "$OUT/queries-log.txt" 2>&1 || rc=1
  tail -5 "$OUT/queries-log.txt"
  sed -n '/## Runs/,$p' "$OUT"/queries-*.md
fi
if [ "$what" = timeline ]; then
  design=${TIMELINE_DESIGN:-clustered:l_shipdate} query=${TIMELINE_QUERY:-q6}
  for sf in ${TIMELINE_SF:-100}; do
    tpch_parts "$sf" || rc=1
    path=$(python3 -c "
from gquery.bench.queries import bench_source, design_store, NEEDED
print(design_store(bench_source($sf, None, print), $sf, '$design', None, NEEDED, print))" | tail -1)
    python3 scripts/fused_timeline.py "$path" "$query" --chunk-frames "${TIMELINE_CHUNKS:-auto,1112,4096,8192}" \
      --json "$OUT/timeline-sf$sf-$query.json" 2>&1 | tee "$OUT/timeline-sf$sf-$query.txt" || rc=1
  done
fi
exit $rc
