"""Queries over many tables and many GPUs: a parted table's parts, or one table's frames, divided
among the devices. Each device is driven by an engine of its own on a thread of its own (its
primary context current there), over its own PCIe link; the exact partials are added on the host.

    share       one device's work: a list of tables (parts, or frame views of a part or a table),
                or, for a table opened with a window, a list of parts read from disk as it goes
    MultiPlan   the shares and one QueryPlan per table of each share (windowed parts are planned
                as they arrive); printable like a QueryPlan
    MultiEngine plan() and run() as Engine has them, so the runner, the benchmark and the API drive
                one GPU or several, one table or a hundred parts, through the same calls

Page-locked memory is portable (gpu.memory): a store opened once is read in place by every GPU.
Device copies of a share (resident mode) live in its view's cache: spread over the GPUs' memories.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gquery.encodings import frames_of, split_frames
from gquery.errors import GqueryError, UsageError
from gquery.gpu.executor import Engine, GpuResult, close_last
from gquery.plan import QueryPlan
from gquery.profile import Interval, Profile
from gquery.mission import MissionQuery, scaled_int, to_decimal
from gquery.table import PartedTable, Table


class DeviceWorker:
    """One GPU's engine, made and run on the GPU's own thread (gpu.device.device_thread): what the
    engine allocates belongs to that thread and is freed there too (release_table)."""

    def __init__(self, ordinal: int):
        from gquery.gpu.device import device_thread

        self.ordinal = ordinal
        self._thread = device_thread(ordinal)
        self.engine: Engine = self.submit(Engine).result()

    def submit(self, fn, *args):
        return self._thread.submit(fn, *args)

    def close(self) -> None:
        def stop():
            engine, self.engine = self.engine, None
            close_last(engine)  # on the thread of its context

        if self.engine is not None:
            self.submit(stop).result()


class SharedMemory:
    """The memory layer as the many-GPU engine's callers see it: allocations on the calling thread
    (page-locked memory is portable: every GPU reads it), and release_table that frees each
    device's share of a table on that device's own thread, then the rest here."""

    def __init__(self, workers: list[DeviceWorker]):
        self._workers = workers
        self._here = workers[0].engine.memory

    def __getattr__(self, name):
        return getattr(self._here, name)

    def release_table(self, table) -> None:
        """Each device's own allocations on its thread, then the rest (page-locked memory, registrations, and
        what another engine of GPU 0 made) on GPU 0's thread: PyCUDA frees GPU 0's objects only there."""
        for w in self._workers:
            w.submit(w.engine.memory.release_table, table, True).result()
        self._workers[0].submit(self._here.release_table, table).result()


@dataclass
class Share:
    device: int  # index into MultiEngine.workers
    tables: list = field(default_factory=list)  # Tables, or part indices of a windowed PartedTable
    rows: int = 0


@dataclass
class MultiPlan:
    z: int
    mode: str
    requested: str  # the encoding asked for ("auto": each table's planner chooses)
    shares: list[Share]
    plans: list[list[QueryPlan]]  # per share, per table; windowed shares fill theirs as parts arrive
    rows: int
    window: int = 0  # parts a device holds at once when reading from disk (0: all in memory)
    options: dict = field(default_factory=dict)

    @property
    def encoding(self) -> str:
        chosen = {p.encoding for plans in self.plans for p in plans}
        return chosen.pop() if len(chosen) == 1 else (self.requested if not chosen else "mixed")

    @property
    def gpus(self) -> int:
        return len(self.shares)

    def first(self) -> QueryPlan | None:
        return next((p for plans in self.plans for p in plans), None)

    def to_dict(self) -> dict:
        first = self.first()
        return {"z": self.z, "mode": self.mode, "encoding": self.encoding, "gpus": self.gpus, "rows": self.rows,
                "window_parts": self.window,
                "shares": [{"gpu": s.device, "tables": len(s.tables), "rows": s.rows} for s in self.shares],
                "first_table": None if first is None else first.to_dict()}

    def describe(self) -> str:
        how = f"parts read from disk, {self.window} at a time a GPU" if self.window else "held in host memory"
        lines = [f"plan: {self.mode} on {self.gpus} GPU{'s' * (self.gpus > 1)}, {self.rows:,} rows, {how}"]
        lines += [f"  gpu {s.device}: {len(s.tables)} table(s), {s.rows:,} rows" for s in self.shares]
        first = self.first()
        if first is not None:
            lines += ["each table's plan, the first shown:"] + ["  " + ln for ln in first.describe().splitlines()]
        return "\n".join(lines)


class MultiEngine:
    """plan() and run() over `gpus` devices, for a Table or a PartedTable."""

    def __init__(self, gpus=1):
        from gquery.gpu.device import device_count, require, resolve_gpus

        require()
        n = resolve_gpus(gpus, device_count())
        self.workers = [DeviceWorker(k) for k in range(n)]
        self.device = self.workers[0].engine.device
        self.memory = SharedMemory(self.workers)

    @property
    def gpus(self) -> int:
        return len(self.workers)

    def resources(self, kernel=None, tile_words: int = 0) -> dict:
        return self.workers[0].submit(self.workers[0].engine.resources, kernel, tile_words).result()

    def close(self) -> None:
        for w in self.workers:
            w.close()

    def concurrent_h2d(self, nbytes: int = 1 << 30, repeat: int = 5) -> float:
        """GB/s of pinned host-to-device copies to every GPU at once (each its own buffer and
        link), the median of `repeat` rounds: the host-side limit a query over these GPUs meets."""
        import threading

        import numpy as np

        n = len(self.workers)
        sources = [self.memory.pinned_empty(nbytes, np.uint8) for _ in range(n)]
        for s in sources:
            s[:] = 1  # touched: no first-fault in the timing
        targets = [w.submit(w.engine.memory.device_empty, nbytes).result() for w in self.workers]
        barrier = threading.Barrier(n)

        def copy(k: int) -> None:
            import pycuda.driver as cuda

            barrier.wait()
            cuda.memcpy_htod(targets[k], sources[k])

        rounds = []
        for _ in range(repeat + 1):  # the first round warms the links up
            t0 = time.perf_counter()
            for f in [w.submit(copy, k) for k, w in enumerate(self.workers)]:
                f.result()
            rounds.append(n * nbytes / (time.perf_counter() - t0) / 1e9)
        for w, t in zip(self.workers, targets):
            w.submit(t.free).result()
        return sorted(rounds[1:])[repeat // 2]

    # --- dividing the work -----------------------------------------------------------------
    def shares(self, table) -> list[Share]:
        """Nearly equal row shares, one a GPU. Frames are the unit: a part is cut only where a
        share's boundary falls inside it; a windowed table is divided by whole parts."""
        n = self.gpus
        if isinstance(table, PartedTable) and table.tables is None:
            bounds = _balanced_parts(table.part_rows, n)
            return [Share(k, list(range(a, b)), sum(table.part_rows[a:b])) for k, (a, b) in enumerate(bounds)]
        key = ("shares", n)
        if key not in table.cache:
            tables = table.tables if isinstance(table, PartedTable) else [table]
            table.cache[key] = _frame_shares(tables, n)
        return table.cache[key]

    def plan(self, table, query: MissionQuery, mode: str, encoding: str = "auto", window: int | None = None,
             **options) -> MultiPlan:
        if not isinstance(table, (Table, PartedTable)):
            raise GqueryError(f"cannot plan a query over {type(table).__name__}")
        shares = self.shares(table)
        windowed = isinstance(table, PartedTable) and table.tables is None
        if windowed and mode == "resident":
            raise UsageError("--mode resident needs the table in host memory first; a windowed store streams "
                             "from disk: use pinned, registered or pageable")
        def plan_share(s: Share) -> list[QueryPlan]:
            batched = {"batched": len(s.tables) > 1}  # queued back to back (Engine.run_many): larger chunks
            return [self.workers[s.device].engine.plan(t, query, mode, encoding, **(batched | options)) for t in s.tables]

        futures = [] if windowed else [self.workers[s.device].submit(plan_share, s) for s in shares]
        plans = [f.result() for f in futures] if futures else [[] for _ in shares]
        return MultiPlan(query.z, mode, encoding, shares, plans, table.rows,
                         (window or table.window) if windowed else 0, options)

    # --- one query ----------------------------------------------------------------------------
    def run(self, table, query: MissionQuery, mplan: MultiPlan) -> GpuResult:
        if mplan.rows != table.rows or mplan.z != query.z:
            raise GqueryError("this plan was made for another table or Z")
        t0 = time.perf_counter()
        jobs = [self.workers[s.device].submit(self._run_share, table, query, mplan, i)
                for i, s in enumerate(mplan.shares)]
        done = [j.result() for j in jobs]
        wall_ms = (time.perf_counter() - t0) * 1e3
        return self._combine(table, mplan, done, t0, wall_ms)

    def _run_share(self, table, query: MissionQuery, mplan: MultiPlan, i: int) -> tuple[list[GpuResult], int]:
        """One device's tables in order; returns their results and the device's memory high-water."""
        import pycuda.driver as cuda

        share = mplan.shares[i]
        engine = self.workers[share.device].engine
        peak = 0
        results = []

        def used() -> int:
            free, total = cuda.mem_get_info()
            return total - free

        if not mplan.window:  # every table in memory: queued back to back, one wait at the end
            return engine.run_many(list(zip(share.tables, mplan.plans[i])), query), used()
        from gquery.store import PartReader

        pinned = mplan.mode == "pinned"  # registered and pageable read into the user's kind of memory
        lists = mplan.requested == "indexed"  # auto plans windowed parts sliced: the lists stay on disk
        key = ("window", engine.memory.tag, pinned, mplan.window, tuple(share.tables), lists)
        kept = table.cache.get(key)
        reader = PartReader(table, share.tables, engine.memory if pinned else None, mplan.window,
                            kept[0] if kept else None, lists=lists)
        table.cache[key] = (reader.slots, kept[1] if kept else reader.pinned)  # kept for the next query; unregistered
        # on this thread by release_table
        engine.memory.hold(table)
        plans = mplan.plans[i]
        plans.clear()
        try:
            for _, t in reader:
                p = engine.plan(t, query, mplan.mode, mplan.requested, **mplan.options)
                plans.append(p)
                results.append(engine.run(t, query, p))
                peak = max(peak, used())
                engine.memory.release_table(t)  # the slot is refilled next: what was made for it goes
        finally:
            reader.close()
        return results, peak

    def _combine(self, table, mplan: MultiPlan, done, t0: float, wall_ms: float) -> GpuResult:
        total = selected = 0
        intervals: list[Interval] = []
        sums = {"h2d": 0, "zero_copy": 0, "kernel": 0, "physical": 0, "setup": 0.0}
        counters: dict = {}
        per_gpu = []
        for share, (results, peak) in zip(mplan.shares, done):
            chunk = 0
            spans = []
            for r in results:
                total += scaled_int(r.value)
                selected += r.selected_rows
                p = r.profile
                shift = (r.started - t0) * 1e3
                for iv in p.intervals:
                    intervals.append(Interval(iv.stage, f"gpu{share.device} {iv.lane}", chunk + iv.chunk,
                                              iv.start_ms + shift, iv.end_ms + shift))
                    spans.append((iv.start_ms + shift, iv.end_ms + shift))
                chunk += 1 + max((iv.chunk for iv in p.intervals), default=0)
                sums["h2d"] += p.h2d_bytes
                sums["zero_copy"] += p.zero_copy_bytes
                sums["kernel"] += p.kernel_bytes or 0
                sums["physical"] += p.physical_bytes or 0
                sums["setup"] += p.setup_ms
                for k, v in p.counters.items():
                    counters[k] = counters.get(k, 0) + v
            per_gpu.append({"gpu": share.device, "tables": len(results), "rows": share.rows,
                            "gpu_ms": _covered(spans), "device_memory_peak_bytes": peak})
        counters["gpus"] = mplan.gpus
        first = next((r.profile for results, _ in done for r in results), None)
        host_path = (first.host_path if first else "") + (
            f"; parts read from disk through a window of {mplan.window} a GPU" if mplan.window else "")
        profile = Profile(mplan.mode, table.rows, table.logical_bytes(), sums["h2d"], wall_ms,
                          sorted(intervals, key=lambda iv: iv.start_ms), sums["setup"], sums["kernel"],
                          encoding=mplan.encoding, zero_copy_bytes=sums["zero_copy"], physical_bytes=sums["physical"],
                          counters=counters, host_path=host_path, per_gpu=per_gpu)
        return GpuResult(to_decimal(total, selected), selected, profile, mplan, t0)


