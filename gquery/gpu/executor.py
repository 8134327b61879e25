"""Runs a plan on the GPU: streams, copies, the fused kernel, and CUDA events around every stage."""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from gquery.columns import LineitemColumns
from gquery.errors import GqueryError
from gquery.gpu import kernels
from gquery.gpu.device import require
from gquery.gpu.memory import DeviceColumns, GpuMemory
from gquery.plan import (BLOCK_THREADS, BLOCKS_PER_SM, ROWS_PER_VECTOR, VECTORS_PER_THREAD, Plan, host_threads,
                         make_plan)
from gquery.profile import Interval, Profile
from gquery.query import Query, to_decimal

SELECT_SUM = kernels.build("select_sum.cu", BLOCK_THREADS=BLOCK_THREADS, VECTORS_PER_THREAD=VECTORS_PER_THREAD,
                           MIN_BLOCKS_PER_SM=BLOCKS_PER_SM)
FACTOR_BYTES_PER_VECTOR = 2 * ROWS_PER_VECTOR * 8  # both int64 factors of a 4-row vector


@dataclass
class GpuResult:
    value: Decimal | None
    selected_rows: int
    profile: Profile
    plan: Plan


def exact_total(words: np.ndarray) -> tuple[int, int]:
    """(signed 128-bit sum, selected rows) from the accumulator's first three uint64 words."""
    lo, hi, count = (int(w) for w in words[:3])
    total = (hi << 64) | lo
    if total >= 1 << 127:
        total -= 1 << 128
    return total, count


class Timeline:
    """CUDA events and host clock readings on one time axis, from the run's start."""

    def __init__(self, cuda, stream):
        self._cuda = cuda
        self._gpu: list[tuple[str, str, int, object, object]] = []
        self._host: list[Interval] = []
        self.start = self.event(stream)
        self.t0 = time.perf_counter()

    def event(self, stream):
        e = self._cuda.Event()
        e.record(stream)
        return e

    def gpu(self, stage: str, lane: str, chunk: int, begin, end) -> None:
        self._gpu.append((stage, lane, chunk, begin, end))

    def host(self, stage: str, chunk: int, t_begin: float, t_end: float) -> None:
        self._host.append(Interval(stage, "host", chunk, (t_begin - self.t0) * 1e3, (t_end - self.t0) * 1e3))

    def intervals(self) -> list[Interval]:
        """Call after the last event completed."""
        out = [Interval(stage, lane, chunk, b.time_since(self.start), e.time_since(self.start))
               for stage, lane, chunk, b, e in self._gpu]
        return sorted(out + self._host, key=lambda i: i.start_ms)


