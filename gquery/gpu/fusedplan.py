"""The plan of a query on the fused kernel: plain data, printable before it runs.

For each table (a part of a parted store is a table) it says which frames the zone maps rule out,
which pass whole and which are tested, cut into chunks of contiguous frames; for each chunk, where
each column's bytes come from:

    stream     copied to the GPU in bulk (the chunk's frames), on the copy stream, ahead of its kernel
    zero_copy  read in place from mapped host memory by the kernel, only for the rows that passed
    resident   already in device memory (mode resident)

Predicate columns ship first (only for chunks with frames to test), or are read in place for the
tested frames alone where those are few; a value column (an aggregate's or a group's) is read in
place when the rows a chunk selects would cost fewer bytes of the link that way than its frames
copied whole, else shipped in bulk with the chunk.

A predicate column that also keeps its top byte a row (the `sliced` encoding: buckets as below) may be
read by it in the frame loop: a byte a row crosses the link instead of its packed bits, and only the
rows of the buckets the predicate leaves undecided read their low bits, in place (`sliced_value`).

A table whose predicate column carries bucket lists (the `indexed` encoding: its rows listed bucket
after bucket, 256 buckets of equal ranges of its values) may instead be scanned by index: only the
entries of the buckets the predicate's range on that column can touch are read, in list order, and
every other column is read in place at each entry's row. The planner weighs the two by the bytes
each reads over the link (a byte still on disk weighed COLD_READ_WEIGHT where reading it is part of
the answer's time) and keeps the cheapest: the column packed or by its top byte for every table's frames
(one kernel), then frames or index per table. Every choice has its reason in `reasons`, and
--explain prints them with the generated kernel.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
from dataclasses import dataclass, field

import numpy as np

from gquery.encodings import FRAME_ROWS, TOP_BITS, packed_bytes, slice_geometry
from gquery.errors import UsageError
from gquery.gpu.codegen import (GLOBAL_ACC_BYTES, HASH_KEY_LIMIT, KernelSpec, NotOnGpu, SlicedKernel, TopCut, hash_slots,
                                kernel_spec, top_cut)
from gquery.plan import MAPPED_MODES, MODES, ZERO_COPY_READ_BYTES
from gquery.prune import (ALWAYS, BLOCKED_FRAMES, CHECK, NEVER, ClassesGiven, Estimate, EveryRow, SparseEstimate,
                          StretchEstimate, SummaryEstimate, classify_counted, compare_classes_together, compare_summary,
                          decided_buckets, every_frame, every_frame_classed, frame_zones, joined_once, kept,
                          last_fractions, lower, narrowed, per_piece_together, sampled_fraction, string_sides, summarized)
from gquery.query import And, Expr, Query

# Two touched runs become one chunk when the ruled-out frames between them cost the link less than a
# chunk's own fixed cost (its copies, events and launch: ~60 us, about 3 MB of the link): they are shipped
# and skipped by their class. Measured on H100 at SF 100, Z = 30: 17,000 touched frames scattered over
# 586,000 made thousands of chunks, and the query took 1.7 s where one chunk a part takes milliseconds.
GAP_BYTES = 3 << 20
# A stretch of frames that all pass is a chunk of its own (its predicate columns not shipped) only when the bytes
# it saves pay for a chunk's fixed cost (GAP_BYTES), and is at least this long. Measured on H100 at SF 10,
# l_suppkey < 100000 as generated: 603 tested frames among 57,978 that pass whole made 589 chunks when any
# stretch of 64 was split off (20 ms of kernels, 18 ms of copies at 14 GB/s); one chunk a few MB long takes 4.5 ms.
SPLIT_FRAMES = 64
MIN_CHUNK_FRAMES, MAX_CHUNK_FRAMES = 1024, 8192  # 1 to 8 M rows a chunk
# Chunks a query is cut into, over all its tables: enough for copies to hide kernels. Counted per query, not
# per table: the parts of a parted store pipeline one another, and each chunk costs the host its copies and
# launch to queue. Measured on H100 at SF 100, Q6 clustered by l_shipdate: 8 chunks a part (80 of 5 MB)
# took 18 ms where the link needs 7.
CHUNKS_PER_QUERY = 8
META_BYTES = 16  # a frame's metadata a column: reference, word offset and width
# A predicate column of a chunk whose tested frames are few is read in place, those frames' words only, where
# shipping it would copy every frame's: coalesced reads of mapped memory run at ~48 GB/s against 55 copied,
# and a frame's metadata costs a sector and its request. Measured on H100 at SF 10, l_suppkey < 100000 as
# generated: 603 tested frames among 57,978 that pass whole shipped the key whole (128 MB of 355).
IN_PLACE_FRAME_WEIGHT, IN_PLACE_META_BYTES = 1.2, 64
# A byte still on disk costs about ten over PCIe: read from the page cache, checksummed and page-locked at
# about 5 GB/s against 55 GB/s copied (H100 host, scripts/first_answer_profile.py). Weighed only for runs
# without warm-up, where reading it is part of the answer's time.
COLD_READ_WEIGHT = 10
# A column's value at a listed row is one read in place, its word (its frames' metadata, 16 B a frame, are
# copied to device memory once a table), costing about 1.25 x ZERO_COPY_READ_BYTES of the link. Measured on
# H200 at SF 10 as generated: l_suppkey < 1,000, 1.2 M values read in 1.68 ms (77 B a read at 55 GB/s);
# l_suppkey < 3,000, 3.6 M in 5.7 ms (87 B), where the frames by the key's top byte took 4.3 ms.
IN_PLACE_READS = 1.25
INDEX_MODES = MAPPED_MODES  # where a kernel can read a listed row's columns in place
SCANS = ("auto", "frames", "sliced", "index")
SECTOR = 32  # the smallest read a GPU load makes of host memory (a row's low bits read in place)


@dataclass(frozen=True)
class IndexOption:
    """A table's index scan as the planner weighs it, before the lists are read: the column, the bucket
    range its predicate range can touch, and the bytes estimated from its zone maps."""

    column: str
    values: tuple[int, int]  # the column's values a selected row can have (prune.narrowed)
    entries: float  # estimated entries of the buckets those values fall in
    link_bytes: float  # list entries read in order, and the columns read in place at their rows
    slot: int = 0  # the column's kernel slot
    low_bytes: int = 0  # bytes of a listed value's low bits, as the lists are built (slice_geometry)


@dataclass(frozen=True)
class IndexScan:
    """The index scan a table runs: entries [first, end) of `column`'s lists, buckets [bucket_first,
    bucket_end); a listed value is first_value + bucket x (its bucket - bucket_first) + its low bits."""

    column: str
    slot: int
    bucket_first: int
    bucket_end: int
    first: int
    end: int
    first_value: int
    bucket: int
    low_bytes: int
    starts: np.ndarray = field(repr=False, compare=False)  # each bucket's first entry, from `first`, and the end

    @property
    def entries(self) -> int:
        return self.end - self.first


@dataclass(frozen=True)
class SlicedScan:
    """A table's predicate column read by its top byte a row in the frame loop: value = reference + bucket x
    top + low, where `undecided` (a bit a bucket) marks the buckets whose rows the predicate needs exactly
    (their low bits read in place); every other bucket's first value decides its rows (prune.decided_buckets)."""

    column: str
    slot: int
    reference: int
    bucket: int
    low_bytes: int
    undecided: int  # 256 bits
    low_rows: float  # rows estimated to read their low bits

    @property
    def kernel(self) -> SlicedKernel:
        return SlicedKernel(self.slot, self.low_bytes)

    @property
    def mask_words(self) -> tuple[int, ...]:
        """The undecided mask as four signed 64-bit kernel arguments, bucket t at bit t % 64 of word t // 64."""
        words = [(self.undecided >> (64 * k)) & (2**64 - 1) for k in range(4)]
        return tuple(w - 2**64 if w >= 2**63 else w for w in words)


@dataclass(frozen=True)
class Chunk:
    first: int  # first frame
    end: int  # one past the last
    always: bool  # every frame passes whole: no predicate columns, no test
    streamed: tuple[str, ...]  # columns copied in bulk for this chunk
    zero_copy: tuple[str, ...]  # columns read in place: values for the rows this chunk selects, predicates for its tested frames
    selected: float  # rows it is estimated to select
    tested_in_place: int = 0  # bytes of predicate columns read in place: their tested frames' words and metadata

    @property
    def frames(self) -> int:
        return self.end - self.first


class _Lazy:
    """make(), made when first asked for, once (two threads asking at once make it once; a lock each, as one
    made may ask for another)."""

    def __init__(self, make):
        self._make, self._made, self._lock = make, None, threading.Lock()

    @property
    def made(self) -> bool:
        return self._made is not None

    def __call__(self):
        if self._made is None:
            with self._lock:
                if self._made is None:
                    self._made, self._make = self._make(), None
        return self._made


@dataclass
class TablePlan:
    """One table's share of the plan: its constants, its frames' classes, its chunks. The chunks of a plan's tables
    are cut together when first asked for (`cut`, _chunks'): a plan whose every table is scanned by index never
    cuts them (_Costs.beats_frames weighs its lists against `frames_floor`)."""

    table: object = field(repr=False)
    constants: tuple[int, ...]
    group_bases: tuple[int, ...]
    frames: "_Frames" = field(repr=False)  # its frames' classes (made when first asked for) and their counts
    # every table's (every table's chunks when first asked for, stream bytes, bytes read in place): a plan weighed
    # against another by its bytes makes no chunk (FusedPlan.choose)
    cut: _Lazy = field(repr=False, compare=False)
    at: int  # this table's place among them
    frames_floor: int  # the least stream_bytes + zero_copy_bytes can be: its tested frames' predicate bytes
    selected: float  # rows estimated to pass
    index_option: IndexOption | None = None  # the index scan the planner may choose instead of the chunks
    index: IndexScan | None = None  # chosen (FusedPlan.choose): the table is scanned by its lists, not its chunks
    sliced: SlicedScan | None = None  # its frames read this predicate column by its top byte

    @property
    def classes(self) -> np.ndarray:
        """int8 a frame: NEVER, CHECK, ALWAYS."""
        return self.frames.classes

    @property
    def frame_count(self) -> int:
        return self.frames.n

    @property
    def touched(self) -> int:
        """Frames not ruled out (a table without any has no chunk)."""
        return self.frames.n - self.frames.ruled_out

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        return self.cut()[self.at][0]()[self.at]

    @property
    def stream_bytes(self) -> int:
        """Bulk copies, over every chunk."""
        return self.cut()[self.at][1]

    @property
    def zero_copy_bytes(self) -> int:
        """Estimated reads in place."""
        return self.cut()[self.at][2]

    @property
    def rows(self) -> int:
        return self.table.rows

    @property
    def link_bytes(self) -> float:
        """What the chosen scan reads over the link, estimated."""
        return self.index_option.link_bytes if self.index is not None else self.stream_bytes + self.zero_copy_bytes

    @property
    def scan(self) -> str:
        """How the table is read: by its lists (index), its frames with a column by its top byte (sliced), or
        its frames (frames)."""
        return "index" if self.index is not None else "sliced" if self.sliced is not None else "frames"

    def counts(self) -> dict[str, int]:
        f = self.frames
        return {"never": f.ruled_out, "check": f.tested, "always": f.n - f.ruled_out - f.tested}


def _replaced(tp: TablePlan, **changes) -> TablePlan:
    """dataclasses.replace of a TablePlan, its fields copied rather than passed to __init__ again (a plan of ten parts
    replaced twenty: 0.3 ms)."""
    new = object.__new__(TablePlan)
    new.__dict__.update(tp.__dict__, **changes)
    return new


