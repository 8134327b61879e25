"""Runs a fused plan (gquery.gpu.fusedplan) on one GPU: its chunks' copies on one copy stream, the
generated kernel on compute streams under them, columns read in place where the plan placed them,
and CUDA events around every stage, on the engine's streams, events, rings and memory layer
(gpu/executor.Engine).

    chunk k:  copy stream    H2D of each streamed column's frames' words into ring slot k % s (their metadata is
                             the runner's, in device memory)
              compute k % c  wait for the copy; the fused kernel over the chunk's frames
    end:      the tables' accumulator words back in one copy; each table's groups read out exactly
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass

import numpy as np

from gquery.encodings import FRAME_ROWS, PAD_WORDS, TOP_BITS
from gquery.errors import GqueryError
from gquery.gpu.fusedplan import SECTOR, FusedPlan, TablePlan
from gquery.gpu.memory import freed, generation
from gquery.plan import MAPPED_MODES
from gquery.gpu import codegen, kernels
from gquery.gpu.timeline import Timeline
from gquery.host import host_threads
from gquery.profile import Profile
from gquery.result import python_values
from gquery.table import read_all

BLOCK_THREADS = 128  # 4 warps: a warp a frame
MIN_BLOCKS_PER_SM = 4  # the generated kernels fit 128 registers without spills
COUNTER_WORDS = 3  # a table's: values read in place, frames whose metadata was read in place, rows a hashed run found no slot for
IMAGES_KEPT = 64  # shapes whose accumulators' initial words a runner keeps (fewer than codegen.TOP_MIN_GROUPS groups)
# a ring slot (and a pageable chunk's pinned stage) grown a quarter beyond the chunk that needs it: a clustered table's
# next constant cuts a chunk a few frames longer, and each regrowth freed and allocated nine device buffers and moved
# the memory's generation, so the launch was prepared twice (H100, SF 10 by l_suppkey, Z = 1,000 on: 1.1-1.4 ms of
# queueing in half the new texts, 0.1 ms in the others)
RING_HEADROOM = 1.25
LAYOUTS_KEPT = 64  # launches a table keeps by layout (FusedRunner._launch), for its new constants' plans
META_KEPT_BYTES = 1 << 30  # columns' frame metadata a runner keeps in device memory, read in place or shipped (SF 1000: 94 MB a column)


@functools.lru_cache(maxsize=256)  # a build holds its source (20-60 KB): 256 shapes' kernels at most
def fused_build(spec: codegen.KernelSpec, index: codegen.IndexKernel | None = None,
                sliced: codegen.SlicedKernel | None = None) -> kernels.Build:
    """The frame loop's build (`sliced`: a predicate column it reads by its top byte), or the index scan's
    (`index`: the slot it walks and its low bits' bytes). Made once a shape: a new constant's plan finds its
    builds (their source generated, its text hashed) without generating them again."""
    code = (codegen.source(spec, BLOCK_THREADS, sliced) if index is None
            else codegen.list_source(spec, index, BLOCK_THREADS))
    return kernels.build("fused", code=code.replace(f"__launch_bounds__({BLOCK_THREADS})",
                                                   f"__launch_bounds__({BLOCK_THREADS}, {MIN_BLOCKS_PER_SM})"))


def index_kernel(scan) -> codegen.IndexKernel:
    return codegen.IndexKernel(scan.slot, scan.low_bytes)


def _launched(plan: FusedPlan) -> list[tuple]:
    """(index kernel, sliced kernel) of each kernel a run of the plan launches: the frame loop's (where a table is
    scanned by frames), and each index scan's."""
    frames = any(tp.index is None and tp.touched and tp.chunks for tp in plan.tables)  # (no frame touched: no chunk
    # to cut; an empty plan launches nothing)
    found = [(None, plan.sliced_kernel)] if frames else []
    for tp in plan.tables:
        if tp.index is not None and (k := (index_kernel(tp.index), None)) not in found:
            found.append(k)
    return found


def plan_builds(plan: FusedPlan) -> list[kernels.Build]:
    """The kernels a run of the plan launches (_launched), as builds."""
    return [fused_build(plan.spec, index, sliced) for index, sliced in _launched(plan)]


def possible_builds(plan: FusedPlan) -> list[kernels.Build]:
    """Every kernel a plan before its choice (plan_fused's) may launch once chosen, whatever it weighs then:
    the frame loop packed and by a column's top byte, and each index scan, its low bits' bytes as the
    lists are built."""
    found = [fused_build(plan.spec)]
    tops = {s.kernel for s in (plan.top_plans.sliced if plan.top_plans is not None else ()) if s is not None}
    lists = {codegen.IndexKernel(tp.index_option.slot, tp.index_option.low_bytes) for tp in plan.tables
             if tp.index_option is not None}
    return found + [fused_build(plan.spec, sliced=k) for k in sorted(tops, key=repr)] + \
        [fused_build(plan.spec, k) for k in sorted(lists, key=repr)]


def compile_plan(plan: FusedPlan, arch: str) -> list[kernels.Build]:
    """Compiles what the plan launches, where this is called: on the asking thread, so that a new
    shape's compile waits for no other query's GPU work and holds up none (the GPU's thread finds the
    machine code in memory, kernels.cubin). Returns those builds."""
    builds = plan_builds(plan)
    for b in builds:
        kernels.cubin(b, arch)
    return builds


@dataclass
class TableRun:
    """One table's answer: the groups that selected a row (their indices; a wide key's three words a row), each
    one's rows, and each accumulator's exact value for each of them (codegen.read_groups)."""

    plan: TablePlan
    index: np.ndarray
    counts: np.ndarray  # int64, per group
    values: list  # per accumulator, per group: an int64 array, or Python integers (codegen.read_groups)
    values_in_place: int
    frames_in_place: int
    selected: int | None = None  # rows selected, where its groups are not all read back (a TopCut's run)
    counted: list | None = None  # per accumulator over a column with NULLs, per group the rows it took (else None)

    @functools.cached_property  # asked by the run's profile and by the answer's partial
    def rows_selected(self) -> int:
        return int(self.counts.sum()) if self.selected is None else self.selected

    @property
    def groups(self) -> dict[int, tuple[int, list]]:
        """Per group index, (its rows, its accumulators' values): as read_group gives one."""
        values = [python_values(v) for v in self.values]
        index = [tuple(k) for k in self.index.tolist()] if self.index.ndim > 1 else self.index.tolist()  # a wide key's words
        return {g: (n, list(v)) for g, n, v in zip(index, self.counts.tolist(), zip(*values) if values
                                                    else ((),) * len(self.counts))}


