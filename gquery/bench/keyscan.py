"""The engine's benchmark: SF x Z x mode, with DuckDB and the CuPy one-liner measured in the same
run, the measured limits, and the floors the engine must meet. Writes reports/bench-<gpu>.json/.md."""

from __future__ import annotations

from pathlib import Path

from gquery import reports
from gquery.contract import check_source
from gquery.bench import cupy_baseline
from gquery.gpu.bandwidth import measure
from gquery.gpu.executor import Engine
from gquery.gpu.memory import DeviceColumns
from gquery.gpu.multi import MultiEngine
from gquery.plan import LIST_MODES, MODES
from gquery.mission import MissionQuery, run_modes, scaled_int
from gquery.reference import DuckDBReference
from gquery.table import KEY, PRICE, QUANTITY, PartedTable
from gquery.tpch import generate

BENCH_ENCODINGS = ("plain", "packed", "sliced", "indexed")  # indexed: every mode but pageable (LIST_MODES)
FLOORS = {  # (what, floor)
    # pinned store, the encoding the planner chooses (sliced or indexed): DuckDB time / GPU time at Z = half (each SF)
    "host_vs_duckdb_half": 3.0,
    "host_vs_duckdb_30": 5.0,  # the same at Z = 30
    "pcie_bytes_per_row_half": 6.0,  # at most (SF 10; the planner's encoding)
    "pcie_bytes_per_row_30": 1.5,  # at most (SF 10; the planner's encoding)
    "resident_packed_vs_plain": 2.0,  # resident plain time / resident packed time, Z = half
    "resident_packed_kernel_of_d2d": 0.80,  # packed bytes the kernel read / kernel time / device copy rate
    "registered_of_pinned": 0.95,  # pinned time / registered time, same encoding
    "registered_plain_end_to_end_of_h2d": 0.80,  # the old pageable floor, met by the registered path
    "resident_kernel_of_d2d": 0.85,  # plain
    "pinned_end_to_end_of_h2d": 0.95,  # plain
    "resident_vs_cupy": 3.0,
}
AT_MOST = {"pcie_bytes_per_row_half", "pcie_bytes_per_row_30"}


def half_of_suppliers(table) -> int:
    """Z that selects about half the rows: half of the largest supplier key (over every part)."""
    tables = getattr(table, "tables", None) or [table]
    largest = None
    for t in tables:
        keys = t.encoded("sliced")[KEY]
        if not t.rows:
            continue
        top = max(i for i, n in enumerate(keys.histogram) if n)
        bound = keys.reference + (top + 1) * keys.bucket - 1  # at or above the part's largest key
        exact = int(keys.decode().max()) if bound - keys.reference < 2**40 else bound
        largest = exact if largest is None else max(largest, exact)
    return 0 if largest is None else (largest + 1) // 2


def _store_tables(source, engine, echo):
    """The store twice: in mapped pinned memory (resident and pinned runs) and in ordinary NumPy
    memory (registered and pageable runs: what a user's own arrays are)."""
    from gquery import store

    path = store.ensure_store(source, echo=echo)
    return store.open_store(path, engine.memory), store.open_store(path)


HOST_MODES = ("registered", "pageable")  # run on the NumPy copy of the store


