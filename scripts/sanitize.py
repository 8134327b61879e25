"""Every scan variant (encoding x mode, frame, vector and list loops, 64- and 128-bit products) on small odd-sized tables, checked
against Python integers, each alone and all four queued as one batch (run_many): run under compute-sanitizer (memcheck, racecheck) on a GPU host."""

import sys

import numpy as np

from gquery.columns import LineitemColumns
from gquery.gpu.executor import Engine
from gquery.plan import LIST_MODES, MODES
from gquery.mission import MissionQuery, to_decimal
from gquery.table import Table

engine = Engine()
rng = np.random.default_rng(5)
failures = 0
tables = []
for rows, big in ((1, False), (1023, False), (2049, True), (5003, False)):
    hi = 2**62 if big else 10**7
    cols = LineitemColumns(rng.integers(1, 3000, rows).astype(np.int32), rng.integers(-hi, hi, rows),
                           rng.integers(-hi, hi, rows), "sanitize")
    tables.append((cols, Table.from_columns(cols)))
for z in (0, 5, 1500, 4000):
    wants = []
    for cols, _ in tables:
        mask = cols.suppkey < z
        wants.append(to_decimal(sum(int(a) * int(b) for a, b in zip(cols.quantity[mask], cols.extendedprice[mask])),
                                int(mask.sum())))
    for mode in MODES:
        for encoding in ("plain", "packed", "sliced", "indexed"):
            if encoding == "indexed" and mode not in LIST_MODES:  # it gathers factors by row id: refused there
                continue
            for tiles in ((True, False) if encoding in ("packed", "sliced") else (True,)):  # frame loop, vector loop
                options = ({} if mode == "resident" else {"chunk_rows": 1024}) | {"tiles": tiles}
                plans = [engine.plan(t, MissionQuery(z), mode, encoding, **options) for _, t in tables]
                alone = [engine.run(t, MissionQuery(z), p).value for (_, t), p in zip(tables, plans)]
                batch = [r.value for r in engine.run_many([(t, p) for (_, t), p in zip(tables, plans)], MissionQuery(z))]
                for (cols, _), want, got, got_batch in zip(tables, wants, alone, batch):
                    if not got == got_batch == want:
                        failures += 1
                        print("MISMATCH", len(cols), z, mode, encoding, tiles, got, got_batch, want)
for _, t in tables:
    engine.memory.release_table(t)
engine.close()
print("sanitize: failures", failures)
sys.exit(1 if failures else 0)
