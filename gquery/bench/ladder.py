"""Runs the ladder's steps (gquery/ladder.py) through one host routine: copy the columns in, launch
the step's kernel per chunk, copy its output back, sum it on the CPU where the step does. The last
steps are the engine itself: the mission's SQL planned and run by the fused kernel (gpu/fused.py),
over frames or by the key's bucket lists, as the step says."""

from __future__ import annotations

import math
import time

import numpy as np

from gquery import timing
from gquery.columns import LineitemColumns
from gquery.gpu import kernels
from gquery.gpu.executor import Engine
from gquery.gpu.timeline import Timeline
from gquery.gpu.memory import ROW_BYTES
from gquery.ladder import STEPS, LadderRow, Step
from gquery.host import host_threads
from gquery.plan import BLOCK_THREADS, BLOCKS_PER_SM, blocks_for, make_plan
from gquery.profile import busy_ms
from gquery.exact import INT64_MAX, INT64_MIN, exact_sum_int64
from gquery.table import Table

INT64_LIMIT = 2**63
SECOND_REDUCE_THREADS = 1024
DYNAMIC_SHARED = {"reduce_interleaved", "reduce_sequential", "reduce_unrolled_warp", "reduce_two_loads",
                  "reduce_warp_shuffle"}  # kernels that size `extern __shared__` at launch: a word a thread


SELECT_SUM = kernels.build("select_sum.cu", BLOCK_THREADS=BLOCK_THREADS, VECTORS_PER_THREAD=4,
                           MIN_BLOCKS_PER_SM=BLOCKS_PER_SM)  # the fused_engine step: the engine's kernel before codegen


def builds() -> set:
    """Every compilation of ladder.cu and select_sum.cu the ladder launches (the CPU test compiles each with
    nvcc); the engine's own steps compile their generated kernels as any query does."""
    return {kernels.build("ladder.cu", s.options, BLOCK_THREADS=BLOCK_THREADS) for s in STEPS
            if s.kernel not in ("select_sum", "fused")} | {SELECT_SUM}


def z_int64(z: int) -> int:
    """Z clamped into int64 for the ladder's kernels: keys are int32, so the predicate is unchanged."""
    return min(max(z, INT64_MIN), INT64_MAX)


def signed_128(lo, hi) -> int:
    total = (int(hi) << 64) | int(lo)
    return total - (1 << 128) if total >= 1 << 127 else total


