"""`gquery bench`: SQL of the class on the GPU against DuckDB on the same SQL text, in two
physical designs, timed as a user waits for it. Writes reports/queries-<gpu>.json and .md.

    designs    as-generated          the rows as tpchgen-cli writes them
               clustered:<column>    the rows ordered by a column (each part by itself); DuckDB gets
                                     its own table ordered the same way
    queries    mission   SUM(l_quantity * l_extendedprice) WHERE l_suppkey < Z, Z over a sweep
                         (1, 30, 100, 300, 1000, 3000 and 10..100% of the suppliers), as generated
                         and clustered by l_suppkey
               q6, q1    TPC-H's own, as generated and clustered by l_shipdate
               top-suppliers, per-day   GROUP BY l_suppkey top 10, GROUP BY l_shipdate, as generated
               top-orders, top-parts    GROUP BY l_orderkey and l_partkey, top 10 (15M and 2M groups at
                                        SF 10: a hash table, and a dense array), as generated

wall_ms (the headline): the public call, table.sql(text, backend="gpu", check=False), from the text to
the rows in hand, timed with a host clock around it: the median of at least 7 calls (and 0.1 s of
them) after warm-up calls and the reads and compiles they left in the background. duckdb_ms: DuckDB's
con.execute(text).fetchall() over its own in-memory table of the columns the queries read, all cores,
timed alike in the same process. Beside them:
gpu_ms (CUDA events, the same call's), host_ms (where the call's wall clock went: answer.HOST_PHASES),
and new_text_ms (the median of up to NEW_TEXTS first calls of texts of a compiled shape with other constants: after
a call of the text's sibling, its last number one more, which compiles the shape and reads its columns, the text
itself, then the sibling's siblings that are queries (new_texts); each parsed, planned and prepared afresh, as a
user's next question with another constant meets them, the reads a call leaves in the background done before the
next). cold_compile: a shape compiled for the
first time on the host, then found on disk by a second process. threads: 8 threads asking 30 random
queries each through one table, against one thread asking the same calls back to back. first_answer:
a fresh process's import, open and first query, against DuckDB's fresh process over the parquet.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from gquery import reports, store, timing, tpch
from gquery.answer import HOST_PHASES, parts_of, schema_of, settle
from gquery.errors import GqueryError
from gquery.result import same
from gquery.sql import named_sql, parse

FLOORS = {"mission": 3.0, "q6": 4.0, "q1": 15.0, "top-suppliers": 3.0, "per-day": 3.0,  # DuckDB's / gquery's wall
          "top-orders": 2.0, "top-parts": 2.0}
HOST_FLOORS_MS = {  # wall_ms - gpu_ms, at most: (one store, a parted store)
    "repeated text": (0.3, 1.0), "new text of a compiled shape": (2.0, 3.0)}
COLD_FLOOR_MS = 250.0  # a shape's first answer, at most this above its warm wall time
THREADS, THREAD_QUERIES = 8, 30  # threads asking one table at once, and the random queries each asks
THREADS_FLOOR = 1.25  # their wall clock over one thread's for the same calls back to back, at most
WALL_RUNS = 7  # timed calls at least, after warm-up
NEW_TEXTS = 7  # new texts of a compiled shape timed, each once
GROUPED = {
    "top-suppliers": "SELECT l_suppkey, SUM(l_quantity) AS q FROM lineitem GROUP BY l_suppkey ORDER BY q DESC LIMIT 10",
    "per-day": "SELECT l_shipdate, COUNT(*) FROM lineitem GROUP BY 1 ORDER BY 1",
    "top-orders": "SELECT l_orderkey, SUM(l_extendedprice) AS v FROM lineitem GROUP BY l_orderkey ORDER BY v DESC, "
                  "l_orderkey LIMIT 10",
    "top-parts": "SELECT l_partkey, SUM(l_quantity) AS q FROM lineitem GROUP BY l_partkey ORDER BY q DESC, l_partkey LIMIT 10",
}
COLD_SHAPES = {  # three shapes the rest of the benchmark does not compile
    "q6-shape": "SELECT SUM(l_extendedprice * l_discount) FROM lineitem WHERE l_discount BETWEEN 0.02 AND 0.04 "
                "AND l_quantity < 30 AND l_shipdate >= DATE '1995-01-01'",
    "q1-shape": "SELECT l_returnflag, l_linestatus, SUM(l_quantity), AVG(l_discount), SUM(l_extendedprice * (1 + l_tax)), "
                "COUNT(*) FROM lineitem WHERE l_shipdate <= DATE '1997-06-30' GROUP BY 1, 2 ORDER BY 1, 2",
    "grouped-or": "SELECT l_returnflag, SUM(l_quantity), COUNT(*) FROM lineitem WHERE l_shipdate < DATE '1995-01-01' "
                  "OR l_discount > 0.05 GROUP BY l_returnflag ORDER BY l_returnflag",
}
SWEEP_ABSOLUTE = (1, 30, 100, 300, 1000, 3000)
SWEEP_PERCENT = (10, 30, 50, 70, 100)
DESIGNS = {"as-generated": None, "clustered:l_suppkey": "l_suppkey", "clustered:l_shipdate": "l_shipdate"}
QUERIES_OF = {"as-generated": ("mission", "q6", "q1", "top-suppliers", "per-day", "top-orders", "top-parts"),
              "clustered:l_suppkey": ("mission",),
              "clustered:l_shipdate": ("q6", "q1")}
FIRST_ANSWER = "first-answer"  # --query's name for the first answers in a fresh process (with their queries' columns)
FIRST_QUERIES = ("mission", "q6")  # the first answers' queries (the mission at Z = half the suppliers)
FIRST_TEXTS = ("new", "asked before")  # each first asked in a process as a text new to the host, then again
NEEDED = ("l_suppkey", "l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_returnflag", "l_linestatus",
          "l_shipdate", "l_orderkey", "l_partkey")


def design_columns(design: str, names=None) -> tuple[str, ...]:
    """The columns a design's queries (those of `names`, where given) read, in NEEDED's order: what its store
    holds unless every column is asked for."""
    from gquery.arrow import TBL_SCHEMA
    from gquery.schema import read_schema

    schema = read_schema(TBL_SCHEMA)
    names = names if names is None or FIRST_ANSWER not in names else (*names, *FIRST_QUERIES)  # their columns
    read = {c for q in QUERIES_OF[design] if names is None or q in names for c in parse(text_of(q, 1), schema).columns()}
    return tuple(c for c in NEEDED if c in read)


def sweep(largest_key: int) -> list[int]:
    """The mission's Z: absolute values, then shares of the suppliers (100%: every row)."""
    return sorted({*SWEEP_ABSOLUTE, *(largest_key * p // 100 + (p == 100) for p in SWEEP_PERCENT)})


def _scans(plan) -> str:
    """How the plan's tables are scanned: frames, index (a column's bucket lists), or both."""
    return "+".join(sorted({t.scan for t in plan.tables}))


def bench_source(sf: float, data_dir, echo):
    """The parquet of an SF: as found (a file, or a folder of parts made by tpchgen-cli --parts), else generated."""
    folder = tpch.dataset_dir(sf, data_dir)
    for found in (folder / "lineitem.parquet", folder / "lineitem"):
        if found.exists():
            return tpch.find_lineitem(found)
    return tpch.generate(sf, data_dir, keep_parquet=True, echo=echo)


def design_store(source, sf: float, design: str, data_dir, columns, echo, names=None) -> Path:
    """The store of a design: as generated, beside the parquet; clustered, in a folder of its own; kept where it
    holds what the design's queries (those of `names`, where given) read. `columns` None: every column (the
    key's slices and lists only where the design runs the mission)."""
    column = DESIGNS[design]
    if column is None and columns is None:
        return store.ensure_store(source, echo=echo)
    path = tpch.dataset_dir(sf, data_dir) / (f"lineitem-by-{column}.gq" if column else "lineitem-needed.gq")
    columns = None if columns is None else design_columns(design, names)  # the key's lists only with l_suppkey
    if store.is_store(path):
        m = store._manifest(store.part_path(path, 1) if store.is_parted(path) else path)
        if m.get("sorted_by") == column and store.unchanged_sources(path) and set(columns or ()) <= set(m["columns"]):
            return path
    t0 = time.perf_counter()
    if len(source.files) > 1:
        store.write_parted(source, path, echo=echo, sort_by=column, columns=columns)
    else:
        store.write_store(source, path, source, echo=echo, sort_by=column, columns=columns)
    echo(f"{design} store at SF {sf:g} built in {time.perf_counter() - t0:.1f} s")
    return path


def class_store(sf: float, data_dir, echo) -> Path:
    """The store of the columns the class's queries read, as generated: kept when whole (a large SF's,
    built part by part beforehand, may have no parquet left), else built from the SF's parquet."""
    path = tpch.dataset_dir(sf, data_dir) / "lineitem-needed.gq"
    if store.is_store(path):
        return path
    return design_store(bench_source(sf, data_dir, echo), sf, "as-generated", data_dir, NEEDED, echo)


GQUERY_PROBE = """import json, sys, time
t0 = time.perf_counter()
import gquery  # as a user's script imports it: gquery.open imports the engine's modules, beside the driver's start
t1 = time.perf_counter()
t = gquery.open(sys.argv[1])
t2 = time.perf_counter()
a = t.sql(sys.argv[2], check=False, warmup=False)
rows = a.rows
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "first_query_ms": (t3 - t2) * 1e3,
                  "scans": sorted({p.scan for p in a.plan.tables}), "sqlglot_imported": "sqlglot" in sys.modules,
                  "rows": [[str(v) for v in r] for r in rows]}))
"""
DUCKDB_PROBE = """import json, os, sys, time
t0 = time.perf_counter()
import duckdb
t1 = time.perf_counter()
con = duckdb.connect(":memory:")
con.execute(f"SET threads = {os.cpu_count() or 1}")
scan, sql, columns = sys.argv[1:4]  # columns: loaded into a table of DuckDB's own first; none: a view over the files
con.execute(f"CREATE TABLE lineitem AS SELECT {columns} FROM {scan}" if columns else
            f"CREATE VIEW lineitem AS SELECT * FROM {scan}")
t2 = time.perf_counter()
rows = con.execute(sql).fetchall()
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "first_query_ms": (t3 - t2) * 1e3,
                  "rows": [[str(v) for v in r] for r in rows]}))
"""


IMPORTS_PROBE = """import json, time
t0 = time.perf_counter()
import numpy
t1 = time.perf_counter()
import sqlglot.dialects.duckdb
t2 = time.perf_counter()
import gquery, gquery.api, gquery.answer, gquery.sql, gquery.gpu.fused
t3 = time.perf_counter()
print(json.dumps({"numpy_s": t1 - t0, "sqlglot_s": t2 - t1, "gquery_s": t3 - t2}))
"""


PROBED_PACKAGES = ("gquery", "sqlglot", "pycuda", "pytools", "duckdb", "numpy")


def compiled_bytecode_env() -> dict:
    """The probes' environment: bytecode compiled beforehand, into a cache of our own, for what a first
    answer imports, as pip install leaves it. A host that writes none (PYTHONDONTWRITEBYTECODE, as
    the lent GPU hosts do) would otherwise compile every module from source in every process: measured
    there, that put about half a second of sqlglot's and gquery's compiling into a first query."""
    import importlib.util

    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(Path.home() / ".cache" / "gquery" / "pycache")}
    folders = [str(Path(spec.origin).parent) for name in PROBED_PACKAGES
               if (spec := importlib.util.find_spec(name)) is not None and spec.origin]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], env=env, capture_output=True, timeout=600)
    return env


