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
from gquery.gpu.timeline import Timeline
from gquery.host import host_threads
from gquery.plan import (BLOCK_THREADS, BLOCKS_PER_SM, ENCODING_CHOICES, FRAME_BLOCK_THREADS, MODES, ROWS_PER_VECTOR, VECTORS_PER_THREAD,
                         ZERO_COPY_SECTOR, Kernel, QueryPlan, plan_query, frame_block)
from gquery.profile import Profile
from gquery.mission import MissionQuery, to_decimal
from gquery.table import KEY, PRICE, QUANTITY, Table

SELECT_SUM = kernels.build("select_sum.cu", BLOCK_THREADS=BLOCK_THREADS, VECTORS_PER_THREAD=VECTORS_PER_THREAD,
                           MIN_BLOCKS_PER_SM=BLOCKS_PER_SM)  # the ladder's fused_engine step
SCAN_BLOCKS_PER_SM = 4  # 4 x 256 threads: room for the decoders' registers (<= 64), no spills
FRAME_SCAN_BLOCKS_PER_SM = 8  # the frame loop: 8 x 128 threads in <= 64 registers, no spills (7 x 72: 0.76 of a device copy at SF 10 on H100, 8: 0.84)
PLAIN_SCAN_BLOCKS_PER_SM = 6  # the plain 64-bit scan fits 40 registers without spills: 75% occupancy
SELECTED, FACTOR_VECTORS, LOW_READS = 4, 5, 6  # counter words of the accumulator (scan.cu)
JOBS_KEPT = 16  # a table's jobs kept for repeated plans (Engine._job), per memory layer


def scan_build(kernel: Kernel) -> kernels.Build:
    plain = kernel.key == kernel.factors == "plain" and not kernel.wide
    return kernels.build("scan.cu", BLOCK_THREADS=FRAME_BLOCK_THREADS if kernel.tiles else BLOCK_THREADS,
                         VECTORS_PER_THREAD=VECTORS_PER_THREAD,
                         MIN_BLOCKS_PER_SM=(PLAIN_SCAN_BLOCKS_PER_SM if plain else
                                            FRAME_SCAN_BLOCKS_PER_SM if kernel.tiles else SCAN_BLOCKS_PER_SM),
                         FRAME_ROWS=FRAME_ROWS, **kernel.defines())


def scan_builds() -> set:
    """Every scan variant a plan can ask for (the CPU test compiles each with nvcc)."""
    out = set()
    for key, factors in (("plain", "plain"), ("packed", "packed"), ("sliced", "packed"), ("indexed", "packed")):
        for low in ((0, 1, 2, 4, 8) if key in ("sliced", "indexed") else (0,)):
            for wide in (False, True):
                if key == "indexed":  # its own loop: no frame tiles
                    out.update(scan_build(Kernel(key, factors, low, wide, False, ids)) for ids in (4, 8))
                    continue
                for tiles in ((False, True) if factors == "packed" else (False,)):
                    out.add(scan_build(Kernel(key, factors, low, wide, tiles)))
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


@dataclass
class _Job:
    """One table's query in a batch: what its pipeline reads, and where its events are."""

    index: int  # its accumulator's row
    table: Table
    plan: QueryPlan
    encoded: dict
    sources: dict
    ranges: dict
    streamed: list
    h2d_bytes: int
    params: tuple | None
    bases: dict  # where the kernel reads the buffers that are not streamed (Engine._bases)
    setup_ms: float = 0.0
    timeline: Timeline | None = None
    begin: object = None  # event before its first copy
    end: object = None  # event after its last chunk's kernel (the batch's last job: after the result's copy)


