"""`gquery bench --scale`: SQL of the class at scale. Each SF's store on one GPU (TPC-H Q6
and Q1, and the mission query at Z = half the suppliers where the store holds l_suppkey); one SF on
1, 2 ... GPUs (each GPU a share of the frames and its own fused kernel, the exact partials added);
the same SQL text as Dask tasks on GPU workers that hold their parts. Every answer is checked:
against DuckDB over the parquet where every part's file is still on disk, else against the NumPy
reference over the same store. Writes reports/scale-queries-<gpu>.json/.md.

    ms   the fused kernel on k GPUs, from handing out the shares to the last partial back (host wall
         time), the store in page-locked host memory and nothing on the GPU before a query
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

from gquery import reports, store
from gquery.answer import cpu_answer, gpu_answer_multi, parts_of, schema_of
from gquery.gpu.multi import MultiEngine
from gquery.reference import duckdb_over_files
from gquery.result import same
from gquery.sql import OutOfClass, UnknownName, named_sql, parse

QUERIES = ("q6", "q1", "mission")

FLOORS = {"sf_ratio": 10.5, "gpus_2": 1.8, "gpus_4": 2.6}  # SF x10 costs at most 10.5x; 2 and 4 GPUs give at least


def texts(table) -> list[tuple[str, str]]:
    """(name, SQL) of each query the store's columns answer: the mission's at half the largest supplier."""
    schema = schema_of(table)
    out = []
    for name in QUERIES:
        try:
            parse(named_sql(name, 1), schema)
        except (OutOfClass, UnknownName):  # a column the store does not hold
            continue
        z = max(t.ranges(["l_suppkey"])["l_suppkey"][1] for t in parts_of(table)) // 2 if name == "mission" else None
        out.append((name, named_sql(name, z)))
    return out


def reference(path: Path, table, text: str) -> tuple[object, str, float]:
    """(rows or an Answer, how, ms): DuckDB over the store's source files where every one is still
    there, else the NumPy reference over the store itself."""
    source = store.as_source(path)
    if source.files:
        rows, ms = duckdb_over_files(source, text)
        return rows, "DuckDB over the parquet", ms
    a = cpu_answer(parse(text, schema_of(table)), table)
    return a, "NumPy reference over the store", a.times_ms[0]


def _equal(answer, ref) -> bool:
    """The GPU's exact partial against the reference: DuckDB's rows over parquet read in place (an AVG
    within one unit in the last place: result.compare), or the NumPy partial."""
    if isinstance(ref, list):
        return same(answer.result, ref, bool(answer.query.order_by))
    return answer.partial.groups == ref.partial.groups  # both exact: equal partials, equal rows


def _row(sf, gpus, name, text, answer, rows: int, ref, how: str, ref_ms: float) -> dict:
    p = answer.profile
    return {"sf": sf, "gpus": gpus, "query": name, "sql": text, "rows": [[str(v) for v in r] for r in answer.rows],
            "match": _equal(answer, ref), "reference": how, "reference_ms": ref_ms, "gpu_ms": p.total_ms,
            "times_ms": answer.times_ms, "table_rows": rows, "rows_per_s": rows / p.total_ms * 1e3,
            "pcie_bytes_per_row": p.pcie_bytes_per_row, "per_gpu": p.per_gpu}


def run_class_scale(stores: dict, gpu_counts, gpu_sf: float | None, repeat: int, echo=print) -> dict:
    """`stores`: {sf: store path}. Each SF on one GPU, then gpu_sf on each count, then Dask."""
    runs, refs, checked, device = [], {}, {}, None
    counts = sorted(set(gpu_counts) | {1})
    for sf, path in sorted(stores.items()):
        for n in counts if sf == gpu_sf else (1,):
            eng = MultiEngine(n)
            device = device or eng.device
            t0 = time.perf_counter()
            table = store.open_store(path, eng.memory)
            echo(f"SF {sf:g}: {table.rows:,} rows opened into pinned memory in {time.perf_counter() - t0:.1f} s ({n} GPU(s))")
            for name, text in texts(table):
                if (sf, name) not in refs:
                    refs[(sf, name)] = reference(path, table, text)
                    echo(f"  {name}: {refs[(sf, name)][1]} in {refs[(sf, name)][2]:,.0f} ms")
                a = gpu_answer_multi(parse(text, schema_of(table)), table, eng, "pinned", repeat)
                runs.append(_row(sf, n, name, text, a, table.rows, *refs[(sf, name)]))
                if runs[-1]["match"]:
                    checked.setdefault((sf, name), a.rows)  # Dask's rows are compared with these
                echo(f"  {name} on {n} GPU(s): {a.profile.total_ms:.2f} ms, {'exact' if runs[-1]['match'] else 'MISMATCH'}")
            eng.memory.release_table(table)
            del table
            gc.collect()
            eng.close()
    dask = _dask(stores.get(gpu_sf), max(counts), repeat, checked, gpu_sf, echo)
    return {"device": device.name, "device_info": device.to_dict(), **reports.stamp(), "repeat": repeat,
            "runs": runs, "dask": dask, "floors": floors(runs)}


def _dask(path, workers: int, repeat: int, checked: dict, sf, echo) -> list[dict] | dict:
    """Each query as Dask tasks on `workers` GPU workers holding their parts, against the same SQL in
    this process on as many GPUs: its rows must equal that answer's, which the reference checked
    (`checked`). Where dask is missing or fails, the reason."""
    from gquery import distributed

    missing = dask_unavailable(path)
    if missing:
        return missing
    out = []
    try:
        with distributed.Session(None, "gpu", workers) as session:
            table = store.open_store(path, check_source=False)
            for name, text in texts(table):
                session.run(path, text, "pinned", hold=True)  # warm-up: each worker opens its parts
                r = session.run(path, text, "pinned", repeat, hold=True)
                match = None if (sf, name) not in checked else r.result.rows == checked[(sf, name)]
                out.append({"query": name, "workers": r.workers, "parts": len(distributed.store_parts(path)),
                            "dask_ms": r.wall_ms, "dask_times_ms": r.times_ms, "match": match,
                            "rows": [[str(v) for v in row] for row in r.result.rows]})
                echo(f"Dask, {r.workers} GPU worker(s), {name}: {r.wall_ms:.1f} ms, {'exact' if match else 'MISMATCH'}")
    except Exception as e:  # the report keeps what ran; the failure is shown, not hidden
        return out or {"unavailable": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
    return out


def dask_unavailable(path) -> dict | None:
    """Why a report's Dask section cannot run (no store for it, or dask not installed), else None."""
    from gquery import distributed
    from gquery.errors import GqueryError

    if path is None:
        return {"unavailable": "no store for --gpu-sf"}
    try:
        distributed.require_dask()
    except GqueryError as e:
        return {"unavailable": str(e)}
    return None


