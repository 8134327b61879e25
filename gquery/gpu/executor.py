"""Runs a query plan on the GPU: one pipeline of chunk copies (staged or not), the scan kernel on
compute streams, zero-copy reads where the plan placed them, and CUDA events around every stage."""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from gquery.encodings import FRAME_ROWS, PAD_WORDS
from gquery.errors import GqueryError
from gquery.gpu import kernels
from gquery.gpu.device import current_info, require
from gquery.gpu.memory import ACC_WORDS, GpuMemory
from gquery.plan import (BLOCK_THREADS, BLOCKS_PER_SM, ENCODING_CHOICES, MODES, ROWS_PER_VECTOR, VECTORS_PER_THREAD,
                         ZERO_COPY_SECTOR, Kernel, QueryPlan, host_threads, plan_query)
from gquery.profile import Interval, Profile
from gquery.query import Query, to_decimal
from gquery.table import KEY, PRICE, QUANTITY, Table

SELECT_SUM = kernels.build("select_sum.cu", BLOCK_THREADS=BLOCK_THREADS, VECTORS_PER_THREAD=VECTORS_PER_THREAD,
                           MIN_BLOCKS_PER_SM=BLOCKS_PER_SM)  # the ladder's fused_engine step
SCAN_BLOCKS_PER_SM = 4  # 4 x 256 threads: room for the decoders' registers (<= 64), no spills
PLAIN_SCAN_BLOCKS_PER_SM = 6  # the plain 64-bit scan fits 40 registers without spills: 75% occupancy
SELECTED, FACTOR_VECTORS, LOW_READS = 4, 5, 6  # counter words of the accumulator (scan.cu)


def scan_build(kernel: Kernel) -> kernels.Build:
    plain = kernel.key == kernel.factors == "plain" and not kernel.wide
    return kernels.build("scan.cu", BLOCK_THREADS=BLOCK_THREADS, VECTORS_PER_THREAD=VECTORS_PER_THREAD,
                         MIN_BLOCKS_PER_SM=PLAIN_SCAN_BLOCKS_PER_SM if plain else SCAN_BLOCKS_PER_SM,
                         FRAME_ROWS=FRAME_ROWS, **kernel.defines())


def scan_builds() -> set:
    """Every scan variant a plan can ask for (the CPU test compiles each with nvcc)."""
    out = set()
    for key, factors in (("plain", "plain"), ("packed", "packed"), ("sliced", "packed")):
        for low in ((0, 1, 2, 4, 8) if key == "sliced" else (0,)):
            for wide in (False, True):
                out.add(scan_build(Kernel(key, factors, low, wide)))
    return out


@dataclass
class GpuResult:
    value: Decimal | None
    selected_rows: int
    profile: Profile
    plan: Plan
    started: float = 0.0  # perf_counter at the run's first event: puts several runs on one time axis


def signed_128(lo, hi) -> int:
    total = (int(hi) << 64) | int(lo)
    return total - (1 << 128) if total >= 1 << 127 else total


def exact_total(words: np.ndarray) -> tuple[int, int]:
    """(signed 128-bit sum, selected rows) from select_sum's accumulator words."""
    return signed_128(words[0], words[1]), int(words[2])