class _Pipeline:
    """What a batch of tables' pipelines share: one copy stream, the compute streams, the device
    ring and the pinned staging ring, and the events that say when each slot may be refilled. Chunks
    are counted across the batch, so table k+1's first copy goes under table k's last kernels."""

    def __init__(self, engine: "Engine", jobs: list[_Job]):
        streaming = [j for j in jobs if j.streamed]
        self.slots = max((j.plan.geometry.streams for j in streaming), default=1)
        if streaming:
            self.copy, *self.compute = engine.streams(self.slots + 1)
        else:  # nothing to copy: one stream, no cross-stream waits
            self.copy = engine.streams(1)[0]
            self.compute = [self.copy]
        # every buffer sized for the batch's largest chunk before anything is queued: a buffer
        # regrown mid-batch would be freed under a kernel still reading it
        need: dict = {}
        stage_need: dict = {}
        for j in streaming:
            for b in j.streamed:
                k = (b.column, b.name)
                need[k] = max(need.get(k, 0), _capacity(j.ranges[k], j.sources[k]))
                if j.plan.geometry.staging_buffers:
                    sk = (k, j.sources[k].dtype.str)
                    stage_need[sk] = max(stage_need.get(sk, 0), max(r[1] - r[0] for r in j.ranges[k]))
        self.ring = [{k: engine.memory.scratch_device(f"ring{s}:{k[0]}.{k[1]}", n) for k, n in need.items()}
                     for s in range(self.slots)]
        n_staging = max((j.plan.geometry.staging_buffers for j in streaming), default=0)
        self.staging = [{sk: engine.memory.scratch_host(f"stage{s}:{sk[0][0]}.{sk[0][1]}", n, np.dtype(sk[1]), pinned=True)
                         for sk, n in stage_need.items()} for s in range(n_staging)]
        threads = max((j.plan.geometry.staging_threads for j in streaming), default=0)
        self.copier = engine.memory.copier(threads) if self.staging else None
        self.staged_free: list = [None] * len(self.staging)
        self.ring_free: list = [None] * self.slots
        self.last_kernel: dict = {}  # compute stream index → its last kernel's end event
        self.chunk = 0  # chunks queued so far, across the batch


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
        self._scans: dict[Kernel, object] = {}
        self._frame_blocks: dict[tuple[Kernel, int], int] = {}
        self._streams: list = []
        self._events: list = []  # CUDA events for reuse: creating ~250 a query costs the host ~1 ms
        self.extensions: dict = {}  # runners of other kernels on this engine (gpu/fused.py), closed with it

    @property
    def kernel(self):
        """The ladder's fused_engine step (select_sum.cu), compiled when first asked for."""
        if "select_sum" not in self.extensions:
            f = kernels.function(SELECT_SUM, "select_sum")
            f.prepare("PPPqqP")
            self.extensions["select_sum"] = _Closable(f)
        return self.extensions["select_sum"].value

    def scan(self, kernel: Kernel):
        if kernel not in self._scans:
            f = kernels.function(scan_build(kernel), "scan")
            f.prepare("PPqPPqPPqqqqqqP")
            self._scans[kernel] = f
        return self._scans[kernel]

    def resources(self, kernel: Kernel | None = None, tile_words: int = 0) -> dict:
        """Registers, memory and occupancy of a kernel; the frame loop's at its plan's tile size."""
        f = self.kernel if kernel is None else self.scan(kernel)
        threads, shared = frame_block(tile_words) if kernel is not None and kernel.tiles else (BLOCK_THREADS, 0)
        return kernels.resources(f) | {"occupancy": kernels.occupancy(f, threads, shared), "tile_bytes": shared}

    def frame_blocks_per_sm(self, kernel: Kernel, tile_words: int) -> int:
        """Blocks of the frame loop an SM holds at this tile size (memoized: driver queries)."""
        k = (kernel, tile_words)
        if k not in self._frame_blocks:
            self._frame_blocks[k] = kernels.blocks_per_sm(self.scan(kernel), *frame_block(tile_words))
        return self._frame_blocks[k]

    def plan(self, table: Table, query: MissionQuery, mode: str, encoding: str = "auto", **options) -> QueryPlan:
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
        self.memory.hold(table)  # what is cached in it is freed by Engine.close too
        out = {}
        for b in qplan.buffers:
            array = encoded[b.column].buffers()[b.name].reshape(-1)
            key = (b.column, qplan.encoding, b.name)
            out[(b.column, b.name)] = (self._resident(table, key, array) if b.placement == "resident"
                                       else self._host_buffer(table, key, array, qplan.mode))
        if any(b.placement == "resident" for b in qplan.buffers):
            self._cuda.Context.synchronize()  # uploads done before the query's clock starts
        return out, (time.perf_counter() - t0) * 1e3

    # --- queries ----------------------------------------------------------------------------------
    def run(self, table: Table, query: MissionQuery, qplan: QueryPlan) -> GpuResult:
        return self.run_many([(table, qplan)], query)[0]

    def run_many(self, items: list[tuple[Table, QueryPlan]], query: MissionQuery) -> list[GpuResult]:
        """The query over several tables (a parted table's parts, one GPU's share), queued back to
        back on the same streams, each table into an accumulator of its own, and one wait at the
        end: the link and the SMs do not idle between tables while the host plans or waits."""
        for table, qplan in items:
            if qplan.rows != table.rows:
                raise GqueryError(f"plan is for {qplan.rows:,} rows, the table has {table.rows:,}")
            if qplan.z != query.z:
                raise GqueryError(f"plan is for Z = {qplan.z}, the query has Z = {query.z}")
        jobs = [self._job(i, table, qplan, query) for i, (table, qplan) in enumerate(items)]
        pipe = _Pipeline(self, jobs)
        acc_d, acc_h = self.memory.accumulator(len(jobs))
        shared = Timeline(self._cuda, pipe.copy, pool=self._events)
        self.memory.zero_async(int(acc_d), acc_h.nbytes, pipe.copy)
        for job in jobs:
            job.timeline = Timeline(self._cuda, pipe.copy, within=shared, pool=self._events)
            job.begin = shared.start if job.index == 0 else job.timeline.event(pipe.copy)
            if job.params is not None:
                self._pipeline(pipe, job, int(acc_d) + job.index * ACC_WORDS * 8)
            else:  # no row can pass: no kernel, the accumulator stays zero
                job.end = job.timeline.event(pipe.copy)
        for end in pipe.last_kernel.values():
            pipe.copy.wait_for_event(end)  # the results are read only after every kernel
        last = jobs[-1]
        d2h_begin = last.timeline.event(pipe.copy)
        self.memory.dtoh_async(acc_h, int(acc_d), pipe.copy)
        done = last.end = last.timeline.event(pipe.copy)
        last.timeline.gpu("d2h", "copy" if any(j.streamed for j in jobs) else "stream 0", 0, d2h_begin, done)
        done.synchronize()
        results = [self._result(job, acc_h[job.index * ACC_WORDS:(job.index + 1) * ACC_WORDS]) for job in jobs]
        for tl in [shared] + [job.timeline for job in jobs]:  # every event has completed and been read
            self._events.extend(tl.recorded)
        return results

    def _job(self, index: int, table: Table, qplan: QueryPlan, query: MissionQuery) -> _Job:
        """A table's part of a batch. What follows from the plan alone (where each buffer is, each
        chunk's ranges, pointers) is kept in table.cache, keyed by the plan's value, for the next
        query with an equal plan: ~0.3 ms a table of host work the GPU would otherwise wait for
        before its first copy. release_table drops it with the memory it points into."""
        key = ("job", self.memory.tag, qplan)
        if key in table.cache:
            table.cache[key] = table.cache.pop(key)  # the most recently used is evicted last
            return _Job(index, table, qplan, *table.cache[key], setup_ms=0.0)
        sources, setup_ms = self.prepare(table, qplan)
        encoded = table.encoded(qplan.encoding)
        chunks = list(qplan.geometry.chunks())
        ranges = {(b.column, b.name): [_chunk_range(encoded[b.column], b.name, a, e) for _, a, e in chunks]
                  for b in qplan.buffers}
        streamed = [b for b in qplan.buffers if b.placement == "stream"]
        h2d_bytes = sum((r[1] - r[0]) * encoded[b.column].buffers()[b.name].itemsize
                        for b in streamed for r in ranges[(b.column, b.name)])
        held = (encoded, sources, ranges, streamed, h2d_bytes, _z_params(encoded[KEY], query.z_int64),
                self._bases(qplan, encoded, sources))
        jobs = [k for k in table.cache if k[0] == "job" and k[1] == self.memory.tag]
        for old in jobs[:max(0, len(jobs) + 1 - JOBS_KEPT)]:  # bounded: a new Z is a new plan
            del table.cache[old]
        table.cache[key] = held
        return _Job(index, table, qplan, *held, setup_ms=setup_ms)

    def _result(self, job: _Job, words: np.ndarray) -> GpuResult:
        qplan, table, encoded = job.plan, job.table, job.encoded
        total = scan_total(words, qplan.kernel.wide) * common_factors(encoded)
        selected = int(words[SELECTED])
        counters = {"selected_rows": selected, "factor_vectors": int(words[FACTOR_VECTORS]),
                    "low_reads": int(words[LOW_READS])}
        h2d_bytes = job.h2d_bytes

        # a table's span on the GPU: the first table's from the batch's start to the result's copy
        profile = Profile(qplan.mode, table.rows, table.logical_bytes(), h2d_bytes, job.end.time_since(job.begin),
                          job.timeline.intervals(), job.setup_ms, _kernel_bytes(qplan, encoded, counters),
                          encoding=qplan.encoding, zero_copy_bytes=_zero_copy_bytes(qplan, encoded, counters),
                          physical_bytes=sum(b.nbytes for b in qplan.buffers), counters=counters,
                          host_path=_host_path(qplan, table))
        return GpuResult(to_decimal(total, selected), selected, profile, qplan, job.timeline.t0)

    def _pipeline(self, pipe: _Pipeline, job: _Job, acc: int) -> None:
        """All copies go in order on one copy stream, back to back, so their events time the copies
        themselves; chunk i's kernel runs on compute stream i % k once its copy is done, under the
        next chunks' copies (and, for pageable, the host's staging of them). Device buffer i % k is
        overwritten only after the kernel that last read it has finished."""
        g, tl, copy = job.plan.geometry, job.timeline, pipe.copy
        scan = self.scan(job.plan.kernel)
        per_sm = self.frame_blocks_per_sm(job.plan.kernel, job.plan.tile_words) if job.plan.kernel.tiles else 0
        key_width = job.plan.key_width
        for i, a, b in g.chunks():
            n = pipe.chunk
            pipe.chunk += 1
            slot = n % pipe.slots
            parts = {(c.column, c.name): job.sources[(c.column, c.name)][slice(*job.ranges[(c.column, c.name)][i])]
                     for c in job.streamed}
            if pipe.staging:
                s = n % len(pipe.staging)
                if pipe.staged_free[s] is not None:
                    pipe.staged_free[s].synchronize()
                t0 = time.perf_counter()
                targets = {k: pipe.staging[s][(k, v.dtype.str)][:len(v)] for k, v in parts.items()}
                pipe.copier.copy((targets[k], parts[k]) for k in parts)
                tl.host("staging", i, t0, time.perf_counter())
                parts = targets
            if parts:
                if pipe.ring_free[slot] is not None:
                    copy.wait_for_event(pipe.ring_free[slot])
                begin = tl.event(copy)
                for k, part in parts.items():
                    self.memory.htod_async(int(pipe.ring[slot][k]), part, copy)
                copied = tl.event(copy)
                tl.gpu("h2d", "copy", i, begin, copied)
                if pipe.staging:
                    pipe.staged_free[n % len(pipe.staging)] = copied
            lane = slot % len(pipe.compute)
            stream = pipe.compute[lane]
            if parts:
                stream.wait_for_event(copied)
            args = self._scan_args(job, pipe.ring[slot], i)
            begin = tl.event(stream)
            if job.plan.kernel.key == "indexed":  # one chunk: the lists' prefix, not rows a..b
                items = job.plan.entries[1]
                launch = g.list_launch(items)
            else:
                items = b - a
                launch = g.frame_launch(items, job.plan.tile_words, per_sm) if per_sm else g.launch(items)
            scan.prepared_async_call((launch.grid, 1, 1), (launch.block, 1, 1), stream,
                                     *args, items, key_width, *job.params, acc, shared_size=launch.shared)
            end = tl.event(stream)
            tl.gpu("kernel", f"stream {lane}", i, begin, end)
            pipe.ring_free[slot] = pipe.last_kernel[lane] = job.end = end  # chunks end in order: the last, last

    def _bases(self, qplan: QueryPlan, encoded: dict, sources: dict) -> dict:
        """{(column, buffer): (device pointer of its first element, element bytes)} for buffers the
        kernel reads where they lie (resident, or mapped host memory read in place); streamed ones
        are in the ring. Resolved once a table, not once a chunk."""
        out = {}
        for b in qplan.buffers:
            source = sources[(b.column, b.name)]
            itemsize = encoded[b.column].buffers()[b.name].itemsize
            if b.placement == "resident":
                out[(b.column, b.name)] = (int(source), itemsize)
            elif b.placement == "zero_copy":
                out[(b.column, b.name)] = (self.memory.mapped_pointer(source), itemsize)
        return out

    def _locate(self, job: _Job, ring: dict, column: str, name: str, i: int) -> tuple[int, int]:
        """(pointer the kernel reads buffer `name` of chunk i at, word base for packed words)."""
        key = (column, name)
        start = job.ranges[key][i][0]
        if key not in job.bases:  # streamed: this chunk's share is at the start of its ring buffer
            return int(ring[key]), start if name == "words" else 0
        base, itemsize = job.bases[key]
        if name == "words":  # whole: the frame metadata holds offsets from the buffer's start
            return base, 0
        return base + start * itemsize, 0

    def _scan_args(self, job: _Job, ring: dict, i: int) -> list:
        loc = lambda column, name: self._locate(job, ring, column, name, i)
        key = job.encoded[KEY]
        if key.name == "plain":
            key_args = [loc(KEY, "values")[0], 0, 0]
        elif key.name == "packed":
            words, base = loc(KEY, "words")
            key_args = [words, loc(KEY, "meta")[0], base]
        elif key.name == "sliced":
            key_args = [loc(KEY, "top")[0], loc(KEY, "low")[0] if key.low is not None else 0, 0]
        else:  # indexed: the lists, and how many of their first entries pass outright
            key_args = [loc(KEY, "ids")[0], loc(KEY, "low")[0] if key.low is not None else 0, job.plan.entries[0]]
        factor_args = []
        for column in (QUANTITY, PRICE):
            enc = job.encoded[column]
            if enc.name == "plain":
                factor_args += [loc(column, "values")[0], 0, 0]
            else:
                words, base = loc(column, "words")
                factor_args += [words, loc(column, "meta")[0], base]
        return key_args + factor_args

    def close(self) -> None:
        for ext in self.extensions.values():
            ext.close()
        self.extensions.clear()
        self.memory.release()
        self._streams.clear()
        self._events.clear()
        self._scans.clear()  # functions hold their modules: unloaded with them, on this thread