class LadderRunner:
    def __init__(self, engine: Engine):
        self.engine = engine
        self.memory = engine.memory
        self._cuda = engine._cuda
        self._largest: dict[int, tuple[LineitemColumns, int]] = {}
        self._tables: dict[int, tuple[LineitemColumns, Table]] = {}
        self._select_sum = None

    def table(self, columns: LineitemColumns) -> Table:
        """The columns as an encoded table, once per table (kept with the columns, so the id holds)."""
        if id(columns) not in self._tables:
            self._tables[id(columns)] = (columns, Table.from_columns(columns))
        return self._tables[id(columns)][1]

    def fused_plan(self, step: Step, columns: LineitemColumns, z: int):
        """The mission's SQL planned as any query is, the scan the step names chosen."""
        from gquery import sql
        from gquery.answer import schema_of
        from gquery.gpu.fusedplan import plan_fused

        table = self.table(columns)
        if step.scan == "index":
            table.columns["l_suppkey"].get("indexed")  # the key's bucket lists, made once with the table
        query = sql.parse(sql.named_sql("mission", z), schema_of(table))
        return plan_fused(query, [table], step.host, self.engine.device.sm_count).choose(scan=step.scan)

    def release(self) -> None:
        for _, table in self._tables.values():
            self.memory.release_table(table)
        self._tables.clear()

    def function(self, step: Step):
        if step.kernel == "select_sum":
            if self._select_sum is None:
                self._select_sum = kernels.function(SELECT_SUM, "select_sum")
                self._select_sum.prepare("PPPqqP")
            return self._select_sum
        f = kernels.function(kernels.build("ladder.cu", step.options, BLOCK_THREADS=BLOCK_THREADS), step.kernel)
        f.prepare("PPPqqP")
        return f

    def second_kernel(self):
        f = kernels.function(kernels.build("ladder.cu", BLOCK_THREADS=BLOCK_THREADS), "sum_partials")
        f.prepare("PqP")
        return f

    def grid(self, step: Step, rows: int) -> int:
        if step.kernel == "select_sum":
            return self.plan(step, rows).launch(rows).grid
        if step.rows_per_thread == 0:
            return blocks_for(rows, BLOCK_THREADS, self.engine.device.sm_count * BLOCKS_PER_SM)
        return blocks_for(rows, BLOCK_THREADS * step.rows_per_thread)

    def plan(self, step: Step, rows: int):
        return make_plan("pinned", rows, ROW_BYTES, self.engine.device.sm_count, streams=step.streams,
                         chunk_rows=math.ceil(rows / step.streams) if step.streams > 1 else max(rows, 1))

    def outputs(self, step: Step, rows: int) -> int:
        return {"rows": rows, "partials": self.grid(step, rows), "gpu_total": 1, "exact": 0}[step.output]

    def largest_product(self, columns: LineitemColumns) -> int:
        """Largest |q x p| any row can give, once per table (kept with the table, so its id holds)."""
        key = id(columns)
        if key not in self._largest:
            largest = 0 if columns.rows == 0 else \
                int(np.abs(columns.quantity).max()) * int(np.abs(columns.extendedprice).max())
            self._largest[key] = (columns, largest)
        return self._largest[key][1]

    def partial_bound(self, step: Step, columns: LineitemColumns, chunk_rows: int) -> tuple[int, int]:
        """(rows one int64 output value sums, the largest magnitude such a value can reach)."""
        if step.output == "rows":
            per_partial = 1
        elif step.output == "gpu_total":
            per_partial = chunk_rows
        elif step.rows_per_thread:
            per_partial = BLOCK_THREADS * step.rows_per_thread
        else:  # a grid-stride block covers at most this many rows
            per_partial = math.ceil(chunk_rows / (self.grid(step, chunk_rows) * BLOCK_THREADS)) * BLOCK_THREADS
        return per_partial, per_partial * self.largest_product(columns)

    def exactness_problem(self, step: Step, columns: LineitemColumns, chunk_rows: int) -> str | None:
        """Why int64 partials could overflow on these columns, or None when they cannot."""
        if columns.rows == 0:
            return None
        if self.largest_product(columns) >= INT64_LIMIT:  # every step multiplies in 64 bits
            return (f"a product overflows int64 (largest {self.largest_product(columns):,}); "
                    "the engine's fused kernel multiplies these in 128 bits")
        if step.output == "exact":
            return None
        per_partial, bound = self.partial_bound(step, columns, chunk_rows)
        if bound >= INT64_LIMIT:
            largest = self.largest_product(columns)
            return f"an int64 partial of {per_partial:,} rows could overflow (largest product {largest:,})"
        return None

    def run(self, step: Step, columns: LineitemColumns, z: int, plan=None) -> dict:
        """One timed run of a step: its exact sum and where the time went."""
        if step.kernel == "fused":
            return self._run_fused(plan or self.fused_plan(step, columns, z))
        cuda, memory = self._cuda, self.memory
        plan = self.plan(step, columns.rows)
        pinned = step.host == "pinned"
        host = memory.pinned_columns(columns, memory.copier(host_threads())) if pinned else columns
        ring = memory.chunk_ring(step.streams, plan.chunk_rows)
        streams = self.engine.streams(step.streams)
        func, second = self.function(step), (self.second_kernel() if step.output == "gpu_total" else None)
        chunks = list(plan.chunks())
        offsets = np.cumsum([0] + [self.outputs(step, b - a) for _, a, b in chunks])
        out_d = memory.scratch_device("ladder-out", max(int(offsets[-1]), 1) * 8)
        partials_d = memory.scratch_device("ladder-partials", self.grid(step, plan.chunk_rows) * 8)
        out_h = memory.scratch_host("ladder-out", int(offsets[-1]), np.int64, pinned)
        acc_d, acc_h = memory.accumulator()
        bound = None if step.output == "exact" else self.partial_bound(step, columns, plan.chunk_rows)[1]

        tl = Timeline(cuda, streams[0])
        memory.zero_async(int(acc_d), acc_h.nbytes, streams[0])
        zeroed = tl.event(streams[0])
        for s in streams[1:]:
            s.wait_for_event(zeroed)
        for (i, a, b), off in zip(chunks, offsets):
            lane = i % len(streams)
            stream, dev = streams[lane], ring[lane]
            begin = tl.event(stream)
            for ptr, col in zip(dev.pointers(), host.arrays()):
                memory.htod_async(ptr, col[a:b], stream)
            copied = tl.event(stream)
            tl.gpu("h2d", f"stream {lane}", i, begin, copied)
            n, grid = b - a, self.grid(step, b - a)
            target = int(acc_d) if step.output == "exact" else (
                int(partials_d) if second else int(out_d) + int(off) * 8)
            shared = BLOCK_THREADS * 8 if step.kernel in DYNAMIC_SHARED else 0
            func.prepared_async_call((grid, 1, 1), (BLOCK_THREADS, 1, 1), stream, *dev.pointers(), n,
                                     z_int64(z), target, shared_size=shared)
            if second:
                second.prepared_async_call((1, 1, 1), (SECOND_REDUCE_THREADS, 1, 1), stream, int(partials_d), grid,
                                           int(out_d) + int(off) * 8, shared_size=SECOND_REDUCE_THREADS * 8)
            launched = tl.event(stream)
            tl.gpu("kernel", f"stream {lane}", i, copied, launched)
            if step.output != "exact":
                count = int(offsets[i + 1] - off)
                memory.dtoh_async(out_h[int(off):int(off) + count], int(out_d) + int(off) * 8, stream)
                tl.gpu("d2h", f"stream {lane}", i, launched, tl.event(stream))
        for s in streams[1:]:
            streams[0].wait_for_event(tl.event(s))
        if step.output == "exact":
            begin = tl.event(streams[0])
            memory.dtoh_async(acc_h, int(acc_d), streams[0])
            tl.gpu("d2h", "stream 0", 0, begin, tl.event(streams[0]))
        done = tl.event(streams[0])
        done.synchronize()
        t0 = time.perf_counter()
        total = signed_128(acc_h[0], acc_h[1]) if step.output == "exact" else exact_sum_int64(out_h, bound)
        cpu_ms = (time.perf_counter() - t0) * 1e3 if step.output in ("rows", "partials") else 0.0
        intervals = tl.intervals()
        pick = lambda stage: [iv for iv in intervals if iv.stage == stage]
        return {"value": total, "total_ms": done.time_since(tl.start) + cpu_ms, "h2d_ms": busy_ms(pick("h2d")),
                "d2h_ms": busy_ms(pick("d2h")), "kernel_ms": busy_ms(pick("kernel")), "cpu_sum_ms": cpu_ms,
                "copy_ms": busy_ms(pick("h2d") + pick("d2h")),
                "intervals": intervals}

    def _run_fused(self, plan) -> dict:
        """The engine's own run of the plan: the same chunks, streams and events as any query's."""
        from gquery.gpu.fused import runner_of

        run = runner_of(self.engine).run(plan)
        p = run.profile
        rows, values = run.tables[0].groups.get(0, (0, [0]))
        return {"value": values[0] if rows else 0, "total_ms": p.total_ms, "h2d_ms": p.stage_ms("h2d"),
                "d2h_ms": p.stage_ms("d2h"), "kernel_ms": p.stage_ms("kernel"), "cpu_sum_ms": 0.0,
                "copy_ms": busy_ms(p.stage("h2d") + p.stage("d2h")), "intervals": p.intervals,
                "pcie_bytes_per_row": p.pcie_bytes_per_row}

    def measure(self, step: Step, columns: LineitemColumns, z: int, expected: int | None, repeat: int) -> LadderRow:
        """Warm-up runs, then `repeat` runs or more (gquery.timing); the median run by total time
        is reported."""
        plan = None
        if step.kernel == "fused":
            from gquery.gpu.fused import index_kernel, runner_of

            plan = self.fused_plan(step, columns, z)
            scans = [t.index for t in plan.tables if t.index is not None]
            func = runner_of(self.engine).function(plan.spec, index_kernel(scans[0]) if scans else None)
        else:
            func = self.function(step)
        regs, occ = func.num_regs, kernels.occupancy(func, BLOCK_THREADS)
        problem = self.exactness_problem(step, columns, self.plan(step, columns.rows).chunk_rows)
        if problem:
            return LadderRow(step, None, None, 0, 0, 0, 0, 0, 0, regs, occ, skipped=problem)
        run = lambda: self.run(step, columns, z, plan)  # noqa: E731
        timing.warm_up(run)
        runs = sorted(timing.timed_runs(run, repeat), key=lambda r: r["total_ms"])
        m = runs[len(runs) // 2]
        match = None if expected is None else all(r["value"] == expected for r in runs)
        return LadderRow(step, m["value"], match, m["total_ms"], m["h2d_ms"], m["d2h_ms"], m["kernel_ms"],
                         m["cpu_sum_ms"], m["copy_ms"], regs, occ, [r["total_ms"] for r in runs])
