"""The scale benchmark: the store at SF 10, 100 and 1000 on one GPU (time, rows/s, PCIe bytes a row,
host and GPU memory high-water), and one SF on 1, 2, 4 ... GPUs with the concurrent-copy limits
measured in the same run; DuckDB where its data is on disk, else the CPU's exact reference over the
same store. Writes reports/scale-<gpu>.json/.md with the floors met or missed, and why."""

from __future__ import annotations

import gc
import time
from pathlib import Path

from gquery import reports, store
from gquery.gpu.bandwidth import measure
from gquery.gpu.bench import half_of_suppliers
from gquery.gpu.multi import MultiEngine
from gquery.mission import MissionQuery
from gquery.reference import DuckDBReference
from gquery.mission import measure as measure_run
from gquery.mission import select_sum

SCALE_MODES = ("pinned", "registered", "pageable")  # the host-memory modes
FLOORS = {"sf_ratio": 10.5, "gpus_2": 1.8, "gpus_4": 2.6}


def reset_peak_rss() -> bool:
    """Start the kernel's high-water mark of this process's resident memory afresh (Linux)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def rss_bytes(field: str = "VmHWM") -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def store_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*.bin"))


def _reference(path: Path, table, query: MissionQuery, echo):
    """(value, how, ms): DuckDB over the source files where they are all still there, else the CPU's
    exact reference over the store itself."""
    source = store.as_source(path)  # its files only where every part's are still there
    t0 = time.perf_counter()
    if source.files:
        ref = DuckDBReference(source)
        r = ref.run(query, repeat=3)
        ref.close()
        if r.unavailable is None:
            return r.value, f"DuckDB ({r.threads} threads)", r.median_ms
    echo("  reference: the parquet is gone (deleted part by part); the CPU's exact sum over the store")
    return select_sum(table, query), "CPU exact over the store", (time.perf_counter() - t0) * 1e3


def _row(sf, z, mode, run, rows, how, ref_ms, extra=None) -> dict:
    p = run.result.profile
    return {"sf": sf, "z": z, "mode": mode, "encoding": run.encoding, "gpus": p.counters.get("gpus", 1),
            "result": str(run.value), "match": run.match, "reference": how, "reference_ms": ref_ms,
            "gpu_ms": p.total_ms, "totals_ms": run.totals_ms, "rows": rows, "rows_per_s": rows / p.total_ms * 1e3,
            "pcie_bytes": p.pcie_bytes, "pcie_bytes_per_row": p.pcie_bytes_per_row, "h2d_ms": p.stage_ms("h2d"),
            "kernel_ms": p.stage_ms("kernel"), "per_gpu": p.per_gpu, "host_path": p.host_path,
            "device_memory_peak_bytes": max((g["device_memory_peak_bytes"] for g in p.per_gpu), default=None),
            **(extra or {})}


def run_scale(stores: dict, gpu_counts, gpu_sf: float | None, repeat: int, window: int = 2, echo=print) -> dict:
    """`stores`: {sf: store path}. One GPU over every SF and host mode; then gpu_sf on each count."""
    engine = MultiEngine(1)
    limits = measure(engine.memory)
    runs, memory = [], []
    for sf, path in sorted(stores.items()):
        size = store_bytes(path)
        reset_peak_rss()
        base = rss_bytes("VmRSS")
        t0 = time.perf_counter()
        table = store.open_store(path, engine.memory)
        open_s = time.perf_counter() - t0
        echo(f"SF {sf:g}: opened {table.rows:,} rows ({size / 1e9:.1f} GB of store) into pinned memory in {open_s:.1f} s")
        zs = (30, half_of_suppliers(table))
        refs = {z: _reference(path, table, MissionQuery(z), echo) for z in zs}
        for z in zs:
            run = measure_run(engine, table, MissionQuery(z), "pinned", "auto", repeat, refs[z][0])
            runs.append(_row(sf, z, "pinned", run, table.rows, *refs[z][1:]))
            echo(f"  Z {z} pinned: {run.result.profile.total_ms:.2f} ms, {'exact' if run.match else 'MISMATCH'}")
        held = rss_bytes()
        engine.memory.release_table(table)
        del table, run  # the last run's plan holds the shares, and they the parts
        gc.collect()
        table = store.open_store(path)  # the user's own arrays: registered in place, or staged
        for z in zs:
            for mode in ("registered", "pageable"):
                run = measure_run(engine, table, MissionQuery(z), mode, "auto", repeat, refs[z][0])
                runs.append(_row(sf, z, mode, run, table.rows, *refs[z][1:]))
                echo(f"  Z {z} {mode}: {run.result.profile.total_ms:.2f} ms, {'exact' if run.match else 'MISMATCH'}")
        engine.memory.release_table(table)
        del table, run
        gc.collect()
        memory.append({"sf": sf, "store_bytes": size, "open_s": open_s, "rss_before": base,
                       "rss_high_water_pinned": held, "rss_high_water": rss_bytes()})
        if store.is_parted(path) and sf == max(stores):
            reset_peak_rss()
            base = rss_bytes("VmRSS")
            table = store.open_store(path, engine.memory, window=window)
            for z in zs:
                run = measure_run(engine, table, MissionQuery(z), "pinned", "auto", repeat, refs[z][0])
                runs.append(_row(sf, z, "pinned", run, table.rows, *refs[z][1:], {"window": window}))
                echo(f"  Z {z} pinned, parts from disk {window} at a time: {run.result.profile.total_ms:.2f} ms")
            largest_part = max(p["bytes"] for p in store._manifest(path)["parts"])
            memory.append({"sf": sf, "window": window, "store_bytes": size, "rss_before": base,
                           "rss_high_water": rss_bytes(), "window_bytes": window * largest_part})
            engine.memory.release_table(table)
            del table, run
            gc.collect()
    engine.close()
    multi, copies = [], {}
    if gpu_sf is not None and gpu_sf in stores:
        path = stores[gpu_sf]
        expected = {}
        for n in gpu_counts:
            eng = MultiEngine(n)
            copies[n] = eng.concurrent_h2d()
            table = store.open_store(path, eng.memory)
            zs = (30, half_of_suppliers(table))
            for z in zs:
                if z not in expected:
                    expected[z] = _reference(path, table, MissionQuery(z), echo)
                run = measure_run(eng, table, MissionQuery(z), "pinned", "auto", repeat, expected[z][0])
                row = _row(gpu_sf, z, "pinned", run, table.rows, *expected[z][1:],
                           {"h2d_all_gpus_gbps": copies[n]})
                multi.append(row)
                echo(f"SF {gpu_sf:g} on {n} GPU(s), Z {z}: {row['gpu_ms']:.2f} ms "
                     f"({'exact' if run.match else 'MISMATCH'}); {n} concurrent copies {copies[n]:.1f} GB/s")
            eng.memory.release_table(table)
            del table
            eng.close()
    dask = _dask_overhead(stores.get(gpu_sf), gpu_counts, repeat, echo)
    return {"device": engine.device.name, "device_info": engine.device.to_dict(), **reports.stamp(),
            "repeat": repeat, "limits": limits, "runs": runs, "memory": memory, "multi_gpu": multi,
            "concurrent_h2d_gbps": copies, "dask": dask, "floors": floors(runs, multi, copies)}


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


def _dask_overhead(path, gpu_counts, repeat: int, echo) -> list[dict] | dict:
    """The Dask path against the in-process path on the same store and host: GPU workers (one, and
    one a GPU), Z = 30. Where dask is not installed, the reason."""
    from gquery import distributed

    missing = dask_unavailable(path)
    if missing:
        return missing
    out = []
    for hold in (False, True):
        for workers in sorted({1, max(gpu_counts)}):
            try:
                o = distributed.overhead(path, MissionQuery(30), backend="gpu", workers=workers, repeat=repeat, hold=hold)
            except Exception as e:  # the report keeps what ran; the failure is shown, not hidden
                return {"unavailable": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
            echo(f"Dask, {workers} GPU worker(s){', parts held' if hold else ''}: {o['dask_ms']:.1f} ms against "
                 f"{o['in_process_ms']:.1f} ms in-process ({o['ratio']:.2f}x), result {o['result']}")
            out.append(o)
    return out


def floor_entry(name: str, what: str, value: float, why: str, at_most: bool = False) -> dict:
    """One floor of FLOORS read against a measured value: met or not, by how much, and why where not."""
    floor = FLOORS[name]
    met = value <= floor if at_most else value >= floor
    return {"name": name, "what": what, "value": value, "floor": floor, "at_most": at_most, "met": met,
            "short_by": None if met else abs(value - floor), "why": None if met else why}


def floors(runs: list[dict], multi: list[dict], copies: dict) -> list[dict]:
    out = []
    add = lambda *a, **k: out.append(floor_entry(*a, **k))  # noqa: E731

    single = [r for r in runs if "window" not in r]
    sfs = sorted({r["sf"] for r in single})
    if 100 in sfs and 1000 in sfs:
        for mode in SCALE_MODES:
            for kind in ("Z = 30", "Z = half"):
                pick = lambda sf: next((r for r in single if r["sf"] == sf and r["mode"] == mode
                                        and (r["z"] == 30) == (kind == "Z = 30")), None)
                big, small = pick(1000), pick(100)
                if big and small:
                    add("sf_ratio", f"time SF1000 / SF100, {mode}, {kind}", big["gpu_ms"] / small["gpu_ms"],
                        f"SF1000 {big['gpu_ms']:.1f} ms ({big['pcie_bytes_per_row']:.2f} B a row over PCIe), "
                        f"SF100 {small['gpu_ms']:.1f} ms ({small['pcie_bytes_per_row']:.2f})", at_most=True)
    one = {r["z"]: r for r in multi if r["gpus"] == 1}
    for r in multi:
        name = {2: "gpus_2", 4: "gpus_4"}.get(r["gpus"])
        if name and r["z"] in one:
            k = r["gpus"]
            limit = copies.get(k, 0) / copies[1] if copies.get(1) else None
            add(name, f"SF {r['sf']:g} on {k} GPUs / on 1, Z = {r['z']}", one[r["z"]]["gpu_ms"] / r["gpu_ms"],
                f"{k} GPUs {r['gpu_ms']:.2f} ms, 1 GPU {one[r['z']]['gpu_ms']:.2f} ms; {k} concurrent pinned copies "
                f"reached {copies.get(k, 0):.1f} GB/s, {limit or 0:.2f}x one GPU's {copies.get(1, 0):.1f} GB/s")
    return out


def markdown(data: dict, command: str) -> str:
    L = data["limits"]
    rows = [[f"{r['sf']:g}", r["z"], r["mode"] + (f", window {r['window']}" if r.get("window") else ""),
             r["encoding"], "MATCH" if r["match"] else "MISMATCH", r["reference"], f"{r['gpu_ms']:.2f}",
             f"{r['rows_per_s'] / 1e9:.2f}", f"{r['pcie_bytes_per_row']:.2f}",
             f"{(r['device_memory_peak_bytes'] or 0) / 2**30:.2f}"] for r in data["runs"]]
    gb = lambda v: f"{v / 1e9:.2f}" if v else ""
    mem = [[f"{m['sf']:g}" + (f", window {m['window']}" if m.get("window") else ""), gb(m["store_bytes"]),
            gb(m.get("rss_before")), gb(m.get("rss_high_water")), gb(m.get("window_bytes")),
            f"{m['open_s']:.1f}" if m.get("open_s") else ""] for m in data["memory"]]
    multi = [[f"{r['sf']:g}", r["gpus"], r["z"], "MATCH" if r["match"] else "MISMATCH", f"{r['gpu_ms']:.2f}",
              f"{r['rows_per_s'] / 1e9:.2f}", f"{r['h2d_all_gpus_gbps']:.1f}"] for r in data["multi_gpu"]]
    fl = [[f["what"], f"{f['value']:.2f}", ("≤ " if f["at_most"] else "≥ ") + f"{f['floor']:g}",
           "met" if f["met"] else f"MISSED by {f['short_by']:.2f}", f["why"] or ""] for f in data["floors"]]
    return "\n".join([
        f"# gquery at scale on {data['device']}", "",
        f"`{command}` · commit `{data['commit']}` · {data['date']} · medians of at least {data['repeat']} runs and 0.1 s of runs, after 25 ms of warm-up runs.",
        "", f"Limits in this run: H2D pinned {L['h2d_pinned_gbps']:.1f} GB/s, pageable {L['h2d_pageable_gbps']:.1f} GB/s, "
        f"device copy {L['d2d_gbps']:,.0f} GB/s; concurrent pinned H2D over k GPUs: "
        + ", ".join(f"{k}: {v:.1f} GB/s" for k, v in data["concurrent_h2d_gbps"].items()) + ".",
        "", "## One GPU, from the store", "",
        reports.md_table(["SF", "Z", "mode", "encoding", "check", "reference", "ms", "G rows/s", "PCIe B/row",
                          "GPU mem peak GiB"], rows),
        "", "ms: host wall time from the query's start to the exact sum on the host, over every part. "
        "GPU memory peak: the whole device's memory in use, sampled after each GPU's share of the query (its buffers are kept between queries: a high-water).",
        "", "## Host memory", "", reports.md_table(["SF", "store GB", "RSS before open GB", "RSS high-water GB",
                                                         "window GB", "open s"], mem),
        "", "RSS: the process's resident memory (VmRSS, VmHWM reset before each SF), page-locked store included; "
        "the baseline before opening is the CUDA context, the limits' buffers and the previous SF's freed pages.",
        "", "## Several GPUs", "", reports.md_table(["SF", "GPUs", "Z", "check", "ms", "G rows/s",
                                                    "concurrent H2D GB/s"], multi),
        "", "## Dask (beyond one host), against the in-process path on this host", "",
        reports.md_table(["backend", "store", "workers", "parts", "Z", "in-process ms", "Dask ms", "ratio", "result"],
                         [[d["backend"], "held" if d.get("hold") else "opened a query", d["workers"], d["parts"], d["z"],
                           f"{d['in_process_ms']:.1f}", f"{d['dask_ms']:.1f}", f"{d['ratio']:.2f}x", d["result"]]
                          for d in data["dask"]])
        if isinstance(data["dask"], list) else f"Not run: {data['dask']['unavailable']}",
        "", "Parts opened a query: in-process, every part opened into pinned memory, queried and released, one "
        "after another on one GPU (gquery.distributed.in_process); Dask, a task a part doing the same on a local "
        "cluster's GPU workers. Parts held: in-process, the store opened once and queried by the engine (its parts "
        "queued back to back on one GPU); Dask, part k always on worker k mod n, which keeps it open in pinned memory. "
        "The client adds the exact partials: every answer exact and equal.",
        "", "## Floors", "", reports.md_table(["what", "value", "floor", "", "why, where missed"], fl),
    ])


def write(data: dict, out_dir: Path | str, command: str) -> tuple[Path, Path]:
    return reports.write(out_dir, f"scale-{reports.slug(data['device'])}", data, markdown(data, command))