class _Closable:
    """A value kept in Engine.extensions that needs nothing done to close."""

    def __init__(self, value):
        self.value = value

    def close(self) -> None:
        self.value = None


def close_last(engine: Engine) -> None:
    """Close the last engine of this thread, then collect what it left and forget this thread's
    modules: everything of its context is freed here, on its own thread, not at the interpreter's
    exit (where PyCUDA can only warn of it)."""
    import gc

    engine.close()
    gc.collect()
    kernels.drop_modules()


def common_factors(encoded: dict) -> int:
    """What the scan's sum is multiplied by: it sums products of packed factors' values with their
    common factors left out (scan.cu), so the product of those factors is applied once, here."""
    out = 1
    for column in (QUANTITY, PRICE):
        out *= getattr(encoded[column], "factor", 1)
    return out


def _chunk_range(enc, name: str, a: int, b: int) -> tuple[int, int]:
    """[start, stop) elements of buffer `name` (flattened) that rows a..b need."""
    if name == "top":  # whole frames: the frame loop stages a frame's top bytes at once (padded so)
        return a, min(-(-b // FRAME_ROWS) * FRAME_ROWS, len(enc.top))
    if name in ("values", "low", "ids"):  # (an indexed key's plan is one chunk: its lists whole)
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
    if key.name in ("sliced", "indexed"):
        z_top, z_low = key.thresholds(z)
        return None if z_top < 0 else (z, z_top, z_low)
    return z, 0, 0


def _zero_copy_bytes(qplan: QueryPlan, encoded: dict, counters: dict, placement: str = "zero_copy") -> int:
    """Bytes read from mapped host memory (or, indexed, from the buffers of another `placement`),
    from the kernel's counters: a 32-byte sector a scattered
    read (a low-bits read per undecided row; per selected row's factors, the frame metadata and the
    words of each column). An indexed key's lists are read in order: the ids of the entries that
    pass outright and Z's bucket's low bits at their own size, its passing rows' ids a sector each."""
    zero = {(b.column, b.name) for b in qplan.buffers if b.placement == placement}
    reads = sum(counters["selected_rows"] for c in (QUANTITY, PRICE) for n in ("meta", "words") if (c, n) in zero)
    key = encoded[KEY]
    if key.name == "indexed":
        ordered = 0
        if (KEY, "ids") in zero:
            ordered += qplan.entries[0] * key.ids.itemsize
            reads += counters["selected_rows"] - min(qplan.entries[0], counters["selected_rows"])
        if (KEY, "low") in zero:
            ordered += counters["low_reads"] * key.low_itemsize
        return ordered + reads * ZERO_COPY_SECTOR
    if (KEY, "low") in zero:
        reads += counters["low_reads"]
    return reads * ZERO_COPY_SECTOR


def _kernel_bytes(qplan: QueryPlan, encoded: dict, counters: dict) -> int:
    """Device-memory bytes the kernel read: the key's streamed or resident buffers whole, the
    factor bytes of the 4-row vectors it loaded factors for."""
    total = 0
    if encoded[KEY].name == "indexed":  # resident lists and factors: the same reads, from device memory
        return _zero_copy_bytes(qplan, encoded, counters, "resident")
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


__all__ = ["Engine", "GpuResult", "exact_total", "scan_total", "MODES", "ENCODING_CHOICES"]