def fresh_process(code: str, *args: str, profile: str | None = None, env: dict | None = None) -> dict:
    """Run a probe's code in a fresh Python (imports, page cache and compile cache as a user's next
    process finds them) and read the JSON line it prints. `profile`: a file for its cProfile."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "probe.py"
        script.write_text(code)
        command = [sys.executable, *(["-m", "cProfile", "-o", profile] if profile else []), str(script)]
        r = subprocess.run([*command, *args], capture_output=True, text=True,
                           env={**(env or os.environ), "PYTHONUNBUFFERED": "1"}, timeout=600)
    try:
        found = json.loads((r.stdout.strip().splitlines() or [""])[-1])
    except ValueError:
        found = None
    said = [line.strip() for line in r.stderr.splitlines() if line.strip().strip("-")]
    if not isinstance(found, dict):  # no answer printed: the probe failed
        raise GqueryError(f"a fresh-process probe failed (exit {r.returncode}): {said[-1] if said else '?'}")
    if r.returncode:  # its answer printed, then the process failed on its way out: kept, and said in the report
        found["exit_error"] = f"exit {r.returncode} after its answer: " + \
            next((line for line in said if "ERROR" in line or "free" in line), said[-1] if said else "?")
    return found


def exit_errors(*probes: dict) -> list[str]:
    """What the probes' processes said when they failed after printing their answer (fresh_process)."""
    return [p["exit_error"] for p in probes if p.get("exit_error")]


