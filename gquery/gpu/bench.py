"""The engine's benchmark: SF x Z x mode, with DuckDB and the CuPy one-liner measured in the same
run, the measured limits, and the floors the engine must meet. Writes reports/bench-<gpu>.json/.md."""

from __future__ import annotations

from pathlib import Path

from gquery import reports
from gquery.columns import load_lineitem
from gquery.gpu import cupy_baseline
from gquery.gpu.bandwidth import measure
from gquery.gpu.executor import Engine
from gquery.plan import MODES
from gquery.query import Query
from gquery.reference import DuckDBReference
from gquery.runner import run_modes
from gquery.tpch import generate

FLOORS = {  # (what, floor): checked on the largest SF of the run
    "resident_kernel_of_d2d": 0.85,
    "pinned_end_to_end_of_h2d": 0.95,
    "pageable_end_to_end_of_h2d": 0.80,
    "resident_vs_cupy": 3.0,
}


def half_of_suppliers(suppkey) -> int:
    """Z that selects about half the rows: half of the largest supplier key."""
    return (int(suppkey.max()) + 1) // 2 if len(suppkey) else 0


def run_bench(sfs, repeat: int, data_dir=None, echo=print) -> dict:
    engine = Engine()
    limits = measure(engine.memory)
    runs = []
    for sf in sfs:
        source = generate(sf, data_dir, echo=echo)
        columns = load_lineitem(source)
        ref = DuckDBReference(source)
        for z in (30, half_of_suppliers(columns.suppkey)):
            query = Query(z)
            echo(f"SF {sf:g}, Z {z}: DuckDB, {', '.join(MODES)}, CuPy")
            duck = ref.run(query, repeat=repeat)
            mode_runs = run_modes(engine, columns, query, MODES, repeat, duck.value)
            cupy_ms = cupy_value = None
            if cupy_baseline.available():
                dev, _ = engine.memory.resident(columns)
                cupy_ms, cupy_value = cupy_baseline.one_liner(dev, columns.rows, query, repeat)
            for r in mode_runs:
                p = r.result.profile
                s = p.summary(limits)
                runs.append({
                    "sf": sf, "z": z, "mode": r.mode, "match": r.match, "result": str(r.value),
                    "gpu_ms": p.total_ms, "h2d_ms": s["h2d_ms"], "kernel_ms": s["kernel_ms"],
                    "staging_ms": s["staging_ms"], "d2h_ms": s["d2h_ms"], "effective_gbps": p.effective_gbps,
                    "h2d_gbps": s["h2d_gbps"], "kernel_gbps": s["kernel_gbps"], "kernel_hidden": s["kernel_hidden"],
                    "staging_hidden": s["staging_hidden"], "duckdb_ms": duck.median_ms,
                    "duckdb_threads": duck.threads, "cupy_ms": cupy_ms,
                    "cupy_match": None if cupy_value is None else (cupy_value == r.result.value.scaleb(4)
                                                                  if r.result.value is not None else cupy_value == 0),
                    "totals_ms": r.totals_ms, "plan": r.result.plan.to_dict(), "rows": columns.rows,
                    "column_bytes": p.column_bytes,
                })
        ref.close()
        engine.memory.evict(columns)
        del columns
    return {"device": engine.device.name, "device_info": engine.device.to_dict(), **reports.stamp(),
            "kernel": engine.resources(), "repeat": repeat, "limits": limits, "runs": runs,
            "floors": floors(runs, limits)}


