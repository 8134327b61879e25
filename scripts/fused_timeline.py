"""Where a fused query's time goes, chunk by chunk, at several chunk sizes: the copies' and kernels'
busy time, the host's time to queue every chunk, and the time the GPU sat idle waiting for either.
A query whose total is near the sum of its copy and kernel time, or near its queueing time, is not
pipelined: this says which.

    python scripts/fused_timeline.py STORE q6|q1|mission|"SELECT ..." [--z Z] [--chunk-frames auto,1024,4096]
        [--repeat 20] [--mode pinned] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys

from gquery import store
from gquery.answer import gpu_answer, schema_of
from gquery.gpu.executor import Engine
from gquery.profile import union
from gquery.sql import NAMED, named_sql, parse


def idle_ms(profile) -> float:
    """Time from the first GPU interval to the last in which no copy or kernel ran."""
    spans = union([i for i in profile.intervals if i.lane != "host"])
    return sum(b[0] - a[1] for a, b in zip(spans, spans[1:]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("store")
    p.add_argument("query", help="a named query or SQL")
    p.add_argument("--z", type=int, default=None)
    p.add_argument("--chunk-frames", default="auto")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--mode", default="pinned")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    engine = Engine()
    table = store.open_store(a.store, engine.memory)
    text = named_sql(a.query, a.z) if a.query in NAMED else a.query
    query = parse(text, schema_of(table))
    out = []
    for setting in a.chunk_frames.split(","):
        frames = None if setting == "auto" else int(setting)
        ans = gpu_answer(query, table, engine, a.mode, a.repeat, chunk_frames=frames, scan="frames")
        prof = ans.profile
        row = {"chunk_frames": setting, "chunks": prof.counters.get("chunks"), "total_ms": prof.total_ms,
               "times_ms": sorted(ans.times_ms), "h2d_ms": prof.stage_ms("h2d"), "kernel_ms": prof.stage_ms("kernel"),
               "queued_ms": prof.counters.get("queued_ms"), "gpu_idle_ms": idle_ms(prof), "h2d_bytes": prof.h2d_bytes,
               "h2d_gbps": prof.h2d_gbps, "rows": [[str(v) for v in r] for r in ans.rows],
               "intervals": [[i.stage, i.lane, i.chunk, round(i.start_ms, 4), round(i.end_ms, 4)] for i in prof.intervals]}
        out.append(row)
        t = row["times_ms"]
        print(f"chunk frames {setting:>6}: {row['chunks']:>4} chunks, median {row['total_ms']:7.3f} ms "
              f"(min {t[0]:.3f}, max {t[-1]:.3f}); H2D busy {row['h2d_ms']:.3f} ms at {row['h2d_gbps'] or 0:.1f} GB/s, "
              f"kernels {row['kernel_ms']:.3f} ms, queued in {row['queued_ms']:.3f} ms, GPU idle {row['gpu_idle_ms']:.3f} ms")
    engine.memory.release_table(table)
    engine.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"store": a.store, "sql": text, "device": engine.device.name, "runs": out}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
