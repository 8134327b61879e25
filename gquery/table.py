"""A table of named columns, each carrying its encodings: what the planner and the engines read.

A Table holds columns of exact integer values (gquery.schema: unscaled decimals, days, dictionary
codes), each with its SQL type. Each column keeps every encoding made of it so far (a store opens
with its stored encodings, read from disk only when a query first needs them; others are derived on
first use and kept with the table, whose lifetime is theirs). Every column's packed encoding carries
its zone maps: each frame's smallest and largest value, what the planner prunes frames by.

The mission's three columns also have encoding sets, one encoding a column, for its own scan:

    plain    key plain,  factors plain   (20 bytes a row: today's engine)
    packed   key packed, factors packed  (frame of reference + bit-packing, decoded in the scan)
    sliced   key sliced, factors packed  (the key's top byte decides; the rest is read on demand)
    indexed  key indexed, factors packed (the rows of Z's bucket and those below: a prefix of lists)
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gquery.columns import LineitemColumns
from gquery.contract import QUERY_COLUMNS
from gquery.encodings import ENCODINGS, FRAME_ROWS, Indexed, Packed, Plain, Sliced, encode_column, frame_view, index_key
from gquery.query import BIGINT, DATE_INFINITY, INTEGER_TYPES, SqlType, decimal
from gquery.schema import Dictionary, Schema, as_dictionary

KEY, QUANTITY, PRICE = QUERY_COLUMNS
LOGICAL = {KEY: ("int32 key", 4), QUANTITY: ("decimal(_,2) as int64 hundredths", 8),
           PRICE: ("decimal(_,2) as int64 hundredths", 8)}
ENCODING_SETS = {
    "plain": {KEY: "plain", QUANTITY: "plain", PRICE: "plain"},
    "packed": {KEY: "packed", QUANTITY: "packed", PRICE: "packed"},
    "sliced": {KEY: "sliced", QUANTITY: "packed", PRICE: "packed"},
    "indexed": {KEY: "indexed", QUANTITY: "packed", PRICE: "packed"},
}
assert set(ENCODING_SETS) == set(ENCODINGS)


MISSION_TYPES = {KEY: BIGINT, QUANTITY: decimal(15, 2), PRICE: decimal(15, 2)}  # TPC-H's own, as DuckDB reads them
INTEGER_BYTES = {**{name: bits // 8 for name, bits in INTEGER_TYPES.items()}, "DATE": 4, "VARCHAR": 4}



def zone_spans(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each frame's smallest value as a double, the values it spans as a double): what the planner's
    estimates divide by (prune.classify)."""
    low_f = low.astype(np.float64)
    return low_f, high.astype(np.float64) - low_f + 1


BLOCK_FRAMES = 64  # frames a zone block: a plan classes a block whole where its envelopes allow (prune.classify)


@dataclass(frozen=True)
class ZoneBlocks:
    """A column's zone map in blocks of BLOCK_FRAMES frames (the last may hold fewer): each block's envelopes,
    exact (its frames' smallest and largest low, smallest and largest high), its frames that hold one value,
    its narrowest frame's span, and its frames' sums of 1/span, low/span and high/span, with which a block's
    mean estimate is a closed form of a constant (prune.classify)."""

    frames: np.ndarray
    low_min: np.ndarray
    low_max: np.ndarray
    high_min: np.ndarray
    high_max: np.ndarray
    points: np.ndarray
    span_min: np.ndarray
    inv_span: np.ndarray
    low_per_span: np.ndarray
    high_per_span: np.ndarray


def zone_blocks(low: np.ndarray, high: np.ndarray, spans: tuple[np.ndarray, np.ndarray]) -> ZoneBlocks:
    """A column's ZoneBlocks from its zone map and zone_spans."""
    n = len(low)
    starts = np.arange(0, n, BLOCK_FRAMES)
    low_f, span = spans
    frames = np.diff(np.append(starts, n))
    return ZoneBlocks(frames, np.minimum.reduceat(low, starts), np.maximum.reduceat(low, starts),
                      np.minimum.reduceat(high, starts), np.maximum.reduceat(high, starts),
                      np.add.reduceat(low == high, starts, dtype=np.int64), np.minimum.reduceat(span, starts),
                      np.add.reduceat(1 / span, starts), np.add.reduceat(low_f / span, starts),
                      np.add.reduceat(high.astype(np.float64) / span, starts))