def run_bench(sfs, repeat: int, data_dir=None, echo=print) -> dict:
    engine = Engine()
    parts_engine = None  # parted stores (SF above 10) go through the many-table engine, on one GPU
    limits = measure(engine.memory)
    runs = []
    kernels = {}
    for sf in sfs:
        source = generate(sf, data_dir, keep_parquet=True, echo=echo)  # DuckDB reads the parquet
        check_source(source)
        echo(f"SF {sf:g}: opening the encoded store into pinned memory, and into NumPy memory")
        table, host_table = _store_tables(source, engine, echo)
        parted = isinstance(table, PartedTable)
        if parted and parts_engine is None:
            parts_engine = MultiEngine(1)
        eng = parts_engine if parted else engine
        ref = DuckDBReference(source)
        for z in (30, half_of_suppliers(table)):
            query = MissionQuery(z)
            echo(f"SF {sf:g}, Z {z}: DuckDB, {', '.join(MODES)} x {', '.join(BENCH_ENCODINGS)}, CuPy")
            duck = ref.run(query, repeat=repeat)
            mode_runs = [run for encoding in BENCH_ENCODINGS for mode in MODES
                         if encoding != "indexed" or mode in LIST_MODES
                         for run in run_modes(eng, host_table if mode in HOST_MODES else table, query, (mode,),
                                              repeat, duck.value, encodings=(encoding,))]
            chosen = {mode: eng.plan(host_table if mode in HOST_MODES else table, query, mode).encoding for mode in MODES}
            cupy_ms = cupy_value = None
            if cupy_baseline.available() and not parted:  # the one-liner reads one table's columns
                plan = engine.plan(table, query, "resident", "plain")
                held, _ = engine.prepare(table, plan)
                dev = DeviceColumns(tuple(held[(c, "values")] for c in (KEY, QUANTITY, PRICE)), table.rows)
                cupy_ms, cupy_value = cupy_baseline.one_liner(dev, table.rows, query, repeat)
            for r in mode_runs:
                p = r.result.profile
                s = p.summary(limits)
                first = r.result.plan.first() if parted else r.result.plan
                kernels[str(first.kernel)] = engine.resources(first.kernel, first.tile_words)
                runs.append({
                    "sf": sf, "z": z, "mode": r.mode, "encoding": r.encoding, "match": r.match,
                    "result": str(r.value), "gpu_ms": p.total_ms, "h2d_ms": s["h2d_ms"], "kernel_ms": s["kernel_ms"],
                    "staging_ms": s["staging_ms"], "d2h_ms": s["d2h_ms"], "effective_gbps": p.effective_gbps,
                    "h2d_gbps": s["h2d_gbps"], "kernel_gbps": s["kernel_gbps"], "kernel_bytes": p.kernel_bytes,
                    "kernel_hidden": s["kernel_hidden"], "staging_hidden": s["staging_hidden"],
                    "duckdb_ms": duck.median_ms, "duckdb_threads": duck.threads, "cupy_ms": cupy_ms,
                    "cupy_match": None if cupy_value is None else cupy_value == scaled_int(r.result.value),
                    "totals_ms": r.totals_ms, "plan": r.result.plan.to_dict(), "rows": table.rows,
                    "column_bytes": p.column_bytes, "physical_bytes": p.physical_bytes,
                    "pcie_bytes": p.pcie_bytes, "pcie_bytes_per_row": p.pcie_bytes_per_row,
                    "zero_copy_bytes": p.zero_copy_bytes, "counters": p.counters, "host_path": p.host_path,
                    "setup_ms": p.setup_ms, "kernel": str(first.kernel), "parts": getattr(table, "parts", 1),
                    "planner_choice": chosen[r.mode] == r.encoding,  # what --encoding auto runs in this mode
                })
        ref.close()
        engine.memory.release_table(table)
        engine.memory.release_table(host_table)
        del table, host_table
    if parts_engine is not None:
        parts_engine.close()
    return {"device": engine.device.name, "device_info": engine.device.to_dict(), **reports.stamp(),
            "kernel": engine.resources(), "kernels": kernels, "repeat": repeat, "limits": limits, "runs": runs,
            "floors": floors(runs, limits)}