@dataclass
class FusedPlan:
    query: Query
    mode: str
    spec: KernelSpec
    tables: list[TablePlan]
    reasons: list[str]
    block_threads: int = 128
    encoding: str = "fused"
    scan_note: str = ""  # why the tables are scanned as they are (FusedPlan.choose): a line a choice
    shared_groups: bool = False  # every table's groups counted from one base: they add into one table of words
    # each table's plan with a predicate column read by its top byte (SlicedScan), made when first weighed, or None
    top_plans: "_TopPlans | None" = field(default=None, repr=False, compare=False)
    hash_slots: int = 0  # a hashed spec's slots a table of words (codegen.hash_slots); 0 where the groups are dense
    top: TopCut | None = None  # the hashed groups cut to those LIMIT can keep before the read-back (codegen.TopCut)
    # scan → choose()'s plan where it reads nothing from disk (a plan of its own: dataclasses.replace makes a new one)
    _warm: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    # (scan, the frames as planned, each table by index) → choose()'s last plan so over some runs (its tables reused)
    _cold: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    # memory layer's tag → its runs' queued launch (gpu.fused._Launch), replayed while the memory is unchanged
    _launches: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    # scan → _decide's warm choice (bytes alone, nothing on disk weighed): asked up to three times a new plan
    _decided: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    kept_from: str | None = None  # a kept choice's (_kept_choice): the earlier text whose chunks, scans and estimates it keeps
    # a kept choice's full plan (plan_fused's, made when asked for): any other scan, or a read from disk, is its choice
    _full: "_Lazy | None" = field(default=None, repr=False, compare=False)
    # a plan whose every frame is tested, or passes whole: keeps its warm choice for new constants of its shape
    # (_keep_choice), or None
    _keep: object = field(default=None, init=False, repr=False, compare=False)

    def choose(self, runs: int | None = None, scan: str = "auto") -> "FusedPlan":
        """The scans that read fewest bytes over the link: first the frame loop's predicate column packed or by
        its top byte (one kernel for every table), then each table with an index option by index or by
        frames. Warm (`runs` None), or over `runs` runs without warm-up, a byte still on disk (the lists, the
        top bytes, the columns' words) weighed COLD_READ_WEIGHT, as a renter buys once the rent paid would have
        bought it. (Weighing one cold run alone chose the frames for ever: their bytes were read by then, the
        lists never.) `scan`: auto, or "frames" (packed) / "sliced" / "index" wherever a table can be scanned so
        (tests and benchmarks)."""
        if scan not in SCANS:
            raise UsageError(f"scan must be one of {', '.join(SCANS)}, got {scan!r}")
        if self._full is not None and (scan != "auto" or self._reads_disk(self, [False] * len(self.tables))):
            return self._full().choose(runs, scan)  # (a kept choice is the warm choice of scan auto alone)
        cached = self._warm.get(scan)
        if cached is not None and (runs is None or not self._reads_disk(cached, [tp.index is not None for tp in cached.tables])):
            return cached  # a repeated text on a kept table: chosen once
        # where the warm choice reads nothing from disk, every run count chooses it (its costs are its warm bytes
        # times the runs, every other scan's at least theirs): chosen warm, and kept
        if runs is not None and not self._reads_disk(*self._decide(None, scan)):
            runs = None
        costs = _Costs(self.spec, runs)  # (each table's bytes weighed once this call, whichever step asks)
        plan, by_index = self._decide(runs, scan, costs)
        key = (scan, plan is self, tuple(by_index))
        same = self._cold.get(key)  # the same scans chosen by an earlier call: its tables, and the runs it queued
        chosen = plan._with_index_scans(by_index, costs, scan, None if same is None else same.tables)
        if same is not None:
            chosen._launches = same._launches  # the same tables read the same way: a run replays what they queued
        for tp in chosen.tables:  # top bytes still on disk read here, on the asking thread (not the GPU's)
            if tp.sliced is not None and tp.index is None:
                tp.table.columns[tp.sliced.column].get("sliced")
        if runs is None:
            self._warm[scan] = chosen
            if self._keep is not None and scan == "auto":
                self._keep(chosen)
        else:
            self._cold[key] = chosen
        return chosen

    def _reads_disk(self, plan: "FusedPlan", by_index: list[bool]) -> bool:
        """Whether a choice (a plan's tables, each by index or by frames) still reads something from disk."""
        return any(c.cold_bytes(e) for c, e in self._encodings_read(plan, by_index))

    def _encodings_read(self, plan: "FusedPlan", by_index: list[bool]) -> list[tuple]:
        """(column, encoding) a choice reads, its tables' (_table_reads) together."""
        return [r for tp, ix in zip(plan.tables, by_index) for r in _table_reads(self.spec, tp, ix)]

    def reads(self) -> list[tuple]:
        """(column, encoding) this chosen plan's run reads."""
        return self._encodings_read(self, [tp.index is not None for tp in self.tables])

    def _decide(self, runs: int | None, scan: str, costs: "_Costs | None" = None) -> tuple["FusedPlan", tuple[bool, ...]]:
        """The frames packed or by top byte, then for each table whether by index: weighed, nothing read. The
        warm choice (`runs` None) weighs the plan's bytes alone: found once. `costs`: the asking call's, of these runs."""
        if runs is None:
            found = self._decided.get(scan)
            if found is None:
                found = self._decided[scan] = self._weighed(_Costs(self.spec, None), scan)
            return found
        return self._weighed(costs or _Costs(self.spec, runs), scan)

    def _weighed(self, costs: "_Costs", scan: str) -> tuple["FusedPlan", tuple[bool, ...]]:
        plan = self._choose_top(costs, scan)
        by_index = []
        for tp in plan.tables:
            if tp.index_option is None or scan in ("frames", "sliced"):
                by_index.append(False)
            else:
                by_index.append(scan == "index" or (scan == "auto" and costs.beats_frames(tp)))
        return plan, tuple(by_index)

    def _with_index_scans(self, by_index: list[bool], costs: "_Costs", scan: str,
                          tables: list | None = None) -> "FusedPlan":
        """This plan with the tables chosen to be scanned by index given their index scans (the lists read), and
        the reason. `tables`: those an earlier call made of the same choice, reused."""
        options = [tp for tp in self.tables if tp.index_option is not None]
        if not options or scan in ("frames", "sliced"):
            return self
        runs = costs.runs
        cut = all(tp.cut.made for tp in options)  # (else the frames' floor: where the lists beat it, never cut)
        index_bytes = sum(costs.index(tp) for tp in options)
        frames_bytes = sum(costs.frames(tp, floor=not cut) for tp in options)
        if tables is None:
            tables = [_replaced(tp, index=_index_scan(tp, self.spec) if ix else None)
                      if tp.index_option is not None else tp for tp, ix in zip(self.tables, by_index)]
        chosen = sum(1 for tp in tables if tp.index is not None)
        column = options[0].index_option.column
        per = (f" for {runs} run{'s' * (runs > 1)}, a byte still on disk weighed as {COLD_READ_WEIGHT} read over the link"
               if runs is not None else "")
        note = (f"{chosen} of {len(options)} table(s) scanned by the index on {column}: about "
                f"{index_bytes / 1e6:,.1f} MB to read by index against {'' if cut else 'at least '}{frames_bytes / 1e6:,.1f} MB "
                f"by frames{per}{self._top_floor_note()}")
        return dataclasses.replace(self, tables=tables, scan_note="\n".join(filter(None, (self.scan_note, note))))

    def _choose_top(self, costs: "_Costs", scan: str) -> "FusedPlan":
        """The frame loop's tables with the predicate column packed (as planned) or read by its top byte."""
        if self.top_plans is None or scan in ("frames", "index"):
            return self
        if scan == "auto" and self._indexed_anyway(costs):
            return self  # (the frames never cut, packed or by top byte: a new constant's plan reads the lists alone)
        runs = costs.runs
        top = sum(costs.frames(tp) for tp in self.by_top)
        # the packed frames cut only where their floor, over the runs, does not already lose to the top bytes (SF 100's
        # ten parts a few suppliers past Z = 1 as generated: 1.5 MB by top byte, at least 3.3 MB packed; a cut took about
        # 1 ms of a new constant's plan)
        packed_floor = (runs or 1) * sum(tp.frames_floor for tp in self.tables)
        if runs is not None and not top < packed_floor:  # what is still on disk weighed too
            packed_floor = sum(costs.frames(tp, floor=True) for tp in self.tables)
        cut = scan != "auto" or not top < packed_floor or self.tables[0].cut.made
        packed = sum(costs.frames(tp) for tp in self.tables) if cut else packed_floor
        if scan == "auto" and packed <= top:
            return self
        sliced = self.by_top[0].sliced
        per = f" for {runs} run{'s' * (runs > 1)}, a byte on disk weighed {COLD_READ_WEIGHT}" if runs is not None else ""
        note = (f"the frames read {sliced.column} by its top byte (a byte a row; low bits in place for about "
                f"{sum(tp.sliced.low_rows for tp in self.by_top):,.0f} rows of the buckets the predicate leaves undecided): "
                f"about {top / 1e6:,.1f} MB against {'' if cut else 'at least '}{packed / 1e6:,.1f} MB packed{per}")
        return dataclasses.replace(self, tables=self.by_top, top_plans=None, scan_note=note)

    def _top_floor_note(self) -> str:
        """Where the frames' top-byte plan was never cut (_indexed_anyway), the least its bytes could be."""
        if self.top_plans is None or self.top_plans.made:
            return ""
        return f" packed (by their top bytes at least {sum(self.top_plans.floors) / 1e6:,.1f} MB)"

    def _indexed_anyway(self, costs: "_Costs") -> bool:
        """Whether every table's index scan reads fewer bytes than its frames would, packed and by top byte alike
        (found from their floors where it reads fewer than those: TablePlan.frames_floor), or the table has no
        frame to read either way (a part the zone maps rule out): weighed over choose's runs. The choice then scans
        every table by index where it reads any, whichever way the frames are read."""
        return all(not tp.touched or (tp.index_option is not None and costs.index(tp) < costs.frames(top, floor=True)
                                      and costs.beats_frames(tp))
                   for tp, top in zip(self.tables, self.by_top))

    @property
    def by_top(self) -> list | None:
        """Each table's plan with the frame loop's predicate column read by its top byte (SlicedScan), or None."""
        return None if self.top_plans is None else self.top_plans.tables()

    def worth_reading(self) -> list[tuple]:
        """(column, encoding) a warm run would scan by where this plan does not, found from the estimates
        alone (nothing read): a column's top bytes (`sliced`) or its lists (`indexed`). A table kept open
        reads them in the background (answer.gpu_plan), so later calls scan by them without any call
        waiting for the disk."""
        warm, by_index = self._decide(None, "auto")
        return [(tp.table.columns[tp.index_option.column], "indexed") for tp, ix in zip(warm.tables, by_index)
                if ix and tp.index is None] + \
            [(tp.table.columns[tp.sliced.column], "sliced") for tp, ix in zip(warm.tables, by_index)
             if warm is not self and not ix]  # the frames a warm run scans by their top bytes, where this plan does not

    @property
    def sliced_kernel(self) -> SlicedKernel | None:
        """The frame loop's sliced column, where its tables read one by its top byte."""
        found = next((tp.sliced for tp in self.tables if tp.sliced is not None and tp.index is None), None)
        return None if found is None else found.kernel

    @property
    def why(self) -> list[str]:
        return [*self.reasons, *(self.scan_note.split("\n") if self.scan_note else [])]

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)

    @property
    def word_tables(self) -> int:
        """Tables of accumulator words a run fills: one shared by every table, or one a table."""
        return 1 if self.shared_groups else len(self.tables)

    @property
    def empty(self) -> bool:
        """The zone maps rule out every frame of every table (and no index scan has an entry): nothing to
        read, the answer is the aggregates of no row (gpu.fused.empty_run), as DuckDB answers from its own."""
        return all(not tp.touched and (tp.index is None or not tp.index.entries) for tp in self.tables)

    @property
    def z(self):  # a fused plan answers SQL; the mission's Z is in its constants
        return None

    def steps(self) -> list[tuple[str, str]]:
        by_frames = [t for t in self.tables if t.index is None]
        total = {k: sum(t.counts()[k] for t in by_frames) for k in ("never", "check", "always")}
        frames = sum(total.values())
        chunks = [c for t in by_frames for c in t.chunks]
        streamed = sorted({c for ch in chunks for c in ch.streamed})
        zero = sorted({c for ch in chunks for c in ch.zero_copy})
        out = []
        indexed = [t for t in self.tables if t.index is not None]
        if indexed:
            ix = indexed[0].index
            rest = ", ".join(c for c in self.spec.columns if c != ix.column) or "none"
            out.append(("index-scan", f"{len(indexed)} table(s) by the bucket lists of {ix.column}: "
                                      f"{sum(t.index.entries for t in indexed):,} entries of the buckets its range can touch, "
                                      f"read in order; at each listed row, read in place: {rest}"))
        if not by_frames:
            return out + [("combine", self._combine())]
        out += [("prune", f"{frames:,} frames of {FRAME_ROWS}: {total['never']:,} ruled out by the zone maps (not shipped), "
                          f"{total['always']:,} pass whole (no predicate), {total['check']:,} tested row by row")]
        if self.mode == "resident":
            out.append(("resident", f"on the GPU before the query: {', '.join(self.spec.columns)}"))
        elif streamed:
            out.append(("transfer", f"{len(chunks)} chunk(s) of contiguous frames copied on one stream: "
                                    f"{', '.join(streamed)} ({sum(t.stream_bytes for t in by_frames) / 1e6:,.1f} MB)"))
        pred = ", ".join(self.spec.columns[i] for i in self.spec.predicate_slots) or "none"
        sliced = [t.sliced for t in by_frames if t.sliced is not None]
        if sliced:
            undecided = max(bin(x.undecided).count("1") for x in sliced)
            pred += (f" ({sliced[0].column} by its top byte, a byte a row: {undecided} of 256 buckets leave the predicate "
                     f"undecided, their rows' low bits read in place)")
        values = ", ".join(self.spec.columns[i] for i in self.spec.value_slots) or "none"
        out.append(("decode-and-scan", f"fused kernel, a warp a frame: predicate on {pred}; then, only for frames with a "
                                       f"selected row, {values} of the selected rows"))
        if zero:
            out.append(("gather", f"read in place from mapped host memory for selected rows: {', '.join(zero)} "
                                  f"(about {sum(t.zero_copy_bytes for t in by_frames) / 1e6:,.1f} MB)"))
        out.append(("combine", self._combine()))
        return out

    def _combine(self) -> str:
        if self.spec.groups == 1:
            agg = "registers"
        elif self.spec.hashed:
            found = (f"by its key of three words, NULL flags and a 64-bit digit a column (its index, of "
                     f"{self.spec.groups:,}, passes 62 bits)" if self.spec.wide_keys else f"by its index (of {self.spec.groups:,})")
            agg = (f"a hash table of {self.hash_slots:,} slots x {self.spec.words} words in device memory, a group's slot "
                   f"found {found}")
        else:
            agg = (f"{self.spec.groups:,} group(s) x {self.spec.words} words in "
                   f"{'shared' if self.spec.in_shared else 'device'} memory")
        back = (f"the groups that can be among the first {self.top.limit:,} by {self.top.key} copied back" if self.top
                else "one copy back")
        return f"exact 128-bit sums, counts, min and max in {agg}; atomically added per table; {back}"

    def describe(self) -> str:
        lines = [f"plan: {self.mode}, fused kernel, {len(self.tables)} table(s), {self.rows:,} rows",
                 f"  query       {self.query.describe()}",
                 f"  selects     about {sum(t.selected for t in self.tables):,.0f} rows (estimated from the zone maps"
                 f"{', for the earlier text whose choices it keeps' if self.kept_from else ''})"]
        lines += [f"  {i + 1}. {name:<16} {text}" for i, (name, text) in enumerate(self.steps())]
        lines += [f"  why: {r}" for r in self.why]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        by_frames = [t for t in self.tables if t.index is None]  # (a table scanned by index runs no chunk)
        return {"kernel": "fused", "mode": self.mode, "rows": self.rows, "columns": list(self.spec.columns),
                "predicate": self.spec.predicate, "groups": self.spec.groups, "hash_slots": self.hash_slots,
                "top_cut": None if self.top is None else {"key": self.top.key, "limit": self.top.limit,
                                                          "partitions": 1 << self.top.bits},
                "accumulators": [a.kind for a in self.spec.accumulators],
                "frames": {k: sum(t.counts()[k] for t in self.tables) for k in ("never", "check", "always")},
                "chunks": sum(len(t.chunks) for t in by_frames), "selected_estimate": sum(t.selected for t in self.tables),
                "stream_bytes": sum(t.stream_bytes for t in by_frames),
                "zero_copy_bytes_estimate": sum(t.zero_copy_bytes for t in by_frames),
                "index_scans": [{"column": t.index.column, "entries": t.index.entries} for t in self.tables if t.index],
                "by_top_byte": sorted({t.sliced.column for t in self.tables if t.sliced is not None and t.index is None}),
                "steps": [list(s) for s in self.steps()], "reasons": self.why, "kept_from": self.kept_from}