def scan_total(words: np.ndarray, wide: bool) -> int:
    """The scan's exact sum: wide scans sum the products' low words (unsigned) and high words apart."""
    if not wide:
        return signed_128(words[0], words[1])
    low_words = (int(words[1]) << 64) | int(words[0])  # < rows x 2^64: never negative
    return low_words + (signed_128(words[2], words[3]) << 64)


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
    """The GPU engine on the device of the context current on this thread (device 0's primary
    context unless a caller such as gpu.multi made another current). Scratch memory is reused
    across queries; what belongs to a table (device copies, pinned copies, registrations) lives in
    table.cache, device and pinned copies keyed by the memory layer (and so the thread) that made them."""

    def __init__(self):
        import pycuda.driver as cuda

        require()
        self.device = current_info()
        self._cuda = cuda
        self.memory = GpuMemory()
        self.kernel = kernels.function(SELECT_SUM, "select_sum")  # the ladder's fused_engine step
        self.kernel.prepare("PPPqqP")
        self._scans: dict[Kernel, object] = {}
        self._streams: list = []

    def scan(self, kernel: Kernel):
        if kernel not in self._scans:
            f = kernels.function(scan_build(kernel), "scan")
            f.prepare("PPqPPqqPPqqqqqqP")
            self._scans[kernel] = f
        return self._scans[kernel]

    def resources(self, kernel: Kernel | None = None) -> dict:
        f = self.kernel if kernel is None else self.scan(kernel)
        return kernels.resources(f) | {"occupancy": kernels.occupancy(f, BLOCK_THREADS)}

    def plan(self, table: Table, query: Query, mode: str, encoding: str = "auto", **options) -> QueryPlan:
        free = self._cuda.mem_get_info()[0]
        if mode == "resident":
            free += sum(v[1] for k, v in table.cache.items() if k[:2] == ("device", self.memory.tag))  # held: no new room
        return plan_query(table, query.z, mode, self.device.sm_count, free, encoding, **options)

    def streams(self, n: int) -> list:
        while len(self._streams) < n:
            self._streams.append(self._cuda.Stream())
        return self._streams[:n]

    # --- where each buffer is ------------------------------------------------------------------
    def _host_buffer(self, table: Table, key: tuple, array: np.ndarray, mode: str) -> np.ndarray:
        """The host array a plan reads: pinned mode a mapped copy (unless the table is mapped
        already), registered mode the table's own array locked in place, pageable as it is."""
        if mode == "pageable" or mode == "resident":
            return array
        if self.memory.is_mapped(array):  # already page-locked and mapped (a store opened so): in place
            return array.reshape(-1)
        if mode == "pinned":
            k = ("pinned", self.memory.tag, *key)
            if k not in table.cache:
                copy = self.memory.mapped_empty(array.size, array.dtype)
                self.memory.copier(host_threads()).copy([(copy, array.reshape(-1))])
                table.cache[k] = copy
            return table.cache[k]
        owner = self.memory.owner(array)
        k = ("registered", owner.ctypes.data)
        if k not in table.cache and owner.nbytes:
            if owner.base is not None:
                raise GqueryError("cannot register this table's memory in place (it is not a NumPy allocation); "
                                  "use --mode pinned")
            table.cache[k] = (self.memory.register(owner), owner)
        return array.reshape(-1)

    def _resident(self, table: Table, key: tuple, array: np.ndarray):
        k = ("device", self.memory.tag, *key)
        if k not in table.cache:
            table.cache[k] = (self.memory.upload(array), array.nbytes)
        return table.cache[k][0]

    def prepare(self, table: Table, qplan: QueryPlan) -> tuple[dict, float]:
        """Once per table, mode and encoding, untimed by queries: upload (resident), page-lock a copy
        (pinned) or register in place (registered). Returns {(column, buffer): host or device}."""
        t0 = time.perf_counter()
        encoded = table.encoded(qplan.encoding)
        out = {}
        for b in qplan.buffers:
            array = encoded[b.column].buffers()[b.name].reshape(-1)
            key = (b.column, qplan.encoding, b.name)
            out[(b.column, b.name)] = (self._resident(table, key, array) if b.placement == "resident"
                                       else self._host_buffer(table, key, array, qplan.mode))
        self._cuda.Context.synchronize()
        return out, (time.perf_counter() - t0) * 1e3

    # --- one query -------------------------------------------------------------------------------
    def run(self, table: Table, query: Query, qplan: QueryPlan) -> GpuResult:
        if qplan.rows != table.rows:
            raise GqueryError(f"plan is for {qplan.rows:,} rows, the table has {table.rows:,}")
        if qplan.z != query.z:
            raise GqueryError(f"plan is for Z = {qplan.z}, the query has Z = {query.z}")
        sources, setup_ms = self.prepare(table, qplan)
        encoded = table.encoded(qplan.encoding)
        g = qplan.geometry
        chunks = list(g.chunks())
        ranges = {(b.column, b.name): [_chunk_range(encoded[b.column], b.name, a, e) for _, a, e in chunks]
                  for b in qplan.buffers}
        streamed = [b for b in qplan.buffers if b.placement == "stream"]
        acc_d, acc_h = self.memory.accumulator()
        scan = self.scan(qplan.kernel)
        params = _z_params(encoded[KEY], query.z_int64)
        if streamed:
            copy, *compute = self.streams(g.streams + 1)
        else:  # nothing to copy: one stream, no cross-stream waits
            copy = self.streams(1)[0]
            compute = [copy]
        tl = Timeline(self._cuda, copy)
        self.memory.zero_async(int(acc_d), acc_h.nbytes, copy)
        if params is not None:
            self._pipeline(tl, copy, compute, qplan, encoded, sources, ranges, streamed, scan, params, int(acc_d))
        d2h_begin = tl.event(copy)
        self.memory.dtoh_async(acc_h, int(acc_d), copy)
        done = tl.event(copy)
        tl.gpu("d2h", "copy" if streamed else "stream 0", 0, d2h_begin, done)
        done.synchronize()
        total = scan_total(acc_h, qplan.kernel.wide)
        selected = int(acc_h[SELECTED])
        counters = {"selected_rows": selected, "factor_vectors": int(acc_h[FACTOR_VECTORS]),
                    "low_reads": int(acc_h[LOW_READS])}
        h2d_bytes = sum((r[1] - r[0]) * encoded[b.column].buffers()[b.name].itemsize
                        for b in streamed for r in ranges[(b.column, b.name)])
        zero_copy_reads = _zero_copy_reads(qplan, counters)
        profile = Profile(qplan.mode, table.rows, table.logical_bytes(), h2d_bytes, done.time_since(tl.start),
                          tl.intervals(), setup_ms, _kernel_bytes(qplan, encoded, counters),
                          encoding=qplan.encoding, zero_copy_bytes=zero_copy_reads * ZERO_COPY_SECTOR,
                          physical_bytes=sum(b.nbytes for b in qplan.buffers), counters=counters,
                          host_path=_host_path(qplan, table))
        return GpuResult(to_decimal(total, selected), selected, profile, qplan, tl.t0)

    def _pipeline(self, tl: Timeline, copy, compute: list, qplan: QueryPlan, encoded: dict, sources: dict,
                  ranges: dict, streamed: list, scan, params: tuple, acc: int) -> None:
        """All copies go in order on one copy stream, back to back, so their events time the copies
        themselves; chunk i's kernel runs on compute stream i % k once its copy is done, under the
        next chunks' copies (and, for pageable, the host's staging of them). Device buffer i % k is
        overwritten only after the kernel that last read it has finished."""
        g = qplan.geometry
        slots = g.streams if streamed else 1
        ring = [{(b.column, b.name): self.memory.scratch_device(f"ring{s}:{b.column}.{b.name}",
                                                               _capacity(ranges[(b.column, b.name)], sources[(b.column, b.name)]))
                 for b in streamed} for s in range(slots)]
        staging = None
        if g.staging_buffers and streamed:
            staging = [{(b.column, b.name): self.memory.scratch_host(
                f"stage{s}:{b.column}.{b.name}", max(r[1] - r[0] for r in ranges[(b.column, b.name)]),
                sources[(b.column, b.name)].dtype, pinned=True) for b in streamed} for s in range(g.staging_buffers)]
        copier = self.memory.copier(g.staging_threads) if staging else None
        staged_free: list = [None] * (len(staging) if staging else 0)
        ring_free: list = [None] * slots
        kernels_done = []
        for i, a, b in g.chunks():
            slot = i % slots
            parts = {k: sources[k][ranges[k][i][0]:ranges[k][i][1]] for k in ring[slot]}
            if staging is not None:
                s = i % len(staging)
                if staged_free[s] is not None:
                    staged_free[s].synchronize()
                t0 = time.perf_counter()
                targets = {k: staging[s][k][:len(v)] for k, v in parts.items()}
                copier.copy((targets[k], parts[k]) for k in parts)
                tl.host("staging", i, t0, time.perf_counter())
                parts = targets
            if parts:
                if ring_free[slot] is not None:
                    copy.wait_for_event(ring_free[slot])
                begin = tl.event(copy)
                for k, part in parts.items():
                    self.memory.htod_async(int(ring[slot][k]), part, copy)
                copied = tl.event(copy)
                tl.gpu("h2d", "copy", i, begin, copied)
                if staging is not None:
                    staged_free[i % len(staging)] = copied
            stream = compute[slot % len(compute)]
            if parts:
                stream.wait_for_event(copied)
            args = self._scan_args(qplan, encoded, sources, ranges, ring[slot], i)
            begin = tl.event(stream)
            launch = g.launch(b - a)
            scan.prepared_async_call((launch.grid, 1, 1), (launch.block, 1, 1), stream,
                                     *args, b - a, *params, acc)
            end = tl.event(stream)
            tl.gpu("kernel", f"stream {slot % len(compute)}", i, begin, end)
            ring_free[slot] = end
            kernels_done.append(end)
        for done in kernels_done[-len(compute):]:
            copy.wait_for_event(done)  # the result is read only after every kernel

    def _locate(self, qplan, encoded, sources, ranges, ring, column: str, name: str, i: int) -> tuple[int, int]:
        """(pointer the kernel reads buffer `name` of this chunk at, word base for packed words)."""
        key = (column, name)
        start = ranges[key][i][0]
        placement = qplan.placement(column, name)
        if placement == "stream":
            return int(ring[key]), start if name == "words" else 0
        source = sources[key]
        if placement == "resident":
            base = int(source)
        else:
            base = self.memory.mapped_pointer(source)
        if name == "words":
            return base, 0
        return base + start * encoded[column].buffers()[name].itemsize, 0

    def _scan_args(self, qplan, encoded, sources, ranges, ring, i: int) -> list:
        loc = lambda column, name: self._locate(qplan, encoded, sources, ranges, ring, column, name, i)
        key = encoded[KEY]
        if key.name == "plain":
            key_args = [loc(KEY, "values")[0], 0, 0]
        elif key.name == "packed":
            words, base = loc(KEY, "words")
            key_args = [words, loc(KEY, "meta")[0], base]
        else:
            key_args = [loc(KEY, "top")[0], loc(KEY, "low")[0] if key.low is not None else 0, 0]
        factor_args = []
        for column in (QUANTITY, PRICE):
            enc = encoded[column]
            if enc.name == "plain":
                factor_args += [loc(column, "values")[0], 0, 0, 1]
            else:
                words, base = loc(column, "words")
                factor_args += [words, loc(column, "meta")[0], base, enc.factor]
        return key_args + factor_args

    def close(self) -> None:
        self.memory.release()
        self._streams.clear()