def floors(runs: list[dict], limits: dict) -> list[dict]:
    """Each floor: value, floor, met, and where missed, by how much and the measured reason."""
    if not runs:
        return []
    out = []

    def add(name, what, sf, value, why):
        floor = FLOORS[name]
        if value is None:
            return
        met = value <= floor if name in AT_MOST else value >= floor
        out.append({"name": name, "what": what, "sf": sf, "value": value, "floor": floor, "met": met,
                    "short_by": None if met else abs(floor - value), "why": None if met else why})

    for sf in sorted({r["sf"] for r in runs}):
        at = [r for r in runs if r["sf"] == sf]
        half = max(r["z"] for r in at)
        pick = lambda mode, enc, z: next((r for r in at if r["mode"] == mode and r["encoding"] == enc
                                          and r["z"] == z), None)
        for z, name in ((half, "host_vs_duckdb_half"), (30, "host_vs_duckdb_30")):
            r = next((x for x in at if x["mode"] == "pinned" and x["z"] == z and x.get("planner_choice")), None)
            if r:
                add(name, f"DuckDB / GPU from the pinned store ({r['encoding']}, the planner's choice), Z = {z}", sf,
                    r["duckdb_ms"] / r["gpu_ms"],
                    f"GPU {r['gpu_ms']:.2f} ms (H2D busy {r['h2d_ms']:.2f} ms for {r['pcie_bytes'] / 1e6:,.0f} MB, "
                    f"{r['pcie_bytes_per_row']:.2f} B a row; kernel busy {r['kernel_ms']:.2f} ms) against DuckDB "
                    f"{r['duckdb_ms']:.2f} ms on {r['duckdb_threads']} threads")
            if sf == min(r2["sf"] for r2 in runs) or sf == 10:
                key = "pcie_bytes_per_row_half" if z == half else "pcie_bytes_per_row_30"
                if r and (sf == 10 or 10 not in {x["sf"] for x in runs}):
                    add(key, f"PCIe bytes a row, pinned store ({r['encoding']}), Z = {z}", sf, r["pcie_bytes_per_row"],
                        f"{r['pcie_bytes'] / 1e6:,.0f} MB: copied {(r['pcie_bytes'] - r['zero_copy_bytes']) / 1e6:,.0f} MB, "
                        f"read in place {r['zero_copy_bytes'] / 1e6:,.1f} MB")
        plain, packed = pick("resident", "plain", half), pick("resident", "packed", half)
        if plain and packed:
            add("resident_packed_vs_plain", f"resident plain / resident packed time, Z = {half}", sf,
                plain["gpu_ms"] / packed["gpu_ms"],
                f"packed {packed['gpu_ms']:.3f} ms (kernel {packed['kernel_ms']:.3f} ms reading "
                f"{(packed['kernel_bytes'] or 0) / 1e6:,.0f} MB), plain {plain['gpu_ms']:.3f} ms")
            add("resident_packed_kernel_of_d2d", f"resident packed: bytes read / kernel time / device copy, Z = {half}",
                sf, (packed["kernel_gbps"] or 0) / limits["d2d_gbps"],
                f"the kernel read {(packed['kernel_bytes'] or 0) / 1e6:,.0f} MB of packed columns in "
                f"{packed['kernel_ms']:.3f} ms ({packed['kernel_gbps'] or 0:,.0f} GB/s; a warp stages each frame in "
                f"shared memory and decodes it there), against a device copy of {limits['d2d_gbps']:,.0f} GB/s")
        for enc in BENCH_ENCODINGS:
            for z in (30, half):
                pin, reg = pick("pinned", enc, z), pick("registered", enc, z)
                if pin and reg:
                    busy = lambda r: (f"{r['gpu_ms']:.2f} ms (H2D busy {r['h2d_ms'] or 0:.2f} ms, kernels busy "
                                      f"{r['kernel_ms']:.2f} ms, {r['zero_copy_bytes'] / 1e6:,.1f} MB read in place)")
                    add("registered_of_pinned", f"pinned / registered time ({enc}), Z = {z}", sf,
                        pin["gpu_ms"] / reg["gpu_ms"], f"registered {busy(reg)}, pinned {busy(pin)}")
        for z in (30, half):
            reg, pin = pick("registered", "plain", z), pick("pinned", "plain", z)
            if reg:
                add("registered_plain_end_to_end_of_h2d", f"registered plain end to end / pinned H2D, Z = {z}", sf,
                    reg["effective_gbps"] / limits["h2d_pinned_gbps"],
                    f"H2D ran {reg['h2d_ms']:.2f} ms at {reg['h2d_gbps'] or 0:.1f} GB/s; the run took {reg['gpu_ms']:.2f} ms")
            if pin:
                add("pinned_end_to_end_of_h2d", f"pinned plain end to end / pinned H2D, Z = {z}", sf,
                    pin["effective_gbps"] / limits["h2d_pinned_gbps"],
                    f"H2D ran {pin['h2d_ms']:.2f} ms at {pin['h2d_gbps'] or 0:.1f} GB/s; the run took {pin['gpu_ms']:.2f} ms")
        r = pick("resident", "plain", half)
        if r:
            add("resident_kernel_of_d2d", f"resident plain kernel rate / device copy rate, Z = {half}", sf,
                (r["kernel_gbps"] or 0) / limits["d2d_gbps"],
                f"the kernel consumed {r['kernel_gbps'] or 0:,.0f} GB/s in {r['kernel_ms']:.3f} ms against a "
                f"device copy of {limits['d2d_gbps']:,.0f} GB/s (read+write)")
        for z in (30, half):
            r = pick("resident", "plain", z)
            if r and r["cupy_ms"]:
                add("resident_vs_cupy", f"CuPy one-liner / resident plain time, Z = {z}", sf, r["cupy_ms"] / r["gpu_ms"],
                    f"resident took {r['gpu_ms']:.3f} ms (kernel {r['kernel_ms']:.3f} ms), CuPy {r['cupy_ms']:.3f} ms")
    return out