@dataclass
class FusedRun:
    tables: list[TableRun]
    profile: Profile
    plan: FusedPlan
    host_ms: float = 0.0  # the host's clock around the run and its read-out (answer.gpu_runs, gpu_finish)


@dataclass
class _Launch:
    """A plan's run as FusedRunner._prepare found it, replayed while the memory's generation is `generation`:
    addresses as integers and views of the table's arrays, no CUDA object and no scratch (the plan keeps it,
    and may outlive the engine; scratch is found by name at each run, so none is kept past its regrowth)."""

    generation: int
    slots: int  # ring slots: 3 where a chunk ships columns, else 1 (and the copy stream computes too)
    words_per_table: int
    groups: int  # a table's groups of words (a hashed table's slots)
    acc_d: int  # the tables of words on the device
    keys_d: int | None  # a hashed table's keys on the device
    host_words: int  # words read back whole into "fused:acc" (0: hashed); a few groups' also set from "fused:init"
    staged: dict  # pageable: each (column, buffer)'s bytes staged through "fusedstage<0|1>:..." (else empty)
    chunks: list  # each chunk's (ring slot, also its compute stream; {(column, buffer): host view to copy}, the slot's addresses, frames, kernel arguments)
    scans: list  # each index scan's (codegen.IndexKernel, compute lane, warps, kernel arguments)
    h2d_bytes: int
    zero_bytes: int  # read in place whatever the rows: the lists, tested frames' predicate words, low bits (estimated)
    list_entries: int
    logical_bytes: int
    write: object  # () → None: the scratch the kernels read in place, written as this plan needs it
    again: object  # (another plan of the same layout_key) → its _Launch, made from this one's


class _Placed:
    """A table's array as a run reads it (`array`: Engine._host_buffer's) and, found when first asked for, its device
    address (mapped memory), while the memory's generation is `generation` (nothing freed since: no address moved)."""

    __slots__ = ("generation", "of", "array", "_base")

    def __init__(self, generation: int, of: np.ndarray, array: np.ndarray):
        self.generation, self.of, self.array, self._base = generation, of, array, None

    def base(self, memory) -> int:
        if self._base is None:
            self._base = memory.mapped_pointer(self.array)
        return self._base


def runner_of(engine) -> "FusedRunner":
    """The engine's fused runner, made on first use and closed with the engine."""
    if "fused" not in engine.extensions:
        engine.extensions["fused"] = FusedRunner(engine)
    return engine.extensions["fused"]


def loaded(engine, plan: FusedPlan) -> bool:
    """Whether the engine's runner has loaded every kernel a run of the plan launches (FusedRunner.loaded)."""
    runner = engine.extensions.get("fused")
    return runner is not None and runner.loaded(plan)


