#!/bin/bash
# On a host with several GPUs, in two calls on one warm machine (the scale report needs SF 1000,
# whose generation outlasts one call; it resumes part by part, so a second start is harmless):
#   start    SF 1000's store built part by part in the background (its own session: it outlives the
#            call; 8 parts at a time, each tpchgen-cli --part then gquery encode into the part's
#            store, its parquet deleted: what `gquery generate --sf 1000` does one part at a time,
#            8 at once on a 64-core host), SF 10 and 100 in the foreground, then the GPU tests of
#            several GPUs and of Dask
#   report   wait for SF 1000, then `gquery bench --scale` (the class at scale) over SF 10, 100 and 1000, GPUs 1, 2, 4
#   queries  SQL of the class on every GPU and as Dask tasks (one call): the GPU tests of several GPUs and
#            of Dask, SF 100 (SCALE_SF) with its parquet kept, then `gquery bench --scale`
# Usage: GQUERY_COMMIT=<git rev-parse --short HEAD, run here: the lent host's .git may not be this checkout's> \
#          bash .device/run.sh bash scripts/scale_host.sh start|report
set -uo pipefail
cd "$(dirname "$0")/.."
export GQUERY_DATA_DIR=${GQUERY_DATA_DIR:-/tmp/dbgen_data} OUT=${OUT:-/tmp/gquery-out}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # the host's rule
mkdir -p "$OUT" "$GQUERY_DATA_DIR"
log=$GQUERY_DATA_DIR/sf1000-generate.log
rc=0
case "${1:-}" in
  start)
    nvidia-smi -L; nproc; free -g | head -2; df -h "$GQUERY_DATA_DIR" | tail -1
    setsid nohup bash scripts/scale_host.sh sf1000 > "$log" 2>&1 < /dev/null &
    # the parquet kept up to SF 100, so the report checks those against DuckDB
    python3 -m gquery generate --sf 10 --keep-parquet 2>&1 | tail -2 || rc=1
    python3 -m gquery generate --sf 100 --keep-parquet 2>&1 | tail -2 || rc=1
    python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests/test_gpu_scale.py tests/test_distributed.py 2>&1 \
      | tee "$OUT/gpu-scale-tests.txt" | tail -8 || rc=1
    while pgrep -f "scale_host.sh sf1000" > /dev/null && [ "$SECONDS" -lt 540 ]; do sleep 5; done  # the call's time
    grep -c "done" "$log"; tail -3 "$log"; df -h "$GQUERY_DATA_DIR" | tail -1
    ;;
  report)
    while pgrep -f "scale_host.sh sf1000" > /dev/null; do sleep 5; done
    tail -4 "$log"; cp "$log" "$OUT/"
    df -h "$GQUERY_DATA_DIR" | tail -1
    python3 -m gquery bench --scale --sf 10 --sf 100 --sf 1000 --gpus 1 --gpus 2 --gpus 4 --repeat 5 --out "$OUT" \
      > "$OUT/scale.txt" 2>&1 || rc=1
    tail -60 "$OUT/scale.txt"
    ;;
  sf1000)  # 100 parts of SF 10: at most 8 parts' parquet on disk at once, never the 260 GB of all
    sf=${SCALE_SF:-1000} parts=${SCALE_PARTS:-100}  # smaller only to try the script out
    store=$GQUERY_DATA_DIR/sf$sf/lineitem.gq
    mkdir -p "$store"
    seq 1 "$parts" | xargs -P 8 -I{} bash -c 'k=$1; part=$(printf "%s/part-%05d.gq" "$2" "$k")
      [ -f "$part/manifest.json" ] && exit 0
      t=$(mktemp -d -p "$2/..") && tpchgen-cli parquet -s "$3" --tables lineitem --parts "$4" --part "$k" -n 8 \
        --no-progress -o "$t" && python3 -m gquery encode --data "$(find "$t" -name "*.parquet")" --out "$part" \
        && rm -rf "$t" && echo "part $k done $(date +%T)"' _ {} "$store" "$sf" "$parts"
    python3 -c "from gquery import store; store.finish_parted('$store', $parts)"
    ;;
  queries)  # SQL of the class on every GPU and on Dask: the GPU tests of several GPUs and of Dask, then SF 100's
    # parquet (kept: DuckDB checks every answer) and a store of the class's columns, its 10 parts encoded at once,
    # then `gquery bench --scale` on 1 and 2 ... GPUs
    nvidia-smi -L; nproc
    python3 -m pytest -m gpu -q -p no:cacheprovider -rfs --tb=line -W error::pytest.PytestUnraisableExceptionWarning \
      tests/test_gpu_scale.py tests/test_distributed.py "tests/test_gpu_sql.py::test_sql_over_every_gpu_of_the_host" \
      > "$OUT/gpu-scale-tests-full.txt" 2>&1 || rc=1
    grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed|Warning:|Error:" "$OUT/gpu-scale-tests-full.txt" | sort | uniq -c \
      | sort -rn | cut -c1-400 | head -40 | tee "$OUT/gpu-scale-tests.txt"
    rm -f "$OUT/gpu-scale-tests-full.txt"
    sf=${SCALE_SF:-100}
    dir=$GQUERY_DATA_DIR/sf$sf
    if [ ! -d "$dir/lineitem" ]; then
      tpchgen-cli parquet -s "$sf" --tables lineitem -o "/tmp/tg$sf" --parts $((sf / 10)) --no-progress && mkdir -p "$dir" \
        && mv "/tmp/tg$sf/lineitem" "$dir/lineitem"
    fi
    store=$dir/lineitem-needed.gq
    columns=$(python3 -c "from gquery.bench.queries import NEEDED; print(','.join(NEEDED))")
    mkdir -p "$store"
    find "$dir/lineitem" -name "*.parquet" | sort -V | awk '{print NR, $0}' | xargs -P 16 -n 2 bash -c \
      'python3 -m gquery encode --data "$4" --out "$(printf "%s/part-%05d.gq" "$1" "$3")" --columns "$2" > /dev/null' _ \
      "$store" "$columns" 2>&1 | tail -3
    python3 -c "from gquery import store; store.finish_parted('$store', $((sf / 10)))" || rc=1
    gpus=""; for g in $(seq 1 "$(nvidia-smi -L | wc -l)"); do gpus="$gpus --gpus $g"; done
    python3 -m gquery bench --scale --sf "$sf" $gpus --repeat 5 --out "$OUT" > "$OUT/scale-queries.txt" 2>&1 || rc=1
    tail -40 "$OUT/scale-queries.txt"
    ;;
  *) echo "usage: scale_host.sh start|report|queries" >&2; exit 2 ;;
esac
exit $rc
