"""The plan of a query on the fused kernel: plain data, printable before it runs.

For each table (a part of a parted store is a table) it says which frames the zone maps rule out,
which pass whole and which are tested, cut into chunks of contiguous frames; for each chunk, where
each column's bytes come from:

    stream     copied to the GPU in bulk (the chunk's frames), on the copy stream, ahead of its kernel
    zero_copy  read in place from mapped host memory by the kernel, only for the rows that passed
    resident   already in device memory (mode resident)

Predicate columns ship first (only for chunks with frames to test); a value column (an aggregate's
or a group's) is read in place when the rows a chunk selects would cost fewer bytes of the link
that way than its frames copied whole, else shipped in bulk with the chunk. Every choice has its
reason in `reasons`, and --explain prints them with the generated kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gquery.encodings import FRAME_ROWS, frame_words, packed_bytes
from gquery.errors import UsageError
from gquery.gpu.codegen import KernelSpec, NotOnGpu, kernel_spec
from gquery.plan import MAPPED_MODES, MODES, ZERO_COPY_READ_BYTES
from gquery.prune import ALWAYS, CHECK, NEVER, classify, frame_zones, lower, narrowed
from gquery.query import Query

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


@dataclass(frozen=True)
class Chunk:
    first: int  # first frame
    end: int  # one past the last
    always: bool  # every frame passes whole: no predicate columns, no test
    streamed: tuple[str, ...]  # columns copied in bulk for this chunk
    zero_copy: tuple[str, ...]  # columns read in place for the rows this chunk selects
    selected: float  # rows it is estimated to select

    @property
    def frames(self) -> int:
        return self.end - self.first


@dataclass
class TablePlan:
    """One table's share of the plan: its constants, its frames' classes, its chunks."""

    table: object = field(repr=False)
    constants: tuple[int, ...]
    group_bases: tuple[int, ...]
    classes: np.ndarray = field(repr=False)  # int8 a frame: NEVER, CHECK, ALWAYS
    chunks: tuple[Chunk, ...]
    selected: float  # rows estimated to pass
    stream_bytes: int  # bulk copies, over every chunk
    zero_copy_bytes: int  # estimated reads in place

    @property
    def rows(self) -> int:
        return self.table.rows

    def counts(self) -> dict[str, int]:
        return {name: int(np.count_nonzero(self.classes == c)) for name, c in (("never", NEVER), ("check", CHECK), ("always", ALWAYS))}


@dataclass
class FusedPlan:
    query: Query
    mode: str
    spec: KernelSpec
    tables: list[TablePlan]
    reasons: list[str]
    block_threads: int = 128
    encoding: str = "fused"

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)

    @property
    def z(self):  # a fused plan answers SQL; the mission's Z is in its constants
        return None

    def steps(self) -> list[tuple[str, str]]:
        total = {k: sum(t.counts()[k] for t in self.tables) for k in ("never", "check", "always")}
        frames = sum(total.values())
        chunks = [c for t in self.tables for c in t.chunks]
        streamed = sorted({c for ch in chunks for c in ch.streamed})
        zero = sorted({c for ch in chunks for c in ch.zero_copy})
        out = [("prune", f"{frames:,} frames of {FRAME_ROWS}: {total['never']:,} ruled out by the zone maps (not shipped), "
                         f"{total['always']:,} pass whole (no predicate), {total['check']:,} tested row by row")]
        if self.mode == "resident":
            out.append(("resident", f"on the GPU before the query: {', '.join(self.spec.columns)}"))
        elif streamed:
            out.append(("transfer", f"{len(chunks)} chunk(s) of contiguous frames copied on one stream: "
                                    f"{', '.join(streamed)} ({sum(t.stream_bytes for t in self.tables) / 1e6:,.1f} MB)"))
        pred = ", ".join(self.spec.columns[i] for i in self.spec.predicate_slots) or "none"
        values = ", ".join(self.spec.columns[i] for i in self.spec.value_slots) or "none"
        out.append(("decode-and-scan", f"fused kernel, a warp a frame: predicate on {pred}; then, only for frames with a "
                                       f"selected row, {values} of the selected rows"))
        if zero:
            out.append(("gather", f"read in place from mapped host memory for selected rows: {', '.join(zero)} "
                                  f"(about {sum(t.zero_copy_bytes for t in self.tables) / 1e6:,.1f} MB)"))
        agg = "registers" if self.spec.groups == 1 else \
            f"{self.spec.groups:,} group(s) x {self.spec.words} words in {'shared' if self.spec.in_shared else 'device'} memory"
        out.append(("combine", f"exact 128-bit sums, counts, min and max in {agg}; atomically added per table; one copy back"))
        return out

    def describe(self) -> str:
        lines = [f"plan: {self.mode}, fused kernel, {len(self.tables)} table(s), {self.rows:,} rows",
                 f"  query       {self.query.describe()}",
                 f"  selects     about {sum(t.selected for t in self.tables):,.0f} rows (estimated from the zone maps)"]
        lines += [f"  {i + 1}. {name:<16} {text}" for i, (name, text) in enumerate(self.steps())]
        lines += [f"  why: {r}" for r in self.reasons]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"kernel": "fused", "mode": self.mode, "rows": self.rows, "columns": list(self.spec.columns),
                "predicate": self.spec.predicate, "groups": self.spec.groups,
                "accumulators": [a.kind for a in self.spec.accumulators],
                "frames": {k: sum(t.counts()[k] for t in self.tables) for k in ("never", "check", "always")},
                "chunks": sum(len(t.chunks) for t in self.tables), "selected_estimate": sum(t.selected for t in self.tables),
                "stream_bytes": sum(t.stream_bytes for t in self.tables),
                "zero_copy_bytes_estimate": sum(t.zero_copy_bytes for t in self.tables),
                "steps": [list(s) for s in self.steps()], "reasons": list(self.reasons)}


def _runs(touched: np.ndarray, gap_frames: int) -> list[tuple[int, int]]:
    """[first, end) runs of touched frames, runs separated by at most `gap_frames` ruled-out frames merged."""
    idx = np.flatnonzero(touched)
    if not len(idx):
        return []
    breaks = np.flatnonzero(np.diff(idx) > gap_frames + 1)
    starts = np.concatenate([[idx[0]], idx[breaks + 1]])
    ends = np.concatenate([idx[breaks] + 1, [idx[-1] + 1]])
    return list(zip(starts.tolist(), ends.tolist()))


def _segments(classes: np.ndarray, a: int, b: int, split: int) -> list[tuple[int, int, bool]]:
    """A run as (first, end, whole): a stretch of at least `split` frames that all pass is a
    segment of its own (its predicate columns are not shipped); the rest are tested frames, a short
    stretch that passes whole joining its neighbours."""
    always = classes[a:b] == ALWAYS
    cuts = [0, *(np.flatnonzero(np.diff(always.astype(np.int8))) + 1).tolist(), b - a]
    out: list[tuple[int, int, bool]] = []
    for s, e in zip(cuts, cuts[1:]):
        whole = bool(always[s]) and e - s >= split
        if out and not whole and not out[-1][2]:
            out[-1] = (out[-1][0], a + e, False)
        else:
            out.append((a + s, a + e, whole))
    return out


def plan_fused(query: Query, tables: list, mode: str, sm_count: int, chunk_frames: int | None = None) -> FusedPlan:
    """Plan `query` over `tables` (one Table, or a parted table's parts) in `mode`."""
    if mode not in MODES:
        raise UsageError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if chunk_frames is not None and chunk_frames < 1:
        raise UsageError(f"chunk rows must be positive, got {chunk_frames * FRAME_ROWS}")
    names = query.columns()
    ranges_by_table = [t.ranges(names) for t in tables]
    ranges = {n: (min(r[n][0] for r in ranges_by_table), max(r[n][1] for r in ranges_by_table)) for n in names}
    lowered = [lower(query.where, {n: t.columns[n].dictionary for n in names}, r) for t, r in zip(tables, ranges_by_table)]
    # a group column's values are bounded per part, and narrowed by the predicate: its groups are counted
    # from each part's smallest value a selected row can have
    selectable = [narrowed(low, r) for low, r in zip(lowered, ranges_by_table)]
    # a group column's values are multiples of its common factor in every table (l_quantity's of 100): its
    # groups are counted in those steps, from each table's base (its smallest selectable value, in steps,
    # rounded down), and rounded up to a power of two: tables of nearly the same ranges share one kernel
    steps = tuple(math.gcd(*(int(t.columns[c.name].zone_buffers()[2]) for t in tables)) or 1 for c in query.group_by)
    cards = tuple(1 << (max(r[c.name][1] // step - r[c.name][0] // step + 1 for r in selectable) - 1).bit_length()
                  for c, step in zip(query.group_by, steps))
    spec, _ = kernel_spec(query, lowered[0], ranges, max(t.rows for t in tables), cards, steps, len(tables))
    reasons = [f"kernel columns {', '.join(spec.columns)}; predicate `{spec.predicate or 'none'}`; "
               f"{len(spec.accumulators)} accumulator(s), {spec.groups:,} group(s)"]
    classified = []
    for t, low, r in zip(tables, lowered, selectable):
        other, constants = kernel_spec(query, low, ranges, max(tt.rows for tt in tables), cards, steps, len(tables))
        if other != spec:
            raise NotOnGpu("the parts lower the query to different kernels")
        zones = frame_zones(t, low.columns() if low is not None else (), t.rows)
        classes, fraction = classify(low, zones)
        bases = tuple(r[c.name][0] // step for c, step in zip(query.group_by, steps))
        classified.append((t, classes, fraction * zones.rows, tuple(constants), bases))
    touched = sum(int(np.count_nonzero(c != NEVER)) for _, c, *_ in classified)
    target = chunk_frames or min(MAX_CHUNK_FRAMES, max(MIN_CHUNK_FRAMES, math.ceil(touched / CHUNKS_PER_QUERY)))
    table_plans = [_chunks(t, query, spec, mode, classes, selected, constants, bases, target)
                   for t, classes, selected, constants, bases in classified]
    if mode in MAPPED_MODES:
        reasons.append(f"value columns read in place when a chunk's selected rows x {ZERO_COPY_READ_BYTES} B a column "
                       f"cost less than its frames copied whole")
    elif mode == "pageable":
        reasons.append("pageable memory cannot be read in place: every column a chunk needs is staged and copied")
    if any(t.sorted_by for t in tables):
        reasons.append(f"the rows are clustered by {tables[0].sorted_by}: its zone maps are narrow, so a range on it "
                       f"rules out most frames")
    return FusedPlan(query, mode, spec, table_plans, reasons)


def _chunks(table, query: Query, spec: KernelSpec, mode: str, classes: np.ndarray, selected: np.ndarray,
            constants: tuple, bases: tuple, target: int) -> TablePlan:
    """One table's chunks: its touched runs cut into pieces of about `target` frames, of equal size
    within a run (a run of 1.1 targets is two chunks of 0.55, not one whole and a sliver)."""
    touched = classes != NEVER
    predicate = [spec.columns[i] for i in spec.predicate_slots]
    values = [spec.columns[i] for i in spec.value_slots]
    # sized from the frame metadata the zone maps came with: no column's words are read to plan
    meta = {c: table.columns[c].zone_buffers()[0] for c in spec.columns} if mode != "resident" else {}
    shipped = sum(packed_bytes(meta[c]) for c in predicate if c in meta) / max(len(classes), 1)  # a gap frame's bytes
    # (resident: nothing is shipped, so every run is one: ruled-out frames are skipped by their class)
    runs = _runs(touched, int(GAP_BYTES / shipped) if shipped else len(classes))
    # a stretch that passes whole is split off where its predicate bytes pay for a chunk (resident: one
    # chunk, the class of each frame says which frames skip the predicate)
    split = max(SPLIT_FRAMES, math.ceil(GAP_BYTES / shipped)) if shipped else len(classes) + 1
    chunks, stream_bytes, zero_bytes = [], 0, 0
    for a, b in runs:
        for s, e, whole in _segments(classes, a, b, split):
            pieces = -(-(e - s) // target)
            for k in range(pieces):
                first, end = s + (e - s) * k // pieces, s + (e - s) * (k + 1) // pieces
                picked = float(selected[first:end].sum())
                need = sorted(set(values) | (set() if whole else set(predicate)), key=spec.columns.index)
                streamed, zero = [], []
                for c in need:
                    if mode == "resident":
                        continue
                    w0, w1 = frame_words(meta[c], first, end)
                    bulk = 4 * (w1 - w0) + META_BYTES * (end - first)
                    if c in predicate and not whole or mode not in MAPPED_MODES or whole:
                        streamed.append(c)
                        stream_bytes += bulk
                    elif picked * ZERO_COPY_READ_BYTES < bulk:
                        zero.append(c)
                        zero_bytes += int(picked * ZERO_COPY_READ_BYTES)
                    else:
                        streamed.append(c)
                        stream_bytes += bulk
                chunks.append(Chunk(first, end, whole, tuple(streamed), tuple(zero), picked))
    return TablePlan(table, constants, bases, classes, tuple(chunks), float(selected.sum()), stream_bytes, zero_bytes)


__all__ = ["FusedPlan", "TablePlan", "Chunk", "plan_fused", "NotOnGpu"]
