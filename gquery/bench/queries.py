"""`gquery bench`: SQL of the class on the GPU against DuckDB on the same SQL text, in two
physical designs, and the time to a first answer. Writes reports/queries-<gpu>.json and .md.

    designs    as-generated          the rows as tpchgen-cli writes them
               clustered:<column>    the rows ordered by a column (each part by itself); DuckDB gets
                                     its own table ordered the same way
    queries    mission   SUM(l_quantity * l_extendedprice) WHERE l_suppkey < Z, Z over a sweep
                         (1, 30, 100, 300, 1000, 3000 and 10..100% of the suppliers), as generated
                         and clustered by l_suppkey
               q6, q1    TPC-H's own, as generated and clustered by l_shipdate

gpu_ms: the query on the GPU from the first copy to the result on the host (CUDA events), the
median run, the store in host memory and nothing on the GPU before it; the planner chooses each
table's scan (its frames, or a column's bucket lists where they read fewer bytes). duckdb_ms: DuckDB
over its own in-memory table of the columns the queries read, all cores, warm, median.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from gquery import reports, store, tpch
from gquery.answer import gpu_answer, parts_of, schema_of
from gquery.errors import GqueryError
from gquery.result import same
from gquery.sql import named_sql, parse

FLOORS = {"mission": 3.0, "q6": 4.0, "q1": 15.0}  # DuckDB time / GPU time, in every design
SWEEP_ABSOLUTE = (1, 30, 100, 300, 1000, 3000)
SWEEP_PERCENT = (10, 30, 50, 70, 100)
DESIGNS = {"as-generated": None, "clustered:l_suppkey": "l_suppkey", "clustered:l_shipdate": "l_shipdate"}
QUERIES_OF = {"as-generated": ("mission", "q6", "q1"), "clustered:l_suppkey": ("mission",),
              "clustered:l_shipdate": ("q6", "q1")}
NEEDED = ("l_suppkey", "l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_returnflag", "l_linestatus",
          "l_shipdate")
MISSION_COLUMNS = ("l_suppkey", "l_quantity", "l_extendedprice")


def design_columns(design: str) -> tuple[str, ...]:
    """The columns a design's queries read: what its store holds unless every column is asked for."""
    return tuple(c for c in NEEDED if "mission" in QUERIES_OF[design] and c in MISSION_COLUMNS
                 or {"q6", "q1"} & set(QUERIES_OF[design]) and c != "l_suppkey")


def sweep(largest_key: int) -> list[int]:
    """The mission's Z: absolute values, then shares of the suppliers (100%: every row)."""
    return sorted({*SWEEP_ABSOLUTE, *(largest_key * p // 100 + (p == 100) for p in SWEEP_PERCENT)})


def _scans(plan) -> str:
    """How the plan's tables are scanned: frames, index (a column's bucket lists), or both."""
    return "+".join(sorted({"index" if t.index is not None else "frames" for t in plan.tables}))


def bench_source(sf: float, data_dir, echo):
    """The parquet of an SF: as found (a file, or a folder of parts made by tpchgen-cli --parts), else generated."""
    folder = tpch.dataset_dir(sf, data_dir)
    for found in (folder / "lineitem.parquet", folder / "lineitem"):
        if found.exists():
            return tpch.find_lineitem(found)
    return tpch.generate(sf, data_dir, keep_parquet=True, echo=echo)


def design_store(source, sf: float, design: str, data_dir, columns, echo) -> Path:
    """The store of a design: as generated, beside the parquet; clustered, in a folder of its own.
    `columns` None: every column (the key's slices and lists only where the design runs the mission)."""
    column = DESIGNS[design]
    if column is None and columns is None:
        return store.ensure_store(source, echo=echo)
    path = tpch.dataset_dir(sf, data_dir) / (f"lineitem-by-{column}.gq" if column else "lineitem-needed.gq")
    columns = None if columns is None else design_columns(design)  # the key's lists only with l_suppkey
    if store.is_store(path):
        m = store._manifest(path)
        if m.get("sorted_by") == column and store.unchanged_sources(path):
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
import gquery, gquery.api
t1 = time.perf_counter()
t = gquery.open(sys.argv[1])
t2 = time.perf_counter()
a = t.sql(sys.argv[2], check=False, warmup=False)
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "first_query_ms": (t3 - t2) * 1e3,
                  "scans": sorted({"index" if p.index is not None else "frames" for p in a.plan.tables}),
                  "rows": [[str(v) for v in r] for r in a.rows]}))
