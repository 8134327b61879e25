"""`gquery bench --scale`: SQL of the class at scale, on the wall clock. Each SF's store on one GPU (TPC-H Q6
and Q1, and the mission query at Z = half the suppliers where the store holds l_suppkey); one SF on
1, 2 ... GPUs (each GPU a share of the frames and its own fused kernel, the exact partials added);
the same SQL text as Dask tasks on GPU workers that hold their parts. Every answer is checked:
against DuckDB over the parquet where every part's file is still on disk, else against the CPU
reference over the same store. Writes reports/scale-queries-<gpu>.json/.md.

    wall_ms    the public call, table.sql(text, backend="gpu", gpus=k, check=False) on the store opened
               with gquery.open, from the text to the rows in hand, host clock: the median of at least
               `repeat` (and 7) calls and 0.1 s of them, after warm-up calls (bench.queries.timed_calls)
    gpu_ms     the median call's GPU time: one GPU's events, or on k GPUs the host's clock from handing out
               the shares to the last partial back
    duckdb_ms  DuckDB over the parquet, read in place as a user's DuckDB reads it, in the same process:
               execute(text).fetchall(), timed alike (median of as many calls, after one)
"""

from __future__ import annotations

import time
from pathlib import Path

from gquery import reports, store
from gquery.answer import parts_of, schema_of
from gquery.bench.queries import WALL_RUNS, timed_calls
from gquery.reference import DuckDBTable
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


def reference(path: Path, handle, text: str, repeat: int = 1) -> dict:
    """The text's reference answer over the store at `path` (opened as `handle`): DuckDB over the store's source
    files where every one is still there (a view over them, read in place), timed as gquery's calls are (the median
    of at least `repeat` and WALL_RUNS calls after one); else the CPU reference over the store itself, untimed.
    {rows, how, duckdb_ms, duckdb_first_ms, duckdb_times_ms}."""
    source = store.as_source(path)
    if source.files:
        duck = DuckDBTable(source, [], name=handle.name, in_place=True)
        try:
            d = duck.run_sql(text, repeat=max(repeat, WALL_RUNS), warmup=1)
        finally:
            duck.close()
        return {"rows": d.rows, "how": "DuckDB over the parquet", "duckdb_ms": d.median_ms,
                "duckdb_first_ms": d.first_query_ms, "duckdb_times_ms": d.times_ms}
    rows = handle.sql(text, backend="cpu", check=False).rows
    return {"rows": rows, "how": "the CPU reference over the store", "duckdb_ms": None, "duckdb_first_ms": None,
            "duckdb_times_ms": []}


def _equal(answer, ref: dict) -> bool:
    """The GPU's answer against the reference's rows: DuckDB's over parquet read in place (an AVG within one unit
    in the last place: result.compare), or the CPU reference's (both exact: equal rows)."""
    if ref["how"].startswith("DuckDB"):
        return same(answer.result, ref["rows"], query=answer.query)
    return answer.rows == ref["rows"]