def floors(runs: list[dict], limits: dict) -> list[dict]:
    """Each floor on the largest SF: value, floor, met, and where missed, by how much and why."""
    if not runs:
        return []
    sf = max(r["sf"] for r in runs)
    at = [r for r in runs if r["sf"] == sf]
    half = max(r["z"] for r in at)
    pick = lambda mode, z=None: [r for r in at if r["mode"] == mode and (z is None or r["z"] == z)]
    out = []

    def add(name, what, value, why):
        floor = FLOORS[name]
        met = value is not None and value >= floor
        out.append({"name": name, "what": what, "sf": sf, "value": value, "floor": floor, "met": met,
                    "short_by": None if met or value is None else floor - value, "why": None if met else why})

    for r in pick("resident", half):
        add("resident_kernel_of_d2d", f"resident kernel rate / device copy rate, Z = {half}",
            r["kernel_gbps"] / limits["d2d_gbps"],
            f"the kernel consumed {r['kernel_gbps']:,.0f} GB/s of columns in {r['kernel_ms']:.3f} ms against a "
            f"device copy of {limits['d2d_gbps']:,.0f} GB/s (read+write)")
    for mode, name in (("pinned", "pinned_end_to_end_of_h2d"), ("pageable", "pageable_end_to_end_of_h2d")):
        for r in pick(mode):
            why = (f"H2D ran {r['h2d_ms']:.2f} ms at {r['h2d_gbps'] or 0:.1f} GB/s while copying; "
                   f"the run took {r['gpu_ms']:.2f} ms")
            if r["staging_ms"]:
                why += (f"; host staging was busy {r['staging_ms']:.2f} ms "
                        f"({r['column_bytes'] / r['staging_ms'] / 1e6:.1f} GB/s; alone, with no DMA beside it, host threads copy "
                        f"{limits['host_staging_gbps']:.1f} GB/s on this host) and overlapped the copies "
                        f"{(r['staging_hidden'] or 0):.0%} of its time: host memory bandwidth for the copy into "
                        f"pinned buffers bounds it, below the {FLOORS[name]:.0%} floor")
            add(name, f"{mode} end to end / pinned H2D, Z = {r['z']}", r["effective_gbps"] / limits["h2d_pinned_gbps"], why)
    for r in pick("resident"):
        if r["cupy_ms"]:
            add("resident_vs_cupy", f"CuPy one-liner time / resident time, Z = {r['z']}", r["cupy_ms"] / r["gpu_ms"],
                f"resident took {r['gpu_ms']:.3f} ms (kernel {r['kernel_ms']:.3f} ms, "
                f"{r['kernel_gbps']:,.0f} GB/s), CuPy {r['cupy_ms']:.3f} ms")
    return out


def markdown(data: dict, command: str) -> str:
    L = data["limits"]
    run_rows = [[f"{r['sf']:g}", r["z"], r["mode"], "MATCH" if r["match"] else "MISMATCH", f"{r['gpu_ms']:.3f}",
                 f"{r['h2d_ms']:.3f}" if r["h2d_ms"] else "", f"{r['staging_ms']:.3f}" if r["staging_ms"] else "",
                 f"{r['kernel_ms']:.3f}", f"{r['effective_gbps']:,.1f}",
                 f"{r['kernel_hidden']:.0%}" if r["kernel_hidden"] is not None else "",
                 f"{r['duckdb_ms']:.2f}", f"{r['duckdb_ms'] / r['gpu_ms']:.1f}x",
                 f"{r['cupy_ms']:.3f}" if r["cupy_ms"] else "n/a"] for r in data["runs"]]
    floor_rows = [[f["what"], f"SF {f['sf']:g}", f"{f['value']:.3f}" if f["value"] is not None else "",
                   f"{f['floor']:g}", "met" if f["met"] else f"MISSED by {f['short_by']:.3f}", f["why"] or ""]
                  for f in data["floors"]]
    k = data["kernel"]
    return "\n".join([
        f"# gquery benchmark on {data['device']}",
        "",
        f"`{command}` · commit `{data['commit']}` · {data['date']} · medians of {data['repeat']} runs after a warm-up.",
        "",
        f"Limits measured in this run: H2D pinned {L['h2d_pinned_gbps']:.1f} GB/s, pageable "
        f"{L['h2d_pageable_gbps']:.1f} GB/s; D2H pinned {L['d2h_pinned_gbps']:.1f} GB/s; device copy "
        f"{L['d2d_gbps']:,.0f} GB/s (read+write); host pageable→pinned copy {L['host_staging_gbps']:.1f} GB/s "
        f"({L['host_staging_threads']} threads). Kernel select_sum: {k['registers']} registers, "
        f"occupancy {k['occupancy']:.0%}.",
        "",
        "## Runs",
        "",
        reports.md_table(["SF", "Z", "mode", "check", "GPU ms", "H2D ms", "staging ms", "kernel ms",
                          "GB/s end to end", "kernels hidden", "DuckDB ms", "vs DuckDB", "CuPy ms"], run_rows),
        "",
        "GPU ms: start of the query to the result on the host (CUDA events). GB/s: the three columns' "
        "bytes (20 per row) over GPU ms. Resident columns were uploaded once before timing; pinned columns "
        "were page-locked once. DuckDB: its own in-memory table, all cores, warm.",
        "",
        "## Floors",
        "",
        reports.md_table(["what", "at", "value", "floor", "", "why, where missed"], floor_rows),
    ])


def write(data: dict, out_dir: Path | str, command: str) -> tuple[Path, Path]:
    return reports.write(out_dir, f"bench-{reports.slug(data['device'])}", data, markdown(data, command))