class Engine:
    """The GPU engine on the current device; memory is reused across queries."""

    def __init__(self):
        import pycuda.driver as cuda

        self.device = require()
        self._cuda = cuda
        self.memory = GpuMemory()
        self.kernel = kernels.function(SELECT_SUM, "select_sum")
        self.kernel.prepare("PPPqqP")
        self._streams: list = []

    def resources(self) -> dict:
        return kernels.resources(self.kernel) | {"occupancy": kernels.occupancy(self.kernel, BLOCK_THREADS)}

    def plan(self, columns: LineitemColumns, mode: str, **options) -> Plan:
        free = self._cuda.mem_get_info()[0]
        if mode == "resident" and self.memory.is_resident(columns):
            free += columns.nbytes  # cached columns need no new room
        return make_plan(mode, columns.rows, columns.bytes_per_row, self.device.sm_count, free, **options)

    def streams(self, n: int) -> list:
        while len(self._streams) < n:
            self._streams.append(self._cuda.Stream())
        return self._streams[:n]

    def prepare(self, columns: LineitemColumns, plan: Plan) -> tuple[LineitemColumns | DeviceColumns, float]:
        """Once per table and mode, untimed by queries: upload (resident) or page-lock (pinned)."""
        t0 = time.perf_counter()
        if plan.mode == "resident":
            source = self.memory.resident(columns)[0]
        elif plan.mode == "pinned":
            source = self.memory.pinned_columns(columns, self.memory.copier(host_threads()))
        else:
            source = columns
        self._cuda.Context.synchronize()
        return source, (time.perf_counter() - t0) * 1e3

    def run(self, columns: LineitemColumns, query: Query, plan: Plan) -> GpuResult:
        if plan.rows != columns.rows:
            raise GqueryError(f"plan is for {plan.rows:,} rows, the table has {columns.rows:,}")
        source, setup_ms = self.prepare(columns, plan)
        acc_d, acc_h = self.memory.accumulator()
        if plan.mode == "resident":  # one stream: no cross-stream waits in a 0.1 ms query
            copy = self.streams(1)[0]
            tl = Timeline(self._cuda, copy)
            self.memory.zero_async(int(acc_d), acc_h.nbytes, copy)
            self._launch(tl, copy, "stream 0", 0, source.pointers(), plan.rows, query, plan, int(acc_d))
            h2d_bytes = 0
        else:
            copy, *compute = self.streams(plan.streams + 1)
            tl = Timeline(self._cuda, copy)
            self.memory.zero_async(int(acc_d), acc_h.nbytes, copy)
            self._stream_chunks(tl, copy, compute, source, query, plan, int(acc_d))
            h2d_bytes = plan.bytes
        d2h_begin = tl.event(copy)
        self.memory.dtoh_async(acc_h, int(acc_d), copy)
        done = tl.event(copy)
        tl.gpu("d2h", "stream 0" if plan.mode == "resident" else "copy", 0, d2h_begin, done)
        done.synchronize()
        total, selected = exact_total(acc_h)
        kernel_bytes = plan.rows * 4 + int(acc_h[3]) * FACTOR_BYTES_PER_VECTOR
        profile = Profile(plan.mode, plan.rows, plan.bytes, h2d_bytes, done.time_since(tl.start),
                          tl.intervals(), setup_ms, kernel_bytes)
        return GpuResult(to_decimal(total, selected), selected, profile, plan)

    def _launch(self, tl: Timeline, stream, lane: str, chunk: int, pointers, rows: int, query: Query,
                plan: Plan, acc: int) -> object:
        """The kernel on `stream`, timed; returns the event after it."""
        begin = tl.event(stream)
        launch = plan.launch(rows)
        self.kernel.prepared_async_call((launch.grid, 1, 1), (launch.block, 1, 1), stream,
                                        *pointers, rows, query.z_int64, acc)
        end = tl.event(stream)
        tl.gpu("kernel", lane, chunk, begin, end)
        return end

    def _stream_chunks(self, tl: Timeline, copy, compute: list, host: LineitemColumns, query: Query,
                       plan: Plan, acc: int) -> None:
        """All copies go in order on one copy stream, back to back, so their events time the copies
        themselves; chunk i's kernel runs on compute stream i % k once its copy is done, under the
        next chunks' copies (and, for pageable, the host's staging of them). Device buffer i % k is
        overwritten only after the kernel that last read it has finished."""
        ring = self.memory.chunk_ring(plan.streams, plan.chunk_rows)
        staging = self.memory.staging_ring(plan.staging_buffers, plan.chunk_rows) if plan.mode == "pageable" else None
        copier = self.memory.copier(plan.staging_threads) if staging else None
        staged_free: list = [None] * (len(staging) if staging else 0)  # copy out of each pinned buffer done
        ring_free: list = [None] * len(ring)  # kernel reading each device buffer done
        kernels_done = []
        for i, a, b in plan.chunks():
            slot = i % len(ring)
            parts = [col[a:b] for col in host.arrays()]
            if staging is not None:
                k = i % len(staging)
                if staged_free[k] is not None:
                    staged_free[k].synchronize()
                t0 = time.perf_counter()
                targets = [buf[:b - a] for buf in staging[k]]
                copier.copy(zip(targets, parts))
                tl.host("staging", i, t0, time.perf_counter())
                parts = targets
            if ring_free[slot] is not None:
                copy.wait_for_event(ring_free[slot])
            begin = tl.event(copy)
            for ptr, part in zip(ring[slot].pointers(), parts):
                self.memory.htod_async(ptr, part, copy)
            copied = tl.event(copy)
            tl.gpu("h2d", "copy", i, begin, copied)
            if staging is not None:
                staged_free[k] = copied
            stream = compute[slot % len(compute)]
            stream.wait_for_event(copied)
            ring_free[slot] = self._launch(tl, stream, f"stream {slot % len(compute)}", i,
                                           ring[slot].pointers(), b - a, query, plan, acc)
            kernels_done.append(ring_free[slot])
        for done in kernels_done[-len(compute):]:
            copy.wait_for_event(done)  # the result is read only after every kernel

    def close(self) -> None:
        self.memory.release()