def _row(sf, gpus, name, text, timed: list, rows: int, ref: dict) -> dict:
    wall, answer = timed[len(timed) // 2]
    p = answer.profile
    return {"sf": sf, "gpus": gpus, "query": name, "sql": text, "rows": [[str(v) for v in r] for r in answer.rows],
            "match": _equal(answer, ref), "reference": ref["how"], "wall_ms": wall, "wall_times_ms": [w for w, _ in timed],
            "gpu_ms": p.total_ms, "host_ms": answer.host_ms, "duckdb_ms": ref["duckdb_ms"],
            "duckdb_first_ms": ref["duckdb_first_ms"], "duckdb_times_ms": ref["duckdb_times_ms"],
            "ratio": ref["duckdb_ms"] / wall if ref["duckdb_ms"] else None, "table_rows": rows,
            "rows_per_s": rows / wall * 1e3, "pcie_bytes_per_row": p.pcie_bytes_per_row,
            "per_gpu": p.per_gpu or [{"gpu": 0, "gpu_ms": p.total_ms}]}


def run_class_scale(stores: dict, gpu_counts, gpu_sf: float | None, repeat: int, echo=print) -> dict:
    """`stores`: {sf: store path}. Each SF on one GPU, then gpu_sf on each count (the store opened once, asked with
    gpus=k), then Dask."""
    import gquery
    from gquery import api
    from gquery.gpu.device import probe

    runs, checked = [], {}
    counts = sorted(set(gpu_counts) | {1})
    for sf, path in sorted(stores.items()):
        t0 = time.perf_counter()
        handle = gquery.open(path, pinned=True)
        echo(f"SF {sf:g}: {handle.rows:,} rows, opened in {time.perf_counter() - t0:.1f} s")
        for name, text in texts(handle.data):
            ref = reference(path, handle, text, repeat)
            if ref["duckdb_ms"] is not None:
                echo(f"  {name}: {ref['how']}, {ref['duckdb_ms']:,.1f} ms (first call {ref['duckdb_first_ms']:,.0f} ms)")
            for n in counts if sf == gpu_sf else (1,):
                timed = timed_calls(handle, text, repeat, gpus=n)
                runs.append(_row(sf, n, name, text, timed, handle.rows, ref))
                if runs[-1]["match"]:
                    checked.setdefault((sf, name), timed[0][1].rows)  # Dask's rows are compared with these
                echo(f"  {name} on {n} GPU(s): {runs[-1]['wall_ms']:.2f} ms wall, {runs[-1]['gpu_ms']:.2f} ms GPU, "
                     f"{'exact' if runs[-1]['match'] else 'MISMATCH'}")
        handle.close()
    api.shutdown()  # the engines' GPU memory freed before Dask's workers make theirs
    device = probe()[0]
    dask = _dask(stores.get(gpu_sf), max(counts), repeat, checked, gpu_sf, echo)
    return {"device": device.name, "device_info": device.to_dict(), **reports.stamp(), "repeat": repeat,
            "gpu_sf": gpu_sf, "runs": runs, "dask": dask, "floors": floors(runs)}


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
    """Each query's wall clock at SF x on one GPU over SF x/10's (at most 10.5x), and at one SF on one GPU over
    k GPUs' (at least 1.8x for 2, 2.6x for 4): what a user waits for, the public call's."""
    out = []
    add = lambda *a, **k: out.append(floor_entry(*a, **k))  # noqa: E731

    one = {(r["sf"], r["query"]): r for r in runs if r["gpus"] == 1}
    for (sf, name), big in sorted(one.items()):
        small = one.get((sf / 10, name))
        if small:
            add("sf_ratio", f"{name}: wall SF {sf:g} / SF {sf / 10:g}, one GPU", big["wall_ms"] / small["wall_ms"],
                f"SF {sf:g} {big['wall_ms']:.1f} ms (GPU {big['gpu_ms']:.1f}, {big['pcie_bytes_per_row']:.2f} B a row "
                f"over PCIe), SF {sf / 10:g} {small['wall_ms']:.1f} ms (GPU {small['gpu_ms']:.1f}, "
                f"{small['pcie_bytes_per_row']:.2f})", at_most=True)
    for r in runs:
        name = {2: "gpus_2", 4: "gpus_4"}.get(r["gpus"])
        base = one.get((r["sf"], r["query"]))
        if name and base:
            busy = ", ".join(f"GPU {g['gpu']} {g['gpu_ms']:.1f} ms" for g in r["per_gpu"])
            add(name, f"{r['query']}: SF {r['sf']:g} wall on 1 GPU / on {r['gpus']}", base["wall_ms"] / r["wall_ms"],
                f"{r['gpus']} GPUs {r['wall_ms']:.2f} ms wall ({busy}), 1 GPU {base['wall_ms']:.2f} ms wall "
                f"(GPU {base['gpu_ms']:.2f})")
    return out


def markdown(data: dict, command: str) -> str:
    def ms(v):
        return "" if v is None else f"{v:,.2f}" if v < 100 else f"{v:,.0f}"

    rows = [[f"{r['sf']:g}", r["gpus"], r["query"], "MATCH" if r["match"] else "MISMATCH", ms(r["wall_ms"]),
             ms(r["gpu_ms"]), ms(r["duckdb_ms"]), f"{r['ratio']:.1f}x" if r["ratio"] else "", f"{r['rows_per_s'] / 1e9:.2f}",
             f"{r['pcie_bytes_per_row']:.2f}", r["reference"]] for r in data["runs"]]
    dask = data["dask"]
    fl = [[f["what"], f"{f['value']:.2f}", ("≤ " if f["at_most"] else "≥ ") + f"{f['floor']:g}",
           "met" if f["met"] else f"MISSED by {f['short_by']:.2g}", f["why"] or ""] for f in data["floors"]]
    in_process = {(r["query"], r["gpus"]): r["wall_ms"] for r in data["runs"] if r["sf"] == data.get("gpu_sf", r["sf"])}
    return "\n".join([
        f"# SQL of the class at scale on {data['device']}, on the wall clock", "",
        f"`{command}` · commit `{data['commit']}` · {data['date']} · medians of at least {max(data['repeat'], WALL_RUNS)} "
        "calls and 0.1 s of them, after warm-up calls.", "",
        "## The public call on one GPU and on several", "",
        reports.md_table(["SF", "GPUs", "query", "check", "wall ms", "GPU ms", "DuckDB ms", "vs DuckDB", "G rows/s (wall)",
                          "PCIe B/row", "reference"], rows),
        "", "wall ms: `table.sql(text, backend=\"gpu\", gpus=k, check=False)` on the store opened with `gquery.open`, "
        "from the text to the rows in hand, host clock. GPU ms: the median call's GPU time (one GPU's CUDA events; on "
        "several, the host's clock from handing each GPU its share of the frames to the last exact partial back). "
        "DuckDB ms: `execute(text).fetchall()` over the parquet read in place (a view over the files, all cores), in the "
        "same process, timed alike (its first call not counted). Reference: DuckDB's rows where every part's parquet "
        "is still on disk, else the CPU reference over the same store (then no DuckDB time).",
        "", "## Dask: the same SQL as tasks on GPU workers that hold their parts", "",
        reports.md_table(["query", "workers", "parts", "Dask ms", "in-process wall ms (as many GPUs)", "check"],
                         [[d["query"], d["workers"], d["parts"], f"{d['dask_ms']:.1f}",
                           f"{in_process.get((d['query'], d['workers']), float('nan')):.1f}",
                           {True: "MATCH", False: "MISMATCH", None: "unchecked"}[d["match"]]] for d in dask])
        if isinstance(dask, list) else f"Not run: {dask['unavailable']}",
        "", "## Floors", "", reports.md_table(["what", "value", "floor", "", "why, where missed"], fl),
    ])


def write(data: dict, out_dir: Path | str, command: str) -> tuple[Path, Path]:
    return reports.write(out_dir, f"scale-queries-{reports.slug(data['device'])}", data, markdown(data, command))
