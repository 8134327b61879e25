#!/bin/bash
# On the GPU host, one call: GPU tests, the benchmark report, the ladder report and a recorded run
# (tests/data uses it). Everything lands in $OUT (at most 8 files come back).
# Usage: GQUERY_COMMIT=$(git rev-parse HEAD) bash .device/run.sh bash scripts/gpu_host.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export GQUERY_DATA_DIR=${GQUERY_DATA_DIR:-/tmp/dbgen_data} OUT=${OUT:-/tmp/gquery-out}
mkdir -p "$OUT"
rc=0
python3 -m pytest -m gpu -q -rs tests 2>&1 || rc=1
python3 -m gquery run --sf 1 --z 30 --mode all --repeat 5 --json > "$OUT/run-sf1-$(python3 -c 'from gquery.gpu.device import require; from gquery.reports import slug; print(slug(require().name))').json" || rc=1
python3 -m gquery bench --sf 1 --sf 10 --repeat 10 --out "$OUT" || rc=1
python3 -m gquery ladder --sf 1 --z 30 --repeat 10 --report-dir "$OUT" || rc=1
ls -la "$OUT"
python3 -m gquery run --sf 10 --z 30 > "$OUT/run-sf10-z30.txt" || rc=1
cat "$OUT/run-sf10-z30.txt"
exit $rc
