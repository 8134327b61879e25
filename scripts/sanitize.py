"""Every scan variant (encoding x mode, 64- and 128-bit products) on small odd-sized tables, checked
against Python integers: run under compute-sanitizer (memcheck, racecheck) on a GPU host."""

import sys

import numpy as np

from gquery.columns import LineitemColumns
from gquery.gpu.executor import Engine
from gquery.plan import MODES
from gquery.query import Query, to_decimal
from gquery.table import Table

engine = Engine()
rng = np.random.default_rng(5)
failures = 0
for rows, big in ((1, False), (1023, False), (2049, True), (5003, False)):
    hi = 2**62 if big else 10**7
    cols = LineitemColumns(rng.integers(1, 3000, rows).astype(np.int32), rng.integers(-hi, hi, rows),
                           rng.integers(-hi, hi, rows), "sanitize")
    table = Table.from_columns(cols)
    for z in (0, 5, 1500, 4000):
        mask = cols.suppkey < z
        want = to_decimal(sum(int(a) * int(b) for a, b in zip(cols.quantity[mask], cols.extendedprice[mask])),
                          int(mask.sum()))
        for mode in MODES:
            for encoding in ("plain", "packed", "sliced"):
                plan = engine.plan(table, Query(z), mode, encoding, **({} if mode == "resident" else {"chunk_rows": 1024}))
                got = engine.run(table, Query(z), plan).value
                if got != want:
                    failures += 1
                    print("MISMATCH", rows, z, mode, encoding, got, want)
    engine.memory.release_table(table)
engine.close()
print("sanitize: failures", failures)
sys.exit(1 if failures else 0)
