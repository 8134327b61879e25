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
from gquery.plan import BLOCK_THREADS, VECTORS_PER_THREAD, Plan, make_plan
from gquery.profile import Interval, Profile
from gquery.query import Query, to_decimal

SELECT_SUM = kernels.build("select_sum.cu", BLOCK_THREADS=BLOCK_THREADS, VECTORS_PER_THREAD=VECTORS_PER_THREAD)


@dataclass
class GpuResult:
    value: Decimal | None
    selected_rows: int
    profile: Profile
    plan: Plan


def exact_total(words: np.ndarray) -> tuple[int, int]:
    """(signed 128-bit sum, selected rows) from the accumulator's three uint64 words."""
    lo, hi, count = (int(w) for w in words)
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

    def gpu(self, stage: str, lane: int, chunk: int, begin, end) -> None:
        self._gpu.append((stage, f"stream {lane}", chunk, begin, end))

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
            source = self.memory.pinned_columns(columns, self.memory.copier(plan.staging_threads or 16))
        else:
            source = columns
        self._cuda.Context.synchronize()
        return source, (time.perf_counter() - t0) * 1e3

    def run(self, columns: LineitemColumns, query: Query, plan: Plan) -> GpuResult:
        if plan.rows != columns.rows:
            raise GqueryError(f"plan is for {plan.rows:,} rows, the table has {columns.rows:,}")
        source, setup_ms = self.prepare(columns, plan)
        streams = self.streams(plan.streams)
        acc_d, acc_h = self.memory.accumulator()
        tl = Timeline(self._cuda, streams[0])
        self.memory.zero_async(int(acc_d), 24, streams[0])
        zeroed = tl.event(streams[0])
        for s in streams[1:]:
            s.wait_for_event(zeroed)
        if plan.mode == "resident":
            self._launch(tl, streams[0], 0, 0, source.pointers(), plan.rows, query, plan, int(acc_d))
            h2d_bytes = 0
        else:
            self._stream_chunks(tl, streams, source, query, plan, int(acc_d))
            h2d_bytes = plan.bytes
        for s in streams[1:]:
            streams[0].wait_for_event(tl.event(s))
        d2h_begin = tl.event(streams[0])
        self.memory.dtoh_async(acc_h, int(acc_d), streams[0])
        done = tl.event(streams[0])
        tl.gpu("d2h", 0, 0, d2h_begin, done)
        done.synchronize()
        total, selected = exact_total(acc_h)
        profile = Profile(plan.mode, plan.rows, plan.bytes, h2d_bytes, done.time_since(tl.start),
                          tl.intervals(), setup_ms)
        return GpuResult(to_decimal(total, selected), selected, profile, plan)

    def _launch(self, tl: Timeline, stream, lane: int, chunk: int, pointers, rows: int, query: Query,
                plan: Plan, acc: int, begin=None) -> None:
        begin = begin or tl.event(stream)
        launch = plan.launch(rows)
        self.kernel.prepared_async_call((launch.grid, 1, 1), (launch.block, 1, 1), stream,
                                        *pointers, rows, query.z_int64, acc)
        tl.gpu("kernel", lane, chunk, begin, tl.event(stream))

    def _stream_chunks(self, tl: Timeline, streams, host: LineitemColumns, query: Query, plan: Plan, acc: int):
        """Chunk i goes to stream i % k: its copy overlaps the kernels (and, for pageable, the host
        staging) of the chunks before it. A stream's buffer is reused only after its previous
        kernel, which stream order guarantees. Each copy waits for the previous chunk's copy: they
        share one copy engine anyway, and so the events time the copy itself, not its queueing."""
        ring = self.memory.chunk_ring(plan.streams, plan.chunk_rows)
        staging = self.memory.staging_ring(plan.staging_buffers, plan.chunk_rows) if plan.mode == "pageable" else None
        copier = self.memory.copier(plan.staging_threads) if staging else None
        slot_free: list = [None] * (len(staging) if staging else 0)
        previous_copy = None
        for i, a, b in plan.chunks():
            lane = i % len(streams)
            stream, dev = streams[lane], ring[lane]
            n = b - a
            parts = [col[a:b] for col in host.arrays()]
            if staging is not None:
                slot = i % len(staging)
                if slot_free[slot] is not None:
                    slot_free[slot].synchronize()  # the copy out of this buffer has finished
                t0 = time.perf_counter()
                targets = [buf[:n] for buf in staging[slot]]
                copier.copy(zip(targets, parts))
                tl.host("staging", i, t0, time.perf_counter())
                parts = targets
            if previous_copy is not None:
                stream.wait_for_event(previous_copy)
            begin = tl.event(stream)
            for ptr, part in zip(dev.pointers(), parts):
                self.memory.htod_async(ptr, part, stream)
            copied = tl.event(stream)
            tl.gpu("h2d", lane, i, begin, copied)
            previous_copy = copied
            if staging is not None:
                slot_free[slot] = copied
            self._launch(tl, stream, lane, i, dev.pointers(), n, query, plan, acc, begin=copied)

    def close(self) -> None:
        self.memory.release()