"""
DUCKDB_PROBE = """import json, os, sys, time
t0 = time.perf_counter()
import duckdb
t1 = time.perf_counter()
con = duckdb.connect(":memory:")
con.execute(f"SET threads = {os.cpu_count() or 1}")
con.execute(f"CREATE TABLE lineitem AS SELECT {sys.argv[1]} FROM {sys.argv[2]}")
t2 = time.perf_counter()
rows = con.execute(sys.argv[3]).fetchall()
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "first_query_ms": (t3 - t2) * 1e3,
                  "rows": [[str(v) for v in r] for r in rows]}))
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
    if r.returncode:
        raise GqueryError(f"a first-answer probe failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def first_answer(store_path: Path, sql: str, env: dict | None = None) -> dict:
    """gquery's open and first query in a fresh process (its kernel compiled before, so the disk cache
    holds it), as a user's first question meets them."""
    return fresh_process(GQUERY_PROBE, str(store_path), sql, profile=os.environ.get("GQUERY_FIRST_ANSWER_PROFILE"),
                         env=env)


def run_queries(sfs, repeat: int, data_dir=None, echo=print, columns=NEEDED, designs=tuple(DESIGNS)) -> dict:
    from gquery.gpu.executor import Engine
    from gquery.reference import DuckDBTable

    engine = Engine()
    runs, first, probes = [], [], []
    for sf in sfs:
        source = bench_source(sf, data_dir, echo)
        for design in designs:
            path = design_store(source, sf, design, data_dir, columns, echo)
            table = store.open_store(path, engine.memory)
            schema = schema_of(table)
            needed = sorted({c for name in QUERIES_OF[design] for c in parse(named_sql(name, 1), schema).columns()})
            echo(f"SF {sf:g}, {design}: DuckDB loads its own table of {', '.join(needed)}"
                 f"{' ordered by ' + DESIGNS[design] if DESIGNS[design] else ''}")
            duck = DuckDBTable(source, needed, order_by=DESIGNS[design])
            largest = max(t.ranges(["l_suppkey"])["l_suppkey"][1] for t in parts_of(table)) \
                if "l_suppkey" in schema.types else None  # a design whose queries do not read it has no sweep
            for name in QUERIES_OF[design]:
                for z in (sweep(largest) if name == "mission" else (None,)):
                    text = named_sql(name, z)
                    query = parse(text, schema)
                    echo(f"SF {sf:g}, {design}, {name}{'' if z is None else f' Z = {z}'}")
                    d = duck.run_sql(text, repeat=repeat)
                    a = gpu_answer(query, table, engine, "pinned", repeat)
                    p = a.profile
                    dms = sorted(d.times_ms)[len(d.times_ms) // 2] if d.times_ms else None
                    runs.append({"query": name, "sql": text, "sf": sf, "z": z, "design": design,
                                 "gpu_ms": p.total_ms, "duckdb_ms": dms, "ratio": dms / p.total_ms if dms else None,
                                 "match": bool(d.unavailable is None and same(a.result, d.rows, bool(query.order_by))),
                                 "rows": [[str(v) for v in r] for r in a.rows], "pcie_bytes_per_row": p.pcie_bytes_per_row,
                                 "h2d_ms": p.stage_ms("h2d"), "kernel_ms": p.stage_ms("kernel"), "scans": _scans(a.plan),
                                 "queued_ms": p.counters.get("queued_ms"),
                                 "times_ms": a.times_ms, "duckdb_times_ms": d.times_ms, "plan": a.plan.to_dict(),
                                 "notes": a.notes, "table_rows": table.rows})
            engine.memory.release_table(table)
            duck.close()
            del table, duck
            if design == "as-generated":  # after its queries: their kernels are in the compile cache on disk
                probes.append((sf, source, path, largest))
    engine.close()
    for probe in probes:  # as a user's first process meets the GPU: no other context of this one's on it
        first.append(_first(*probe))
    return {"device": engine.device.name, "device_info": engine.device.to_dict(), **reports.stamp(), "repeat": repeat,
            "stored_columns": list(columns) if columns else "all", "runs": runs, "first_answer": first,
            "floors": floors(runs, first)}


def _first(sf: float, source, path: Path, largest_key: int) -> dict:
    """Time to a first answer at Z = half the suppliers, each in a fresh process: gquery (import, then
    open + first query) against DuckDB (import, then load of the three columns + first query), and DuckDB
    straight over the parquet. The goal compares open + first query with load + first query; the imports
    are reported beside them."""
    from gquery.reference import _scan, duckdb_over_files

    sql = named_sql("mission", largest_key // 2)
    env = compiled_bytecode_env()
    g = first_answer(path, sql, env)
    d = fresh_process(DUCKDB_PROBE, "l_suppkey, l_quantity, l_extendedprice", _scan(source), sql, env=env)
    rows, files_ms = duckdb_over_files(source, sql)
    gquery_s = g["open_s"] + g["first_query_ms"] / 1e3
    duckdb_s = d["load_s"] + d["first_query_ms"] / 1e3
    return {"sf": sf, "sql": sql, "gquery_import_s": g["import_s"], "gquery_open_s": g["open_s"],
            "gquery_first_query_ms": g["first_query_ms"], "gquery_first_scans": "+".join(g["scans"]),
            "duckdb_import_s": d["import_s"], "duckdb_load_s": d["load_s"], "duckdb_first_query_ms": d["first_query_ms"],
            "duckdb_over_parquet_ms": files_ms, "gquery_total_s": gquery_s, "duckdb_total_s": duckdb_s,
            "gquery_with_import_s": g["import_s"] + gquery_s, "duckdb_with_import_s": d["import_s"] + duckdb_s,
            "same_answer": g["rows"] == d["rows"] == [[str(v) for v in r] for r in rows]}


def floors(runs: list[dict], first: list[dict]) -> list[dict]:
    out = []
    for r in runs:
        floor = FLOORS[r["query"]]
        if r["ratio"] is None:
            continue
        met = r["ratio"] >= floor
        at = "" if r["z"] is None else f" Z = {r['z']:,}"
        out.append({"what": f"{r['query']}{at} ({r['design']})", "sf": r["sf"],
                    "value": r["ratio"], "floor": floor, "met": met,
                    "why": None if met else _why(r)})
    for f in first:
        met = f["gquery_total_s"] <= f["duckdb_total_s"]
        out.append({"what": "first answer: gquery open + first query against DuckDB load + first query", "sf": f["sf"],
                    "value": f["duckdb_total_s"] / f["gquery_total_s"], "floor": 1.0, "met": met,
                    "why": None if met else f"gquery {f['gquery_open_s']:.2f} s open + {f['gquery_first_query_ms']:.0f} ms, "
                                            f"DuckDB {f['duckdb_load_s']:.2f} s load + {f['duckdb_first_query_ms']:.0f} ms"})
    return out


def _why(r: dict) -> str:
    queued = f", queued by the host in {r['queued_ms']:.3f} ms" if r.get("queued_ms") is not None else ""
    return (f"GPU {r['gpu_ms']:.3f} ms (H2D busy {r['h2d_ms']:.3f} ms, kernels {r['kernel_ms']:.3f} ms{queued}, "
            f"{r['pcie_bytes_per_row']:.2f} B a row over PCIe, {r['scans']}) against DuckDB {r['duckdb_ms']:.3f} ms")


def markdown(data: dict, command: str) -> str:
    rows = [[f"{r['sf']:g}", r["design"], r["query"], "" if r["z"] is None else f"{r['z']:,}", r["scans"],
             "MATCH" if r["match"] else "MISMATCH", f"{r['gpu_ms']:.3f}", f"{r['duckdb_ms']:.2f}",
             f"{r['ratio']:.1f}x", f"{r['pcie_bytes_per_row']:.3f}",
             f"{r['plan']['frames']['never']:,}/{sum(r['plan']['frames'].values()):,}" if 'frames' in r['plan'] else ""]
            for r in data["runs"]]
    first = [[f"{f['sf']:g}", f"{f['gquery_open_s']:.3f}", f"{f['gquery_first_query_ms']:.0f}", f"{f['gquery_total_s']:.3f}",
              f"{f['duckdb_load_s']:.3f}", f"{f['duckdb_first_query_ms']:.0f}", f"{f['duckdb_total_s']:.3f}",
              f"{f['gquery_import_s']:.3f} / {f['duckdb_import_s']:.3f}",
              f"{f['gquery_with_import_s']:.3f} / {f['duckdb_with_import_s']:.3f}",
              f"{f['duckdb_over_parquet_ms']:.0f}", f['gquery_first_scans'], "yes" if f["same_answer"] else "NO"]
             for f in data["first_answer"]]
    floor_rows = [[f["what"], f"SF {f['sf']:g}", f"{f['value']:.2f}", f"≥ {f['floor']:g}",
                   "met" if f["met"] else f"MISSED by {f['floor'] - f['value']:.2f}", f["why"] or ""]
                  for f in data["floors"]]
    missed = [f for f in data["floors"] if not f["met"]]
    return "\n".join([
        f"# gquery: SQL of the class against DuckDB on {data['device']}",
        "",
        f"`{command}` · commit `{data['commit']}` · {data['date']} · medians of at least {data['repeat']} runs "
        f"(GPU: and 0.1 s of runs, after 25 ms of warm-up runs). Stores of "
        f"{'every column' if data['stored_columns'] == 'all' else 'the columns the queries read (' + ', '.join(data['stored_columns']) + ')'}.",
        "",
        f"{len(data['runs'])} runs, {sum(r['match'] for r in data['runs'])} exact against DuckDB; "
        f"{len(data['floors']) - len(missed)} of {len(data['floors'])} floors met.",
        "",
        "## Runs",
        "",
        reports.md_table(["SF", "design", "query", "Z", "scan", "check", "GPU ms", "DuckDB ms", "vs DuckDB", "PCIe B/row",
                          "frames pruned"], rows),
        "",
        "GPU ms: the query from the store in host memory, nothing on the GPU before it, CUDA events from the first "
        "copy to the result on the host. DuckDB ms: DuckDB over its own in-memory table of the columns read, ordered "
        "as the design is, all cores, warm. PCIe B/row: bytes copied plus bytes read in place, per row of the table. "
        "frames pruned: frames the zone maps ruled out, of all.",
        "",
        "## First answer",
        "",
        reports.md_table(["SF", "gquery open s", "first query ms", "total s", "DuckDB load s", "first query ms", "total s",
                          "imports s (gquery / DuckDB)", "with imports s (gquery / DuckDB)", "DuckDB over parquet ms",
                          "gquery scan", "same answer"], first),
        "",
        "gquery: a fresh process imports gquery, opens the store (its manifest; the driver and the GPU's context start "
        "meanwhile, on threads of their own) and answers the mission query at Z = half the suppliers, reading, checking "
        "and page-locking the three columns it needs; the kernel was compiled earlier in this run (the compile cache on "
        "disk holds it) and its modules' bytecode too, as an installed package has it (the GPU host writes none, so "
        "the benchmark compiles it into a cache of its own first). DuckDB: a fresh process imports duckdb, loads the same three columns from the parquet into its "
        "own table (all cores), then answers; and, in this process with no load at all, straight over the parquet. Both "
        "read files the page cache holds. The goal compares the totals without imports; the totals with them are beside.",
        "",
        "## Floors",
        "",
        reports.md_table(["what", "at", "value", "floor", "", "why, where missed"], floor_rows),
    ])


def combine(reports: list[dict]) -> dict:
    """One report of several runs of the same commit on the same kind of GPU (SF 10 and SF 100 each
    fit one call of a lent machine): runs and first answers in order, floors read again."""
    if len({(r["commit"], r["device"]) for r in reports}) != 1:
        raise GqueryError("reports of different commits or devices do not combine")
    runs = [x for r in reports for x in r["runs"]]
    first = [x for r in reports for x in r["first_answer"]]
    return {**reports[-1], "runs": runs, "first_answer": first, "floors": floors(runs, first),
            "dates": [r["date"] for r in reports]}


def write(data: dict, out_dir: Path | str, command: str) -> tuple[Path, Path]:
    return reports.write(out_dir, f"queries-{reports.slug(data['device'])}", data, markdown(data, command))