def _chunk_range(enc, name: str, a: int, b: int) -> tuple[int, int]:
    """[start, stop) elements of buffer `name` (flattened) that rows a..b need."""
    if name in ("values", "top", "low"):
        return a, b
    f0, f1 = a // FRAME_ROWS, -(-b // FRAME_ROWS)
    if name == "meta":
        return 2 * f0, 2 * f1
    w0, w1 = enc.frame_words(f0, f1)
    return w0, w1


def _capacity(chunk_ranges: list, source: np.ndarray) -> int:
    """Bytes of a ring buffer: the largest chunk's share, plus room for the decoders' reads past it."""
    return max(r[1] - r[0] for r in chunk_ranges) * source.itemsize + 4 * PAD_WORDS + 64


def _z_params(key, z: int) -> tuple[int, int, int] | None:
    """(z, z_top, z_low) for the scan; None when no row can pass (no kernel need run)."""
    if key.name == "sliced":
        z_top, z_low = key.thresholds(z)
        return None if z_top < 0 else (z, z_top, z_low)
    return z, 0, 0


def _zero_copy_reads(qplan: QueryPlan, counters: dict) -> int:
    """Reads of mapped host memory, from the kernel's counters: a low-bits read per undecided row;
    per selected row's factors, the frame metadata and the words of each column."""
    reads = 0
    if any(b.name == "low" and b.placement == "zero_copy" for b in qplan.buffers):
        reads += counters["low_reads"]
    for column in (QUANTITY, PRICE):
        zero = {b.name for b in qplan.buffers if b.column == column and b.placement == "zero_copy"}
        reads += counters["selected_rows"] * len(zero)
    return reads


def _kernel_bytes(qplan: QueryPlan, encoded: dict, counters: dict) -> int:
    """Device-memory bytes the kernel read: the key's streamed or resident buffers whole, the
    factor bytes of the 4-row vectors it loaded factors for."""
    total = 0
    for b in qplan.buffers:
        if b.placement == "zero_copy":
            continue
        if b.column == KEY and b.name != "low":
            total += b.nbytes
        elif b.name == "low":
            total += counters["low_reads"] * encoded[KEY].low_itemsize
        elif b.name in ("values", "words"):
            per_row = b.nbytes / max(qplan.rows, 1)
            total += int(counters["factor_vectors"] * ROWS_PER_VECTOR * per_row)
    return total


def _host_path(qplan: QueryPlan, table: Table) -> str:
    if table.pinned and qplan.mode in ("pinned", "registered"):
        return "the store's mapped pinned memory, in place"
    return {"resident": "resident on the GPU", "pinned": "pinned copy (mapped)",
            "registered": "registered in place (no copy)",
            "pageable": "staged through pinned buffers"}[qplan.mode]


__all__ = ["Engine", "GpuResult", "Timeline", "exact_total", "scan_total", "MODES", "ENCODING_CHOICES"]