@dataclass(frozen=True)
class ZoneOrder:
    """A column's zone map in two orders, by each frame's smallest value (`lows`, sorted) and by its largest
    (`highs`), with running sums in either order (from 0, one more than the frames) of each frame's 1/span,
    (low - base)/span and (high + 1 - base)/span: how many frames a comparison with a constant rules out, passes
    whole or tests, and the rows it is estimated to select, in a binary search an order (prune.compare_summary),
    where a frame at a time touched every frame's zone map (SF 100's 586,000 a constant, 10 ms)."""

    base: int  # the column's smallest value: the sums' values taken from it (fewer digits cancel)
    lows: np.ndarray
    highs: np.ndarray
    by_low: tuple[np.ndarray, np.ndarray, np.ndarray]  # running sums of 1/span, (low - base)/span, (high + 1 - base)/span
    by_high: tuple[np.ndarray, np.ndarray, np.ndarray]
    low_order: np.ndarray  # the frames in `lows`' order (int32): those a constant's binary search passes, classed alone
    high_order: np.ndarray
    in_order: tuple[np.ndarray, np.ndarray, np.ndarray]  # the running sums in the frames' own order: any run of
    # frames' estimate where a constant tests every frame
    in_frame_order: bool = False  # the frames' lows and highs both ascend (a store clustered by the column): either
    # order is the frames' own, and a constant parts them into a stretch below it, one across it and one above


def zone_order(low: np.ndarray, high: np.ndarray, spans: tuple[np.ndarray, np.ndarray]) -> ZoneOrder:
    """A column's ZoneOrder from its zone map and zone_spans."""
    low_f, span = spans
    base = int(low.min()) if len(low) else 0
    terms = (1 / span, (low_f - base) / span, (high.astype(np.float64) + 1 - base) / span)

    def running(order: np.ndarray) -> tuple:
        return tuple(np.concatenate([[0.0], np.cumsum(x[order])]) for x in terms)

    by_low, by_high = np.argsort(low, kind="stable"), np.argsort(high, kind="stable")
    ascending = bool((low[1:] >= low[:-1]).all() and (high[1:] >= high[:-1]).all())  # (then each argsort is 0, 1, ...)
    return ZoneOrder(base, low[by_low], high[by_high], running(by_low), running(by_high), by_low.astype(np.int32),
                     by_high.astype(np.int32), running(slice(None)), ascending)