def _table_reads(spec: KernelSpec, tp: TablePlan, by_index: bool) -> list[tuple]:
    """(column, encoding) a table reads: by index its lists and the other columns' packed words, by frames
    each column's packed words, or a sliced column's top bytes."""
    columns = tp.table.columns
    if by_index:
        opt = tp.index_option
        return [(columns[opt.column], "indexed")] + [(columns[c], "packed") for c in _index_columns(spec, opt)]
    return [(columns[c], "sliced" if tp.sliced is not None and c == tp.sliced.column else "packed")
            for c in _frame_columns(spec, tp)]


class _Costs:
    """The bytes each table's scans read over the link, weighed for one choice (FusedPlan.choose): a warm run's
    (`runs` None), or over `runs` runs with a byte still on disk weighed COLD_READ_WEIGHT. A choice weighs each of
    ten parts' scans several times (packed against top bytes, then each table by index): what is still on disk is
    found once a table, not at every weighing (it changes only between calls, as the background reads land)."""

    def __init__(self, spec: KernelSpec, runs: int | None):
        self.spec, self.runs = spec, runs
        self._on_disk: dict = {}  # (id(tp), by index) → (tp, its reads' bytes still on disk): tp kept, so its id is its own

    def _cold_bytes(self, tp: TablePlan, by_index: bool) -> int:
        found = self._on_disk.get((id(tp), by_index))
        if found is None:
            found = self._on_disk[id(tp), by_index] = (tp, sum(c.cold_bytes(e) for c, e in _table_reads(self.spec, tp, by_index)))
        return found[1]

    def frames(self, tp: TablePlan, floor: bool = False) -> float:
        """Bytes a table's frames read (the top bytes and low bits of a sliced column, the others' words). `floor`: the
        least they can be, found without cutting the frames (TablePlan.frames_floor)."""
        bytes_ = tp.frames_floor if floor else tp.stream_bytes + tp.zero_copy_bytes
        if self.runs is None:
            return bytes_
        return bytes_ * self.runs + COLD_READ_WEIGHT * self._cold_bytes(tp, False)

    def index(self, tp: TablePlan) -> float:
        """Bytes a table's index scan reads."""
        index = tp.index_option.link_bytes
        if self.runs is not None:
            index = index * self.runs + COLD_READ_WEIGHT * self._cold_bytes(tp, True)
        return index

    def beats_frames(self, tp: TablePlan) -> bool:
        """Whether a table's index scan reads fewer bytes than its frames would: found without cutting the frames
        where it reads fewer than their floor (every table of Z >= 30 as generated at SF 100: ten parts' 586,000
        frames cut for a plan that reads none of them took most of a new constant's 20 ms plan)."""
        index = self.index(tp)
        return index < self.frames(tp, floor=True) or index < self.frames(tp)