class FusedRunner:
    """The fused kernel's side of an Engine: compiled kernels by shape, and one run of a plan."""

    def __init__(self, engine):
        self.engine = engine
        self._functions: dict = {}  # (spec, index, sliced) → (the prepared function, blocks of one wave)
        self._images: dict = {}  # (spec, tables) → the accumulators' initial words
        self._metas: dict = {}  # (address, bytes) of a column's host metadata → (a view of it, its device copy), oldest first
        self._written = None  # the _Launch whose scratch (classes, IN lists, starts, initial words) is written now
        self._unread: list[tuple[_Unread, list]] = []  # earlier runs' intervals not read yet, and their events

    def _compiled(self, spec: codegen.KernelSpec, index: codegen.IndexKernel | None,
                  sliced: codegen.SlicedKernel | None = None):
        """Looked up by the shape itself: its source is generated (0.1 ms) only the first time."""
        found = self._functions.get((spec, index, sliced))
        if found is None:
            f = kernels.function(fused_build(spec, index, sliced), "fused" if index is None else "fused_list")
            constants = "".join("Pq" if j in spec.set_slots else "q" for j in range(spec.constants))
            columns = "".join("PPqqqqqq" if sliced is not None and i == sliced.slot else
                              "PPqqP" if i in spec.nullable else "PPqq" for i in range(len(spec.columns)))  # P: validity
            f.prepare(columns + constants + "q" * len(spec.group_slots) + ("PqqPqP" if index is None else "PPPiqqqPqP")
                      + ("Pq" if spec.hashed else ""))
            found = self._functions[(spec, index, sliced)] = (f, self._wave(f))
        return found

    def _wave(self, *functions) -> int:
        """Blocks of one wave of these kernels: what the GPU holds of the most demanding at once."""
        return self.engine.device.sm_count * max(1, min(kernels.blocks_per_sm(f, BLOCK_THREADS) for f in functions))

    def _slot_kernels(self, spec: codegen.KernelSpec):
        """The kernels over a table of groups' words (codegen._slot_kernels), from the frame loop's build: (the one
        that sets the table before a run; the one keeping its partitions' best ORDER BY keys; the one gathering the
        slots a run filled; the blocks of a wave)."""
        key = ("slots", spec)
        found = self._functions.get(key)
        if found is None:
            build = fused_build(spec)
            best, gather = kernels.function(build, "fused_slots_best"), kernels.function(build, "fused_slots_gather")
            best.prepare("PPqPiiiiqi")
            gather.prepare("PPqPPPqiiiqiQP")
            init = kernels.function(build, "fused_init")
            init.prepare("PPq")
            found = self._functions[key] = (init, best, gather, self._wave(init, best, gather))
        return found

    def _initial(self, spec: codegen.KernelSpec, tables: int) -> np.ndarray:
        """The accumulators' words before any row, each table's counters and groups: made once a shape of a
        few groups (more are set on the GPU: codegen.slot_kernels)."""
        found = self._images.get((spec, tables))
        if found is None:
            if len(self._images) >= IMAGES_KEPT:  # many shapes of many groups: memory, not time, bounds them
                self._images.clear()
            image = np.concatenate([np.zeros(COUNTER_WORDS, np.uint64), codegen.initial_words(spec)])
            found = self._images[(spec, tables)] = np.tile(image, tables)
        return found

    def loaded(self, plan: FusedPlan) -> bool:
        """Whether every kernel a run of the plan launches is loaded here (plan_builds'; a table of many
        groups' slot kernels too): a run that loads none may run on another thread than this engine's own."""
        spec = plan.spec
        if codegen.slot_kernels(spec) and ("slots", spec) not in self._functions:
            return False
        return all((spec, index, sliced) in self._functions for index, sliced in _launched(plan))

    def function(self, spec: codegen.KernelSpec, index: codegen.IndexKernel | None = None,
                 sliced: codegen.SlicedKernel | None = None):
        return self._compiled(spec, index, sliced)[0]

    def close(self) -> None:
        self._read_earlier()  # a profile read after the engine is gone has its intervals already
        self._functions.clear()
        self._images.clear()
        self._metas.clear()
        self._written = None

    # --- where each column's bytes are -----------------------------------------------------------
    def _placed(self, table, key: tuple, array: np.ndarray, mode: str) -> "_Placed":
        """Where a run in `mode` reads a table's array (Engine._host_buffer's: mapped where it can be), found once a
        memory generation and kept with the table (a parted store's new constant looked up 60 arrays and their device
        addresses, about 1 ms of its queueing on the H100)."""
        k = ("fused-placed", self.engine.memory.tag, mode, *key)
        found = table.cache.get(k)
        if found is None or found.generation != generation() or found.of is not array:
            made = generation()  # read first: memory freed while it is found makes it a past generation's
            found = table.cache[k] = _Placed(made, array, self.engine._host_buffer(table, key, array.reshape(-1), mode))
        return found

    def _device(self, table, column: str, buffer: str):
        array = table.columns[column].get("packed").buffers()[buffer].reshape(-1)
        return self.engine._resident(table, (column, "fused", buffer), array)

    def _device_metas(self, wanted: dict) -> dict:
        """{key: device address of a column's frame metadata} for `wanted` {key: (table, column)}: the
        metadata (16 B a frame) of columns whose words kernels read, in place or shipped, copied to the device once and
        kept by the runner, not the table (a table dropped on a thread without the context must hold no
        device memory); past META_KEPT_BYTES the oldest this run does not read are let go (a run's kernels
        are done before the next run starts)."""
        arrays = {k: t.columns[c].get("packed").buffers()["meta"].reshape(-1) for k, (t, c) in wanted.items()}
        # keyed by where the host bytes lie (a new view of them each call): the kept view holds them, so the
        # address is not reused while kept
        where = {k: (a.__array_interface__["data"][0], a.nbytes) for k, a in arrays.items()}
        for k, a in arrays.items():
            found = self._metas.pop(where[k], None)
            self._metas[where[k]] = found or (a, self.engine.memory.upload(a))
        used = set(where.values())
        total = sum(a.nbytes for a, _ in self._metas.values())
        for k in [k for k in self._metas if k not in used]:
            if total <= META_KEPT_BYTES:
                break
            total -= self._metas.pop(k)[0].nbytes
            freed()  # its device copy: a run prepared before may hold its address
        return {k: int(self._metas[where[k]][1]) for k in arrays}

    def run(self, plan: FusedPlan) -> FusedRun:
        eng = self.engine
        memory, cuda = eng.memory, eng._cuda
        spec = plan.spec
        t_setup = time.perf_counter()
        launch = plan._launches.get(memory.tag)
        if launch is None or launch.generation != generation():  # a repeated text's run replays what it queued before
            launch = plan._launches[memory.tag] = self._launch(plan)
        if self._written is not launch:  # the scratch the kernels read in place, as this plan needs it
            launch.write()
            self._written = launch
        setup_ms = (time.perf_counter() - t_setup) * 1e3

        slots, accumulating, words_per_table = launch.slots, plan.word_tables, launch.words_per_table
        if slots > 1:
            copy, *compute = eng.streams(slots + 1)
        else:
            copy = eng.streams(1)[0]
            compute = [copy]
        stage_bufs = [{k: memory.scratch_host(f"fusedstage{s}:{k[0]}.{k[1]}", n, np.uint8, pinned=True)
                       for k, n in launch.staged.items()} for s in range(2)] if launch.staged else []
        copier = memory.copier(host_threads()) if stage_bufs else None
        acc_d, keys_d, groups = launch.acc_d, launch.keys_d, launch.groups
        tl = Timeline(cuda, copy, pool=eng._events)
        if codegen.slot_kernels(spec):  # tables of many groups set on the GPU (megabytes, a hash table's gigabytes):
            # counters 0, every group's words initial, every hashed slot empty
            slot_init, *slot_read, slot_wave = self._slot_kernels(spec)
            for k in range(accumulating):
                words_at = acc_d + 8 * k * words_per_table
                memory.zero_async(words_at, 8 * COUNTER_WORDS, copy)
                slot_init.prepared_async_call((_blocks(groups, slot_wave), 1, 1), (BLOCK_THREADS, 1, 1), copy,
                                              words_at + 8 * COUNTER_WORDS,
                                              keys_d + 8 * spec.key_words * k * groups if spec.hashed else 0, groups)
        else:  # a few groups' words: copied from their image
            memory.htod_async(acc_d, memory.scratch_host("fused:init", launch.host_words, np.uint64, pinned=True), copy)
        ring_free, stage_free, last_kernel = [None] * slots, [None] * len(stage_bufs), {}
        t_queue = time.perf_counter()
        if launch.chunks:
            fn, wave = self._compiled(spec, None, plan.sliced_kernel)
        for n, (slot, parts, ring, frames, args) in enumerate(launch.chunks):  # a slot's chunks on its compute stream
            if stage_bufs:  # pageable: host threads copy the chunk into a pinned buffer first
                s = n % len(stage_bufs)
                if stage_free[s] is not None:
                    stage_free[s].synchronize()
                t0 = time.perf_counter()
                targets = {k: stage_bufs[s][k][:v.nbytes].view(v.dtype) for k, v in parts.items()}
                copier.copy((targets[k], parts[k]) for k in parts)
                tl.host("staging", n, t0, time.perf_counter())
                parts = targets
            if parts:
                if ring_free[slot] is not None:
                    copy.wait_for_event(ring_free[slot])
                begin = tl.event(copy)
                for k, part in parts.items():
                    memory.htod_async(ring[k], part, copy)
                copied = tl.event(copy)
                tl.gpu("h2d", "copy", n, begin, copied)
                if stage_bufs:
                    stage_free[n % len(stage_bufs)] = copied
            stream = compute[slot]
            if parts:
                stream.wait_for_event(copied)
            begin = tl.event(stream)
            fn.prepared_async_call((_blocks(frames, wave), 1, 1), (BLOCK_THREADS, 1, 1), stream, *args)
            end = tl.event(stream)
            tl.gpu("kernel", f"stream {slot}", n, begin, end)
            ring_free[slot] = last_kernel[slot] = end
        for n, (index, lane, warps, args) in enumerate(launch.scans):  # index scans: a launch a table, after the chunks
            stream = compute[lane]
            function, wave = self._compiled(spec, index)
            begin = tl.event(stream)
            function.prepared_async_call((max(1, min(-(-warps // (BLOCK_THREADS // 32)), wave)), 1, 1),
                                         (BLOCK_THREADS, 1, 1), stream, *args)
            end = tl.event(stream)
            tl.gpu("kernel", f"stream {lane}", len(launch.chunks) + n, begin, end)
            last_kernel[lane] = end
        queued_ms = (time.perf_counter() - t_queue) * 1e3  # the host's time to queue every chunk (the GPU runs meanwhile)
        self._read_earlier()  # while the GPU works, as what the profile says of the plan
        host_path = _host_path(plan)
        physical_bytes = sum(tp.stream_bytes for tp in plan.tables if tp.index is None)
        for end in last_kernel.values():
            copy.wait_for_event(end)
        d2h_begin = tl.event(copy)
        top = plan.top if accumulating == 1 else None  # a group's words are all in its one table
        if spec.hashed or top is not None:  # the filled slots (that LIMIT can keep) gathered on the GPU
            done, read = self._gather(spec, acc_d, keys_d, words_per_table, groups, accumulating, *slot_read, slot_wave,
                                      copy, tl, top)
        else:
            acc_h = memory.scratch_host("fused:acc", launch.host_words, np.uint64, pinned=True)
            memory.dtoh_async(acc_h, acc_d, copy)
            done = tl.event(copy)
            done.synchronize()
            read = [(acc_h[i * words_per_table:i * words_per_table + COUNTER_WORDS],
                     codegen.read_groups(spec, acc_h[i * words_per_table + COUNTER_WORDS:(i + 1) * words_per_table]), None)
                    for i in range(accumulating)]
        tl.gpu("d2h", "copy", 0, d2h_begin, done)
        runs = []
        # a table of words each (shared: the first table's plan reads them all), counters first
        for tp, (counters, (index, counts, values, counted), selected) in zip(plan.tables[:accumulating], read):
            if counters[2]:  # rows whose key found no slot of a hashed table: the run is not an answer
                raise codegen.NotOnGpu(f"the groups overflow a hash table of {groups:,} slots (the most device memory "
                                       f"allows): {int(counters[2]):,} rows found no slot")
            runs.append(TableRun(tp, index, counts, values, int(counters[0]), int(counters[1]), selected, counted))
        total_ms = done.time_since(tl.start)
        selected = sum(run.rows_selected for run in runs)
        zero_bytes = SECTOR * sum(r.values_in_place + r.frames_in_place for r in runs) + launch.zero_bytes
        unread = _Unread(tl, memory)
        self._unread.append((unread, tl.recorded))
        profile = Profile(plan.mode, plan.rows, launch.logical_bytes, launch.h2d_bytes, total_ms, [], setup_ms,
                          None, encoding="fused", zero_copy_bytes=zero_bytes,
                          physical_bytes=physical_bytes,
                          counters={"selected_rows": selected, "chunks": len(launch.chunks), "queued_ms": queued_ms,
                                    "index_scans": len(launch.scans), "list_entries": launch.list_entries,
                                    "values_read_in_place": sum(r.values_in_place for r in runs)},
                          host_path=host_path).later(unread)
        return FusedRun(runs, profile, plan)

    def _read_earlier(self) -> None:
        """Earlier runs' intervals read from their events (done by now), which go back to the engine's pool."""
        for unread, events in self._unread:
            unread()
            self.engine._events.extend(events)
        self._unread.clear()

    def _launch(self, plan: FusedPlan) -> _Launch:
        """The plan's launch: made from one of the same layout (layout_key) while the memory's generation is the
        one it was prepared in (a new constant's plan often cuts the same chunks), else prepared. A table keeps the
        launches of its plans' layouts (LAYOUTS_KEPT), as long as it keeps the arrays they view."""
        key = layout_key(plan)
        if key is None:
            return self._prepared(plan)
        kept = plan.tables[0].table.cache.setdefault(("fused-layouts", self.engine.memory.tag), {})
        found = kept.get(key)
        if found is not None and found.generation == generation():
            return found.again(plan)
        launch = self._prepared(plan)
        if len(kept) >= LAYOUTS_KEPT:
            kept.clear()
        kept[key] = launch
        return launch

    def _prepared(self, plan: FusedPlan) -> _Launch:
        """_prepare's launch, prepared again where its own prepare regrew a scratch buffer (a shape's first run, a
        larger plan): that moved the generation past the launch at once, so neither the plan's next run nor a new
        constant's plan of its layout could replay it (Q1's sibling left the next constant 0.94 ms of queueing)."""
        launch = self._prepare(plan)
        return launch if launch.generation == generation() else self._prepare(plan)

    def _prepare(self, plan: FusedPlan) -> _Launch:
        """What a run of the plan queues, found from the plan and where its bytes are now: each chunk's host views
        to copy and its kernel's arguments, each index scan's, and the scratch the kernels read in place (the
        frames' classes, long IN lists, the lists' starts, the accumulators' initial words). Kept on the plan
        while the memory's generation is unchanged: no address in it has moved or been freed meanwhile."""
        eng = self.engine
        memory, cuda = eng.memory, eng._cuda
        spec = plan.spec
        made = generation()  # read before any address is: a change from here on is a later generation
        tables = [tp.table for tp in plan.tables]
        for t in tables:
            memory.hold(t)
        needed = _needed_columns(spec)  # by whether a chunk passes whole (found once, not once a chunk and column)
        used = [_used(spec, tp, plan.mode, needed) for tp in plan.tables]  # a table whose frames are all ruled out reads none
        by_top = [tp.sliced.column if tp.sliced is not None and tp.index is None else None for tp in plan.tables]
        read_all([tp.table.columns[c] for tp, cols, top in zip(plan.tables, used, by_top) for c in cols if c != top], "packed")
        sources = {}  # (table index, column, buffer) → host array (mapped where it can be) or device allocation
        placed = {}  # (table index, column, buffer) → its _Placed, where a host array: its device address found once
        for i, tp in enumerate(plan.tables):
            for c in used[i]:
                if c == by_top[i]:  # its top bytes (shipped or read in place) and low bits (read in place)
                    sliced = tp.table.columns[c].get("sliced")
                    if (sliced.reference, sliced.bucket) != (tp.sliced.reference, tp.sliced.bucket):
                        raise GqueryError(f"column {c}'s top bytes disagree with its zone maps (reference "
                                          f"{sliced.reference}, bucket {sliced.bucket}); rebuild the store")
                    for b, array in (("top", sliced.top), ("low", sliced.low)):
                        if array is not None:
                            placed[(i, c, b)] = self._placed(tp.table, (c, "sliced", b), array, plan.mode)
                    continue
                for b in ("meta", "words"):
                    if plan.mode == "resident":
                        sources[(i, c, b)] = self._device(tp.table, c, b)
                    else:
                        placed[(i, c, b)] = self._placed(tp.table, (c, "fused", b),
                                                         tp.table.columns[c].get("packed").buffers()[b], plan.mode)
            if tp.index is not None:  # the lists, read in place in list order
                lists = tp.table.columns[tp.index.column].get("indexed")
                for b, array in (("ids", lists.ids), ("low", lists.low)):
                    if array is not None:
                        placed[(i, tp.index.column, b)] = self._placed(tp.table, (tp.index.column, "indexed", b), array,
                                                                       plan.mode)
        sources.update((k, p.array) for k, p in placed.items())
        # the frames' metadata of every column a kernel reads packed, in place or shipped, from device memory: a chunk
        # copies a column's words alone (one copy a column, not two: Q1's 8 chunks queued 56 copies fewer)
        in_place = {(i, c): (tp.table, c) for i, tp in enumerate(plan.tables) if plan.mode in MAPPED_MODES
                    for c in used[i] if c != by_top[i] and (tp.index is not None or any(
                        c in ch.zero_copy or (c in needed[ch.always] and c not in ch.streamed) for ch in tp.chunks))}
        shipped = {(i, c): (tp.table, c) for i, tp in enumerate(plan.tables) if plan.mode != "resident" and tp.index is None
                   for ch in tp.chunks for c in ch.streamed if c != by_top[i]}
        device_meta = self._device_metas({**in_place, **shipped})

        def valid_on_device(table, c: str) -> int:
            """A column's validity words on the device (every bit set in a part without a NULL in it): copied once
            and kept with the table (rows / 8 bytes)."""
            return int(eng._resident(table, (c, "fused", "valid"), table.columns[c].validity_words(table.rows)))

        for i, tp in enumerate(plan.tables):  # uploaded before the query's clock starts
            for slot in spec.nullable:
                if tp.touched:
                    valid_on_device(tp.table, spec.columns[slot])
        if plan.mode == "resident":
            cuda.Context.synchronize()  # uploads done before the query's clock starts

        # every chunk's copies, sized before anything is queued (a ring slot regrown mid-run would be
        # freed under a kernel still reading it)
        chunks = [(i, ch) for i, tp in enumerate(plan.tables) if tp.index is None for ch in tp.chunks]
        slots = 3 if any(ch.streamed for _, ch in chunks) else 1
        # each streamed column's words of each chunk, found once (the loop that queues the chunks reuses them)
        # (a column read by its top byte: its rows' bytes)
        spans = [{c: (FRAME_ROWS * ch.first, FRAME_ROWS * ch.end) if c == by_top[i] else
                  plan.tables[i].table.columns[c].get("packed").frame_words(ch.first, ch.end) for c in ch.streamed}
                 for i, ch in chunks]
        need: dict = {}
        for (i, ch), span in zip(chunks, spans):
            for c, (w0, w1) in span.items():
                if c == by_top[i]:
                    need[(c, "top")] = max(need.get((c, "top"), 0), w1 - w0)
                    continue
                need[(c, "words")] = max(need.get((c, "words"), 0), 4 * (w1 - w0 + PAD_WORDS) + 64)
        ring = [{k: int(memory.scratch_device(f"fused{s}:{k[0]}.{k[1]}", n, RING_HEADROOM)) for k, n in need.items()}
                for s in range(slots)]
        staged = need if plan.mode == "pageable" and need else {}  # pageable: each chunk staged through pinned buffers
        for s in range(2 if staged else 0):  # sized here, found by name at each run
            for k, n in staged.items():
                memory.scratch_host(f"fusedstage{s}:{k[0]}.{k[1]}", n, np.uint8, pinned=True, headroom=RING_HEADROOM)

        frames = sum(tp.frame_count for tp in plan.tables)
        classes = memory.scratch_mapped("fused:classes", frames, np.int8)
        class_at, at = [], 0
        for tp in plan.tables:
            class_at.append(at)
            at += tp.frame_count
        classes_d = memory.mapped_pointer(classes) if len(classes) else 0
        set_words = max(1, sum(len(k) for k in _sets(plan.tables)))
        set_memory = memory.scratch_mapped("fused:sets", set_words, np.int64)

        def set_positions(plan: FusedPlan) -> dict:
            """Each long IN list's (sorted set's) place in "fused:sets", by the set's id: one after another."""
            found, at = {}, 0
            for k in _sets(plan.tables):
                found[id(k)] = at
                at += len(k)
            return found

        sets_d = memory.mapped_pointer(set_memory)  # (never empty: a word at least)

        def constant_args(tp, set_at: dict) -> list:
            """Each constant: its value, or a set's address and length."""
            return [x for k in tp.constants for x in
                    ((sets_d + set_memory.itemsize * set_at[id(k)] if k else 0, len(k)) if isinstance(k, tuple) else (k,))]

        def table_tails(plan: FusedPlan, set_at: dict) -> dict:
            """Each table's constants and group bases, as every chunk of it ends its arguments with them: made once
            a table (SF 100's ten parts queue 80 chunks)."""
            return {i: constant_args(tp, set_at) + list(tp.group_bases) for i, tp in enumerate(plan.tables)}

        def table_masks(plan: FusedPlan) -> dict:
            """Each top-byte table's undecided mask as kernel arguments (four words from 256 bits): made once a table."""
            return {i: tp.sliced.mask_words for i, tp in enumerate(plan.tables) if tp.sliced is not None}

        set_at = set_positions(plan)

        scans = _scans(plan)
        # each scan's buckets' starts in a place of its own, sized for every bucket: a new constant's scans (others'
        # buckets, as many tables) keep their places, and the launch is made again (again)
        start_words = max(1, STARTS_WORDS * len(scans))
        starts = memory.scratch_mapped("fused:starts", start_words, np.int64)
        start_at = [STARTS_WORDS * n for n in range(len(scans))]

        predicate_columns = {spec.columns[k] for k in spec.predicate_slots}
        groups = plan.hash_slots if spec.hashed else spec.groups  # a table's groups of words (a hashed table's slots)
        words_per_table = COUNTER_WORDS + groups * spec.words
        accumulating = plan.word_tables
        acc_d = int(memory.scratch_device("fused:acc", 8 * words_per_table * accumulating))
        keys_d = int(memory.scratch_device("fused:keys", 8 * spec.key_words * groups * accumulating)) if spec.hashed else None
        host_words = 0 if spec.hashed else words_per_table * accumulating  # read back whole (not hashed; a hashed
        # plan's slot kernels are found where the run launches them)
        imaged = host_words and not codegen.slot_kernels(spec)  # its words copied from an image (else set on the GPU)
        for name in ("fused:acc", "fused:init") if imaged else ("fused:acc",) if host_words else ():  # sized here,
            memory.scratch_host(name, host_words, np.uint64, pinned=True)  # found by name at each run
        hash_args = ((lambda i: [keys_d + 8 * spec.key_words * (i % accumulating) * groups, groups - 1]) if spec.hashed
                     else (lambda i: []))

        def mapped_at(key: tuple, at: int = 0) -> int:
            """memory.mapped_pointer(sources[key][at:]): 0 where nothing is left from `at` (a chunk's address is an
            offset from its source's, found once: _Placed.base)."""
            array = sources[key]
            if at >= len(array):
                return 0
            return placed[key].base(memory) + at * array.itemsize

        def mapped_span(key: tuple, first: int, end: int) -> int:
            """memory.mapped_pointer(sources[key][first:end]): 0 for an empty span. A new constant's index scans
            (mapped_at's, from the bases found once: SF 10's ten parts looked up 50 views a new text, 0.27 ms)."""
            return mapped_at(key, first) if end > first else 0

        starts_d = memory.mapped_pointer(starts)  # (never empty: a word at least)

        factors = {}  # (table index, column) → its common factor (a kernel argument of every chunk)
        valid_at = {}  # (table index, column) → its validity's device address (uploaded above, found once)
        queued, h2d_bytes = [], 0
        holes = []  # each chunk's (table index, where its undecided buckets' mask lies, where its constants lie)
        tails = table_tails(plan, set_at)
        masks = table_masks(plan)
        for n, (i, ch) in enumerate(chunks):
            tp, slot = plan.tables[i], n % slots
            table = tp.table
            parts = {}
            for c, (w0, w1) in spans[n].items():
                if c == by_top[i]:
                    parts[(c, "top")] = sources[(i, c, "top")][w0:w1]
                    continue
                parts[(c, "words")] = sources[(i, c, "words")][w0:w1]
            h2d_bytes += sum(part.nbytes for part in parts.values())
            args, mask_at = [], None
            for at, c in enumerate(spec.columns):
                if c == by_top[i]:  # sliced_value's arguments: top bytes and low bits from the chunk's first row
                    row = FRAME_ROWS * ch.first
                    top = (0 if ch.always else ring[slot][(c, "top")] if c in ch.streamed
                           else mapped_at((i, c, "top"), row))
                    low = 0 if ch.always or (i, c, "low") not in sources else mapped_at((i, c, "low"), row)
                    args += [top, low, tp.sliced.reference, tp.sliced.bucket]
                    mask_at = len(args)
                    args += masks[i]
                    continue
                if c in ch.streamed:
                    args += [ring[slot][(c, "words")], device_meta[(i, c)] + 16 * ch.first, spans[n][c][0]]
                elif c in ch.zero_copy or (plan.mode != "resident" and c in needed[ch.always]):
                    # words read in place; the frames' metadata from device memory where the host's can be read in place
                    meta = (device_meta[(i, c)] + 16 * ch.first if (i, c) in device_meta
                            else mapped_at((i, c, "meta"), 2 * ch.first))
                    args += [mapped_at((i, c, "words")), meta, 0]
                elif plan.mode == "resident":
                    args += [int(sources[(i, c, "words")]), int(sources[(i, c, "meta")]) + 16 * ch.first, 0]
                else:  # a predicate column a chunk that passes whole never reads
                    args += [0, 0, 0]
                if (i, c) not in factors:
                    factors[(i, c)] = table.columns[c].zone_buffers()[2]
                args.append(factors[(i, c)])
                if at in spec.nullable:  # its validity, on the device (a bit a row), from the chunk's first frame
                    if (i, c) not in valid_at:
                        valid_at[(i, c)] = valid_on_device(tp.table, c)
                    args.append(valid_at[(i, c)] + 128 * ch.first)
            holes.append((i, mask_at, len(args)))
            args += tails[i]
            rows = min(ch.end * FRAME_ROWS, table.rows) - ch.first * FRAME_ROWS
            table_words = acc_d + 8 * (i % accumulating) * words_per_table
            values_in_place = sum(1 for c in ch.zero_copy if c not in predicate_columns)  # read a selected row each
            args += [0 if ch.always else classes_d + class_at[i] + ch.first, ch.frames, rows,
                     table_words + 8 * COUNTER_WORDS, values_in_place, table_words, *hash_args(i)]
            queued.append((slot, parts, ring[slot], ch.frames, args))
        def index_launches(plan: FusedPlan, tails: dict) -> tuple[list, int]:
            """Each index scan's launch (its kernel, compute lane, warps and arguments), after the chunks, and the
            bytes of the lists they read."""
            list_bytes, by_index = 0, []
            for n, ((i, ix), at) in enumerate(zip(_scans(plan), start_at)):  # a launch a table
                tp = plan.tables[i]
                args = []
                for c in spec.columns:
                    if c == ix.column:
                        args += [0, 0, 0]  # its value comes from the lists
                    else:  # its words read in place at each row, its frames' metadata from device memory (copied once)
                        args += [mapped_at((i, c, "words")), device_meta[(i, c)], 0]
                    args.append(tp.table.columns[c].zone_buffers()[2])
                ids = sources[(i, ix.column, "ids")][ix.first:ix.end]
                low = sources.get((i, ix.column, "low"))
                table_words = acc_d + 8 * (i % accumulating) * words_per_table
                args += tails[i]
                args += [mapped_span((i, ix.column, "ids"), ix.first, ix.end),
                         mapped_span((i, ix.column, "low"), ix.first, ix.end) if low is not None else 0,
                         starts_d + starts.itemsize * at, ix.bucket_end - ix.bucket_first, ix.first_value, ix.bucket,
                         ix.entries, table_words + 8 * COUNTER_WORDS, 1, table_words, *hash_args(i)]
                list_bytes += ids.nbytes + (ix.entries * low.itemsize if low is not None else 0)
                warps = -(-ix.entries // (32 * codegen.list_unroll(spec)))  # a warp's entries a step
                by_index.append((index_kernel(ix), n % slots, warps, args))  # a compute stream a ring slot (one: the copy stream)
            return by_index, list_bytes

        by_index, list_bytes = index_launches(plan, tails)

        def zero_bytes(plan: FusedPlan, list_bytes: int) -> int:
            return (list_bytes + sum(ch.tested_in_place for tp in plan.tables if tp.index is None for ch in tp.chunks)
                    + sum(int(SECTOR * tp.sliced.low_rows) for tp, top in zip(plan.tables, by_top) if top))  # estimated
            # (a tested frame's predicate words, read whole; the low bits of the undecided buckets' rows)

        def writer(plan: FusedPlan):
            def write() -> None:
                """The scratch found by name (the arrays prepared from: none has been regrown since, or the
                generation would have changed), written as this plan needs it."""
                at, classes = 0, memory.scratch_mapped("fused:classes", frames, np.int8)
                for tp in plan.tables:
                    if tp.index is None:  # (an index scan reads no class: a table's classes made only where read)
                        tp.frames.write_classes(classes[at:at + tp.frame_count])
                    at += tp.frame_count
                set_memory, set_at = memory.scratch_mapped("fused:sets", set_words, np.int64), set_positions(plan)
                for k in _sets(plan.tables):
                    set_memory[set_at[id(k)]:set_at[id(k)] + len(k)] = k
                starts = memory.scratch_mapped("fused:starts", start_words, np.int64)
                for (_, ix), at in zip(_scans(plan), start_at):
                    starts[at:at + len(ix.starts)] = ix.starts
                if imaged:
                    memory.scratch_host("fused:init", host_words, np.uint64, pinned=True)[:] = self._initial(spec, accumulating)
            return write

        logical_bytes = sum(tp.table.logical_bytes(spec.columns) for tp in plan.tables)

        def again(other: FusedPlan) -> _Launch:
            """This launch for a plan of the same layout (layout_key's): each chunk's arguments with the other plan's
            undecided buckets, constants and group bases in their places, its index scans' launches made (their
            buckets' entries), its classes, sets and starts written."""
            other_at, made_again = set_positions(other), []
            other_tails = table_tails(other, other_at)
            other_masks = table_masks(other)
            for (slot, parts, ring_slot, frames_, args), (i, mask_at, const_at) in zip(queued, holes):
                args = list(args)
                if mask_at is not None:
                    args[mask_at:mask_at + len(other_masks[i])] = other_masks[i]
                filled = other_tails[i]
                args[const_at:const_at + len(filled)] = filled
                made_again.append((slot, parts, ring_slot, frames_, args))
            other_scans, other_lists = index_launches(other, other_tails)
            return _Launch(made, slots, words_per_table, groups, acc_d, keys_d, host_words, staged, made_again,
                           other_scans, h2d_bytes, zero_bytes(other, other_lists), sum(ix.entries for _, ix in _scans(other)),
                           logical_bytes, writer(other), again)

        return _Launch(made, slots, words_per_table, groups, acc_d, keys_d, host_words, staged, queued,
                       by_index, h2d_bytes, zero_bytes(plan, list_bytes), sum(ix.entries for _, ix in scans), logical_bytes,
                       writer(plan), again)

    def _gather(self, spec, acc_d, keys_d, words_per_table: int, slots: int, tables: int, best, gather, wave: int, copy,
                tl, top: codegen.TopCut | None) -> tuple:
        """A run's tables of slots read back (a hash table's, or a dense array's with a `top` cut), one after another
        on the copy stream: each table's filled slots gathered on the GPU into one buffer, their count, their rows
        and the table's counters copied back, then only those slots' keys (a dense slot's: its index) and words.
        With a `top` cut (one table), each partition's best ORDER BY key first, and only the slots whose key
        reaches the limit-th best of those gathered (codegen.TopCut says why that is exact).
        (the last event, [(counters, read_hashed's groups, rows selected) a table])."""
        memory = self.engine.memory
        n = spec.key_words if spec.hashed else 1  # a gathered slot's key words (dense: its index)
        out_keys = memory.scratch_device("fused:hash-keys", 8 * n * slots)
        out_words = memory.scratch_device("fused:hash-words", 8 * slots * spec.words)
        small = COUNTER_WORDS + 2  # a table's counters, then how many slots its run filled and their rows
        counts_d = memory.scratch_device("fused:hash-counts", 8 * small)
        counts_h = memory.scratch_host("fused:hash-counts", small, np.uint64, pinned=True)
        out, done = [], None
        for t in range(tables):
            table_keys = 0 if keys_d is None else int(keys_d) + 8 * n * t * slots  # dense: a slot's key is its index
            table_words = int(acc_d) + 8 * (t * words_per_table + COUNTER_WORDS)
            threshold, order = 0, codegen.NO_TOP_ARGS
            if top is not None:
                order, partitions = top.args(), 1 << top.bits
                best_d = memory.scratch_device("fused:hash-best", 8 * partitions)
                best_h = memory.scratch_host("fused:hash-best", partitions, np.uint64, pinned=True)
                memory.zero_async(int(best_d), 8 * partitions, copy)
                best.prepared_async_call((_blocks(slots, wave), 1, 1), (BLOCK_THREADS, 1, 1), copy, table_keys,
                                         table_words, slots, int(best_d), top.bits, *order)
                memory.dtoh_async(best_h, int(best_d), copy)
                copy.synchronize()
                threshold = int(np.partition(best_h, partitions - top.limit)[partitions - top.limit])
            memory.zero_async(int(counts_d) + 8 * COUNTER_WORDS, 16, copy)
            gather.prepared_async_call((_blocks(slots, wave), 1, 1), (BLOCK_THREADS, 1, 1), copy, table_keys, table_words,
                                       slots, int(out_keys), int(out_words), int(counts_d) + 8 * COUNTER_WORDS, slots,
                                       *order, threshold, int(counts_d) + 8 * (COUNTER_WORDS + 1))
            self.engine._cuda.memcpy_dtod_async(int(counts_d), int(acc_d) + 8 * t * words_per_table, 8 * COUNTER_WORDS, copy)
            memory.dtoh_async(counts_h, int(counts_d), copy)
            copy.synchronize()
            counters, filled, rows = counts_h[:COUNTER_WORDS].copy(), int(counts_h[COUNTER_WORDS]), int(counts_h[-1])
            # sized to a power of two: a new LIMIT's few more groups regrew (freed) both a call, and each freed buffer
            # made the next call's launch prepared again (top-parts' new texts queued 0.4 ms)
            keys_h = memory.scratch_host("fused:hash-keys", _power_of_two(n * filled), np.int64, pinned=True)
            words_h = memory.scratch_host("fused:hash-words", _power_of_two(filled * spec.words), np.uint64, pinned=True)
            if filled:  # the filled slots alone
                memory.dtoh_async(keys_h[:n * filled], int(out_keys), copy)
                memory.dtoh_async(words_h[:filled * spec.words], int(out_words), copy)
            done = tl.event(copy)
            done.synchronize()
            keys = keys_h[:n * filled].reshape(filled, n) if n > 1 else keys_h[:filled]  # a wide key's three words a row
            out.append((counters, codegen.read_hashed(spec, keys.copy(), words_h[:filled * spec.words]), rows))
        return done, out


class _Unread:
    """A run's stage intervals, read from its CUDA events once: by the runner's next run while its GPU works (the
    events then go back to the pool), or first by whoever asks the profile for them (this layer's context pushed
    on that thread). Reading 35 events took 0.04 ms of an 8-chunk call's wall clock on the H100 host."""

    def __init__(self, tl: Timeline, memory):
        self._tl, self._memory, self._lock, self._intervals = tl, memory, threading.Lock(), None

    def __call__(self) -> list:
        with self._lock:
            if self._intervals is None:
                self._intervals = self._memory.in_context(self._tl.intervals)
                self._tl = None  # its events are the pool's once read
            return self._intervals


def empty_run(plan: FusedPlan) -> FusedRun:
    """A plan with nothing to read (FusedPlan.empty) answered without the GPU: every table's groups none,
    as a run's read-out of untouched accumulators gives them."""
    none = np.zeros(0, dtype=np.int64)
    runs = [TableRun(tp, none, none, [none for _ in plan.spec.accumulators], 0, 0)
            for tp in plan.tables[:plan.word_tables]]
    logical = sum(tp.table.logical_bytes(plan.spec.columns) for tp in plan.tables)
    profile = Profile(plan.mode, plan.rows, logical, 0, 0.0, [], 0.0, None, encoding="fused", physical_bytes=0,
                      counters={"selected_rows": 0, "chunks": 0, "queued_ms": 0.0, "index_scans": 0, "list_entries": 0,
                                "values_read_in_place": 0},
                      host_path="none: the zone maps rule out every frame")
    return FusedRun(runs, profile, plan)


def layout_key(plan: FusedPlan) -> tuple | None:
    """What a plan's launch depends on besides its constants, its top byte's undecided buckets, its group bases, its
    frames' classes, its sets' values and its index scans' buckets (FusedRunner._prepare): plans of one key are
    launched alike but for those. A table scanned by index: its lists' column, their low bits, whether it reads any."""
    return (plan.spec, plan.mode, plan.hash_slots, plan.word_tables, plan.sliced_kernel,
            tuple((id(tp.table), tp.frame_count, tuple(len(k) for k in _sets([tp])),
                   None if tp.sliced is None else (tp.sliced.column, tp.sliced.reference, tp.sliced.bucket),
                   tuple((ch.first, ch.end, ch.always, ch.streamed, ch.zero_copy) for ch in tp.chunks) if tp.index is None
                   else ("index", tp.index.column, tp.index.low_bytes, tp.index.entries > 0))
                  for tp in plan.tables))


STARTS_WORDS = (1 << TOP_BITS) + 1  # an index scan's buckets' starts, and their end: at most every bucket's


def _scans(plan: FusedPlan) -> list[tuple]:
    """(table index, IndexScan) of each table scanned by index that reads any entry."""
    return [(i, tp.index) for i, tp in enumerate(plan.tables) if tp.index is not None and tp.index.entries]


def _sets(tables: list[TablePlan]) -> list[tuple]:
    """The long IN lists (sorted sets) among the tables' constants, in order."""
    return [k for tp in tables for k in tp.constants if isinstance(k, tuple)]


def _power_of_two(n: int) -> int:
    """The least power of two at least n (and 1)."""
    return 1 << max(0, n - 1).bit_length()


def _blocks(frames: int, wave: int) -> int:
    """A warp a frame, at most one wave."""
    return max(1, min(-(-frames // (BLOCK_THREADS // 32)), wave))


def _used(spec, tp, mode: str, needed: dict) -> list[str]:
    """The columns a table's chunks read, in the kernel's order: resident, every column of a table with
    a chunk; else those its chunks ship, read in place, or need (`needed`: _needed_columns'). Scanned by
    index: every column but the indexed one (its values are in the lists), read in place."""
    if tp.index is not None:
        return [c for c in spec.columns if c != tp.index.column] if tp.index.entries else []
    if mode == "resident":
        return list(spec.columns) if tp.chunks else []
    wanted = set()
    for ch in tp.chunks:
        wanted.update(ch.streamed, ch.zero_copy)
    for always in {ch.always for ch in tp.chunks}:
        wanted |= needed[always]
    return [c for c in spec.columns if c in wanted]


def _needed_columns(spec) -> dict[bool, frozenset]:
    """Columns a chunk's kernel reads, by whether the chunk passes whole (Chunk.always): the value columns
    always, the predicate's unless it passes whole."""
    values = frozenset(spec.columns[i] for i in spec.value_slots)
    return {True: values, False: values | {spec.columns[i] for i in spec.predicate_slots}}


def _host_path(plan: FusedPlan) -> str:
    if plan.mode == "resident":
        return "resident on the GPU"
    if plan.mode == "pageable":
        return "staged through pinned buffers"
    pinned = all(tp.table.pinned for tp in plan.tables)
    return "the store's memory, page-locked in place" if pinned else \
        {"pinned": "pinned copy (mapped)", "registered": "registered in place (no copy)"}[plan.mode]