def first_answer(store_path: Path, sql: str, env: dict | None = None) -> dict:
    """gquery's open and first query in a fresh process (its kernel compiled before, so the disk cache
    holds it), as a user's first question meets them."""
    return fresh_process(GQUERY_PROBE, str(store_path), sql, profile=os.environ.get("GQUERY_FIRST_ANSWER_PROFILE"),
                         env=env)


def first_text(name: str, largest_key: int) -> str:
    """A first answer's SQL: one of FIRST_QUERIES, the mission at Z = half the suppliers."""
    return named_sql(name, largest_key // 2 if name == "mission" else None)


def text_of(name: str, z: int | None = None) -> str:
    """A benchmark query's SQL: a named query's (the mission's at Z), or a grouped one's."""
    return GROUPED[name] if name in GROUPED else named_sql(name, z)


def sibling(text: str) -> str:
    """The text with its last number one more (Z = 30 -> 31, LIMIT 10 -> 11, Q6's quantity 24 -> 25): a text of
    the same shape with another constant. A text without a number is spelled otherwise (a newline more)."""
    from gquery.sql import shape_of

    found = shape_of(text)
    numbers = [(start, length) for start, length in (found[1] if found else []) if text[start:start + length].isdigit()]
    if not numbers:
        return text + "\n"
    start, length = numbers[-1]
    return text[:start] + str(int(text[start:start + length]) + 1) + text[start + length:]


def new_texts(text: str, n: int, valid=lambda text: True) -> list[str]:
    """Up to n texts of the text's shape, each with other constants than the others and than sibling(text) (asked
    first, to compile the shape): the text, then those of sibling(sibling(text)), its sibling, and so on that are
    `valid` (a text whose last number is an ORDER BY position has few: per-day's ORDER BY 3 is no query), at most
    4n tried."""
    out, at = [text], sibling(text)
    for _ in range(4 * n):
        if len(out) == n:
            break
        at = sibling(at)
        if valid(at):
            out.append(at)
    return out


def _parses(table, text: str) -> bool:
    """Whether the text is a query of the class over the table (a new text the benchmark may time)."""
    try:
        parse(text, schema_of(table.data))
    except GqueryError:
        return False
    return True


def _called(table, text: str, gpus=1) -> tuple[float, object]:
    """(wall ms, answer) of one public call, the rows in hand."""
    t0 = time.perf_counter()
    a = table.sql(text, backend="gpu", mode="pinned", check=False, gpus=gpus)
    a.rows
    return (time.perf_counter() - t0) * 1e3, a


def timed_calls(table, text: str, repeat: int, gpus=1) -> list[tuple[float, object]]:
    """(wall ms, answer) of each timed public call, fastest first: warm-up calls (until what they left reading or
    compiling in the background is done, and some more), then at least `repeat` (and WALL_RUNS) timed calls and
    0.1 s of them, every call's rows equal."""
    call = lambda: _called(table, text, gpus)  # noqa: E731
    warm = timing.warm_up(call)
    if settle():  # reads or compiles the first calls left in the background: warm up again on what they made
        warm += timing.warm_up(call)
    timed = sorted(timing.timed_runs(call, max(repeat, WALL_RUNS), timing.MIN_TIMED_MS), key=lambda r: r[0])
    if any(a.rows != timed[0][1].rows for _, a in [*warm, *timed]):
        raise GqueryError(f"repeated calls gave different answers: {text}")  # exact by construction: a bug if seen
    return timed


def measure(table, duck, text: str, repeat: int) -> dict:
    """One query's figures: NEW_TEXTS new texts (a call of its sibling text just before compiled the shape and
    read its columns; new_texts), warm-up calls (until what they left reading or compiling in
    the background is done, and some more), then at least `repeat` (and WALL_RUNS)
    timed calls and 0.1 s of them; the median call's wall clock, GPU time and host phases, and the new texts'
    median; DuckDB's execute(...).fetchall() timed alike; every call's rows equal, and equal to DuckDB's."""
    before = sibling(text)
    _called(table, before)  # the shape compiled, its columns read: as a new constant's text finds them
    settle()
    news = []
    for new in new_texts(text, NEW_TEXTS, lambda t: _parses(table, t)):
        news.append(_called(table, new))
        settle()  # what its plan left reading in the background, off the next text's clock
    first = news[0][1]  # the text's own first answer
    beyond = sorted(news, key=lambda n: n[0] - n[1].profile.total_ms)
    new_ms, new = beyond[len(beyond) // 2]  # the median new text's (by its host time beyond the GPU)
    timed = timed_calls(table, text, repeat)
    if timed[0][1].rows != first.rows:
        raise GqueryError(f"repeated calls gave different answers: {text}")  # exact by construction: a bug if seen
    wall, a = timed[len(timed) // 2]
    d = duck.run_sql(text, repeat=max(repeat, WALL_RUNS), warmup=3)
    p = a.profile
    return {"sql": text, "wall_ms": wall, "duckdb_ms": d.median_ms, "gpu_ms": p.total_ms, "host_ms": a.host_ms,
            "overhead_ms": wall - p.total_ms, "new_text_ms": new_ms, "new_text_after": before,
            "new_text_overhead_ms": new_ms - new.profile.total_ms, "new_text_host_ms": new.host_ms,
            "new_text_sql": new.query.sql, "new_text_times_ms": [ms for ms, _ in news],
            "new_text_overheads_ms": sorted(ms - a.profile.total_ms for ms, a in news),
            "ratio": d.median_ms / wall if d.median_ms else None,
            "match": bool(d.unavailable is None and same(a.result, d.rows, query=a.query)),
            "rows": [[str(v) for v in r] for r in a.rows], "pcie_bytes_per_row": p.pcie_bytes_per_row,
            "h2d_ms": p.stage_ms("h2d"), "kernel_ms": p.stage_ms("kernel"), "scans": _scans(a.plan),
            "queued_ms": p.counters.get("queued_ms"), "wall_times_ms": [w for w, _ in timed],
            "gpu_times_ms": sorted(x.profile.total_ms for _, x in timed), "duckdb_times_ms": d.times_ms,
            "plan": a.plan.to_dict(), "notes": a.notes}


def run_queries(sfs, repeat: int, data_dir=None, echo=print, columns=NEEDED, designs=tuple(DESIGNS), names=None,
                progress=None) -> dict:
    """Each design's queries (those of `names`, where given: then no threads, cold compiles nor first answers)
    at each SF against DuckDB, and (every query asked) 8 threads through one table, cold compiles and the first
    answer: the report's data. `progress`, where given, is handed the report so far after each design's queries and
    after the threads (`cut_short` says where it stops), so that a run stopped later (a lent GPU host's time limit:
    SF 100's call at 4e645c0 lost every run in its 8-thread step) keeps them."""
    import gquery
    from gquery import api
    from gquery.reference import DuckDBTable
    from gquery.table import PartedTable

    runs, first, probes, speeds = [], [], [], []
    threads = None
    cold: list = []
    made: dict = {}  # the GPU's device and the compiler, found once (before the engine is shut down)

    def report(cut_short: str | None = None) -> dict:
        if not made:
            made.update(device=api.engine().device, compiler=_compiler())
        return {"device": made["device"].name, "device_info": made["device"].to_dict(), **reports.stamp(),
                "repeat": repeat, "compiler": made["compiler"],
                "stored_columns": list(columns) if columns else "all", "runs": runs, "cold_compile": cold,
                "threads": threads, "first_answer": first, "host_speed": speeds,
                "floors": floors(runs, first, cold, threads), "cut_short": cut_short}

    for sf in sfs:
        speeds.append({"sf": sf, **reports.host_speed()})  # the host's speed beside its runs (reports.host_speed)
        source = bench_source(sf, data_dir, echo)
        for design in designs:
            asked = [q for q in QUERIES_OF[design] if names is None or q in names]
            probed = design == "as-generated" and (names is None or FIRST_ANSWER in names)  # the first answer's store
            if not asked and not probed:
                continue
            path = design_store(source, sf, design, data_dir, columns, echo, names)
            table = gquery.open(path, pinned=True)
            schema = schema_of(table.data)
            needed = sorted({c for name in asked for c in parse(text_of(name, 1), schema).columns()})
            if needed:
                echo(f"SF {sf:g}, {design}: DuckDB loads its own table of {', '.join(needed)}"
                     f"{' ordered by ' + DESIGNS[design] if DESIGNS[design] else ''}")
            duck = DuckDBTable(source, needed, order_by=DESIGNS[design]) if needed else None
            largest = max(t.ranges(["l_suppkey"])["l_suppkey"][1] for t in parts_of(table.data)) \
                if "l_suppkey" in schema.types else None  # a design whose queries do not read it has no sweep
            for name in asked:
                for z in (sweep(largest) if name == "mission" else (None,)):
                    echo(f"SF {sf:g}, {design}, {name}{'' if z is None else f' Z = {z}'}")
                    runs.append({"query": name, "sf": sf, "z": z, "design": design, "table_rows": table.rows,
                                 "parted": isinstance(table.data, PartedTable),
                                 **measure(table, duck, text_of(name, z), repeat)})
            if progress is not None and asked:
                progress(report(f"after SF {sf:g}, {design}'s queries"))
            if design == "as-generated" and threads is None and names is None:  # the first SF's: 8 threads, one table
                echo(f"SF {sf:g}, {design}: {THREADS} threads x {THREAD_QUERIES} random queries")
                threads = {"sf": sf, **threads_run(table, thread_texts(table))}
                if progress is not None:
                    progress(report(f"after SF {sf:g}'s {THREADS} threads"))
            for name in FIRST_QUERIES if probed else ():  # the first answers' kernels compiled (the cache on disk)
                table.sql(first_text(name, largest), backend="gpu", check=False).rows
            table.close()
            if duck is not None:
                duck.close()
            if probed:  # after its queries: their kernels are in the compile cache
                probes.append((sf, source, path, largest))
        # and after them: a host that slowed or sped up during the runs shows it (one H100 host's same text took
        # 0.26 ms beyond the GPU in one process and 0.52 in another, minutes apart)
        speeds.append({"sf": sf, "after": True, **reports.host_speed()})
    report()  # (the device and compiler found while the engine is up)
    api.shutdown()  # what follows runs in fresh processes, as a user's first process meets the GPU
    cold.extend(cold_compile(probes[0][2]) if probes and names is None else [])
    for probe in probes:
        first.extend(_first(*probe))
    return report()


def thread_texts(table, count: int = THREAD_QUERIES, seed: str = "threads", backend: str = "gpu") -> list[str]:
    """`count` random queries of the class (querygen's) that the table answers on `backend`, each asked once
    here: its shape compiled and its columns read (a query over a column the store lacks is drawn again)."""
    import random

    from gquery.bench import querygen

    rng, out = random.Random(seed), []
    schema = schema_of(table.data)
    while len(out) < count:
        text = querygen.query(rng)
        try:
            if _every_wide_group(parse(text, schema)):
                continue  # millions of rows a call at SF 10: turning them to rows, not 8 threads, would be timed
            table.sql(text, backend=backend, check=False)
        except GqueryError:
            continue
        out.append(text)
    return out


def _every_wide_group(query) -> bool:
    """Whether the query asks every group of a wide key (l_orderkey, l_partkey: a row per order or part)."""
    from gquery.bench import querygen

    return query.limit is None and any(c.name in querygen.WIDE for c in query.group_by)


def threads_run(table, texts: list[str], threads: int = THREADS, backend: str = "gpu") -> dict:
    """`threads` threads at once each asking every text (in an order of its own) through one table, against
    one thread asking the same calls back to back; every answer equal to the text's first."""
    import random
    from concurrent.futures import ThreadPoolExecutor

    want = {t: table.sql(t, backend=backend, check=False).rows for t in texts}
    orders = [random.Random(k).sample(texts, len(texts)) for k in range(threads)]

    def ask(order: list[str]) -> bool:
        return all(table.sql(t, backend=backend, check=False).rows == want[t] for t in order)

    t0 = time.perf_counter()
    one = all(ask(order) for order in orders)
    t1 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        many = all(pool.map(ask, orders))
    t2 = time.perf_counter()
    return {"threads": threads, "queries": len(texts), "calls": threads * len(texts), "wall_s": t2 - t1,
            "one_thread_wall_s": t1 - t0, "exact": one and many, "sql": texts}


COLD_PROBE = """import json, os, sys, time
import gquery
t = gquery.open(sys.argv[1], pinned=True)
text = sys.argv[2]
t.sql(text, backend="cpu")  # the columns read and page-locked
t.sql("SELECT COUNT(*) FROM lineitem", backend="gpu", check=False)  # the GPU's context and engine made
os.environ["GQUERY_KERNEL_CACHE"] = sys.argv[3]  # the shape's kernel: compiled, or found there
def call():
    t0 = time.perf_counter()
    a = t.sql(text, backend="gpu", check=False)
    return (time.perf_counter() - t0) * 1e3, a.rows, a.host_ms
first, rows, phases = call()
for _ in range(3):
    call()
warm = sorted((call() for _ in range(7)), key=lambda c: c[0])
print(json.dumps({"first_wall_ms": first, "warm_wall_ms": warm[3][0], "first_host_ms": phases, "warm_host_ms": warm[3][2],
                  "same": all(r == rows for _, r, _ in warm), "rows": [[str(v) for v in r] for r in rows]}))
"""


def _compiler() -> str:
    """The kernels' compiler and its release ("nvrtc 13.0"): a cold compile's time is its."""
    from gquery.gpu import kernels, nvrtc

    which = kernels.compiler()
    return f"nvrtc {'.'.join(map(str, nvrtc.release()))}" if which == "nvrtc" else which


def cold_compile(store_path: Path) -> list[dict]:
    """Each of COLD_SHAPES asked in a fresh process with an empty kernel cache (its kernel compiled
    then), and again in a second process that finds it on disk: the first call's wall clock in each,
    and the warm calls' median."""
    import tempfile

    out = []
    env = compiled_bytecode_env()
    for name, sql in COLD_SHAPES.items():
        with tempfile.TemporaryDirectory() as cache:
            one = fresh_process(COLD_PROBE, str(store_path), sql, cache, env=env)
            two = fresh_process(COLD_PROBE, str(store_path), sql, cache, env=env)
        out.append({"shape": name, "sql": sql, "first_wall_ms": one["first_wall_ms"], "warm_wall_ms": one["warm_wall_ms"],
                    "second_process_wall_ms": two["first_wall_ms"], "first_host_ms": one["first_host_ms"],
                    "warm_host_ms": one["warm_host_ms"], "second_process_host_ms": two["first_host_ms"],
                    "same_answer": one["same"] and two["same"] and one["rows"] == two["rows"],
                    "exit_errors": exit_errors(one, two)})
    return out


def _first(sf: float, source, path: Path, largest_key: int) -> list[dict]:
    """Time to a first answer of each of FIRST_QUERIES (the mission at Z = half the suppliers, and Q6), each in a
    fresh process: gquery's import, open and first query, rows in hand, against DuckDB's import and the same SQL
    straight over the parquet (the goal), and beside them DuckDB's import, load of the query's columns into its
    own table, and first query."""
    from gquery.arrow import TBL_SCHEMA
    from gquery.reference import _scan
    from gquery.schema import read_schema

    import tempfile

    env = compiled_bytecode_env()
    imports = fresh_process(IMPORTS_PROBE, env=env)  # what a first answer's imports are made of, on this host
    imports.pop("exit_error", None)
    out = []
    for name in FIRST_QUERIES:
        sql = first_text(name, largest_key)
        columns = ", ".join(parse(sql, read_schema(TBL_SCHEMA)).columns())
        with tempfile.TemporaryDirectory() as kept:  # a query cache of its own: the text new to this machine, then
            # asked again by a process of its own, as a script run again asks it (textcache)
            asked = [first_answer(path, sql, {**env, "GQUERY_QUERY_CACHE": kept}) for _ in FIRST_TEXTS]
        p = fresh_process(DUCKDB_PROBE, _scan(source), sql, "", env=env)  # straight over the parquet
        d = fresh_process(DUCKDB_PROBE, _scan(source), sql, columns, env=env)
        duckdb_s = d["load_s"] + d["first_query_ms"] / 1e3
        parquet_ms = p["load_s"] * 1e3 + p["first_query_ms"]  # (its "load": the view's making)
        for text, g in zip(FIRST_TEXTS, asked):
            gquery_s = g["open_s"] + g["first_query_ms"] / 1e3
            out.append({"sf": sf, "query": name, "text": text, "sql": sql, "gquery_import_s": g["import_s"],
                        "gquery_open_s": g["open_s"], "gquery_first_query_ms": g["first_query_ms"],
                        "gquery_first_scans": "+".join(g["scans"]), "gquery_sqlglot_imported": g["sqlglot_imported"],
                        "gquery_total_s": gquery_s, "gquery_with_import_s": g["import_s"] + gquery_s,
                        "duckdb_parquet_import_s": p["import_s"], "duckdb_parquet_query_ms": parquet_ms,
                        "duckdb_parquet_with_import_s": p["import_s"] + parquet_ms / 1e3,
                        "duckdb_import_s": d["import_s"], "duckdb_load_s": d["load_s"],
                        "duckdb_first_query_ms": d["first_query_ms"], "duckdb_total_s": duckdb_s,
                        "duckdb_with_import_s": d["import_s"] + duckdb_s,
                        "gquery_imports_s": imports,
                        "same_answer": g["rows"] == p["rows"] == d["rows"], "exit_errors": exit_errors(g, p, d)})
    return out


def floors(runs: list[dict], first: list[dict], cold: list[dict] | None = None, threads: dict | None = None) -> list[dict]:
    out = []
    for r in runs:
        z = "" if r["z"] is None else f" Z = {r['z']:,}"
        at = f"{r['query']}{z} ({r['design']})"
        if r["ratio"] is not None:
            met = r["ratio"] >= FLOORS[r["query"]]
            out.append({"what": f"{at}: DuckDB's wall / gquery's wall", "sf": r["sf"], "value": r["ratio"],
                        "floor": FLOORS[r["query"]], "met": met, "why": None if met else _why(r)})
        for what, key in (("repeated text", "overhead_ms"), ("new text of a compiled shape", "new_text_overhead_ms")):
            if r.get(key) is not None:
                limit = HOST_FLOORS_MS[what][bool(r.get("parted"))]
                met = r[key] <= limit
                out.append({"what": f"{at}: host ms beyond the GPU's, {what}", "sf": r["sf"], "value": r[key],
                            "floor": limit, "at_most": True, "met": met, "why": None if met else _host_why(r)})
    for c in cold or []:
        value = c["first_wall_ms"] - c["warm_wall_ms"]
        crashed = c.get("exit_errors")
        met = value <= COLD_FLOOR_MS and c["second_process_wall_ms"] - c["warm_wall_ms"] <= COLD_FLOOR_MS and not crashed
        out.append({"what": f"cold compile of {c['shape']}: first wall ms above warm (second process: "
                            f"{c['second_process_wall_ms'] - c['warm_wall_ms']:.0f})", "sf": None, "value": value,
                    "floor": COLD_FLOOR_MS, "at_most": True, "met": met,
                    "why": None if met else f"a probe's process failed at exit: {'; '.join(crashed)}" if crashed else
                    f"first call {c['first_wall_ms']:.0f} ms, warm {c['warm_wall_ms']:.1f} ms: the shape's compile"
                    + (f" (the first call's host ms: {_phases(c['first_host_ms'])}; its plan holds the compile)"
                       if c.get("first_host_ms") else "")})
    if threads:
        value = threads["wall_s"] / threads["one_thread_wall_s"]
        met = value <= THREADS_FLOOR and threads["exact"]
        out.append({"what": f"{threads['threads']} threads x {threads['queries']} random queries through one table: "
                            f"wall over one thread's for the same calls", "sf": threads["sf"], "value": value,
                    "floor": THREADS_FLOOR, "at_most": True, "met": met,
                    "why": None if met else f"{threads['wall_s']:.2f} s against {threads['one_thread_wall_s']:.2f} s"
                                            f"{'' if threads['exact'] else '; an answer differed'}"})
    for f in first:
        crashed = f.get("exit_errors")
        met = f["gquery_with_import_s"] <= f["duckdb_parquet_with_import_s"] and not crashed
        text = f" ({_first_text_words(f)})" if f.get("text") else ""
        out.append({"what": f"first answer of {f['query']}{text} in a fresh process (import, open, query, rows) against "
                            f"DuckDB's fresh process over the parquet (import, query, rows)", "sf": f["sf"],
                    "value": f["duckdb_parquet_with_import_s"] / f["gquery_with_import_s"], "floor": 1.0, "met": met,
                    "why": None if met else f"a probe's process failed at exit: {'; '.join(crashed)}" if crashed else
                    f"gquery {f['gquery_import_s']:.2f} s import + {f['gquery_open_s']:.2f} s open + "
                    f"{f['gquery_first_query_ms']:.0f} ms, DuckDB {f['duckdb_parquet_import_s']:.2f} s import + "
                    f"{f['duckdb_parquet_query_ms']:.0f} ms" + _imports_text(f.get("gquery_imports_s"))})
    return out


def _first_text_words(f: dict) -> str:
    return "a text new to the host" if f["text"] == "new" else "a text asked before on the host"


def _imports_text(imports: dict | None) -> str:
    """What gquery's imports are made of (IMPORTS_PROBE), where measured."""
    if not imports:
        return ""
    return (f"; gquery's imports in a fresh process: NumPy {imports['numpy_s']:.2f} s, sqlglot with its DuckDB dialect "
            f"{imports['sqlglot_s']:.2f} s, gquery's own and PyCUDA {imports['gquery_s']:.2f} s")


def _phases(host: dict) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in host.items())


def _host_why(r: dict) -> str:
    return f"wall {r['wall_ms']:.3f} ms, GPU {r['gpu_ms']:.3f} ms; the median call's host ms: {_phases(r['host_ms'])}"


def _why(r: dict) -> str:
    queued = f", queued by the host in {r['queued_ms']:.3f} ms" if r.get("queued_ms") is not None else ""
    return (f"wall {r['wall_ms']:.3f} ms = GPU {r['gpu_ms']:.3f} ms (H2D busy {r['h2d_ms']:.3f} ms, kernels "
            f"{r['kernel_ms']:.3f} ms{queued}, {r['pcie_bytes_per_row']:.2f} B a row over PCIe, {r['scans']}) + host "
            f"{r['overhead_ms']:.3f} ms ({_phases(r['host_ms'])}) against DuckDB {r['duckdb_ms']:.3f} ms")


def _host_speed_text(speeds: list[dict]) -> str:
    """The report's line of the host's speed (reports.host_speed), before and after an SF's runs."""
    if not speeds:
        return "The host's speed was not measured in this run."
    return ("The host's time for one fixed piece of work (`reports.host_speed`; a report from another host, or this "
            "one busy otherwise, is read beside it): " + "; ".join(
                f"{'after' if x.get('after') else 'before'} SF {x['sf']:g}'s runs Python {x['python_ms']:.2f} ms, NumPy "
                f"{x['numpy_ms']:.2f} ms" for x in speeds) + ".")


def markdown(data: dict, command: str) -> str:
    def ms(v):
        return "" if v is None else f"{v:.3f}" if v < 10 else f"{v:.1f}"

    rows = [[f"{r['sf']:g}", r["design"], r["query"], "" if r["z"] is None else f"{r['z']:,}", r["scans"],
             "MATCH" if r["match"] else "MISMATCH", ms(r["wall_ms"]), ms(r["duckdb_ms"]), f"{r['ratio']:.1f}x",
             ms(r["gpu_ms"]), ms(r["overhead_ms"]), " / ".join(f"{r['host_ms'].get(k, 0):.2f}" for k in HOST_PHASES),
             ms(r["new_text_ms"]), f"{r['pcie_bytes_per_row']:.3f}",
             f"{r['plan']['frames']['never']:,}/{sum(r['plan']['frames'].values()):,}" if 'frames' in r['plan'] else ""]
            for r in data["runs"]]
    cold = [[c["shape"], f"{c['first_wall_ms']:.0f}", f"{c['first_host_ms']['plan']:.0f}" if c.get("first_host_ms") else "",
             f"{c['warm_wall_ms']:.2f}", f"{c['second_process_wall_ms']:.1f}",
             "yes" if c["same_answer"] else "NO"] for c in data.get("cold_compile", [])]
    first = [[f"{f['sf']:g}", f["query"], f.get("text", ""), f"{f['gquery_import_s']:.3f} + {f['gquery_open_s']:.3f} + "
              f"{f['gquery_first_query_ms'] / 1e3:.3f} = {f['gquery_with_import_s']:.3f}",
              f"{f['duckdb_parquet_import_s']:.3f} + {f['duckdb_parquet_query_ms'] / 1e3:.3f} = "
              f"{f['duckdb_parquet_with_import_s']:.3f}",
              f"{f['duckdb_parquet_with_import_s'] / f['gquery_with_import_s']:.2f}x",
              f"{f['duckdb_import_s']:.3f} + {f['duckdb_load_s']:.3f} + {f['duckdb_first_query_ms'] / 1e3:.3f} = "
              f"{f['duckdb_with_import_s']:.3f}", f["gquery_first_scans"], "yes" if f["same_answer"] else "NO"]
             for f in data["first_answer"]]

    def verdict(f):
        if f["met"]:
            return "met"
        return f"MISSED by {f['value'] - f['floor']:.3f}" if f.get("at_most") else f"MISSED by {f['floor'] - f['value']:.2f}"

    floor_rows = [[f["what"], "" if f["sf"] is None else f"SF {f['sf']:g}", f"{f['value']:.3f}",
                   f"{'≤' if f.get('at_most') else '≥'} {f['floor']:g}", verdict(f), f["why"] or ""]
                  for f in data["floors"]]
    missed = [f for f in data["floors"] if not f["met"]]
    return "\n".join([
        f"# gquery: SQL of the class against DuckDB on {data['device']}, on the wall clock",
        "",
        f"`{command}` · commit `{data['commit']}` · {data['date']} · medians of at least "
        f"{max(data['repeat'], WALL_RUNS)} calls and 0.1 s of them, after warm-up calls and the reads they left in "
        "the background. Stores of "
        f"{'every column' if data['stored_columns'] == 'all' else 'the columns the queries read (' + ', '.join(data['stored_columns']) + ')'}.",
        "",
        f"{len(data['runs'])} runs, {sum(r['match'] for r in data['runs'])} exact against DuckDB; "
        f"{len(data['floors']) - len(missed)} of {len(data['floors'])} floors met." + (
            f" **Cut short:** written {data['cut_short']}, while the run went on; what it measured later is not in this "
            "report" + ("; the runs and first answers of a later call (`--add`) are" if data.get("added_after_cut") else "")
            + "." if data.get("cut_short") else ""),
        "",
        _host_speed_text(data.get("host_speed", [])),
        "",
        "## Runs",
        "",
        reports.md_table(["SF", "design", "query", "Z", "scan", "check", "wall ms", "DuckDB ms", "vs DuckDB", "GPU ms",
                          "host ms", "parse / plan / queue / gpu / finalize", "new text ms", "PCIe B/row",
                          "frames pruned"], rows),
        "",
        "wall ms: `table.sql(text, backend=\"gpu\", check=False)` from the text to the rows in hand, a host clock "
        "around the call, the store open (its columns page-locked in place), nothing cached between calls but the "
        "parsed text and its plan. DuckDB ms: `con.execute(text).fetchall()` over DuckDB's own in-memory table of the "
        "columns read, ordered as the design is, all cores, in the same process. GPU ms: the median call's CUDA events "
        "from the first copy to the result on the host. host ms: wall ms - GPU ms; beside it the median call's "
        "phases by the host's clock (" + "; ".join(f"{k}: {v}" for k, v in HOST_PHASES.items()) + "). new text ms: "
        "the median of up to 7 first calls of texts of the shape with new constants (new_texts: this text, then its "
        "sibling's siblings), after a call of its sibling (its last number one more: Z + 1, LIMIT 11, ...), which "
        "compiled the kernel's shape: each text parsed, planned and prepared afresh. "
        "PCIe B/row: bytes copied plus bytes read in place, per row. frames pruned: frames the zone maps ruled out.",
        "",
        "## Cold compile",
        "",
        reports.md_table(["shape", "first call ms", "its plan ms", "warm ms", "second process, first call ms",
                          "same answer"], cold),
        "",
        "A fresh process opens the store, reads its columns and makes the GPU's engine (a COUNT(*) first), then asks "
        "the shape with an empty kernel cache: the first call compiles it (its plan's milliseconds hold the compile, "
        f"{data.get('compiler', 'the compiler')}'s). A second fresh process asks it with that cache: the kernel is "
        "found on disk.",
        "",
        "## Threads",
        "",
        _threads_text(data.get("threads")),
        "",
        "## First answer",
        "",
        reports.md_table(["SF", "query", "text", "gquery s: import + open + first query = total",
                          "DuckDB over the parquet s: import + query = total", "DuckDB's / gquery's",
                          "DuckDB with a load s: import + load + first query = total", "gquery scan", "same answer"],
                         first),
        "",
        "gquery: a fresh process imports gquery, opens the store (its manifest; the driver and the GPU's context start "
        "meanwhile, on threads of their own) and answers the query, rows in hand, reading, checking and page-locking "
        "the columns it needs; its kernel was compiled earlier in this run (the compile cache on disk holds it) and its "
        "modules' bytecode too, as an installed package has it (the GPU host writes none, so the benchmark compiles it "
        "into a cache of its own first). DuckDB, the goal: a fresh process imports duckdb and answers the same SQL "
        "straight over the parquet (all cores). Beside it, another fresh DuckDB loads the query's columns from the "
        "parquet into its own table first, then answers. Every process reads files the page cache holds. Each query "
        "is asked by two gquery processes in turn, over a query cache of their own: the first as a text new to the "
        "host (sqlglot imported to parse it, beside the GPU's context), the second as a text asked before, as a script "
        "run again asks it (its Query read from the cache on disk: no sqlglot).",
        "",
        "## Floors",
        "",
        reports.md_table(["what", "at", "value", "floor", "", "why, where missed"], floor_rows),
    ])


def _threads_text(t: dict | None) -> str:
    if not t:
        return "Not measured in this run."
    exact = "every answer equal to its text's first" if t["exact"] else "an answer NOT equal to its text's first"
    return (f"{t['threads']} threads at once, each asking the same {t['queries']} random queries of the class (in an "
            f"order of its own; none asking every group of l_orderkey or l_partkey) through one table, SF {t['sf']:g}: {t['calls']} calls in {t['wall_s']:.2f} s; one "
            f"thread asking them back to back: {t['one_thread_wall_s']:.2f} s; {exact}.")


def combine(reports: list[dict]) -> dict:
    """One report of several runs of the same commit on the same kind of GPU (SF 10 and SF 100 each
    fit one call of a lent machine): runs and first answers in order, floors read again."""
    if len({(r["commit"], r["device"]) for r in reports}) != 1:
        raise GqueryError("reports of different commits or devices do not combine")
    runs = [x for r in reports for x in r["runs"]]
    first = [x for r in reports for x in r["first_answer"]]
    cold = [x for r in reports for x in r.get("cold_compile", [])]
    threads = next((r["threads"] for r in reports if r.get("threads")), None)
    speeds = [x for r in reports for x in r.get("host_speed", [])]
    cut = [r["cut_short"] for r in reports if r.get("cut_short")]  # (a run stopped after a checkpoint: run_queries)
    return {**reports[-1], "runs": runs, "first_answer": first, "cold_compile": cold, "threads": threads,
            "host_speed": speeds, "floors": floors(runs, first, cold, threads),
            "dates": [d for r in reports for d in r.get("dates", [r["date"]])], "cut_short": "; ".join(cut) or None,
            # (a call added after one cut short: what it measured is here, which the cut call's note alone denies)
            "added_after_cut": any(r.get("cut_short") for r in reports[:-1]) or any(r.get("added_after_cut") for r in reports)}


def read(out_dir: Path | str, device: str) -> dict:
    """The report of `device` already in `out_dir` (gquery bench --add adds to it)."""
    path = Path(out_dir) / f"queries-{reports.slug(device)}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise GqueryError(f"--add: no report to add to at {path} ({e.__class__.__name__})") from None


def write(data: dict, out_dir: Path | str, command: str) -> tuple[Path, Path]:
    return reports.write(out_dir, f"queries-{reports.slug(data['device'])}", data, markdown(data, command))


def report_writer(out_dir: Path | str, command: str, add: bool):
    """A function that writes each report it is handed (run_queries' progress, then its whole report) into `out_dir`,
    each whole or not at all, and returns what it wrote. `add`: each is added to the report found there before the
    first was written (read once: a report written since holds this run's own runs)."""
    earlier: list = []

    def written(data: dict) -> dict:
        if add and not earlier:
            earlier.append(read(out_dir, data["device"]))
        whole = combine([earlier[0], data]) if add else data
        write(whole, out_dir, command)
        return whole

    return written