def markdown(data: dict, command: str) -> str:
    L = data["limits"]
    run_rows = [[f"{r['sf']:g}", r["z"], r["mode"], r["encoding"] + (" *" if r.get("planner_choice") else ""),
                 "MATCH" if r["match"] else "MISMATCH",
                 f"{r['gpu_ms']:.3f}", f"{r['pcie_bytes_per_row']:.2f}",
                 f"{r['h2d_ms']:.3f}" if r["h2d_ms"] else "", f"{r['staging_ms']:.3f}" if r["staging_ms"] else "",
                 f"{r['kernel_ms']:.3f}", f"{r['effective_gbps']:,.1f}",
                 f"{r['kernel_hidden']:.0%}" if r["kernel_hidden"] is not None else "",
                 f"{r['duckdb_ms']:.2f}", f"{r['duckdb_ms'] / r['gpu_ms']:.1f}x",
                 f"{r['cupy_ms']:.3f}" if r["cupy_ms"] else "n/a"] for r in data["runs"]]
    floor_rows = [[f["what"], f"SF {f['sf']:g}", f"{f['value']:.3f}" if f["value"] is not None else "",
                   ("≤ " if f["name"] in AT_MOST else "≥ ") + f"{f['floor']:g}",
                   "met" if f["met"] else f"MISSED by {f['short_by']:.3f}", f["why"] or ""]
                  for f in data["floors"]]
    return "\n".join([
        f"# gquery benchmark on {data['device']}",
        "",
        f"`{command}` · commit `{data['commit']}` · {data['date']} · medians of at least {data['repeat']} runs and 0.1 s of runs, after 25 ms of warm-up runs.",
        "",
        f"Limits measured in this run: H2D pinned {L['h2d_pinned_gbps']:.1f} GB/s, pageable "
        f"{L['h2d_pageable_gbps']:.1f} GB/s; D2H pinned {L['d2h_pinned_gbps']:.1f} GB/s; device copy "
        f"{L['d2d_gbps']:,.0f} GB/s (read+write); host pageable→pinned copy {L['host_staging_gbps']:.1f} GB/s "
        f"({L['host_staging_threads']} threads). Scan variants: "
        + "; ".join(f"{name}: {v['registers']} registers, occupancy {v['occupancy']:.0%}"
                    for name, v in data.get("kernels", {}).items()) + ".",
        "",
        "## Runs",
        "",
        reports.md_table(["SF", "Z", "mode", "encoding", "check", "GPU ms", "PCIe B/row", "H2D ms", "staging ms", "kernel ms",
                          "GB/s end to end", "kernels hidden", "DuckDB ms", "vs DuckDB", "CuPy ms"], run_rows),
        "",
        "GPU ms: start of the query to the result on the host (CUDA events). PCIe B/row: bytes copied plus "
        "bytes read in place from mapped host memory (the kernel's read counters x 32-byte sectors), per row. "
        "GB/s: the three columns' logical bytes (20 per row) over GPU ms. Host memory: the encoded store read "
        "into page-locked, mapped memory (pinned: sliced, indexed and packed buffers used in place; plain decoded from "
        "it and page-locked once); registered: the table's own arrays page-locked in place, no copy; pageable: "
        "staged through a pinned ring. Resident: uploaded once before timing. Nothing is on the GPU before a "
        "host-memory query. DuckDB: its own in-memory table, all cores, warm. Indexed: the key's bucket lists "
        "(each bucket's row ids and low bits, a secondary structure of the store, ~5-9 B a row of host memory); "
        "a sparse Z reads a prefix of them instead of scanning. DuckDB scans (it has no such index here). "
        "choice: * marks the encoding --encoding auto runs in that mode.",
        "",
        "## Floors",
        "",
        reports.md_table(["what", "at", "value", "floor", "", "why, where missed"], floor_rows),
    ])


def write(data: dict, out_dir: Path | str, command: str) -> tuple[Path, Path]:
    return reports.write(out_dir, f"bench-{reports.slug(data['device'])}", data, markdown(data, command))