def _stretches(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, end) of each stretch of True in a boolean array, from where it changes (a comparison of bools:
    np.diff and flatnonzero of int8 take 15 times as long over SF 10's 58,581 frames)."""
    padded = np.concatenate([[False], mask, [False]])
    edges = np.flatnonzero(padded[1:] != padded[:-1])  # each stretch's first, then its end
    return edges[0::2], edges[1::2]


def _stretches_of(frames: np.ndarray, tables: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(first, end) of each stretch of consecutive frames in a sorted list of frames (_stretches' of their mask);
    `tables`: each frame's table, where the frames are several tables' one after another (a stretch never crosses
    from one table into the next)."""
    frames = frames.astype(np.int64)
    if not len(frames):
        return frames, frames
    apart = np.diff(frames) != 1
    breaks = np.flatnonzero(apart if tables is None else apart | (tables[1:] != tables[:-1]))
    return frames[np.concatenate([[0], breaks + 1])], frames[np.concatenate([breaks, [len(frames) - 1]])] + 1


def _stretches_between(frames: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(first, end) of each stretch of the frames [0, n) that a sorted list of frames leaves out."""
    frames = frames.astype(np.int64)
    firsts = np.concatenate([[0], frames + 1])
    ends = np.concatenate([frames, [n]])
    kept = ends > firsts
    return firsts[kept], ends[kept]


class _Frames:
    """A table's frame classes and what chunking reads of them, found once a plan: its scan by frames and by
    a column's top bytes cut the same frames (each _chunks call); their stretches found when first cut."""

    def __init__(self, classes, counts: tuple[int, int, int] | None = None):
        """`classes`: an int8 array, or () → (classes, Estimate) made when first asked for; its `counts` (ruled
        out, tested, passing whole) given where found with the classes or without them (prune.classify_counted,
        prune.compare_summary)."""
        if counts is None:
            self.classes, self.n = classes, len(classes)
            self.check = classes == CHECK
            self.tested = int(np.count_nonzero(self.check))
            self.ruled_out = int(np.count_nonzero(classes == NEVER))
        elif isinstance(classes, np.ndarray):  # counted where classed (prune.classify_counted)
            self.classes, self.n = classes, len(classes)
            self.ruled_out, self.tested, _ = counts
        else:
            self._classing, self.n = classes, sum(counts)
            self.ruled_out, self.tested, _ = counts
        self._picked = None  # (pieces a table, pieces, the rows each is estimated to select): _picked's last
        self.stretched: dict = {}  # (kind, the tables' frames' ids) → their stretches joined (_joined_stretches)

    @functools.cached_property
    def classes(self) -> np.ndarray:
        classes, estimate = self._classing()
        return estimate.classes() if classes is None else classes  # (a comparison's few frames: from its lists)

    def write_classes(self, out: np.ndarray) -> None:
        """Each frame's class written into `out` (a run's classes in mapped memory): a fill where every frame holds one
        class (from the counts), from a comparison's lists where its frames were few (no array of the table's own),
        else the classes."""
        one, listed = self.one_class, self._given
        if one is not None:
            out[:] = one
        elif listed is not None and "classes" not in self.__dict__:
            listed.write_classes(out)
        else:
            out[:] = self.classes

    @functools.cached_property
    def _given(self) -> ClassesGiven | None:
        """The Estimate of a comparison that gives the frames' classes from a few arrays of its own (prune.compare_classes):
        a SparseEstimate's sorted lists where its frames on one side of the constant were few (SF 100's l_suppkey < 2
        touches a few dozen frames of a part's 58,581), a StretchEstimate's three stretches where the frames ascend in
        its column (a store clustered by it); they give the stretches, not an array a frame."""
        if "_classing" not in self.__dict__:
            return None
        found = self._classing()[1]
        return found if isinstance(found, ClassesGiven) else None

    @property
    def _sparse(self) -> SparseEstimate | None:
        given = self._given
        return given if isinstance(given, SparseEstimate) else None

    @property
    def _stretched(self) -> StretchEstimate | None:
        given = self._given
        return given if isinstance(given, StretchEstimate) else None

    @functools.cached_property
    def check(self) -> np.ndarray:
        return self.classes == CHECK

    @property
    def one_class(self) -> int | None:
        """The class every frame holds, where one does (from the counts), else None."""
        passing = self.n - self.ruled_out - self.tested
        return next((k for k, c in ((NEVER, self.ruled_out), (CHECK, self.tested), (ALWAYS, passing)) if c == self.n), None)

    def _alike(self, count: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The stretches of a class that `count` frames hold where that is none or every frame (a comparison that
        tests every frame: Q6 as generated, the mission past a few suppliers), else None."""
        if count == 0 or not self.n:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return (np.zeros(1, np.int64), np.full(1, self.n, np.int64)) if count == self.n else None

    @functools.cached_property
    def touched(self) -> tuple[np.ndarray, np.ndarray]:
        """Stretches of frames not ruled out."""
        found = self._alike(self.n - self.ruled_out)
        if found is not None:
            return found
        listed = self.listed("touched")
        if listed is not None:
            return _stretches_of(np.sort(np.concatenate(listed)))
        sparse = self._sparse
        if sparse is None:
            stretched = self._stretched
            return _stretches(self.classes != NEVER) if stretched is None else stretched.stretches(lambda c: c != NEVER)
        # every frame passes whole but those listed, tested or ruled out
        return _stretches_between(np.setdiff1d(sparse.passing, sparse.tested, assume_unique=True), self.n)

    @functools.cached_property
    def passing(self) -> tuple[np.ndarray, np.ndarray]:
        """Stretches of frames that pass whole."""
        found = self._alike(self.n - self.ruled_out - self.tested)
        if found is not None:
            return found
        listed = self.listed("passing")
        if listed is not None:
            return _stretches_of(listed[0])
        sparse = self._sparse
        if sparse is None:
            stretched = self._stretched
            return _stretches(self.classes == ALWAYS) if stretched is None else stretched.stretches(lambda c: c == ALWAYS)
        return _stretches_between(sparse.passing, self.n)

    def listed(self, name: str) -> tuple[np.ndarray, ...] | None:
        """Sorted lists of frames, apart, whose stretches are `name` (touched, passing), where a comparison's few frames
        list them (every other frame ruled out), else None."""
        sparse = self._sparse
        if sparse is None or sparse.complement or self._alike(self.n - self.ruled_out - self.tested * (name == "passing")):
            return None
        return (sparse.passing, sparse.tested) if name == "touched" else (sparse.passing,)

    @functools.cached_property
    def tested_frames(self) -> np.ndarray:
        """The tested frames, in order: a piece's are found in two binary searches (a sum over its span took
        milliseconds where a few frames lie scattered over a part's 58,000)."""
        sparse, stretched = self._sparse, self._stretched
        if sparse is not None:
            return sparse.tested
        if stretched is not None and "classes" not in self.__dict__:
            return stretched.first + np.flatnonzero(stretched.middle == CHECK)
        return np.flatnonzero(self.check)


def _joined_stretches(frames: list, name: str, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every table's stretches of a kind (_Frames.touched or .passing) in the tables' frames one after another: each
    one's (first, end, table), found once a plan (kept on the first table's frames: the packed and the top-byte cut
    stretch the same frames; SF 100's ten parts at Z = 13 stretched them twice, 0.2 ms each)."""
    key = (name, *map(id, frames))
    found = frames[0].stretched.get(key) if frames else None
    if found is None:
        found = _stretched_together(frames, name, offsets)
        for x in found:
            x.setflags(write=False)
        if frames:
            frames[0].stretched[key] = found
    return found


def _stretched_together(frames: list, name: str, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """_joined_stretches' found: the tables whose frames of that kind are listed (_Frames.listed) stretched together
    from their lists, one after another (SF 100's ten parts a few hundred frames each, at Z = 13: 1.1 ms a part at a
    time)."""
    listed = {k: f.listed(name) for k, f in enumerate(frames) if name not in f.__dict__}
    listed = {k: found for k, found in listed.items() if found is not None}
    firsts = [getattr(f, name)[0] + o for k, (f, o) in enumerate(zip(frames, offsets.tolist())) if k not in listed]
    ends = [getattr(f, name)[1] + o for k, (f, o) in enumerate(zip(frames, offsets.tolist())) if k not in listed]
    if listed:
        at = np.sort(np.concatenate([x + offsets[k] for k, found in listed.items() for x in found]))
        found_firsts, found_ends = _stretches_of(at, np.searchsorted(offsets, at, "right"))
        firsts.append(found_firsts)
        ends.append(found_ends)
    firsts, ends = np.concatenate([np.zeros(0, np.int64), *firsts]), np.concatenate([np.zeros(0, np.int64), *ends])
    if listed and len(listed) < len(frames):  # (the tables' stretches in their order)
        order = np.argsort(firsts, kind="stable")
        firsts, ends = firsts[order], ends[order]
    return firsts, ends, np.searchsorted(offsets, firsts, "right") - 1


def _pieces(frames: list, gaps: np.ndarray, splits: np.ndarray, target: int, offsets: np.ndarray) -> tuple:
    """Every table's pieces at once, in the tables' frames one after another (a loop a table and a run asked NumPy
    dozens of times a part: SF 100's ten parts took a millisecond a cut): (firsts, ends, wholes). A table's touched
    stretches separated by at most its `gaps` ruled-out frames are one run; a stretch of at least its `splits` frames
    that all pass is a segment of its own (its predicate columns not shipped), the rest of a run (tested frames, a
    short stretch that passes whole joining its neighbours) segments between them; each segment is cut into as many
    pieces of equal span as its touched frames fill `target` (a run of scattered frames, its gaps shipped or skipped
    in place, is one piece where it is short of the target: SF 100, Z = 2: 58 pieces a part were 58,000 frames of
    which a few dozen touched, 530 launches and 44 ms). A run never crosses from one table into the next."""
    firsts, ends, table = _joined_stretches(frames, "touched", offsets)
    if not len(firsts):
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, bool)
    breaks = np.flatnonzero((table[1:] != table[:-1]) | (firsts[1:] - ends[:-1] > gaps[table[1:]]))  # gaps left
    run_firsts, run_ends = firsts[np.concatenate([[0], breaks + 1])], ends[np.concatenate([breaks, [len(ends) - 1]])]
    passing_firsts, passing_ends, passing_table = _joined_stretches(frames, "passing", offsets)
    long = passing_ends - passing_firsts >= splits[passing_table]  # (a stretch that passes is touched: within a run)
    long_firsts, long_ends = passing_firsts[long], passing_ends[long]
    # a run is [its first, the first long stretch's first), [that one's end, the next one's first) ... [the last one's
    # end, its end): as the runs and the long stretches within them do not overlap, those bounds pair off in order
    lefts, rights = np.sort(np.concatenate([run_firsts, long_ends])), np.sort(np.concatenate([long_firsts, run_ends]))
    some = rights > lefts
    tested_firsts, tested_ends = lefts[some], rights[some]
    before = np.concatenate([[0], np.cumsum(ends - firsts)])  # the touched frames before each touched stretch

    def touched_below(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(firsts, x, "right") - 1
        return np.where(i < 0, 0, before[i] + np.minimum(x, ends[i]) - firsts[i])

    seg_firsts = np.concatenate([tested_firsts, long_firsts])
    order = np.argsort(seg_firsts, kind="stable")
    seg_firsts, seg_ends = seg_firsts[order], np.concatenate([tested_ends, long_ends])[order]
    seg_wholes = np.concatenate([np.zeros(len(tested_firsts), bool), np.ones(len(long_firsts), bool)])[order]
    filled = np.where(seg_wholes, seg_ends - seg_firsts, touched_below(seg_ends) - touched_below(seg_firsts))
    counts = -(-filled // target)  # (a segment between long stretches with no touched frame: none)
    k = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)  # each piece's place in its segment
    s, span, n = (np.repeat(x, counts) for x in (seg_firsts, seg_ends - seg_firsts, counts))
    return s + span * k // n, s + span * (k + 1) // n, np.repeat(seg_wholes, counts)


def plan_fused(query: Query, tables: list, mode: str, sm_count: int, chunk_frames: int | None = None,
               whole: bool = False, choices: dict | None = None) -> FusedPlan:
    """Plan `query` over `tables` (one Table, or a parted table's parts) in `mode`: each table's chunks, and
    its index option where it has one, weighed from the zone maps alone (no list is read to plan). The
    scans are chosen by FusedPlan.choose, which reads the lists it chooses. `whole`: the tables are all the
    query reads (not a share of several GPUs' or a Dask task's part, whose every group is added to others'),
    so hashed groups in one table may be cut to those ORDER BY ... LIMIT can keep before they are read back.
    `choices`: a held table's kept choices (_kept_choice): a new constant of a shape whose earlier plan tested every
    frame, or passed every frame whole, proven to class its frames so too, keeps that plan's choices, its frames
    classed by no zone map."""
    if mode not in MODES:
        raise UsageError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if chunk_frames is not None and chunk_frames < 1:
        raise UsageError(f"chunk rows must be positive, got {chunk_frames * FRAME_ROWS}")
    shaped = _Shaped.of(query, tables)
    key = None if choices is None else (shaped.spec, mode, chunk_frames, whole, shaped.shared is not None,
                                         *map(id, tables))
    if key is not None:  # an earlier text's plan of this very predicate, else one whose one class these constants keep
        kept = choices.get((key, tuple(shaped.lowered))) or choices.get(key)
        found = None if kept is None else _kept_choice(kept, shaped, mode, sm_count, chunk_frames, whole)
        if found is not None:
            return found
    spec, nullable, lowered, selectable = shaped.spec, shaped.nullable, shaped.lowered, shaped.selectable
    classified = []
    for t, low, constants, bases, (classes, selected, counts) in zip(tables, lowered, shaped.constants, shaped.bases,
                                                                      _classified(tables, lowered, nullable)):
        for c in () if low is None or not nullable else low.columns():  # a NULL fails every test: never ALWAYS
            nulls = t.columns[c].frame_nulls() if c in nullable else None
            if nulls is not None:
                classes = np.where((classes == ALWAYS) & nulls, np.int8(CHECK), classes)  # (classes may be read only)
                counts = None  # (counted again)
        classified.append((t, _Frames(classes, counts), selected, constants, bases))
    frames = [f for _, f, *_ in classified]
    touched = sum(f.n - f.ruled_out for f in frames)
    slots = 0
    if spec.hashed:  # the groups a run can select: no more than the rows of the frames it can select from
        selectable_rows = [min(t.rows, FRAME_ROWS * (f.n - f.ruled_out)) for (t, *_), f in zip(classified, frames)]
        slots = hash_slots(spec, sum(selectable_rows) if shaped.shared is not None else max(selectable_rows),
                           1 if shaped.shared is not None else len(tables))
    top = shaped.top(whole)
    target = chunk_frames or min(MAX_CHUNK_FRAMES, max(MIN_CHUNK_FRAMES, math.ceil(touched / CHUNKS_PER_QUERY)))
    table_plans = _table_plans([(t, f, selected, constants, bases, None)
                                for (t, _, selected, constants, bases), f in zip(classified, frames)], query, spec, mode, target)
    options = [None] * len(table_plans)
    # (the zone maps rule out every frame: no row for a list or a top byte to find, nothing to weigh; an empty plan)
    if mode in INDEX_MODES and touched:
        options = [_index_option(tp, spec, r) for tp, r in zip(table_plans, selectable)]
        table_plans = [_replaced(tp, index_option=o) for tp, o in zip(table_plans, options)]
    sliced = _sliced_scans(spec, classified, [f.tested for f in frames], lowered, mode) if touched else None
    top_plans = None if sliced is None else _TopPlans(
        [(t, f, selected, constants, bases, s) for (t, _, selected, constants, bases), f, s in zip(classified, frames, sliced)],
        query, spec, mode, target, options)
    reasons = [*shaped.reasons, *_later_reasons(spec, slots, top, mode, tables)]
    plan = FusedPlan(query, mode, spec, table_plans, reasons, shared_groups=shaped.shared is not None, top_plans=top_plans,
                     hash_slots=slots, top=top)
    if choices is not None:  # every frame of one class (tested or passing whole), else kept for this predicate alone
        one = {f.one_class for f in frames}
        cls = one.pop() if len(one) == 1 and one <= {CHECK, ALWAYS} else None
        plan._keep = functools.partial(_keep_choice, choices, key, shaped, cls)
    return plan


def _later_reasons(spec: KernelSpec, slots: int, top: TopCut | None, mode: str, tables: list) -> list[str]:
    """The reasons a plan gives after its kernel's (_Shaped's): its hash table, its ORDER BY ... LIMIT cut, its
    mode's reads, its tables' clustering."""
    reasons = []
    if spec.hashed:
        reasons.append(f"{spec.groups:,} possible groups take more than {GLOBAL_ACC_BYTES >> 20} MB as a dense array: "
                       f"each group's words are found by its index in a hash table of {slots:,} slots, twice the groups "
                       f"a run can select")
    if top is not None:
        reasons.append(f"ORDER BY {top.key}{'' if top.ascending else ' DESC'} LIMIT {top.limit:,}: the groups' best keys "
                       f"in {1 << top.bits:,} partitions give a threshold that at least {top.limit:,} groups reach; only "
                       f"the groups that reach it are read back")
    if mode in MAPPED_MODES:
        reasons.append(f"value columns read in place when a chunk's selected rows x {ZERO_COPY_READ_BYTES} B a column "
                       f"cost less than its frames copied whole")
    elif mode == "pageable":
        reasons.append("pageable memory cannot be read in place: every column a chunk needs is staged and copied")
    if any(t.sorted_by for t in tables):
        reasons.append(f"the rows are clustered by {tables[0].sorted_by}: its zone maps are narrow, so a range on it "
                       f"rules out most frames")
    return reasons


@dataclass
class _Shaped:
    """What a plan finds of a query over its tables before any frame is classed: each table's lowered predicate
    (prune.lower), the values a selected row can hold (narrowed), the kernel spec and each table's constants and
    group bases, and the reasons for them."""

    query: Query
    tables: list
    nullable: frozenset  # the query's columns that hold NULLs in some table (read with their validity)
    lowered: list
    selectable: list  # each table's narrowed ranges
    ranges: dict  # each column's range over every table
    shared: tuple | None  # one base for every table's groups (_shared_bases), or None
    spec: KernelSpec
    constants: list  # each table's kernel constants
    bases: list  # each table's group bases
    reasons: list

    @classmethod
    def of(cls, query: Query, tables: list) -> "_Shaped":
        names = query.columns()
        nullable = frozenset(n for t in tables for n in names if t.columns[n].nulls)  # read with their validity
        ranges_by_table = [t.ranges(names) for t in tables]
        for shift in query.date_shifts:  # DuckDB keeps an infinite date infinite; the kernel adds the days to it
            for t in tables:
                if any(t.columns[c].holds_infinite_dates() for c in shift.columns()):
                    raise NotOnGpu(f"{shift} adds days to dates this table holds as DuckDB's infinity or -infinity, which "
                                   "such a sum keeps: the CPU reference computes it")
        ranges = {n: (min(r[n][0] for r in ranges_by_table), max(r[n][1] for r in ranges_by_table)) for n in names}
        # IS NULL of a column that holds NULLs in any part is tested in every part (one kernel: a part without any
        # reads its validity as every bit set, Column.validity_words)
        dictionaries = [{n: t.columns[n].dictionary for n in names} for t in tables]
        sides = string_sides(query.where, dictionaries)  # two string columns compared alike in every part
        lowered = _lowered(query, dictionaries, ranges_by_table, {n: n in nullable for n in names}, sides)
        # a group column's values are bounded per part, and narrowed by the predicate: its groups are counted
        # from each part's smallest value a selected row can have
        narrowings: dict = {}  # (the lowered predicate, the ranges) → narrowed: SF 100's ten parts most often agree

        def narrowed_of(low, r: dict) -> dict:
            key = (id(low), tuple(r.values()))  # (the lowered predicates live through the plan)
            if key not in narrowings:
                narrowings[key] = narrowed(low, r)
            return narrowings[key]

        selectable = [narrowed_of(low, r) for low, r in zip(lowered, ranges_by_table)]
        # a group column's values are multiples of its common factor in every table (l_quantity's of 100): its
        # groups are counted in those steps, from each table's base (its smallest selectable value, in steps,
        # rounded down), and rounded up to a power of two: tables of nearly the same ranges share one kernel
        steps = tuple(math.gcd(*(int(t.columns[c.name].zone_buffers()[2]) for t in tables)) or 1 for c in query.group_by)
        # (a column with NULLs: one value more, its last digit NULL's: codegen.null_digit)
        cards = tuple(1 << (max(r[c.name][1] // step - r[c.name][0] // step + 1 for r in selectable)
                            + (c.name in nullable) - 1).bit_length() for c, step in zip(query.group_by, steps))
        specs: dict = {}  # a part's lowered predicate → (kernel spec, constants): parts that lower alike share them
        shared = _shared_bases(query, tables, selectable, steps, cards, nullable)

        def spec_of(low):
            if low not in specs:
                # a sum adds up the rows of every table that adds into its words: all of them where they share one table
                rows = sum(t.rows for t in tables) if shared is not None else max(t.rows for t in tables)
                spec, constants = kernel_spec(query, low, ranges, rows, cards, steps, len(tables), nullable)
                specs[low] = _interned(spec), constants
            return specs[low]

        spec, _ = spec_of(lowered[0])
        if shared is None and spec.hashed and len(tables) > 1:  # a hash table needs no dense range: one for every part
            one = _one_base(query, tables, selectable, steps, nullable)
            wide = one and tuple(1 << (span - 1).bit_length() for span in one[1])
            # one index must stay within one word (else a table a part, each its own index's range); a wide key's
            # digits count from any base modulo 2^64, so its parts always share one
            if one is not None and (math.prod(wide) < HASH_KEY_LIMIT or spec.wide_keys):
                cards, shared, specs = wide, one[0], {}
                spec, _ = spec_of(lowered[0])
        reasons = [f"kernel columns {', '.join(spec.columns)}; predicate `{spec.predicate or 'none'}`; "
                   f"{len(spec.accumulators)} accumulator(s), {spec.groups:,} group(s)"]
        if spec.nullable:
            reasons.append(f"{', '.join(spec.columns[i] for i in spec.nullable)} hold NULLs: each read with its validity (a "
                           f"bit a row), a frame with a NULL in a predicate column tested row by row, an aggregate over "
                           f"one counting the rows it takes; scanned by frames")
        if shared is not None and query.group_by:
            reasons.append(f"the {len(tables)} parts' groups counted from one base, in as many groups as each part's: "
                           f"they add into one table of accumulators, read back once")
        elif shared is not None:
            reasons.append(f"the {len(tables)} parts' aggregates add into one table of accumulators, read back once")
        constants = []
        for low in lowered:
            other, found = spec_of(low)
            if other != spec:
                raise NotOnGpu("the parts lower the query to different kernels")
            constants.append(tuple(found))
        bases = [shared or tuple(r[c.name][0] // step for c, step in zip(query.group_by, steps)) for r in selectable]
        return cls(query, tables, nullable, lowered, selectable, ranges, shared, spec, constants, bases, reasons)

    def top(self, whole: bool) -> TopCut | None:
        """The hashed groups' cut to those ORDER BY ... LIMIT can keep, where the tables are all the query reads and
        add into one table of words (codegen.top_cut), else None."""
        return top_cut(self.query, self.spec) if whole and (self.shared is not None or len(self.tables) == 1) else None


# A new constant of a shape whose earlier plan tested every frame (or passed every frame whole) keeps that plan's
# choices (its chunks and scans) where its own constants are proven to class every frame so too: classing ten parts'
# frames, estimating their rows and weighing the scans took most of SF 100's 3 ms plan of a new constant (Q6, the
# mission past 30,000 suppliers; every row, its top-byte and packed cuts weighed for a predicate no chunk tests). The choices
# weigh the bytes the selected rows cost (a value column read in place, the lists' entries): kept where the rows a
# sample of frames selects are within KEPT_SHARE of the earlier constants' either way, so that a choice that would
# flip was about as dear as the other. A text whose predicate lowers as an earlier text's did (a new constant in a select
# item or LIMIT: Q1's) keeps that plan's choices whatever the classes: the same predicate over the same tables classes
# and estimates every frame as it did; so does one whose AND terms that differ each test every frame, now and before
# (Q6 over a table clustered by l_shipdate, a new l_quantity bound: its frames ruled out by the dates as before).
KEPT_SHARE = 1.25
CHOICES_KEPT = 64  # kept choices a held table keeps (a shape, kernel and mode each; and by predicate, _keep_choice)


@dataclass(frozen=True)
class _KeptChoice:
    plan: "FusedPlan"  # the warm choice (scan auto) of an earlier text's plan
    share: float  # the rows its predicate selects over a sample of frames (prune.sampled_fraction)
    cls: int | None  # the class of its every frame: CHECK (tested) or ALWAYS (passing whole); None: of several
    lowered: tuple  # each table's lowered predicate


def _keep_choice(choices: dict, key: tuple, shaped: _Shaped, cls: int | None, chosen: "FusedPlan") -> None:
    """Keep the warm choice of a plan for new texts of its shape (_kept_choice), where no table is scanned by index (its
    buckets' entries are the constants') and nothing it reads is on disk: where its every frame is of one class,
    tested or passing whole (`cls`), for new constants (passing whole, where no predicate column holds NULLs: a NULL
    fails every test); else for texts whose predicate lowers as its did, or whose AND terms that differ test every
    frame (kept under the kernel's key as its latest, and where of several classes under its predicates too)."""
    if any(tp.index is not None for tp in chosen.tables) or chosen._reads_disk(chosen, [False] * len(chosen.tables)):
        return
    if cls == ALWAYS and any(low is not None and shaped.nullable & set(low.columns()) for low in shaped.lowered):
        return
    if key not in choices and len(choices) >= CHOICES_KEPT - 1:
        choices.clear()
    lowered = tuple(shaped.lowered)
    choices[key] = _KeptChoice(chosen, sampled_fraction(shaped.lowered[0], shaped.tables[0]), cls, lowered)
    if cls is None:  # (a text of this very predicate finds it whatever a later plan of the kernel keeps)
        choices[(key, lowered)] = choices[key]


def _common_ranges(e: Expr, tables: list) -> dict:
    """Each column `e` reads: the values every frame of it holds in every one of `tables` (_common_range)."""
    return {c: _common_range([t.columns[c] for t in tables]) for c in e.columns()}


def _common_range(columns: list) -> tuple[int, int] | None:
    """The values every frame of these columns (a column of several tables) holds: their common ranges' (Column.
    common_range) intersection, or None where it is empty."""
    found = [c.common_range() for c in columns]
    if None in found:
        return None
    low, high = max(r[0] for r in found), min(r[1] for r in found)
    return (low, high) if low <= high else None


def _kept_choice(kept: _KeptChoice, shaped: _Shaped, mode: str, sm_count: int, chunk_frames: int | None,
                 whole: bool) -> "FusedPlan | None":
    """An earlier text's plan's choices (same kernel, tables, mode and chunking) for this text: where every frame of
    every table is proven of the earlier plan's one class under its constants, tested or passing whole
    (prune.every_frame_classed: classed as the earlier plan's, so cut alike, no frame's zone map read), and a sample
    of frames selects about as many rows (KEPT_SHARE). The same chunks and scans, with this text's constants, group
    bases, undecided buckets and LIMIT cut; the estimates the earlier text's, as its reasons say. Any other scan, or
    a read from disk, is the full plan's (FusedPlan.choose). None where not."""
    tables, lowered = shaped.tables, shaped.lowered
    alike: dict = {}  # the tables that lower the predicate alike: proven together
    for t, low in zip(tables, lowered):
        alike.setdefault(id(low), (low, []))[1].append(t)
    same = tuple(lowered) == kept.lowered  # the earlier text's predicate: every frame classed and estimated alike
    if not same and kept.cls is None and not _tested_alike(lowered, kept.lowered, tables):
        return None
    for low, ts in () if same or kept.cls is None else alike.values():
        if low is None:  # every row passes: every frame whole
            if kept.cls != ALWAYS:
                return None
            continue
        if kept.cls == ALWAYS and shaped.nullable & set(low.columns()):
            return None  # (a NULL fails every test)
        # tested over the values every frame of every such table holds, tested over each frame's own; passing over
        # every value of every table, passing over each frame's
        ranges = _common_ranges(low, ts) if kept.cls == CHECK else shaped.ranges
        if not every_frame_classed(low, [ranges], kept.cls):
            return None
    share = kept.share if same else sampled_fraction(lowered[0], tables[0])
    if not same and not (share <= KEPT_SHARE * kept.share and kept.share <= KEPT_SHARE * share):
        return None
    earlier, buckets, out = kept.plan, {}, []
    for tp, low, constants, bases in zip(earlier.tables, lowered, shaped.constants, shaped.bases):
        sliced = tp.sliced
        if sliced is not None:  # this text's undecided buckets, read by the same kernel
            sliced = _sliced_scan(sliced.column, sliced.slot, tp.table, low, tp.frames.tested, buckets)
            if sliced.kernel != tp.sliced.kernel:
                return None
        out.append(_replaced(tp, constants=constants, group_bases=bases, sliced=sliced, index_option=None))
    top = shaped.top(whole)
    proof = ("the predicate lowered as by the plan of an earlier text of this shape, every frame classed so: its chunks "
             "and scans kept (its estimates are that text's)" if same else
             ("every frame classed as by the plan of an earlier text of this shape, each AND term that differs proven to "
              "test every frame, from the values every frame of a column holds" if kept.cls is None else
              f"every frame tested, proven from the values every frame of a column holds" if kept.cls == CHECK else
              f"every frame passing whole, proven from every value of a column") +
             f", as by the plan of an earlier text of this shape: its chunks and scans kept (its estimates are that "
             f"text's; a sample of frames selects {share / kept.share if kept.share else 1:.2f} times its rows)")
    reasons = [*shaped.reasons, *_later_reasons(shaped.spec, earlier.hash_slots, top, mode, tables), proof]
    plan = dataclasses.replace(earlier, query=shaped.query, tables=out, reasons=reasons, top=top, top_plans=None,
                               kept_from=earlier.kept_from or earlier.query.sql,
                               _full=_Lazy(functools.partial(plan_fused, shaped.query, tables, mode, sm_count,
                                                             chunk_frames, whole)))
    plan._warm["auto"] = plan
    plan._decided["auto"] = (plan, tuple(False for _ in out))
    return plan


def _tested_alike(new: list, old: tuple, tables: list) -> bool:
    """Whether each table's predicate, lowered now (`new`) and for an earlier plan (`old`), classes every frame alike:
    their AND terms one for one, each pair that differs both proven to test every frame of the table
    (prune.every_frame_classed, over the values every frame of a column holds). A frame's class under an AND is its
    terms' least (classify): the terms alike leave it as before, and the differing ones cap it at CHECK, now as
    before (so no frame passes whole for a NULL to undo)."""
    if len(new) != len(old):
        return False
    pairs: dict = {}  # the tables that lower both predicates alike: proven together
    for t, a, b in zip(tables, new, old):
        pairs.setdefault((id(a), id(b)), (a, b, []))[2].append(t)
    for a, b, ts in pairs.values():
        if a == b:
            continue
        if a is None or b is None:
            return False
        terms_a, terms_b = _and_terms(a), _and_terms(b)
        if len(terms_a) != len(terms_b):
            return False
        for x, y in zip(terms_a, terms_b):
            if x != y and not all(every_frame_classed(term, [_common_ranges(term, ts)], CHECK) for term in (x, y)):
                return False
    return True


def _and_terms(e: Expr) -> list:
    """A predicate's AND terms, nested ANDs flattened, in order (the predicate itself where it is no AND)."""
    terms, stack = [], [e]
    while stack:  # (a loop: a predicate may nest thousands of terms)
        a = stack.pop()
        if isinstance(a, And):
            stack += reversed(a.args)
        else:
            terms.append(a)
    return terms


def _lowered(query: Query, dictionaries: list[dict], ranges_by_table: list[dict], nulls: dict, sides: dict) -> list:
    """Each table's lowered predicate (prune.lower), lowered once for the tables whose predicate columns have the
    same ranges and dictionaries (a parted store's parts, mostly): one object, its hash and kernel found once."""
    names = sorted(query.where.columns()) if query.where is not None else []
    found: dict = {}
    out = []
    for d, r in zip(dictionaries, ranges_by_table):
        key = tuple((r[n], id(d[n])) for n in names)
        if key not in found:
            found[key] = lower(query.where, d, r, nulls, sides)
        out.append(found[key])
    return out


def _table_plans(parts: list, query: Query, spec: KernelSpec, mode: str, target: int) -> list[TablePlan]:
    """Each table's plan from `parts` (_chunks'), their chunks cut together when first asked for."""
    cut = _Lazy(functools.partial(_chunks, parts, query, spec, mode, target))
    alone = [spec.columns[i] for i in spec.predicate_slots if i not in spec.value_slots]  # read for the test alone
    return [TablePlan(t, constants, bases, f, cut, at, _frames_floor(t, f, sliced, alone, mode), selected.total(),
                      sliced=sliced)
            for at, (t, f, selected, constants, bases, sliced) in enumerate(parts)]


def _frames_floor(table, frames: _Frames, sliced: SlicedScan | None, alone: list[str], mode: str) -> int:
    """The least bytes a table's frames can read over the link, however they are cut (_cut): each tested frame's
    bytes of every column its test alone reads, shipped or in place: its words, at least its narrowest frame's
    (encodings.pack: 32 words a bit of width); by its top byte, a byte a row and its undecided rows' low bits a
    sector each. Resident: none (nothing crosses the link)."""
    if mode == "resident":
        return 0
    top = 0 if sliced is None else _top_floor(frames, sliced)
    return top + sum(128 * table.columns[c].narrowest_frame() * frames.tested
                     for c in alone if sliced is None or c != sliced.column)


def _top_floor(frames: _Frames, sliced: SlicedScan) -> int:
    """The least bytes a table's frames read by a column's top byte: a byte a row of its tested frames, and a sector
    a row of the buckets its predicate leaves undecided (their low bits, in place)."""
    return FRAME_ROWS * frames.tested + int(sliced.low_rows * SECTOR)


class _TopPlans:
    """Each table's plan with the frame loop's predicate column read by its top byte (its SlicedScan), made when
    first asked for, its chunks cut when first weighed (FusedPlan.choose): never where every table's index scan
    reads fewer bytes than its frames' floor (FusedPlan._indexed_anyway; Z < 1,000 as generated at SF 10)."""

    def __init__(self, parts: list, query: Query, spec: KernelSpec, mode: str, target: int, options: list):
        self.sliced = [part[5] for part in parts]  # each table's SlicedScan
        self.floors = [_top_floor(f, s) for _, f, *_, s in parts]
        self.tables = _Lazy(lambda: [_replaced(tp, index_option=o) if o is not None else tp
                                     for tp, o in zip(_table_plans(parts, query, spec, mode, target), options)])

    @property
    def made(self) -> bool:
        """Whether the tables' chunks by top byte were cut."""
        return self.tables.made and self.tables()[0].cut.made


SPECS_KEPT = 1024  # kernel specs kept (_interned)
_specs: dict = {}


def _interned(spec: KernelSpec) -> KernelSpec:
    """The one KernelSpec equal to this one: a new constant's plan gets its shape's spec, whose hash, words and
    groups are found already and whose builds (gpu.fused.fused_build) and compiled kernels are found by identity."""
    found = _specs.get(spec)
    if found is None:
        if len(_specs) >= SPECS_KEPT:
            _specs.clear()
        found = _specs.setdefault(spec, spec)
    return found


def _classified(tables: list, lowered: list, nullable=frozenset()) -> list[tuple]:
    """Each table's frame classes, the Estimate of the rows each frame selects and, where known before the classes,
    their counts (ruled out, tested, passing whole). A column's order with a constant over a table of many frames
    is counted and estimated from the column's ZoneOrder (prune.compare_summary), its classes made when first
    asked for (a table scanned by index never asks); the other parts that lower the predicate alike are classed
    together (prune.classify_counted: their blocks in one pass)."""
    out: list = [None] * len(tables)
    alike: dict = {}
    counted: dict = {}  # a lowered comparison → the parts counted from its column's ZoneOrder
    for i, (t, low) in enumerate(zip(tables, lowered)):
        if summarized(low) and low.left.name not in nullable and t.rows >= BLOCKED_FRAMES * FRAME_ROWS:
            counted.setdefault(low, []).append(i)
        else:
            alike.setdefault(low, []).append(i)
    for low, parts in counted.items():
        for i, summary in zip(parts, _summaries([tables[i] for i in parts], low)):
            out[i] = summary
    for low, parts in alike.items():
        if low is None:  # every frame passes whole
            for i in parts:
                frames = -(-tables[i].rows // FRAME_ROWS)
                out[i] = every_frame(frames, ALWAYS), EveryRow(frames, tables[i].rows), (0, 0, frames)
            continue
        zones = [frame_zones(tables[i], low.columns(), tables[i].rows) for i in parts]
        for i, found in zip(parts, classify_counted(low, zones)):
            out[i] = found
    return out


def _summaries(tables: list, low: Expr) -> list[tuple]:
    """Each table's (() → (classes, Estimate), the Estimate, the counts) of its frames under a column's order with a
    constant: counted from the column's ZoneOrder, classed from it too when first asked for, every table's at once
    (prune.compare_classes_together). The tables' last frames (fewer rows) are classed together (ten parts' one at a
    time took 0.3 ms)."""
    columns = [t.columns[low.left.name] for t in tables]
    maps = [(*c.zones(), *c.zone_spans()) for c in columns]  # low, high, and the spans' low and width, a frame
    lasts = last_fractions(low, *(np.concatenate([m[k][-1:] for m in maps]) for k in range(4)))
    together = _Lazy(functools.partial(_compare_classes, low, tables, columns))  # every table's, when first asked for
    out = []
    for k, (t, column, last) in enumerate(zip(tables, columns, lasts.tolist())):
        counts, total = compare_summary(low, column.zone_order(), t.rows, last)
        classing = functools.partial(_one_of, together, k)
        out.append((classing, SummaryEstimate(total, lambda classing=classing: classing()[1]), counts))
    return out


def _one_of(together: _Lazy, k: int) -> tuple:
    return together()[k]


# A comparison's classes and Estimates kept with its column's zone orders: a new text whose WHERE is the last one's (Q1
# with another constant in its select list) finds its parts' frames classed. A few shapes' worth: an entry holds a
# byte a frame, and at most a double a frame (an estimate made frame by frame: SF 100's parts, 470 KB each)
CLASSES_KEPT = 32
_classings: dict = {}  # (comparison, rows, ids of the zone orders) → (the zone orders; [(classes read only, Estimate)])


def _compare_classes(low: Expr, tables: list, columns: list) -> list[tuple]:
    """Tables' (classes, Estimate) under a column's order with a constant (prune.compare_classes_together), made once
    while kept."""
    orders = [column.zone_order() for column in columns]

    def made() -> list:
        found = compare_classes_together(low, orders, [frame_zones(t, low.columns(), t.rows) for t in tables],
                                         [t.rows for t in tables], classes=False)
        for classes, _ in found:
            if classes is not None:  # (None: a SparseEstimate's lists give them)
                classes.setflags(write=False)  # (shared by every plan that finds it)
        return found
    return kept(_classings, CLASSES_KEPT, (low, tuple(t.rows for t in tables)), orders, made)


def _sliced_scans(spec: KernelSpec, classified: list, tested: list[int], lowered: list, mode: str) -> list | None:
    """Each table's SlicedScan of the one predicate column the frame loop could read by its top byte: a
    column the predicate alone reads (no aggregate or group needs its exact values), whose top bytes every
    table holds or can read, with low bits of one width (one kernel); found from the zone maps alone, the
    buckets as the encoding cuts them (encodings.slice_geometry). None where no column can be."""
    if mode not in INDEX_MODES or spec.nullable:  # the low bits of undecided rows are read in place; NULLs by frames
        return None
    for i in spec.predicate_slots:
        c = spec.columns[i]
        if i in spec.value_slots or not all(t.columns[c].has("sliced") and t.rows for t, *_ in classified):
            continue
        buckets: dict = {}
        scans = [_sliced_scan(c, i, t, low, frames_tested, buckets)
                 for (t, *_), low, frames_tested in zip(classified, lowered, tested)]
        if len({s.low_bytes for s in scans}) == 1:
            return scans
    return None


def _sliced_scan(c: str, slot: int, table, low: Expr | None, tested: int, buckets: dict) -> SlicedScan:
    """A table's SlicedScan of column `c` (kernel slot `slot`) under its lowered predicate, the undecided rows of its
    `tested` frames estimated; `buckets`: (lowered predicate, the column's range) → _undecided's, found once for the
    parts alike."""
    lo, hi = table.columns[c].slice_range()  # (a GPU's share of frames: the whole column's buckets, as its top bytes)
    if (low, lo, hi) not in buckets:
        buckets[(low, lo, hi)] = _undecided(low, c, lo, hi)
    bucket, dtype, share, mask = buckets[(low, lo, hi)]
    return SlicedScan(c, slot, lo, bucket, 0 if dtype is None else np.dtype(dtype).itemsize, mask,
                      share * FRAME_ROWS * tested)


def _undecided(low: Expr | None, c: str, lo: int, hi: int) -> tuple:
    """(bucket, low bits' dtype, share of the values in buckets the predicate does not decide, their mask) of a
    column of values lo..hi read by its top byte, the buckets as the encoding cuts them."""
    bucket, _, dtype = slice_geometry(hi - lo)
    firsts, lasts = _bucket_bounds(lo, hi, bucket)
    undecided = (~decided_buckets(low, c, firsts, lasts)
                 if dtype is not None else np.zeros(1 << TOP_BITS, bool))  # a bucket of one value decides itself
    share = min(1.0, int(undecided.sum()) * bucket / (hi - lo + 1))  # of the values, spread evenly
    return bucket, dtype, share, int.from_bytes(np.packbits(undecided, bitorder="little").tobytes(), "little")


@functools.lru_cache(maxsize=256)
def _bucket_bounds(lo: int, hi: int, bucket: int) -> tuple[np.ndarray, np.ndarray]:
    """Each bucket's first and last value, clipped to the column's range lo..hi (no bucket past it holds a row):
    in int64 where every bucket's end fits it, else in Python's integers (a key spanning most of int64). Made once
    a column's range (a new constant's plan asks again), read only."""
    if bucket << TOP_BITS < 2**63 and lo + (bucket << TOP_BITS) < 2**63:
        t = np.arange(1 << TOP_BITS, dtype=np.int64)
        firsts, lasts = np.minimum(lo + bucket * t, hi), np.minimum(lo + bucket * (t + 1) - 1, hi)
    else:
        firsts = np.array([min(lo + bucket * t, hi) for t in range(1 << TOP_BITS)], np.int64)
        lasts = np.array([min(lo + bucket * (t + 1) - 1, hi) for t in range(1 << TOP_BITS)], np.int64)
    firsts.setflags(write=False)
    lasts.setflags(write=False)
    return firsts, lasts


def _shared_bases(query: Query, tables: list, selectable: list, steps: tuple, cards: tuple, nullable=frozenset()) -> tuple | None:
    """One base for every part's groups, where counting from it takes no more groups than each part's
    own base does and every group column's codes mean the same strings in every part: the parts then
    add into one table of accumulators (a parted store's 1,000,000 suppliers read back once, not ten
    times; an ungrouped query's one group, () its base: SF 100's ten tables read back and added took
    0.5 ms a call). None where not: one table of words a part."""
    one = _one_base(query, tables, selectable, steps, nullable)
    if one is None or any(span > card for span, card in zip(one[1], cards)):
        return None
    return one[0]


def _one_base(query: Query, tables: list, selectable: list, steps: tuple, nullable=frozenset()) -> tuple | None:
    """(each group column's smallest selectable value over every part, in steps; the values it spans from there,
    one more for a column with NULLs), where the parts are several and each VARCHAR group column's
    (and MIN or MAX argument's) codes mean the same strings in every part; else None."""
    if len(tables) < 2:
        return None
    strings = [a.arg.name for a in query.aggregates if a.func in ("min", "max") and a.arg.type.name == "VARCHAR"]
    if any(t.columns[c].dictionary != tables[0].columns[c].dictionary for c in strings for t in tables[1:]):
        return None  # a MIN or MAX of codes that mean other strings in another part: a table a part
    bases, spans = [], []
    for c, step in zip(query.group_by, steps):
        if any(t.columns[c.name].dictionary != tables[0].columns[c.name].dictionary for t in tables[1:]):
            return None
        low = min(r[c.name][0] // step for r in selectable)
        bases.append(low)
        spans.append(max(r[c.name][1] // step for r in selectable) - low + 1 + (c.name in nullable))
    return tuple(bases), tuple(spans)


# --- the index scan ------------------------------------------------------------------------------------------------
def _frame_columns(spec: KernelSpec, tp: TablePlan) -> list[str]:
    return list(spec.columns) if tp.touched else []


def _index_columns(spec: KernelSpec, opt: IndexOption) -> list[str]:
    """The columns an index scan reads in place at listed rows: every kernel column but the indexed one."""
    return [c for c in spec.columns if c != opt.column]


def _buckets(lo: int, hi: int, reference: int, bucket: int) -> tuple[int, int]:
    """[first, end) of the buckets that hold values lo..hi (256 buckets of `bucket` values from `reference`)."""
    top = (1 << TOP_BITS) - 1
    return min(top, max(0, (lo - reference) // bucket)), min(top, max(0, (hi - reference) // bucket)) + 1


def _index_option(tp: TablePlan, spec: KernelSpec, selectable: dict) -> IndexOption | None:
    """The cheapest index scan of a table, over a predicate column whose bucket lists it holds or can read,
    estimated from the zone maps alone: the entries of the buckets the column's range among selectable
    rows touches (its values spread evenly over the buckets), each an id and its low bits read in order, and
    every other column read in place at each entry's row (predicate columns) or selected row (the rest)."""
    table, best = tp.table, None
    if not tp.touched or table.rows >= 2**32 or spec.nullable:  # nothing to scan; 32-bit row ids only; NULLs by frames
        return None
    for i in spec.predicate_slots:
        c = spec.columns[i]
        col = table.columns[c]
        if not col.has("indexed") or c not in selectable:
            continue
        lo, hi = col.slice_range()
        bucket, _, low = slice_geometry(hi - lo)  # as the lists are built (a share's: the whole column's)
        b0, b1 = _buckets(*selectable[c], lo, bucket)
        entries = table.rows * min(1.0, (b1 - b0) * bucket / (hi - lo + 1))
        low_bytes = 0 if low is None else np.dtype(low).itemsize
        others = [spec.columns[j] for j in spec.predicate_slots if j != i]
        values = [x for x in spec.columns if x != c and x not in others]
        link = (entries * (4 + low_bytes) + entries * IN_PLACE_READS * ZERO_COPY_READ_BYTES * len(others)
                + tp.selected * IN_PLACE_READS * ZERO_COPY_READ_BYTES * len(values))
        if best is None or link < best.link_bytes:
            best = IndexOption(c, selectable[c], entries, link, i, low_bytes)
    return best


def _index_scan(tp: TablePlan, spec: KernelSpec) -> IndexScan | None:
    """The chosen index scan, exact: the lists are read (from disk, the first time) and the entries of the
    buckets found from their histogram. None where the lists cannot serve the kernel (64-bit row ids)."""
    opt = tp.index_option
    lists = tp.table.columns[opt.column].get("indexed")
    if lists.ids.dtype != np.uint32:
        return None
    b0, b1 = _buckets(*opt.values, lists.reference, lists.bucket)
    starts = lists.starts
    first, end = int(starts[b0]), int(starts[b1])
    return IndexScan(opt.column, spec.columns.index(opt.column), b0, b1, first, end, lists.reference + b0 * lists.bucket,
                     lists.bucket, 0 if lists.low is None else lists.low.itemsize, (starts[b0:b1 + 1] - first).astype(np.int64))


def _joined_words(metas: list[np.ndarray]) -> np.ndarray:
    """Several tables' frame metadata of a column, each frame's word offset and width (the second field), as
    one array, made once for these tables."""
    return metas[0][:, 1] if len(metas) == 1 else joined_once(metas, _join_words)


def _join_words(metas: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([m[:, 1] for m in metas])


def _join_widths(metas: list[np.ndarray]) -> np.ndarray:
    """Several tables' frame metadata of a column, each frame's width in words (the low byte of its second field),
    as one array, made once for these tables (joined_once: a new constant's plan asks again), read only."""
    out = _joined_words(metas) & 0xFF
    out.setflags(write=False)
    return out


@dataclass
class _Cut:
    """What chunking finds from the frames' classes alone, before any estimate: every table's pieces (first, end,
    whole) one after another, `counts` a table, and for each column a piece needs (a row a column of `columns`)
    its bytes copied whole (`bulk`) and, for a predicate column alone, whether it is read in place (its tested
    frames' words) and those bytes."""

    pieces: list
    counts: list[int]
    part: np.ndarray  # each piece's table
    firsts: np.ndarray  # each piece's first frame, in its table
    ends: np.ndarray
    wholes: np.ndarray
    columns: list[str]
    is_value: np.ndarray  # (a column, 1)
    needed: np.ndarray  # (columns, pieces): the piece's kernel reads the column
    bulk: np.ndarray
    zero: np.ndarray  # read in place: a predicate column alone (value columns: _chunks, by the estimates)
    zero_read: np.ndarray
    tested_in_place: np.ndarray  # a piece's predicate bytes read in place


# Cuts kept for the next plan of the same tables, kernel columns, mode and target whose frames are classed alike (a
# new constant of Q6 as generated tests every frame whatever its bounds): a few shapes' packed and top-byte cuts
CUTS_KEPT = 32
_cuts: dict = {}  # (mode, target, kernel columns and slots, top-byte column, ..., ids of the tables) → (the tables;
# copies of their classes and the _Cut made from them, read only)


def _kept_cut(parts: list, spec: KernelSpec, mode: str, target: int) -> _Cut:
    """_cut, found again where the last plan of its key had every table's frames classed as these are."""
    by_top = parts[0][5].column if parts and parts[0][5] is not None else None
    key = (mode, target, spec.columns, spec.predicate_slots, spec.value_slots, by_top,
           GAP_BYTES, SPLIT_FRAMES, META_BYTES, IN_PLACE_FRAME_WEIGHT, IN_PLACE_META_BYTES)  # (as tests set them)

    def made() -> tuple:
        cut = _cut(parts, spec, mode, target)
        for f in dataclasses.fields(cut):
            if isinstance(getattr(cut, f.name), np.ndarray):
                getattr(cut, f.name).setflags(write=False)
        return tuple(_kept_classes(f) for _, f, *_ in parts), cut

    def alike(found: tuple) -> bool:
        return all(_classed_alike(c, f) for c, (_, f, *_) in zip(found[0], parts))

    return kept(_cuts, CUTS_KEPT, key, [p[0] for p in parts], made, alike)[1]


def _kept_classes(frames: _Frames) -> tuple:
    """What a kept cut keeps of a table's classes: (frames, the one class every frame holds), found from the counts
    (a comparison that tests every frame: no copy of ten parts' classes, no frame-by-frame comparison on every new
    constant), (frames, a comparison's SparseEstimate or StretchEstimate) where its few frames' lists or its three
    stretches give them, or (frames, its classes where they cannot change, else a copy)."""
    one = frames.one_class
    if one is not None:
        return frames.n, one
    listed = frames._given
    if listed is not None and "classes" not in frames.__dict__:
        return frames.n, listed  # (its lists or middle read only: compare_classes_together's)
    classes = frames.classes  # (read only and its own memory: a comparison's kept classes, kept as they are)
    return frames.n, classes if classes.base is None and not classes.flags.writeable else classes.copy()


def _classed_alike(kept: tuple, frames: _Frames) -> bool:
    n, classes = kept
    if n != frames.n:
        return False
    one = frames.one_class
    if isinstance(classes, int) or one is not None:  # (one class in either: alike where it is both's)
        return isinstance(classes, int) and classes == one
    sparse = frames._sparse
    if isinstance(classes, SparseEstimate) and sparse is not None:  # the lists alike (else a copy of the other's
        # classes, or lists of the other side of the constant: cut again, as classes that differ are)
        return classes is sparse or (classes.complement == sparse.complement and np.array_equal(classes.passing, sparse.passing)
                                     and np.array_equal(classes.tested, sparse.tested))
    stretched = frames._stretched
    if isinstance(classes, StretchEstimate) and stretched is not None:  # their three stretches alike
        return classes is stretched or classes.same(stretched)
    if isinstance(classes, ClassesGiven):
        classes = classes.classes()
    return classes is frames.classes or np.array_equal(classes, frames.classes)


def _cut(parts: list, spec: KernelSpec, mode: str, target: int) -> _Cut:
    """The pieces of _chunks' tables and what each column of them costs the link, from their frames' classes."""
    predicate = [spec.columns[i] for i in spec.predicate_slots]
    values = [spec.columns[i] for i in spec.value_slots]
    # sized from the frame metadata the zone maps came with: no column's words are read to plan
    metas = [{c: table.columns[c].zone_buffers()[0] for c in spec.columns} if mode != "resident" else {}
             for table, *_ in parts]
    by_top = parts[0][5].column if parts and parts[0][5] is not None else None  # one column in every table
    frames = [f for _, f, *_ in parts]
    offsets = np.concatenate([[0], np.cumsum([f.n for f in frames])]).astype(np.int64)
    gaps, splits = [], []
    for f, meta in zip(frames, metas):
        shipped = sum(FRAME_ROWS * f.n if c == by_top else packed_bytes(meta[c])
                      for c in predicate if c in meta) / max(f.n, 1)  # a gap frame's bytes
        # (resident: nothing is shipped, so every run is one: ruled-out frames are skipped by their class)
        gaps.append(int(GAP_BYTES / shipped) if shipped else f.n)
        # a stretch that passes whole is split off where its predicate bytes pay for a chunk (resident: one
        # chunk, the class of each frame says which frames skip the predicate)
        splits.append(max(SPLIT_FRAMES, math.ceil(GAP_BYTES / shipped)) if shipped else f.n + 1)
    joined_firsts, joined_ends, wholes = _pieces(frames, np.array(gaps, np.int64), np.array(splits, np.int64), target,
                                                 offsets)  # every table's frames one after another
    part = np.searchsorted(offsets, joined_firsts, "right") - 1
    firsts, ends = joined_firsts - offsets[part], joined_ends - offsets[part]
    counts = np.bincount(part, minlength=len(parts)).tolist()
    pieces = list(zip(firsts.tolist(), ends.tolist(), wholes.tolist()))
    # each piece's tested frames, from every table's list where some of its frames are tested and some not, else from
    # its span (no list made: Q6 as generated tests every frame of SF 100's ten parts)
    tested_at = np.concatenate([np.zeros(0, np.int64)] + [f.tested_frames + o for f, o in zip(frames, offsets.tolist())
                                                          if 0 < f.tested < f.n])
    every = np.array([f.tested == f.n for f in frames], bool)
    n_tested = np.searchsorted(tested_at, joined_ends) - np.searchsorted(tested_at, joined_firsts)
    n_tested = np.where(every[part], ends - firsts, n_tested)
    every_tested = n_tested == ends - firsts

    def bulk_bytes(c: str) -> np.ndarray:
        """A column's bytes for each piece's frames copied whole: its words (their metadata is in device memory,
        gpu.fused), or its top bytes."""
        if c == by_top:
            return FRAME_ROWS * (ends - firsts)
        words = _joined_words([meta[c] for meta in metas])
        last = words[joined_ends - 1]
        return 4 * ((last >> 8) + 32 * (last & 0xFF) - (words[joined_firsts] >> 8))  # encodings.frame_words

    def tested_bytes(c: str, bulk: np.ndarray) -> np.ndarray:
        """A predicate column's bytes for each piece's tested frames alone, read in place: where a piece tests
        every frame, its bulk bytes (a frame's words lie one after another: encodings.pack)."""
        if c == by_top:
            return FRAME_ROWS * n_tested
        words = bulk.copy()
        if not every_tested.all():
            width = joined_once([meta[c] for meta in metas], _join_widths)
            before = np.concatenate([[0], np.cumsum(width[tested_at], dtype=np.int64)])  # the tested frames' widths, summed
            widths = before[np.searchsorted(tested_at, joined_ends)] - before[np.searchsorted(tested_at, joined_firsts)]
            words[~every_tested] = 128 * widths[~every_tested]
        return words + META_BYTES * n_tested

    # every column's pieces weighed at once, a row a column (a column at a time asked NumPy 15 times a column:
    # Q1's 7 columns and 8 chunks took a millisecond). A column is needed by every piece (a value column), by the
    # pieces that test their frames (a predicate column alone), or by none.
    columns = [c for c in spec.columns if mode != "resident" and (c in values or (c in predicate and not wholes.all()))]
    n_pieces = len(pieces)
    is_value = np.array([c in values for c in columns], bool)[:, None]
    needed = is_value | ~wholes  # (a column listed is a value column or a predicate column)
    bulk = np.array([bulk_bytes(c) for c in columns], np.int64).reshape(len(columns), n_pieces)
    zero = np.zeros((len(columns), n_pieces), bool)  # read in place (a piece that needs it: else never set)
    zero_read = np.zeros((len(columns), n_pieces), np.int64)  # bytes each piece reads a column in place
    tested_in_place = np.zeros(n_pieces, np.int64)
    if mode in MAPPED_MODES:
        for j, c in enumerate(columns):
            if c in predicate and c not in values:  # read for its test alone: its tested frames in place
                in_place = tested_bytes(c, bulk[j])
                zero[j] = needed[j] & (in_place * IN_PLACE_FRAME_WEIGHT + IN_PLACE_META_BYTES * n_tested < bulk[j])
                zero_read[j] = np.where(zero[j], in_place, 0)
                tested_in_place += zero_read[j]
    return _Cut(pieces, counts, part, firsts, ends, wholes, columns, is_value, needed, bulk, zero, zero_read,
                tested_in_place)


def _picked(parts: list, cut: _Cut) -> np.ndarray:
    """The rows each piece of a cut is estimated to select, every table's at once (prune.per_piece_together): summed
    once for pieces cut alike by both scans (the first table's frames keep the last)."""
    if not parts:
        return np.zeros(0)
    frames = parts[0][1]
    if frames._picked is not None and frames._picked[0] == cut.counts and frames._picked[1] == cut.pieces:
        return frames._picked[2]
    found = per_piece_together([selected for _, _, selected, *_ in parts], cut.counts, cut.firsts, cut.ends)
    frames._picked = cut.counts, cut.pieces, found
    return found


def _chunks(parts: list, query: Query, spec: KernelSpec, mode: str, target: int) -> list[tuple]:
    """Each table's (chunks, stream bytes, bytes read in place): its touched runs cut into pieces of about `target`
    touched frames, of equal span within a run (a run of 1.1 targets is two chunks of 0.55, not one whole and a
    sliver). `parts`: each table's
    (table, _Frames, Estimate, constants, group bases, SlicedScan or None: a predicate column read by its top
    byte, a byte a row, instead of its packed frames). The pieces of every table are weighed together, a
    column at a time (a scattered predicate cuts SF 10 into hundreds of pieces; a parted table's ten parts
    asked NumPy ten times as often): from the classes (_cut), then a value column read in place where the
    rows a piece is estimated to select cost the link less than its frames."""
    predicate = [spec.columns[i] for i in spec.predicate_slots]
    cut = _kept_cut(parts, spec, mode, target)
    columns, pieces, part, bulk, wholes = cut.columns, cut.pieces, cut.part, cut.bulk, cut.wholes
    picked = _picked(parts, cut)
    zero, zero_read = cut.zero, cut.zero_read
    if mode in MAPPED_MODES:
        selected_bytes = (picked * ZERO_COPY_READ_BYTES).astype(np.int64)
        value_only = np.array([c not in predicate for c in columns], bool)[:, None] & cut.is_value
        value_zero = value_only & ~wholes & (picked * ZERO_COPY_READ_BYTES < bulk)  # its selected rows in place
        zero = zero | value_zero
        zero_read = np.where(value_zero, selected_bytes, zero_read)
    copied = cut.needed & ~zero

    def by_table(x: np.ndarray) -> np.ndarray:
        """Each table's sum of an integer a piece, over every column."""
        return np.bincount(part, weights=x.sum(axis=0), minlength=len(parts)).astype(np.int64)  # (exact: bytes below 2^53)

    stream_bytes, zero_bytes = by_table(np.where(copied, bulk, 0)), by_table(zero_read)
    # each piece's columns as one number (two bits a column: streamed, read in place), its tuples made once a number
    shifts = 2 * np.arange(len(columns), dtype=np.int64)[:, None]
    code = ((copied.astype(np.int64) << shifts) + (zero.astype(np.int64) << shifts + 1)).sum(axis=0)
    codes = code.tolist()
    shown = {k: (tuple(c for j, c in enumerate(columns) if k >> 2 * j & 1), tuple(c for j, c in enumerate(columns) if k >> 2 * j + 1 & 1))
             for k in set(codes)}

    def made() -> list[tuple[Chunk, ...]]:
        """Each table's chunks (a frozen dataclass each: SF 100's 160 pieces of two plans took 0.2 ms to make)."""
        chunks = [Chunk(first, end, whole, *shown[k], p, t) for (first, end, whole), k, p, t
                  in zip(pieces, codes, picked.tolist(), cut.tested_in_place.tolist())]
        ends = np.cumsum(cut.counts).tolist()
        return [tuple(chunks[end - n:end]) for n, end in zip(cut.counts, ends)]

    tables_chunks = _Lazy(made)
    out = []
    for (table, frames, selected, constants, bases, sliced), streamed, zeroed in zip(parts, stream_bytes.tolist(),
                                                                                    zero_bytes.tolist()):
        if sliced is not None:  # the undecided rows' low bits, a sector each
            zeroed += int(sliced.low_rows * SECTOR)
        out.append((tables_chunks, streamed, zeroed))
    return out


__all__ = ["FusedPlan", "TablePlan", "Chunk", "IndexOption", "IndexScan", "plan_fused", "NotOnGpu"]