def _covered(spans: list[tuple[float, float]]) -> float:
    """Milliseconds covered by at least one of the spans: a device's busy time, overlaps counted once."""
    total, reach = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def _balanced_parts(part_rows: list[int], n: int) -> list[tuple[int, int]]:
    """Contiguous [first, end) part ranges, one a GPU, each near rows / n (every GPU gets a part
    when there are enough)."""
    total = sum(part_rows)
    bounds, acc, k = [0], 0, 1
    for i, r in enumerate(part_rows):
        acc += r
        left_parts, left_gpus = len(part_rows) - (i + 1), n - k
        if k < n and (acc >= total * k / n or left_parts == left_gpus):
            bounds.append(i + 1)
            k += 1
    bounds.append(len(part_rows))
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def _frame_shares(tables: list[Table], n: int) -> list[Share]:
    """Divide the frames of consecutive tables into n contiguous shares of nearly equal frames;
    a table wholly inside one share is used as it is, a cut one through frame views."""
    counts = [frames_of(t.rows) for t in tables]
    shares = [Share(k) for k in range(n)]
    starts = [0]
    for c in counts:
        starts.append(starts[-1] + c)
    for k, (g0, g1) in enumerate(split_frames(starts[-1], n)):
        for t, c, s in zip(tables, counts, starts):
            a, b = max(g0, s) - s, min(g1, s + c) - s
            if a >= b:
                continue
            piece = t if (a, b) == (0, c) else t.view(a, b)
            shares[k].tables.append(piece)
            shares[k].rows += piece.rows
    return [s for s in shares if s.tables]


__all__ = ["MultiEngine", "MultiPlan", "Share", "DeviceWorker"]