@dataclass
class Column:
    """One column: its encodings, its SQL type, its dictionary (VARCHAR: the strings its codes
    stand for), and, for a stored column, `load(encoding)` that reads an encoding from disk."""

    name: str
    encodings: dict = field(default_factory=dict)  # encoding name → Plain | Packed | Sliced | Indexed
    type: SqlType | None = None
    dictionary: Dictionary | None = None  # a tuple of sorted distinct strings given is made one
    load: object = field(default=None, repr=False, compare=False)  # callable(encoding) -> encoding, or None
    stored: tuple[str, ...] = ()  # encodings `load` can read ("zones": the packed encoding's metadata alone)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    # the zone map's own: its read and what is made of it wait for no read of the column's words (`lock`)
    zone_lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    _zones: tuple | None = field(default=None, repr=False, compare=False)
    _zone_map: tuple | None = field(default=None, repr=False, compare=False)  # zones(), made once
    _zone_spans: tuple | None = field(default=None, repr=False, compare=False)  # zone_spans(), made once
    _zone_blocks: ZoneBlocks | None = field(default=None, repr=False, compare=False)  # zone_blocks(), made once
    _narrowest: int | None = field(default=None, repr=False, compare=False)  # narrowest_frame(), found once
    _zone_order: ZoneOrder | None = field(default=None, repr=False, compare=False)  # zone_order(), made once
    _common: tuple | None = field(default=None, repr=False, compare=False)  # (common_range(),), found once
    _finite: tuple | None = field(default=None, repr=False, compare=False)  # (finite_range(),), found once
    on_disk: dict = field(default_factory=dict, repr=False, compare=False)  # stored encoding → bytes its read takes
    nulls: int = 0  # rows that hold NULL (their values hold the column's smallest: schema.engine_values)
    _valid: np.ndarray | None = field(default=None, repr=False, compare=False)  # validity(), once read
    _valid_words: np.ndarray | None = field(default=None, repr=False, compare=False)  # validity_words(), once made
    _frame_nulls: np.ndarray | None = field(default=None, repr=False, compare=False)  # frame_nulls(), once made
    whole: "Column | None" = field(default=None, repr=False, compare=False)  # a view's (Table.view): the column it is of

    def __post_init__(self):
        self.dictionary = as_dictionary(self.dictionary)

    def validity_words(self, rows: int) -> np.ndarray:
        """The validity of the column's `rows` rows as the GPU reads it: 32 uint32 words a frame, a bit a row from
        each word's lowest (the last frame's padded); every bit set where the column holds no NULL (a part of a
        table whose other parts hold some: one kernel reads every part alike). Made once."""
        valid = self.validity()
        with self.lock:
            if self._valid_words is None:
                frames = -(-rows // FRAME_ROWS)
                if valid is None:
                    self._valid_words = np.full(frames * FRAME_ROWS // 32, 0xFFFFFFFF, dtype="<u4")
                else:
                    bits = np.zeros(frames * FRAME_ROWS // 8, dtype=np.uint8)
                    bits[:-(-len(valid) // 8)] = np.packbits(valid, bitorder="little")
                    self._valid_words = bits.view("<u4")
            return self._valid_words

    def frame_nulls(self) -> np.ndarray | None:
        """Whether each frame holds a NULL (a bool a frame); None where the column holds none. Made once (every
        plan of a predicate over the column asks for it)."""
        valid = self.validity()
        if valid is None:
            return None
        with self.lock:
            if self._frame_nulls is None:
                padded = np.ones(-(-len(valid) // FRAME_ROWS) * FRAME_ROWS, dtype=bool)
                padded[:len(valid)] = valid
                self._frame_nulls = ~padded.reshape(-1, FRAME_ROWS).all(axis=1)
            return self._frame_nulls

    def validity(self) -> np.ndarray | None:
        """A bool a row, True where the column holds a value; None where it holds no NULL. A stored column's
        is read from disk (`load("valid")`) when first asked for."""
        if not self.nulls:
            return None
        with self.lock:
            if self._valid is None:
                self._valid = self.load("valid")
            return self._valid

    def get(self, encoding: str):
        found = self.encodings.get(encoding)
        if found is not None and not (encoding == "plain" and self.name == KEY):
            return found  # held already: no lock (a read of another encoding may hold it, prefetch)
        with self.lock:  # queries from several threads derive or read an encoding once
            if encoding not in self.encodings and encoding in self.stored:
                self.encodings[encoding] = self.load(encoding)
            if encoding == "plain" and self.name == KEY and encoding in self.encodings \
                    and self.encodings[encoding].values.dtype != np.int32:  # a table of engine values holds int64
                self.encodings[encoding] = Plain(_ladder_key(self.encodings[encoding].values))
            if encoding == "indexed" and encoding not in self.encodings:  # the sliced key's buckets, listed
                self.encodings[encoding] = index_key(self.get("sliced"))
            if encoding not in self.encodings:
                values = self.values()
                if encoding == "plain" and self.name == KEY:
                    values = _ladder_key(values)
                self.encodings[encoding] = encode_column(values, encoding, self.packing_factor())
            return self.encodings[encoding]

    def prefetch(self, encoding: str) -> None:
        """Read a stored encoding (the lists: `indexed`, or the `sliced` key they are listed from) without
        holding the column's lock through the read, then keep it unless a query read it meanwhile: a
        read in the background holds up no query of the column (get takes the lock)."""
        if encoding in self.encodings or self.load is None:
            return
        if encoding in self.stored:
            read = self.load(encoding)
        elif encoding == "indexed" and ("sliced" in self.encodings or "sliced" in self.stored):
            sliced = self.encodings.get("sliced") or self.load("sliced")
            with self.lock:
                self.encodings.setdefault("sliced", sliced)
            read = index_key(sliced)
        else:
            return
        with self.lock:
            self.encodings.setdefault(encoding, read)

    def packing_factor(self) -> int | None:
        """Decimals divide out the factor their values share (quantities are whole units); keys,
        dates and codes are compared, not multiplied, and keep factor 1."""
        return None if self.type is not None and self.type.is_decimal else 1

    def values(self) -> np.ndarray:
        """The logical values, decoded from whichever encoding is at hand (plain first), or read."""
        with self.lock:
            for name in ENCODINGS:
                if name in self.encodings:
                    return self.encodings[name].decode()
            if self.stored:
                return self.get(self.stored[0]).decode()
        raise ValueError(f"column {self.name} has no encoding")

    def cold_bytes(self, encoding: str) -> int:
        """Bytes reading this encoding would still take from disk (0 once read, or for an encoding in memory)."""
        return 0 if encoding in self.encodings else self.on_disk.get(encoding, 0)

    def has(self, encoding: str) -> bool:
        """Whether the column holds this encoding or can read it from its store (not derive it)."""
        return encoding in self.encodings or encoding in self.stored

    def zone_buffers(self) -> tuple[np.ndarray, np.ndarray, int]:
        """(frame metadata, each frame's largest value, common factor) of the packed encoding, read
        alone where the column is stored (the planner prunes by them before any words are read)."""
        if self._zones is not None:
            return self._zones
        if "packed" not in self.encodings and self.load is not None and "packed" in self.stored:
            with self.zone_lock:  # not the column's lock, which a read of its words holds throughout
                if self._zones is None:
                    self._zones = self.load("zones")
                return self._zones
        packed = self.get("packed")  # (before zone_lock: a read of the words takes the column's lock, then zone_lock)
        with self.zone_lock:
            if self._zones is None:
                self._zones = (packed.meta, packed.zone_max(), packed.factor)
            return self._zones

    def zones(self) -> tuple[np.ndarray, np.ndarray]:
        """(each frame's smallest value, its largest): the zone map, made once (every plan reads it)."""
        if self._zone_map is None:
            meta, zmax, factor = self.zone_buffers()
            lo = meta[:, 0] * np.int64(factor)
            self._zone_map = (lo, zmax, (int(lo.min()), int(zmax.max())) if len(lo) else None)
        return self._zone_map[:2]

    def zone_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """The zone map's (smallest values as doubles, values each frame spans): what the planner's estimates
        divide by, made once (a new constant's plan then compares and divides, no more)."""
        if self._zone_spans is None:
            self._zone_spans = zone_spans(*self.zones())
        return self._zone_spans

    def zone_blocks(self) -> ZoneBlocks:
        """The zone map in blocks (ZoneBlocks), made once: a new constant's plan classes most frames a block at a
        time."""
        if self._zone_blocks is None:
            self._zone_blocks = zone_blocks(*self.zones(), self.zone_spans())
        return self._zone_blocks

    def zone_order(self) -> ZoneOrder:
        """The zone map sorted by smallest and by largest values, with running sums (ZoneOrder), made once: a single
        comparison's new constant is counted and estimated without a pass over the frames."""
        if self._zone_order is None:
            made = (*self.zones(), self.zone_spans())  # (before zone_lock: the zone map may take the column's lock)
            with self.zone_lock:
                if self._zone_order is None:
                    self._zone_order = zone_order(*made)
        return self._zone_order

    def common_range(self) -> tuple[int, int] | None:
        """(its frames' largest smallest value, their smallest largest value): the values every frame's range holds,
        or None where no value is in every frame's (a store clustered by the column). Found once: a new constant
        within it cannot rule out a frame or pass one whole (prune.every_frame_classed)."""
        if self._common is None:
            lo, hi = self.zones()
            found = (int(lo.max()), int(hi.min())) if len(lo) else None
            self._common = (found if found is not None and found[0] <= found[1] else None,)
        return self._common[0]

    def holds_infinite_dates(self) -> bool:
        """Whether a DATE column holds DuckDB's infinity or -infinity (its range reaches the day 2^31 - 1 or its
        negative), from its zone maps."""
        found = self.range()
        return found is not None and self.type is not None and self.type.name == "DATE" and \
            max(-found[0], found[1]) >= DATE_INFINITY

    def finite_range(self) -> tuple[int, int] | None:
        """range(), but a DATE column's without DuckDB's infinity and -infinity: its least and greatest finite day,
        found once from its values where an end is infinite (a NULL holds the column's smallest: finite, or
        -infinity); None where it holds no finite day, or no row. What a date plus days starts from (query.check_dates)."""
        found = self.range()
        if not self.holds_infinite_dates():
            return found
        if self._finite is None:
            values = np.asarray(self.values(), dtype=np.int64)
            finite = values[np.abs(values) != DATE_INFINITY]
            self._finite = ((int(finite.min()), int(finite.max())) if len(finite) else None,)
        return self._finite[0]

    def narrowest_frame(self) -> int:
        """The fewest bits a row any of its packed frames takes (the low byte of a frame's second metadata field):
        the least bytes a tested frame's words cost the planner, found once from the metadata alone."""
        if self._narrowest is None:
            meta, zmax, _ = self.zone_buffers()
            self._narrowest = int((meta[:len(zmax), 1] & 0xFF).min()) if len(zmax) else 0
        return self._narrowest

    def range(self) -> tuple[int, int] | None:
        """(smallest, largest) value of the column, exact; None when it has no rows."""
        self.zones()
        return self._zone_map[2]

    def slice_range(self) -> tuple[int, int] | None:
        """The (smallest, largest) its sliced and indexed encodings cut into buckets: its range, or a view's whole
        column's (a GPU's share of some frames keeps the whole column's top bytes and buckets: encodings.frame_view)."""
        return self.range() if self.whole is None else self.whole.slice_range()

    @property
    def logical_bytes_per_row(self) -> int:
        if self.name in LOGICAL:
            return LOGICAL[self.name][1]
        t = self.type
        return 8 if t is None or t.is_decimal else INTEGER_BYTES.get(t.name, 8)


COLUMNS_AT_ONCE = 4  # columns read together; each reads its buffers in pieces on host threads of its own


SWITCH_INTERVAL_S = 0.001  # while reading ahead (the CPython default is 0.005)
_switching = [0, None]  # read-aheads under way, and the interval before the first of them
_switching_lock = threading.Lock()


@contextmanager
def _switching_often():
    """The interpreter's thread switch interval shortened while reads ahead run: each of their NumPy calls and
    reads lets go of the GIL and, where the main thread is busy (a first query imports its modules meanwhile),
    waited a whole interval to take it back (an SF 10 column's zone map, 6 ms alone, took about 100 beside a
    first query's imports on an H200 host). Set back after the last of them, unless something set it meanwhile."""
    with _switching_lock:
        if _switching[0] == 0:
            _switching[1] = sys.getswitchinterval()
            sys.setswitchinterval(min(_switching[1], SWITCH_INTERVAL_S))
        _switching[0] += 1
    try:
        yield
    finally:
        with _switching_lock:
            _switching[0] -= 1
            if _switching[0] == 0 and sys.getswitchinterval() == min(_switching[1], SWITCH_INTERVAL_S):
                sys.setswitchinterval(_switching[1])


def read_all(columns: list[Column], encoding: str, stop=lambda: False) -> None:
    """Each column's encoding at hand, those still on disk read together: a query's columns land at the
    rate of the host's threads rather than one column after another (none begun once `stop()`)."""
    from gquery.host import parallel_map

    todo = [c for c in columns if encoding not in c.encodings]
    if len(todo) > 1:
        parallel_map(lambda c: None if stop() else c.get(encoding), todo, COLUMNS_AT_ONCE)
    elif todo and not stop():
        todo[0].get(encoding)


def exiting() -> bool:
    """The main thread has finished: the process is exiting (threads read and compile no more)."""
    return not threading.main_thread().is_alive()


READ_AHEAD = "gquery-read-ahead"  # the name of a thread reading columns ahead of the calls that need them
COMPILE_AHEAD = "gquery-compile-ahead"  # and of one compiling kernels ahead (answer._compile_in_background)


def read_ahead(tables: list, names, ordered=()) -> threading.Thread:
    """Read the named stored columns' packed words (each column's zone map first) on threads of their own while
    the caller goes on (a process's first query reads them while the GPU's context is being made), and meanwhile
    the zone maps alone, sorting those of `ordered` (that WHERE tests) as the planner does (zone_order): the
    planner finds them made without waiting for the words. A read that fails is left for the query's own read
    of it to report; none begins once the main thread is done."""
    columns = [t.columns[n] for t in tables for n in names if n in t.columns and "packed" in t.columns[n].stored]

    def run(step) -> None:
        try:
            step()
        except Exception:  # noqa: BLE001 (the query reads the column again and raises its one-line error)
            pass

    def zones() -> None:
        with _switching_often():
            words = threading.Thread(target=run, args=(lambda: read_all(columns, "packed", exiting),), name=READ_AHEAD)
            words.start()
            for c in columns:
                if exiting():
                    break
                c.zone_buffers()
                if c.name in ordered:
                    c.zone_order()
            words.join()

    thread = threading.Thread(target=run, args=(zones,), name=READ_AHEAD)  # not a daemon: answer._read_in_background says why
    thread.start()
    return thread


def _ladder_key(values: np.ndarray) -> np.ndarray:
    """The ladder's kernels (the course's, 2012) read the key as int32 (the contract: keys within int32)."""
    if values.dtype == np.int32:
        return values
    if values.size and (int(values.min()) < -(2**31) or int(values.max()) >= 2**31):
        from gquery.errors import GqueryError

        raise GqueryError(f"column {KEY} has values outside int32, which the ladder's kernels need")
    return values.astype(np.int32)


class ColumnBounds(dict):
    """|value| bounds of columns, computed from their zone maps when first asked for (a store's
    table reads no column to open)."""

    def __init__(self, columns: dict[str, "Column"], given: dict | None = None):
        super().__init__(given or {})
        self._columns = columns

    def __missing__(self, name: str) -> int:
        r = self._columns[name].range()
        self[name] = 0 if r is None else max(abs(r[0]), abs(r[1]))
        return self[name]


@dataclass
class Table:
    rows: int
    columns: dict[str, Column]
    source: str
    largest: dict[str, int]  # |value| bound of each factor column: decides 64- or 128-bit products
    pinned: bool = False  # host buffers are already page-locked and mapped (a store opened so)
    cache: dict = field(default_factory=dict, repr=False, compare=False)  # GPU-side copies: gpu/memory.py
    sorted_by: str | None = None  # the column its rows are ordered by (a clustered store)
    left_out: dict = field(default_factory=dict)  # columns the data has that the table does not hold, and why

    @classmethod
    def from_columns(cls, cols: LineitemColumns) -> "Table":
        columns = {KEY: Column(KEY, {"plain": Plain(cols.suppkey)}, MISSION_TYPES[KEY]),
                   QUANTITY: Column(QUANTITY, {"plain": Plain(cols.quantity)}, MISSION_TYPES[QUANTITY]),
                   PRICE: Column(PRICE, {"plain": Plain(cols.extendedprice)}, MISSION_TYPES[PRICE])}
        return cls(cols.rows, columns, cols.source, {QUANTITY: _largest(cols.quantity), PRICE: _largest(cols.extendedprice)})

    @classmethod
    def from_values(cls, values: dict, schema: Schema, dictionaries: dict | None = None, source: str = "<arrays>",
                    sorted_by: str | None = None, valid: dict | None = None) -> "Table":
        """A table of engine values (gquery.schema.engine_values: int64 a column) and their types; `valid`: a
        column's validity (a bool a row, False where NULL), where it has NULLs."""
        dictionaries, valid = dictionaries or {}, {n: v for n, v in (valid or {}).items() if v is not None}
        lengths = {len(v) for v in values.values()} | {len(v) for v in valid.values()}
        if len(lengths) > 1:
            raise ValueError(f"{source}: columns differ in length")
        columns = {name: Column(name, {"plain": Plain(np.ascontiguousarray(v, dtype=np.int64))}, schema.types[name],
                                dictionaries.get(name)) for name, v in values.items()}
        for name, v in valid.items():
            columns[name].nulls, columns[name]._valid = int(len(v) - np.count_nonzero(v)), np.asarray(v, dtype=bool)
        table = cls(lengths.pop() if lengths else 0, columns, source, {}, sorted_by=sorted_by,
                    left_out=dict(schema.left_out))
        table.largest = ColumnBounds(columns)
        return table

    def values(self, name: str) -> tuple[np.ndarray, Dictionary | None, np.ndarray | None]:
        """A column's engine values, dictionary and validity (what a store is written from)."""
        c = self.columns[name]
        return np.asarray(c.values(), dtype=np.int64), c.dictionary, c.validity()

    @property
    def schema(self) -> Schema:
        return Schema({n: c.type for n, c in self.columns.items() if c.type is not None}, dict(self.left_out))

    @property
    def frames(self) -> int:
        return -(-self.rows // FRAME_ROWS)

    def ranges(self, names) -> dict[str, tuple[int, int]]:
        """Each column's exact (smallest, largest) value, from its zone maps ((0, 0) with no rows)."""
        return {n: self.columns[n].range() or (0, 0) for n in names}

    def encoded(self, encoding: str) -> dict:
        """{column: its encoding} for an encoding set, derived where the table lacks it."""
        return {name: self.columns[name].get(enc) for name, enc in ENCODING_SETS[encoding].items()}

    def plain_columns(self) -> LineitemColumns:
        e = self.encoded("plain")
        return LineitemColumns(e[KEY].values, e[QUANTITY].values, e[PRICE].values, self.source)

    def logical_bytes(self, names=QUERY_COLUMNS) -> int:
        """Bytes a row of these columns takes as loaded (the mission's three by default)."""
        return self.rows * sum(self.columns[n].logical_bytes_per_row for n in names if n in self.columns)

    def view(self, first_frame: int, end_frame: int) -> "Table":
        """Frames first_frame .. end_frame - 1 as a table of their own (one GPU's share), sharing
        the row buffers. Its factor bounds stay the whole table's: every share multiplies alike."""
        def load(col: Column, encoding: str):
            if encoding == "zones":  # the parent's zone maps of these frames, without reading its words
                meta, zmax, factor = col.zone_buffers()
                return meta[first_frame:end_frame], zmax[first_frame:end_frame], factor
            if encoding == "valid":
                return col.validity()[first:first + rows]
            return frame_view(col.get(encoding), first_frame, end_frame)

        def share(col: Column) -> Column:  # what the parent has not read yet is read, then viewed, when asked for
            return Column(col.name, {e: frame_view(enc, first_frame, end_frame) for e, enc in col.encodings.items()},
                          col.type, col.dictionary, lambda e: load(col, e),
                          tuple(dict.fromkeys((*col.encodings, *col.stored))), nulls=col.nulls,  # at most the parent's
                          whole=col)

        columns = {name: share(col) for name, col in self.columns.items()}
        first = first_frame * FRAME_ROWS
        rows = min(end_frame * FRAME_ROWS, self.rows) - first
        return Table(rows, columns, f"{self.source} rows {first:,}..{first + rows:,}", self.largest, self.pinned,
                     sorted_by=self.sorted_by, left_out=self.left_out)

@dataclass
class PartedTable:
    """A table stored in parts (a parted store: gquery.store), each part a Table of its own, so
    no step holds more than a part's worth of anything but the parts themselves. Opened whole,
    `tables` holds every part in host memory (page-locked and mapped when opened for the GPU).
    Opened with a window, no part is held: a query opens each part from disk as it reaches it
    (answer.parts_of)."""

    rows: int
    paths: list[Path]  # each part's store folder, in row order
    part_rows: list[int]
    source: str
    largest: dict[str, int]
    tables: list[Table] | None = None
    window: int = 0
    pinned: bool = False
    cache: dict = field(default_factory=dict, repr=False, compare=False)  # per-device shares: gpu/multi.py

    @property
    def parts(self) -> int:
        return len(self.paths)

    def logical_bytes(self, names=QUERY_COLUMNS) -> int:
        return self.rows * sum(LOGICAL[name][1] for name in names if name in LOGICAL) if self.tables is None else \
            sum(t.logical_bytes(names) for t in self.tables)


def _largest(values: np.ndarray) -> int:
    if values.size == 0:
        return 0
    return max(abs(int(values.min())), abs(int(values.max())))


__all__ = ["Table", "PartedTable", "Column", "ColumnBounds", "ENCODING_SETS", "KEY", "QUANTITY", "PRICE", "Indexed", "Packed", "Plain", "Sliced"]