def floor_entry(name: str, what: str, value: float, why: str, at_most: bool = False) -> dict:
    """One floor of FLOORS read against a measured value: met or not, by how much, and why where not."""
    floor = FLOORS[name]
    met = value <= floor if at_most else value >= floor
    return {"name": name, "what": what, "value": value, "floor": floor, "at_most": at_most, "met": met,
            "short_by": None if met else abs(value - floor), "why": None if met else why}


def floors(runs: list[dict]) -> list[dict]:
    out = []
    add = lambda *a, **k: out.append(floor_entry(*a, **k))  # noqa: E731

    one = {(r["sf"], r["query"]): r for r in runs if r["gpus"] == 1}
    for (sf, name), big in sorted(one.items()):
        small = one.get((sf / 10, name))
        if small:
            add("sf_ratio", f"{name}: time SF {sf:g} / SF {sf / 10:g}, one GPU", big["gpu_ms"] / small["gpu_ms"],
                f"SF {sf:g} {big['gpu_ms']:.1f} ms ({big['pcie_bytes_per_row']:.2f} B a row over PCIe), "
                f"SF {sf / 10:g} {small['gpu_ms']:.1f} ms ({small['pcie_bytes_per_row']:.2f})", at_most=True)
    for r in runs:
        name = {2: "gpus_2", 4: "gpus_4"}.get(r["gpus"])
        base = one.get((r["sf"], r["query"]))
        if name and base:
            busy = ", ".join(f"GPU {g['gpu']} {g['gpu_ms']:.1f} ms" for g in r["per_gpu"])
            add(name, f"{r['query']}: SF {r['sf']:g} on {r['gpus']} GPUs / on 1", base["gpu_ms"] / r["gpu_ms"],
                f"{r['gpus']} GPUs {r['gpu_ms']:.2f} ms ({busy}), 1 GPU {base['gpu_ms']:.2f} ms")
    return out


def markdown(data: dict, command: str) -> str:
    rows = [[f"{r['sf']:g}", r["gpus"], r["query"], "MATCH" if r["match"] else "MISMATCH", r["reference"],
             f"{r['gpu_ms']:.2f}", f"{r['reference_ms']:,.0f}", f"{r['rows_per_s'] / 1e9:.2f}",
             f"{r['pcie_bytes_per_row']:.2f}"] for r in data["runs"]]
    dask = data["dask"]
    fl = [[f["what"], f"{f['value']:.2f}", ("≤ " if f["at_most"] else "≥ ") + f"{f['floor']:g}",
           "met" if f["met"] else f"MISSED by {f['short_by']:.2g}", f["why"] or ""] for f in data["floors"]]
    in_process = {(r["query"], r["gpus"]): r["gpu_ms"] for r in data["runs"]}
    return "\n".join([
        f"# SQL of the class at scale on {data['device']}", "",
        f"`{command}` · commit `{data['commit']}` · {data['date']} · medians of at least {data['repeat']} runs "
        "and 0.1 s of runs, after 25 ms of warm-up runs.", "",
        "## The fused kernel on one GPU and on several", "",
        reports.md_table(["SF", "GPUs", "query", "check", "reference", "ms", "reference ms", "G rows/s", "PCIe B/row"], rows),
        "", "ms: host wall time from handing each GPU its share of the frames to the last exact partial back, the store "
        "page-locked in host memory, nothing on the GPU before a query. Reference: DuckDB over the parquet where every "
        "part's file is still on disk (one cold run, all cores), else the NumPy reference over the same store.",
        "", "## Dask: the same SQL as tasks on GPU workers that hold their parts", "",
        reports.md_table(["query", "workers", "parts", "Dask ms", "in-process ms (as many GPUs)", "check"],
                         [[d["query"], d["workers"], d["parts"], f"{d['dask_ms']:.1f}",
                           f"{in_process.get((d['query'], d['workers']), float('nan')):.1f}",
                           {True: "MATCH", False: "MISMATCH", None: "unchecked"}[d["match"]]] for d in dask])
        if isinstance(dask, list) else f"Not run: {dask['unavailable']}",
        "", "## Floors", "", reports.md_table(["what", "value", "floor", "", "why, where missed"], fl),
    ])


def write(data: dict, out_dir: Path | str, command: str) -> tuple[Path, Path]:
    return reports.write(out_dir, f"scale-queries-{reports.slug(data['device'])}", data, markdown(data, command))
