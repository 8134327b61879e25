"""A new constant's and a repeated text's host time beyond the GPU, for an A/B of two trees on one GPU host.

Each query is asked once (its shape compiled, its reads settled), then repeated (the median of 9 calls'
wall clock less their GPU events), then asked with a new constant 9 times, each text its sibling's
(gquery.bench.queries.sibling: the last number one more), a chain of siblings as the benchmark's new texts are
(new_texts), the median taken alike. Run
it once a tree, turn about, the other tree first on PYTHONPATH:

    PYTHONPATH=/path/to/base python scripts/new_constant_ab.py base
    python scripts/new_constant_ab.py head

Prints one line: the label, then {query: [repeated ms, new constant ms]} as JSON. The stores are the
benchmark's (SF 10 as generated and clustered by l_suppkey, built where missing under $GQUERY_DATA_DIR).
"""

import json
import os
import statistics
import sys
import time

import gquery
from gquery import api
from gquery.answer import settle
from gquery.bench.queries import NEEDED, bench_source, design_store, sibling, text_of

QUERIES = {"as-generated": (("mission", 300), ("mission", 3000), ("mission", 30000), ("q6", None), ("q1", None),
                            ("top-parts", None)),
           "clustered:l_suppkey": (("mission", 1000), ("mission", 30000))}
CALLS = 9


def beyond_gpu(table, text: str) -> float:
    """One call's wall clock, text to rows in hand, less its GPU events (ms)."""
    t0 = time.perf_counter()
    answer = table.sql(text, backend="gpu", check=False)
    answer.rows
    return (time.perf_counter() - t0) * 1e3 - answer.profile.total_ms


def main(label: str) -> None:
    data = os.environ.get("GQUERY_DATA_DIR", "dbgen_data")
    source = bench_source(10, data, lambda *a: None)
    out = {}
    for design, queries in QUERIES.items():
        table = gquery.open(design_store(source, 10, design, data, NEEDED, lambda *a: None), pinned=True)
        for name, z in queries:
            text = text_of(name, z)
            beyond_gpu(table, text)
            settle()
            repeated = [beyond_gpu(table, text) for _ in range(CALLS)]
            new = []
            for _ in range(CALLS):
                text = sibling(text)
                new.append(beyond_gpu(table, text))
                settle()  # the reads and compiles the new plan left in the background, off the next call's clock
            out[f"{name} {z or ''} {design}".replace("  ", " ")] = [round(statistics.median(repeated), 3),
                                                                     round(statistics.median(new), 3)]
        table.close()
    print(label, json.dumps(out), flush=True)
    api.shutdown()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tree")
