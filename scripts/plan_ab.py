"""A new constant's plan, the planner alone (no GPU: any host), for an A/B of two trees on one host.

Each query's sibling is planned first (its shape's spec and its columns' zone orders found) and what its plan
reads is read (as its run would: run_reads), then 16 new texts
of the shape, each a new constant (gquery.bench.queries.new_texts, as the benchmark's), each parsed and planned
afresh as `table.sql` plans a new text (answer.gpu_plan, the choice of scans included, no kernel compiled); the
median of their wall clock and of their thread's CPU time is taken. Run it once a tree, turn about, the other
tree first on PYTHONPATH:

    PYTHONPATH=/path/to/base python scripts/plan_ab.py base --store /path/to/lineitem.gq
    python scripts/plan_ab.py head --store /path/to/lineitem.gq

Prints one line: the label, then {query: [wall ms, CPU ms]} as JSON. With --calls, {query: Python calls} instead:
the median plan's function calls counted by cProfile (its clock not taken): a count that does not move with the
host's load (a 2-core VM's wall and CPU times of the same tree differed 2x within minutes), though it does not
see the work inside a NumPy call (a change that saves NumPy work, and makes a few more calls, counts more). Without --store, the
benchmark's store of --sf (default 100) as generated, built where missing under $GQUERY_DATA_DIR (tpchgen-cli
generates its parquet).

With --instructions, {query: instructions a plan} instead: each query's plans counted by valgrind (callgrind) in a
child process twice, once planning no new text and once 16, garbage collection off, the difference over 16: a count
that moved 0.5% (Q6) to 3% (the mission) between runs of one tree where times moved 2x (what NumPy does inside its
calls is counted too; a page faulted in or a cache missed is not). Minutes a query; valgrind must be installed.
"""

import argparse
import cProfile
import gc
import inspect
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import gquery
from gquery import answer, sql
from gquery.answer import settle
from gquery.bench.queries import NEEDED, bench_source, design_store, new_texts, sibling, text_of

QUERIES = (("mission", 1), ("mission", 300), ("mission", 3000), ("mission", 100000), ("q6", None))
TEXTS = 16
SM_COUNT = 132  # an H100's: the plan's chunks are sized for it


def _held(table) -> dict:
    """What table.sql passes gpu_plan of a held table besides its plans (its kept choices), where this tree takes it."""
    return {"choices": table._choices} if "choices" in inspect.signature(answer.gpu_plan).parameters else {}


def plan_ms(table, plans: dict, text: str) -> tuple[float, float]:
    """A text parsed (outside the clock) and planned as a new text is: (wall ms, this thread's CPU ms)."""
    data = table.data
    query = sql.parse_shaped(text, answer.schema_of(data), table.name, table._shapes)
    wall, cpu = time.perf_counter(), time.thread_time()
    answer.gpu_plan(query, data, SM_COUNT, "pinned", 1, False, plans=plans, arch=None, **_held(table))
    return (time.perf_counter() - wall) * 1e3, (time.thread_time() - cpu) * 1e3


def run_reads(table, plans: dict, text: str) -> None:
    """What the text's chosen plan reads, read from disk and kept, as its run on a GPU leaves them (the packed words
    of its frames' columns: a plan weighs what is still on disk, so a plan made where no run read them weighs
    bytes the GPU host's new texts never see)."""
    query = sql.parse_shaped(text, answer.schema_of(table.data), table.name, table._shapes)
    plan, _ = answer.gpu_plan(query, table.data, SM_COUNT, "pinned", 1, False, plans=plans, arch=None, **_held(table))
    for column, encoding in plan.reads():
        column.get(encoding)


def plan_calls(table, plans: dict, text: str) -> int:
    """A text parsed and planned as plan_ms does it: the Python function calls the plan made (cProfile's count)."""
    data = table.data
    query = sql.parse_shaped(text, answer.schema_of(data), table.name, table._shapes)
    profile = cProfile.Profile()
    profile.runcall(answer.gpu_plan, query, data, SM_COUNT, "pinned", 1, False, plans=plans, arch=None, **_held(table))
    profile.create_stats()
    return sum(calls for _, calls, *_ in profile.stats.values())  # (every call, recursive ones too)


def planned(path: str, name: str, z: int | None, texts: int) -> None:
    """A child's work under valgrind (--instructions): the query's sibling planned and every encoding of its columns
    read, then `texts` new texts planned, garbage collection off (a collection lands in one run and not another)."""
    gc.disable()
    table = gquery.open(path)
    text = text_of(name, z)
    plans: dict = {}
    run_reads(table, plans, sibling(text))
    settle()
    query = sql.parse(text, answer.schema_of(table.data))
    for part in answer.parts_of(table.data):  # every encoding a plan may read, read now: no new text reads from disk
        for column in [part.columns[c] for c in sorted(set(query.columns()))]:  # (reads outweighed ten plans)
            for encoding in ("packed", "sliced", "indexed"):
                if column.has(encoding):
                    column.get(encoding)
    settle()
    for new in new_texts(text, TEXTS)[:texts]:
        plan_ms(table, plans, new)
        settle()
    table.close()


def instructions(path: str, name: str, z: int | None) -> int:
    """Instructions a new text's plan takes (planned's: TEXTS of them less none, over TEXTS)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("plan_ab.py: --instructions needs valgrind on PATH")
    counted = []
    for texts in (0, TEXTS):
        done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                               __file__, "-", "--store", path, "--child", f"{name}:{z or ''}:{texts}"],
                              capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise SystemExit(f"plan_ab.py: the child planning {name} failed: {done.stderr.strip().splitlines()[-1:]}")
        counted.append(int(found.group(1)))
    return (counted[1] - counted[0]) // TEXTS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("label")
    parser.add_argument("--store", help="an existing store (else the benchmark's of --sf, as generated)")
    parser.add_argument("--sf", type=int, default=100)
    parser.add_argument("--calls", action="store_true", help="Python calls a plan, not its times")
    parser.add_argument("--instructions", action="store_true", help="instructions a plan (valgrind), not its times")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # name:z:texts, planned under valgrind
    args = parser.parse_args()
    path = args.store
    if path is None:
        data = os.environ.get("GQUERY_DATA_DIR", "dbgen_data")
        path = design_store(bench_source(args.sf, data, lambda *a: None), args.sf, "as-generated", data, NEEDED,
                            lambda *a: None, names=("mission", "q6"))
    if args.child is not None:
        name, z, texts = args.child.split(":")
        planned(path, name, int(z) if z else None, int(texts))
        os._exit(0)  # (no interpreter teardown counted)
    if args.instructions:
        print(args.label, json.dumps({f"{name} {z or ''}".strip(): instructions(path, name, z) for name, z in QUERIES}),
              flush=True)
        return
    table = gquery.open(path)
    out = {}
    for name, z in QUERIES:
        text = text_of(name, z)
        plans: dict = {}
        run_reads(table, plans, sibling(text))
        settle()  # (the reads the plan left in the background, off the next plan's clock)
        times = []
        for new in new_texts(text, TEXTS):
            times.append(plan_calls(table, plans, new) if args.calls else plan_ms(table, plans, new))
            settle()
        out[f"{name} {z or ''}".strip()] = (statistics.median(times) if args.calls else
                                             [round(statistics.median(t[k] for t in times), 3) for k in (0, 1)])
    table.close()
    print(args.label, json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
