"""What a predicate can touch, per frame, from the zone maps, before anything is read.

Lowering first makes a query's predicate a table's own: a VARCHAR comparison becomes one on the
column's dictionary codes (dictionaries differ from part to part), and a column compared with a
constant of another scale gets the constant in the column's own scale, exactly (x < 6.5 on
hundredths is x < 650; on whole units it is x < 7). The tree keeps its shape whatever the part (a
string the part lacks is code -1), so one compiled kernel serves every part; only constants change.

Then each frame gets one of three answers (DuckDB's CheckZonemap, per 1024-row frame):

    NEVER   no row can pass: the frame is not shipped and not scanned
    CHECK   some may: its predicate columns are shipped and tested row by row
    ALWAYS  every row passes: the predicate is skipped, and its columns are not shipped for it

and an estimate of the rows it selects (interpolated within each frame's range): what the
planner weighs shipping a column in bulk against reading selected rows in place by.
"""

from __future__ import annotations

import abc
import bisect
import collections
import functools
import threading
from dataclasses import dataclass, field, fields

import numpy as np

from gquery.query import (BIGINT, BOOLEAN, FLIPPED, And, Arith, Column, Compare, Expr, InList, IsNull, Literal, Not,
                          Or, Recode, scale_of)
from gquery.schema import merged_ranks, position
from gquery.encodings import FRAME_ROWS
from gquery.table import BLOCK_FRAMES, ZoneBlocks, zone_spans

NEVER, CHECK, ALWAYS = 0, 1, 2
ABSENT = -1  # the code of a string a part's dictionary lacks: no row has it


# --- lowering --------------------------------------------------------------------------------------------
def lower(e: Expr | None, dictionaries: dict, ranges: dict[str, tuple[int, int]], nulls: dict | None = None,
          sides: dict | None = None) -> Expr | None:
    """The predicate as one table part evaluates it (see the module's notes). `ranges`: each column's
    smallest and largest value in the part, which keep lowered constants within 64 bits; `nulls`: each
    column's NULLs (IS NULL of a column without any is FALSE); `sides`: string_sides of every part (so that
    the parts lower alike and share one kernel), else this part's."""
    if e is None:
        return None
    if sides is None:
        sides = string_sides(e, [dictionaries])
    if isinstance(e, (And, Or)):
        return type(e)(tuple(lower(a, dictionaries, ranges, nulls, sides) for a in e.args))
    if isinstance(e, Not):
        return Not(lower(e.arg, dictionaries, ranges, nulls, sides))
    if isinstance(e, IsNull):
        return e if (nulls or {}).get(e.arg.name) else Literal(False, BOOLEAN)
    if isinstance(e, Compare):
        left, right, op = e.left, e.right, e.op
        if isinstance(left, Literal) and not isinstance(right, Literal):
            left, right, op = right, left, FLIPPED[op]
        if isinstance(left, Column) and left.type.name == "VARCHAR" and isinstance(right, Column):
            return _columns_compare(left, op, right, dictionaries, sides.get((left.name, right.name)))
        if isinstance(left, Column) and left.type.name == "VARCHAR":
            return _string_compare(left, op, str(right.value), dictionaries[left.name])
        if isinstance(left, Column) and isinstance(right, Literal) and (left.type.is_numeric or left.type.name == "DATE"):
            return _column_compare(left, op, right, ranges[left.name])
        return Compare(op, left, right)
    if isinstance(e, InList):
        if isinstance(e.arg, Column) and e.arg.type.name == "VARCHAR":
            d = dictionaries[e.arg.name]
            codes = tuple(Literal(_code(d, str(v.value)), BIGINT) for v in e.values)
            return InList(Column(e.arg.name, BIGINT), codes, e.negated)
        if isinstance(e.arg, Column):  # values no row can equal (more digits than the column, past int64) dropped
            scaled = [_rescaled(v, scale_of(e.arg.type)) for v in e.values]
            values = tuple(Literal(v, e.arg.type) for v in scaled if v is not None and -(2**63) <= v < 2**63)
            if not values:
                never = Compare("<", e.arg, Literal(ranges[e.arg.name][0], e.arg.type))
                return Not(never) if e.negated else never
            return InList(e.arg, values, e.negated)
        return e
    return e


def _code(dictionary, s: str) -> int:
    k, found = position(dictionary, s)
    return k if found else ABSENT


def _string_compare(col: Column, op: str, s: str, dictionary) -> Compare:
    """A comparison with a string as one on codes: the dictionary is sorted, so order carries over."""
    codes = Column(col.name, BIGINT)
    lo, hi = bisect.bisect_left(dictionary, s), bisect.bisect_right(dictionary, s)
    if op in ("=", "<>"):
        return Compare(op, codes, Literal(lo if hi > lo else ABSENT, BIGINT))
    bound = {"<": lo, "<=": hi, ">": hi, ">=": lo}[op]
    return Compare({"<": "<", "<=": "<", ">": ">=", ">=": ">="}[op], codes, Literal(bound, BIGINT))


SMALL_DICTIONARY = 4096  # strings a dictionary may have to be ranked into another's order by a search each


def string_sides(e: Expr | None, dictionaries: list[dict]) -> dict:
    """Of each comparison of two VARCHAR columns in e: the column whose codes are ranked by a table in the
    other's order (the one of fewer strings in its largest part, where that is SMALL_DICTIONARY or fewer),
    or None (both ranked among the strings merged). One choice for every part of a table (`dictionaries`:
    each part's): the parts lower alike, so one kernel serves them."""
    out = {}
    for node in e.walk() if e is not None else ():
        if isinstance(node, Compare) and isinstance(node.left, Column) and isinstance(node.right, Column) \
                and node.left.type.name == "VARCHAR" and node.left.name != node.right.name:
            names = (node.left.name, node.right.name)
            sizes = {n: max(len(d[n]) for d in dictionaries) for n in names}
            small = min(names, key=lambda n: (sizes[n], n))
            out[names] = small if sizes[small] <= SMALL_DICTIONARY else None
    return out


def _columns_compare(left: Column, op: str, right: Column, dictionaries: dict, small: str | None) -> Compare:
    """Two VARCHAR columns compared: one column by its codes (the same column). Where `small` names one of
    them (string_sides), the other's code k as 2k and `small`'s codes as a table of ranks in the other's order
    (a string equal to its k-th, 2k; one between its (k-1)-th and k-th, 2k - 1), read at each row: the
    l_comment of millions against a column of a few strings needs a table of a few. Else each code's rank
    among both dictionaries' strings merged (a table a column)."""
    codes = Column(left.name, BIGINT), Column(right.name, BIGINT)
    if left.name == right.name:
        return Compare(op, *codes)
    if small is not None:
        small_first = small == left.name
        (small_codes, small_strings), (large_codes, large) = \
            ((codes[0], dictionaries[left.name]), (codes[1], dictionaries[right.name])) if small_first else \
            ((codes[1], dictionaries[right.name]), (codes[0], dictionaries[left.name]))
        ranked = Recode(small_codes, tuple(2 * k - (not found)
                                           for k, found in (position(large, s) for s in small_strings)))
        doubled = Arith("*", large_codes, Literal(2, BIGINT), BIGINT)
        return Compare(op, ranked, doubled) if small_first else Compare(op, doubled, ranked)
    ranks = merged_ranks(dictionaries[left.name], dictionaries[right.name])
    return Compare(op, Recode(codes[0], ranks[0]), Recode(codes[1], ranks[1]))


def _rescaled(v: Literal, scale: int) -> int | None:
    """A constant in another scale when that is exact, else None."""
    d = scale - scale_of(v.type)
    if d >= 0:
        return int(v.value) * 10**d
    q, r = divmod(int(v.value), 10**-d)
    return q if r == 0 else None


def _column_compare(col: Column, op: str, lit: Literal, rng: tuple[int, int]) -> Expr:
    """col op constant, with the constant in the column's scale (rounded the way that keeps the
    comparison exact) and clamped just outside the column's range (so it fits 64 bits)."""
    d = scale_of(col.type) - scale_of(lit.type)
    v = int(lit.value)
    if d >= 0:
        c = v * 10**d
    else:  # the constant has more digits than the column: round towards the side that keeps it exact
        k = 10**-d
        q, r = divmod(v, k)  # v = q k + r, 0 <= r < k
        if op in ("=", "<>"):
            if r:  # no value of the column equals it
                return Compare("<" if op == "=" else ">=", col, Literal(rng[0], col.type))
            c = q
        else:
            c = {"<": q + (r > 0), "<=": q, ">": q, ">=": q + (r > 0)}[op]
    lo, hi = rng
    c = min(max(c, lo - 1), hi + 1)
    return Compare(op, col, Literal(c, col.type))


def narrowed(e: Expr | None, ranges: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """Each column's range among the rows a lowered predicate can select: its top-level conjuncts
    `column op constant` and `column IN (...)` narrow it (what bounds a GROUP BY column's groups)."""
    out = dict(ranges)
    for c in (e.args if isinstance(e, And) else (e,)) if e is not None else ():
        if isinstance(c, Compare) and isinstance(c.left, Column) and isinstance(c.right, Literal) and c.left.name in out:
            lo, hi = out[c.left.name]
            v, op = int(c.right.value), c.op
            if op == "<" or op == "<=":
                hi = min(hi, v - (op == "<"))
            elif op == ">" or op == ">=":
                lo = max(lo, v + (op == ">"))
            elif op == "=":
                lo, hi = max(lo, v), min(hi, v)
            out[c.left.name] = (lo, max(lo, hi))
        elif isinstance(c, InList) and not c.negated and isinstance(c.arg, Column) and c.arg.name in out:
            vals = [int(v.value) for v in c.values]
            lo, hi = out[c.arg.name]
            out[c.arg.name] = (max(lo, min(vals)), max(max(lo, min(vals)), min(hi, max(vals))))
    return out


# --- frames --------------------------------------------------------------------------------------------------
@dataclass
class Zones:
    """Each frame's rows, and each column's smallest and largest value a frame (int64 arrays)."""

    rows: np.ndarray
    low: dict[str, np.ndarray]
    high: dict[str, np.ndarray]
    # a column's (smallest values as doubles, values each frame spans): what every estimate divides by, found
    # once a column (a table's columns keep theirs: Column.zone_spans)
    spans: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # each column's zone map in blocks (Column.zone_blocks), where the frames are many enough to class by blocks
    blocks: dict[str, ZoneBlocks] | None = None

    def spans_of(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        found = self.spans.get(name)
        if found is None:
            found = self.spans[name] = zone_spans(self.low[name], self.high[name])
        return found

    def frames(self, which: np.ndarray) -> "Zones":
        """The zone maps of some frames alone (no blocks)."""
        return Zones(self.rows[which], {c: v[which] for c, v in self.low.items()}, {c: v[which] for c, v in self.high.items()},
                     {c: (lo[which], span[which]) for c, (lo, span) in self.spans.items()})


MIXED = 3  # a block whose frames its envelopes cannot class alike: classed frame by frame
BLOCKED_FRAMES = 4 * BLOCK_FRAMES  # a table of fewer frames is classed frame by frame


def classify(e: Expr | None, z: Zones) -> tuple[np.ndarray, np.ndarray]:
    """(class a frame: NEVER, CHECK or ALWAYS; estimated fraction of its rows the predicate selects). Where the
    zones have blocks, a block whose envelopes class its every frame alike takes that class, and the mean of its
    frames' estimates (a block's sums make the mean of one comparison exact; an AND of several columns multiplies
    their means); the frames of the other blocks are classed one by one. The classes are the frames' own either
    way: a block is classed whole only where each frame's test would give that class."""
    cls, estimate = classify_parts(e, [z])[0]
    return cls if cls.flags.writeable else cls.copy(), estimate.fractions()  # (every_frame's are read only)


def classify_parts(e: Expr | None, zones: list[Zones]) -> list[tuple[np.ndarray, "Estimate"]]:
    """Each part's frame classes and Estimate of the rows each frame selects (classify's), the blocks of every
    part that has them classed in one pass (the parts of a table lower a predicate alike where their ranges
    do: fusedplan.plan_fused)."""
    return [(classes, estimate) for classes, estimate, _ in classify_counted(e, zones)]


def classify_counted(e: Expr | None, zones: list[Zones]) -> list[tuple[np.ndarray, "Estimate", tuple | None]]:
    """classify_parts' (classes, Estimate) of each part (the classes read only where every frame holds one class:
    every_frame's), with its frames' counts (ruled out, tested, passing whole)
    where its blocks gave them (a block's frames counted at once), else None. The blocked parts' frames are classed
    in one pass too: their classes are one array (each part's a view of it), and the frames of their MIXED blocks
    are classed together (ten parts' frames a part at a time took milliseconds of NumPy calls at SF 100)."""
    if e is None:  # every row passes
        return [(every_frame(len(z.rows), ALWAYS), EveryRow(len(z.rows), _rows(z)), (0, 0, len(z.rows)))
                for z in zones]
    blocked = [z for z in zones if _blocked(z)]
    if len(blocked) > 1:
        joined = {c: _joined([z.blocks[c] for z in blocked]) for c in blocked[0].blocks}
        cls, frac = _classify_blocks(e, joined, sum(_block_count(z) for z in blocked))
    elif blocked:
        cls, frac = _classify_blocks(e, blocked[0].blocks, _block_count(blocked[0]))
    by_blocks = iter(_from_blocks(e, blocked, cls, frac) if blocked else ())
    out = []
    for z in zones:
        if _blocked(z):
            out.append(next(by_blocks))
        else:
            cls_f, frac_f = _finished(*_classify(e, z, len(z.rows)))
            out.append((cls_f, FrameEstimate(frac_f, z.rows), None))
    return out


def _blocked(z: Zones) -> bool:
    return z.blocks is not None and len(z.rows) >= BLOCKED_FRAMES


def _block_count(z: Zones) -> int:
    return -(-len(z.rows) // BLOCK_FRAMES)


def _from_blocks(e: Expr, zones: list[Zones], cls: np.ndarray, frac: np.ndarray) -> list[tuple]:
    """Tables' frames' classes, Estimates and counts from their blocks' (_classify_blocks: the tables' blocks one
    after another), the frames of their MIXED blocks classed one by one (a table's every frame so where most of its
    blocks are: then no counts)."""
    layout = joined_once([z.rows for z in zones], _block_layout)  # (each table's frames' rows: kept with its size)
    blocks, block_at, block_frames, block_rows, table_of = layout
    is_mixed = cls == MIXED
    frac = np.where(cls == NEVER, 0.0, np.where(cls == ALWAYS, 1.0, frac))  # (a mixed block's own frames: below)
    # frames a class in the blocks classed whole (a table's last block holds fewer frames), a row a table; a MIXED
    # block's frames counted as MIXED (below: classed one by one)
    counts = np.bincount(table_of * (MIXED + 1) + cls, weights=block_frames, minlength=len(zones) * (MIXED + 1))
    whole = counts.reshape(len(zones), MIXED + 1)[:, :MIXED].astype(np.int64)  # (exact: frames below 2^53)
    mixed_blocks = np.bincount(table_of[is_mixed], minlength=len(zones)).tolist()
    # a table whose every frame is of one class gets every_frame's; the others' frames their block's class, the tables'
    # frames padded to whole blocks: a table's are a view of it (Q6 as generated tests every frame of SF 100's ten
    # parts: their 586 KB of fresh pages faulted 0.4 ms a plan, for classes no chunk reads)
    ones = [next((k for k, c in enumerate(row) if c == len(z.rows)), None) for z, row in zip(zones, whole.tolist())]
    padded = np.repeat(cls, BLOCK_FRAMES) if None in ones else None
    sums = BlockSums(np.where(is_mixed, 0.0, frac), block_rows)  # (a mixed block's rows are its frames' own)
    out = []
    for z, a, b, k, m, counted, one in zip(zones, block_at[:-1].tolist(), block_at[1:].tolist(), blocks,
                                           mixed_blocks, whole.tolist(), ones):
        n = len(z.rows)
        if 2 * m >= k:  # most blocks mixed: every frame classed alone, no gathering
            cls_f, frac_f = _finished(*_classify(e, z, n))
            out.append((cls_f, FrameEstimate(frac_f, z.rows), None))
            continue
        cls_f = padded[BLOCK_FRAMES * a:BLOCK_FRAMES * a + n] if one is None else every_frame(n, one)
        which, own = _NO_FRAMES, _NO_FRACTIONS
        if m:  # the mixed blocks' frames
            which = (np.flatnonzero(is_mixed[a:b])[:, None] * BLOCK_FRAMES + np.arange(BLOCK_FRAMES)).reshape(-1)
            which = which[which < n]
            cls_f[which], own = _finished(*_classify(e, z.frames(which), len(which)))
            counted = [x + y for x, y in zip(counted, np.bincount(cls_f[which], minlength=ALWAYS + 1).tolist())]
        out.append((cls_f, BlockEstimate(frac[a:b], sums, a, which, own, n, _rows(z)), tuple(counted)))
    return out


def _block_layout(frame_rows: list[np.ndarray]) -> tuple:
    """Tables' blocks one after another, from each table's frames' rows: (blocks a table, where each table's begin and
    the last's end, each block's frames and rows (a table's last block and frame hold fewer), each block's table),
    made once for these tables (joined_once: a parted table's parts keep their frames' rows)."""
    blocks = [-(-len(r) // BLOCK_FRAMES) for r in frame_rows]
    block_at = np.concatenate([[0], np.cumsum(blocks)]).astype(np.int64)
    block_frames = np.full(int(block_at[-1]), BLOCK_FRAMES, np.int64)
    block_frames[block_at[1:] - 1] = [len(r) - BLOCK_FRAMES * (k - 1) for r, k in zip(frame_rows, blocks)]
    block_rows = (block_frames * FRAME_ROWS).astype(np.float64)
    block_rows[block_at[1:] - 1] -= [FRAME_ROWS - int(r[-1]) for r in frame_rows]  # a table's last frame's rows
    table_of = np.repeat(np.arange(len(frame_rows)), blocks)
    for x in (block_at, block_frames, block_rows, table_of):
        x.setflags(write=False)
    return blocks, block_at, block_frames, block_rows, table_of


def _rows(z: Zones) -> int:
    return FRAME_ROWS * (len(z.rows) - 1) + int(z.rows[-1]) if len(z.rows) else 0


def piece_sums(a: np.ndarray, firsts: np.ndarray, ends: np.ndarray, dtype=None) -> np.ndarray:
    """Each piece's sum of a per-frame array, the pieces [first, end) in order and apart: reduceat sums from each
    index to the next, and the sums from an end to the next first (gaps) are dropped (a prefix sum takes 15 times
    as long over SF 10's 58,581 frames)."""
    if not len(firsts):
        return np.zeros(0, dtype)
    first = int(firsts[0])  # only the frames from the first piece to the last are summed (a clustered column's few)
    spans = np.stack([firsts - first, ends - first], 1).reshape(-1)[:-1]  # the last piece's sum runs to its end
    return np.add.reduceat(a[first:int(ends[-1])], spans, dtype=dtype)[0::2]


class Estimate(abc.ABC):
    """The rows each frame of a table is estimated to select, summed as the planner asks: over pieces of frames
    [first, end), and over the table."""

    @abc.abstractmethod
    def per_piece(self, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Each piece's rows."""

    @abc.abstractmethod
    def total(self) -> float:
        """The table's rows."""

    @abc.abstractmethod
    def fractions(self) -> np.ndarray:
        """Each frame's estimated fraction of its rows."""

    @classmethod
    def together(cls, estimates: list, counts: list[int], firsts: np.ndarray, ends: np.ndarray) -> np.ndarray | None:
        """per_piece_together's sums in one NumPy pass where these tables' estimates (each of this class) allow it,
        else None (each table then sums its own)."""
        return None


class FrameEstimate(Estimate):
    """An estimate a frame: each frame's fraction times its rows (the fractions' array taken, scaled in place)."""

    def __init__(self, fractions: np.ndarray, rows: np.ndarray):
        self._last = fractions[-1:].copy()  # the last frame's fraction (its rows are fewer)
        self.selected = fractions
        self.selected *= FRAME_ROWS  # every frame holds FRAME_ROWS rows but the last (a power of two: exact)
        self.selected[-1:] = self._last * rows[-1:]

    def per_piece(self, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        return piece_sums(self.selected, firsts, ends)

    def total(self) -> float:
        return float(self.selected.sum())

    def fractions(self) -> np.ndarray:
        out = self.selected / FRAME_ROWS
        out[-1:] = self._last
        return out


class SummaryEstimate(Estimate):
    """An estimate whose total is known ahead (compare_summary's) and whose frames' are made when first asked for
    (`full`: () → the table's Estimate, as classify_parts makes it): a plan that never cuts the table's frames
    (scanned by index) never makes them."""

    def __init__(self, total: float, full):
        self._total, self._full = total, full

    def per_piece(self, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        return self._full().per_piece(firsts, ends)

    def total(self) -> float:
        return self._total

    def fractions(self) -> np.ndarray:
        return self._full().fractions()


INT64_MAX = 2**63 - 1


def summarized(e: Expr | None) -> bool:
    """Whether compare_summary counts and estimates `e`: a column's order with a constant (< <= > >=)."""
    return (isinstance(e, Compare) and e.op in ("<", "<=", ">", ">=") and isinstance(e.left, Column)
            and isinstance(e.right, Literal))


def last_fractions(e: Compare, low: np.ndarray, high: np.ndarray, low_f: np.ndarray, span: np.ndarray) -> np.ndarray:
    """The fraction of each frame's rows `column op constant` selects, as classify finds it, for a few frames given
    by their zone maps and zone_spans (tables' last frames: compare_summary)."""
    return _finished(*_compare(e.op, low, high, int(e.right.value), (low_f, span)))[1]


def _split(e: Compare, order) -> tuple[int, int, int]:
    """Where `column op constant` splits a column's ZoneOrder: (c_, the frames of low < c_, those of high < c_, a
    frame of these one of those), the comparison being x < c_ or x >= c_ (c_ may pass int64 by one)."""
    c = int(e.right.value)
    c_ = c if e.op in ("<", ">=") else c + 1
    n = len(order.lows)
    if c_ > INT64_MAX:
        return c_, n, n
    return c_, int(np.searchsorted(order.lows, c_, "left")), int(np.searchsorted(order.highs, c_, "left"))


def compare_summary(e: Compare, order, rows: int, last: float) -> tuple[tuple[int, int, int], float]:
    """((frames ruled out, tested, passing whole), rows estimated to pass) of `column op constant` (summarized's)
    over a table of `rows` rows, from its column's ZoneOrder (table.zone_order) and its last frame's fraction
    (last_fractions'): the classes _compare gives a frame at a time, counted, and FrameEstimate's total, its sums
    taken in another order (equal but for rounding)."""
    op, n = e.op, len(order.lows)
    if not n:
        return (0, 0, 0), 0.0
    c_, k_low, k_high = _split(e, order)
    tested = k_low - k_high  # low < c_ <= high
    u, v, w = (float(a[k_low] - b[k_high]) for a, b in zip(order.by_low, order.by_high))
    at = float(c_ - order.base)
    if op in ("<", "<="):
        counts, share = (n - k_low, tested, k_high), at * u - v  # each tested frame's (c_ - low) / span
    else:
        counts, share = (k_high, tested, n - k_low), w - at * u  # each tested frame's (high - c_ + 1) / span
    share = min(max(share, 0.0), float(tested))  # (rounding: never past what the tested frames hold)
    # the last frame holds fewer rows (FrameEstimate): its fraction, as classify finds it, counted for them alone
    return counts, FRAME_ROWS * (counts[2] + share) - (FRAME_ROWS * n - rows) * last


# A comparison's frames on the far side of its constant in either order are classed alone (compare_classes) where
# they are at most 1/SPARSE_SHARE of the table's: scattered through memory, each costs a frame compared in order 16 times
SPARSE_SHARE = 16


def compare_classes(e: Compare, order, zones: Zones, rows: int) -> tuple[np.ndarray, "Estimate"]:
    """classify's classes and estimate of `column op constant` (summarized's) over a table of `rows` rows (`zones`:
    frame_zones of its column), from the column's ZoneOrder: where few frames lie across the constant's side of
    either order, those found in a binary search, compared one by one, the others all of one class, and no array a
    frame but the classes (a few scattered frames of a part's 58,000 took comparing every frame's zone map and its
    estimate's array a millisecond, mostly faulting that array's pages in); where every frame is tested, from the
    running sums in the frames' order; else classify_parts'."""
    return compare_classes_together(e, [order], [zones], [rows])[0]


def compare_classes_together(e: Compare, orders: list, zones: list[Zones], rows: list[int],
                             classes: bool = True) -> list[tuple]:
    """compare_classes' of several tables (a parted table's parts): the few frames of every table where they are few
    compared at once, in the tables' frames one after another (ten parts one at a time asked NumPy ten times as
    often: 1.1 ms of SF 100's new constant). Without `classes`, a table of few such frames gets None for its classes
    (its SparseEstimate's lists give them: ten parts' fresh arrays faulted 0.5 ms a new constant)."""
    op, c = e.op, int(e.right.value)
    below = op in ("<", "<=")
    out: list = [None] * len(orders)
    sparse = []  # (table, its few frames, the class of every other)
    for i, (order, z, r) in enumerate(zip(orders, zones, rows)):
        n = len(order.lows)
        c_, k_low, k_high = _split(e, order)
        if k_low == n and k_high == 0:  # every frame tested (a key scattered through every frame)
            out[i] = every_frame(n, CHECK), TestedEstimate(e, order, z, r, c_)
        elif order.in_frame_order:  # frames [0, k_high) hold values below c_ alone, [k_low, n) none: those between tested
            out[i] = _stretched_classes(e, z, r, k_high, k_low, below, classes)
        elif k_low * SPARSE_SHARE <= n:  # few frames hold values below c_: the others (low >= c_) none
            sparse.append((i, order.low_order[:k_low], NEVER if below else ALWAYS))
        elif (n - k_high) * SPARSE_SHARE <= n:  # few frames hold values at or above c_: the others (high < c_) none
            sparse.append((i, order.high_order[k_high:], ALWAYS if below else NEVER))
        elif (n - k_low + k_high) * SPARSE_SHARE <= n:  # few frames lie wholly on one side of c_: every other tested
            out[i] = _mostly_tested(e, order, z, r, c_, k_low, k_high, below)
        else:
            out[i] = classify_parts(e, [z])[0]
    if not sparse:
        return out
    name = e.left.name
    which = [i for i, *_ in sparse]
    frames = [len(orders[i].lows) for i in which]
    offsets = np.concatenate([[0], np.cumsum(frames)]).astype(np.int64)
    few = np.sort(np.concatenate([f.astype(np.int64) + o for (_, f, _), o in zip(sparse, offsets.tolist())]))

    def joined(arrays: list) -> np.ndarray:  # every such table's array of a frame, one after another, made once
        return arrays[0] if len(arrays) == 1 else joined_once(arrays, np.concatenate)

    found_all, fractions = _compare(op, joined([zones[i].low[name] for i in which])[few],
                                    joined([zones[i].high[name] for i in which])[few], c,
                                    tuple(joined([zones[i].spans_of(name)[k] for i in which])[few] for k in (0, 1)))
    found_all = found_all.astype(np.int8, copy=False)
    bounds = np.searchsorted(few, offsets).tolist()  # each table's few frames: few[bounds[k]:bounds[k + 1]]
    for k, (i, _, others) in enumerate(sparse):
        at, end = bounds[k], bounds[k + 1]
        mine, found, frac = few[at:end] - offsets[k], found_all[at:end], fractions[at:end]
        tested = found == CHECK
        passing = mine[found != ALWAYS] if others == ALWAYS else mine[found == ALWAYS]  # (the frames not passing)
        estimate = SparseEstimate(frames[k], rows[i], passing, others == ALWAYS, mine[tested], frac[tested])
        out[i] = estimate.classes() if classes else None, estimate
    return out


def _stretched_classes(e: Compare, zones: Zones, rows: int, first: int, end: int, below: bool,
                       classes: bool = True) -> tuple[np.ndarray | None, "Estimate"]:
    """compare_classes' where the frames ascend in the column (a store clustered by it): the frames before `first`
    one class (every row below the constant), those from `end` the other, and those between compared one by one,
    as classify compares every frame (a clustered SF 10's 58,581 frames classed by blocks took 0.4 ms a constant).
    Without `classes`, None for them: the StretchEstimate's three stretches give them."""
    name, n = e.left.name, len(zones.rows)
    middle, fractions = _compare(e.op, zones.low[name][first:end], zones.high[name][first:end], int(e.right.value),
                                 tuple(x[first:end] for x in zones.spans_of(name)))
    fractions = np.where(middle == CHECK, fractions, middle == ALWAYS)  # (as _finished makes them)
    estimate = StretchEstimate(n, rows, first, end, middle.astype(np.int8, copy=False), below, fractions)
    return (estimate.classes() if classes else None), estimate


def _mostly_tested(e: Compare, order, zones: Zones, rows: int, c_: int, k_low: int, k_high: int,
                   below: bool) -> tuple[np.ndarray, "Estimate"]:
    """compare_classes' where few frames lie wholly on one side of the constant (those of low >= c_, the last of
    the `lows` order from k_low, and those of high < c_, the first of the `highs` order to k_high): every other
    frame tested, the few found in the binary searches (the mission at Z = 1,000 as generated, SF 10: two of
    58,581 frames ruled out, the rest classed by blocks took 0.8 ms a constant)."""
    name, n = e.left.name, len(order.lows)
    at_or_above, under = order.low_order[k_low:], order.high_order[:k_high]  # (no frame is both: low <= high)
    classes = np.full(n, CHECK, np.int8)
    classes[at_or_above], classes[under] = (NEVER, ALWAYS) if below else (ALWAYS, NEVER)
    few = np.sort(np.concatenate([at_or_above, under]).astype(np.int64))
    return classes, MostlyTestedEstimate(e, order, zones, rows, c_, few, classes[few] == ALWAYS)


class ClassesGiven(Estimate):
    """An Estimate that gives its frames' classes too, from a few arrays of its own (write_classes): no array a frame
    unless one is asked for (classes, made once)."""

    n: int
    _classes: np.ndarray | None = None

    @abc.abstractmethod
    def write_classes(self, out: np.ndarray) -> None:
        """Each frame's class, written into `out` (int8, a frame each)."""

    def classes(self) -> np.ndarray:
        """Each frame's class (int8), made once, read only."""
        if self._classes is None:
            out = np.empty(self.n, np.int8)
            self.write_classes(out)
            out.setflags(write=False)
            self._classes = out
        return self._classes


class StretchEstimate(ClassesGiven):
    """The classes and estimate of frames in three stretches: [0, first) and [end, n) one class each (`outer`: every
    row of the first where `below`, none of the second, else the reverse), those between classed one by one
    (`middle`) with each one's fraction (`fractions`): no array a frame (a clustered table's new constant). Its
    stretches of a class, its classes (written where wanted, or made once) come from those three."""

    def __init__(self, n: int, rows: int, first: int, end: int, middle: np.ndarray, below: bool, fractions: np.ndarray):
        self.n, self.rows, self.first, self.end, self._fractions = n, rows, first, end, fractions
        self.middle, self.outer = middle, (ALWAYS, NEVER) if below else (NEVER, ALWAYS)
        middle.setflags(write=False)  # (a kept cut keeps the estimate to compare a later plan's with: fusedplan)
        self.passing = (0, first) if below else (end, n)
        selected = fractions * FRAME_ROWS
        if len(fractions) and first + len(fractions) == n:  # the last frame holds fewer rows
            selected[-1] = fractions[-1] * (rows - FRAME_ROWS * (n - 1))
        self._selected_before = np.concatenate([[0.0], np.cumsum(selected)])

    def write_classes(self, out: np.ndarray) -> None:
        """Each frame's class, written into `out` (int8, a frame each)."""
        out[:self.first], out[self.first:self.end], out[self.end:] = self.outer[0], self.middle, self.outer[1]

    def stretches(self, holds) -> tuple[np.ndarray, np.ndarray]:
        """(first, end) of each stretch of the frames whose class `holds` (a test of a class, or of an int8 array of
        them): found over the middle frames with each outer stretch one place beside them, not over every frame."""
        low, high = self.first > 0 and bool(holds(self.outer[0])), self.end < self.n and bool(holds(self.outer[1]))
        mask = np.concatenate([[False, low], holds(self.middle), [high, False]])
        at = np.concatenate([[0, 0], np.arange(self.first, self.end), [self.end, self.n]])  # each place's first frame
        edges = np.flatnonzero(mask[1:] != mask[:-1]) + 1  # each stretch's first place, then its end place
        return at[edges[0::2]], at[edges[1::2]]

    def same(self, other: "StretchEstimate") -> bool:
        """Whether another's frames are classed as these are."""
        return (self.n, self.first, self.end, self.outer) == (other.n, other.first, other.end, other.outer) and \
            np.array_equal(self.middle, other.middle)

    def per_piece(self, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        a, b = self.passing
        whole = (np.clip(ends, a, b) - np.clip(firsts, a, b)).astype(np.float64) * FRAME_ROWS
        if b == self.n and a < b:  # the last frame holds fewer rows
            whole -= np.where(ends == self.n, FRAME_ROWS * self.n - self.rows, 0)
        tested = len(self._fractions)
        before = self._selected_before
        return whole + before[np.clip(ends - self.first, 0, tested)] - before[np.clip(firsts - self.first, 0, tested)]

    def total(self) -> float:
        return float(self.per_piece(np.array([0]), np.array([self.n]))[0]) if self.n else 0.0

    def fractions(self) -> np.ndarray:
        out = np.zeros(self.n)
        out[self.passing[0]:self.passing[1]] = 1.0
        out[self.first:self.first + len(self._fractions)] = self._fractions
        return out


def _summed(in_order: tuple, c, below: bool, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Runs' sums of their tested frames' fractions of `column op constant`, from running sums of 1/span,
    (low - base)/span and (high + 1 - base)/span in frame order (ZoneOrder.in_order); `c`: c_ (_split's) from the
    sums' base, a run's own or one for every run; `below`: the comparison is < or <=."""
    inv, low, high = (x[ends] - x[firsts] for x in in_order)
    return c * inv - low if below else high - c * inv


class TestedEstimate(Estimate):
    """The estimate of `column op constant` where it tests every frame: a run of frames' from the running sums of
    their 1/span, (low - base)/span and (high + 1 - base)/span in the frames' order (ZoneOrder.in_order), no array
    a frame (each tested frame's fraction, (c - low)/span or (high - c + 1)/span, lies within [0, 1])."""

    def __init__(self, e: Compare, order, zones: Zones, rows: int, c_: int):
        self.e, self.order, self.zones, self.rows = e, order, zones, rows
        self.n = len(order.lows)
        self._at = float(c_ - order.base)  # c_ (_split's), from the sums' base
        self._below = e.op in ("<", "<=")
        self._last = float(self._sums(np.array([self.n - 1]), np.array([self.n]))[0]) if self.n else 0.0

    def _sums(self, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Each run's sum of its frames' fractions."""
        return _summed(self.order.in_order, self._at, self._below, firsts, ends)

    def per_piece(self, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        return TestedEstimate.together([self], [len(firsts)], firsts, ends)

    def corrections(self, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray | None:
        """What a piece's running sums are corrected by (MostlyTestedEstimate's few frames), None where nothing."""
        return None

    @classmethod
    def together(cls, estimates: list, counts: list[int], firsts: np.ndarray, ends: np.ndarray) -> np.ndarray | None:
        """Every table's pieces from their ZoneOrders' running sums joined (made once for these orders), where each
        compares on the same side: what per_piece sums, a table's pieces after another's."""
        below = estimates[0]._below
        if any(e._below != below for e in estimates):
            return None
        sums = estimates[0].order.in_order if len(estimates) == 1 else \
            [joined_once([e.order.in_order[k] for e in estimates], np.concatenate) for k in range(3)]
        at = np.repeat(np.cumsum([0] + [e.n + 1 for e in estimates[:-1]]), counts)  # each piece's table's sums begin
        whole = _summed(sums, np.repeat([e._at for e in estimates], counts), below, at + firsts, at + ends) * FRAME_ROWS
        n = np.repeat([e.n for e in estimates], counts)
        last = np.repeat([(FRAME_ROWS * e.n - e.rows) * e._last for e in estimates], counts)
        out = whole - np.where(ends == n, last, 0.0)  # (a table's last frame holds fewer rows)
        bounds = np.cumsum([0, *counts]).tolist()
        for e, a, b in zip(estimates, bounds, bounds[1:]):
            extra = e.corrections(firsts[a:b], ends[a:b]) if b > a else None
            if extra is not None:
                out[a:b] += extra
        return out

    def total(self) -> float:
        return float(self.per_piece(np.array([0]), np.array([self.n]))[0]) if self.n else 0.0

    def fractions(self) -> np.ndarray:
        name = self.e.left.name
        return _compare(self.e.op, self.zones.low[name], self.zones.high[name], int(self.e.right.value),
                        self.zones.spans_of(name))[1]


class MostlyTestedEstimate(TestedEstimate):
    """TestedEstimate's where a few frames (`few`, sorted) lie wholly on one side of the constant: the running sums
    give each of those the fraction its bounds give a tested frame (below 0, or past 1), corrected here to none of
    its rows or all of them (`whole`), a sum over the few frames a piece holds."""

    def __init__(self, e: Compare, order, zones: Zones, rows: int, c_: int, few: np.ndarray, whole: np.ndarray):
        super().__init__(e, order, zones, rows, c_)
        summed = self._sums(few, few + 1)  # what the running sums add for each of the few
        frame_rows = np.where(few == self.n - 1, rows - FRAME_ROWS * (self.n - 1), FRAME_ROWS).astype(np.float64)
        self._few = few
        self._corrections = np.concatenate([[0.0], np.cumsum((whole - summed) * frame_rows)])

    def corrections(self, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        c = self._corrections
        return c[np.searchsorted(self._few, ends)] - c[np.searchsorted(self._few, firsts)]


class SparseEstimate(ClassesGiven):
    """An estimate kept as sorted frame lists: every row of the frames that pass whole (`passing`, or every frame
    but those where `complement`), and each tested frame's fraction of its rows (`tested`, `fractions`). The lists
    give the frames' classes too (every frame but those listed ruled out, or passing whole where `complement`):
    written where they are wanted (write_classes), or made once (classes)."""

    def __init__(self, n: int, rows: int, passing: np.ndarray, complement: bool, tested: np.ndarray,
                 fractions: np.ndarray):
        self.n, self.rows, self.passing, self.complement, self.tested = n, rows, passing, complement, tested
        self._fractions = fractions
        passing.setflags(write=False)  # (a kept cut keeps the lists to compare a later plan's with: fusedplan)
        tested.setflags(write=False)
        selected = fractions * FRAME_ROWS
        if len(tested) and tested[-1] == n - 1:  # the last frame holds fewer rows
            selected[-1] = fractions[-1] * (rows - FRAME_ROWS * (n - 1))
        self._selected_before = np.concatenate([[0.0], np.cumsum(selected)])

    def write_classes(self, out: np.ndarray) -> None:
        """Each frame's class, written into `out` (int8, a frame each): no array of the table's own."""
        out[:] = ALWAYS if self.complement else NEVER
        out[self.passing] = NEVER if self.complement else ALWAYS  # (where `complement`: the tested among them too)
        out[self.tested] = CHECK

    def _passing_in(self, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Each piece's frames that pass whole."""
        inside = np.searchsorted(self.passing, ends) - np.searchsorted(self.passing, firsts)
        return ends - firsts - inside if self.complement else inside

    def per_piece(self, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        whole = self._passing_in(firsts, ends).astype(np.float64) * FRAME_ROWS
        if self.n and self._last_passes():  # the last frame holds fewer rows
            whole -= np.where(ends == self.n, FRAME_ROWS * self.n - self.rows, 0)
        before = self._selected_before
        return whole + before[np.searchsorted(self.tested, ends)] - before[np.searchsorted(self.tested, firsts)]

    def _last_passes(self) -> bool:
        found = bool(len(self.passing)) and self.passing[-1] == self.n - 1
        return found != self.complement

    def total(self) -> float:
        return float(self.per_piece(np.array([0]), np.array([self.n]))[0]) if self.n else 0.0

    def fractions(self) -> np.ndarray:
        out = np.full(self.n, 1.0 if self.complement else 0.0)
        out[self.passing] = 0.0 if self.complement else 1.0
        out[self.tested] = self._fractions
        return out


class EveryRow(Estimate):
    """Every row of a table's frames (no predicate)."""

    def __init__(self, n: int, rows: int):
        self.n, self.rows = n, rows

    def per_piece(self, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        return (np.minimum(ends * FRAME_ROWS, self.rows) - firsts * FRAME_ROWS).astype(np.float64)

    def total(self) -> float:
        return float(self.rows)

    def fractions(self) -> np.ndarray:
        return np.ones(self.n)


_NO_FRAMES, _NO_FRACTIONS = np.zeros(0, np.int64), np.zeros(0)  # (a table without mixed blocks: read only)
_NO_FRAMES.setflags(write=False)
_NO_FRACTIONS.setflags(write=False)
_NONE_OWN = np.zeros(1)  # (the running sum of no mixed block's frames)
_NONE_OWN.setflags(write=False)


class BlockSums:
    """Tables' blocks one after another, as one pass classed them (_from_blocks): the fraction every frame of a block
    shares (`uniform`; a MIXED block's 0, its frames' own kept apart) and the running sum of the blocks' rows at it
    (`before`), found once for every table, so that every table's pieces are summed in one NumPy pass
    (per_piece_together: a parted table's ten parts one at a time asked NumPy ten times as often)."""

    def __init__(self, uniform: np.ndarray, block_rows: np.ndarray):
        self.uniform = uniform
        self.before = np.concatenate([[0.0], np.cumsum(uniform * block_rows)])

    def per_piece(self, at: np.ndarray, rows: np.ndarray, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Each piece's rows at its blocks' uniform fractions: its first and last blocks' frames in it, the blocks
        between from the running sums. `at`: each piece's table's first block here; `rows`: that table's rows (its
        last frame holds fewer)."""
        first_block, last_block = firsts // BLOCK_FRAMES, (ends - 1) // BLOCK_FRAMES
        head_end = np.minimum(ends, (first_block + 1) * BLOCK_FRAMES)
        tail_first = np.maximum(firsts, last_block * BLOCK_FRAMES)
        head = self.uniform[at + first_block] * _piece_rows(rows, firsts, head_end)
        tail = np.where(last_block > first_block, self.uniform[at + last_block] * _piece_rows(rows, tail_first, ends), 0.0)
        middle = np.where(last_block > first_block + 1,
                          self.before[at + last_block] - self.before[at + np.minimum(first_block + 1, last_block)], 0.0)
        return head + middle + tail


def _piece_rows(rows, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Rows of the frames [first, end) of a table of `rows` rows: FRAME_ROWS a frame, but its last."""
    return (np.minimum(ends * FRAME_ROWS, rows) - firsts * FRAME_ROWS).astype(np.float64)


class BlockEstimate(Estimate):
    """An estimate a block: a block's frames share its mean fraction, but a MIXED block's frames (`which`), classed
    one by one, keep their own (`own`). Summed without an array a frame (at SF 100, ten parts' 585,810 frames
    took milliseconds to fill and sum)."""

    def __init__(self, block_fractions: np.ndarray, sums: BlockSums, at: int, which: np.ndarray, own: np.ndarray,
                 n: int, rows: int):
        """`sums`: the blocks of the pass that classed this table's, its own from block `at` (read only: several
        tables' blocks, _from_blocks)."""
        self.n, self.rows = n, rows  # frames, rows
        self.block_fractions, self.which, self.own = block_fractions, which, own
        self.sums, self.at = sums, at
        self._own_prefix = np.concatenate([[0.0], np.cumsum(own * _piece_rows(rows, which, which + 1))]) if len(which) else _NONE_OWN

    def own_per_piece(self, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Each piece's rows of its MIXED blocks' frames (their own fractions)."""
        return self._own_prefix[np.searchsorted(self.which, ends)] - self._own_prefix[np.searchsorted(self.which, firsts)]

    def per_piece(self, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        return self.sums.per_piece(self.at, self.rows, firsts, ends) + self.own_per_piece(firsts, ends)

    def total(self) -> float:
        blocks = -(-self.n // BLOCK_FRAMES)
        return float(self.sums.before[self.at + blocks] - self.sums.before[self.at] + self._own_prefix[-1])

    def fractions(self) -> np.ndarray:
        out = np.repeat(self.block_fractions, BLOCK_FRAMES)[:self.n]
        out[self.which] = self.own
        return out


    @classmethod
    def together(cls, estimates: list, counts: list[int], firsts: np.ndarray, ends: np.ndarray) -> np.ndarray | None:
        """Every table's pieces at their blocks' uniform fractions in one pass, where one pass classed them all (one
        BlockSums), each table's MIXED frames added apart."""
        sums = estimates[0].sums
        if any(e.sums is not sums for e in estimates):
            return None
        out = sums.per_piece(np.repeat([e.at for e in estimates], counts), np.repeat([e.rows for e in estimates], counts),
                             firsts, ends)
        bounds = np.cumsum([0, *counts]).tolist()
        for e, a, b in zip(estimates, bounds, bounds[1:]):
            if len(e.which) and b > a:
                out[a:b] += e.own_per_piece(firsts[a:b], ends[a:b])
        return out


def per_piece_together(estimates: list, counts: list[int], firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Each piece's rows, the pieces of several tables one after another (`counts` a table; firsts and ends in its
    own frames): in one NumPy pass where the tables' estimates are of a class that sums them together (Estimate.
    together: the blocks of one pass, a comparison that tests every frame), else a table at a time (its per_piece):
    a parted table's ten parts one at a time asked NumPy ten times as often."""
    found = [e._full() if isinstance(e, SummaryEstimate) else e for e in estimates]
    kinds = {BlockEstimate if isinstance(e, BlockEstimate) else TestedEstimate if isinstance(e, TestedEstimate) else None
             for e in found}
    if len(found) > 1 and len(kinds) == 1 and None not in kinds:
        out = kinds.pop().together(found, counts, firsts, ends)
        if out is not None:
            return out
    bounds = np.cumsum([0, *counts]).tolist()
    return np.concatenate([np.zeros(0)] + [e.per_piece(firsts[a:b], ends[a:b]) for e, a, b in zip(found, bounds, bounds[1:])])


def _finished(cls: np.ndarray, frac: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The classes as int8, and the estimates of frames that no row passes, or every row, made exact (frac:
    an array of its own, finite, set in place). Blended, not assigned through masks: a mask of scattered frames
    (l_suppkey < 30 as generated rules out three frames in four, at random) took 0.25 ms a mask at SF 10."""
    np.multiply(frac, cls == CHECK, out=frac)  # a tested frame keeps its estimate, any other 0 ...
    np.add(frac, cls == ALWAYS, out=frac)  # ... and 1 where every row passes
    return cls.astype(np.int8, copy=False), frac


_kept_lock = threading.Lock()


def kept(store: dict, limit: int, key, objects, make, valid=None):
    """make(), made once for `key` and these very objects (kept with them in `store`, so the ids that key it are
    not reused while it is kept), and again where valid(what it made) no longer holds; at most `limit` kept, the
    oldest dropped first."""
    k = (key, *map(id, objects))
    found = store.get(k)
    if found is None or (valid is not None and not valid(found[1])):
        made = make()
        with _kept_lock:
            if k not in store and len(store) >= limit:
                store.pop(next(iter(store)))
            found = store[k] = (tuple(objects), made)
    return found[1]


_JOINED_KEPT = 64  # joins kept: a parted table's columns, a few sets of parts
_joins: dict = {}  # (join, ids of its parts) → (those parts; their join)


def joined_once(parts: list, join):
    """join(parts), made once for these very objects (a parted table's parts' zone blocks or frame metadata)."""
    return kept(_joins, _JOINED_KEPT, join, parts, lambda: join(parts))


def _joined(blocks: list[ZoneBlocks]) -> ZoneBlocks:
    """Several parts' blocks of a column as one ZoneBlocks, made once for these parts."""
    return joined_once(blocks, _join_blocks)


def _join_blocks(blocks: list[ZoneBlocks]) -> ZoneBlocks:
    return ZoneBlocks(*(np.concatenate([getattr(b, f.name) for b in blocks]) for f in fields(ZoneBlocks)))


def _classify_blocks(e: Expr, blocks: dict, n: int) -> tuple[np.ndarray, np.ndarray]:
    """_classify a block at a time: each block's class where its envelopes give every frame that class, else
    MIXED; and the mean of its frames' estimates (_classify's), where not MIXED."""
    if isinstance(e, And):
        ranges = [_range_of(a) for a in e.args]
        parts = [_classify_blocks(a, blocks, n) for a in e.args]
        frac, ranged = _and_estimates(ranges, parts, n)
        mixed = np.zeros(n, bool)
        # a column of one ordered comparison: its own means (every block it does not class MIXED is one _range_mean is
        # sure of, with the same mean; a MIXED block's frames are classed one by one): Q6's new quantity took both
        atoms = collections.Counter(r[0] for r in ranges if r is not None)
        alone = {r[0]: f for r, (_, f), a in zip(ranges, parts, e.args) if r is not None and atoms[r[0]] == 1 and a.op != "="}
        for name, (lo, hi) in ranged.items():
            if name in alone:
                frac *= alone[name]
                continue
            f, unsure = _kept_blocks(("range", lo, hi), blocks[name], functools.partial(_range_mean, blocks[name], lo, hi))
            frac *= f
            mixed |= unsure
        classes = np.minimum.reduce([c for c, _ in parts])  # MIXED is the largest: a NEVER part decides
        mixed |= np.logical_or.reduce([c == MIXED for c, _ in parts])
        return np.where(mixed & (classes != NEVER), MIXED, classes).astype(np.int8), frac
    if isinstance(e, Or):
        parts = [_classify_blocks(a, blocks, n) for a in e.args]
        known = [np.where(c == MIXED, -1, c) for c, _ in parts]
        classes = np.maximum.reduce(known)  # an ALWAYS part decides
        mixed = np.logical_or.reduce([c == MIXED for c, _ in parts])
        frac = 1 - np.prod([1 - f for _, f in parts], axis=0)
        return np.where(mixed & (classes != ALWAYS), MIXED, classes).astype(np.int8), frac
    if isinstance(e, Not):
        c, f = _classify_blocks(e.arg, blocks, n)
        return np.where(c == MIXED, MIXED, ALWAYS - c).astype(np.int8), 1 - f
    if isinstance(e, Literal) and e.type == BOOLEAN:
        return np.full(n, ALWAYS if e.value else NEVER, np.int8), np.full(n, 1.0 if e.value else 0.0)
    if isinstance(e, Compare) and isinstance(e.left, Column) and isinstance(e.right, Literal):
        b, op, c = blocks[e.left.name], e.op, int(e.right.value)
        return _kept_blocks(("compare", op, c), b, lambda: _compare_blocks(op, b, c))
    if isinstance(e, InList) and isinstance(e.arg, Column):
        return _kept_blocks(e, blocks[e.arg.name], lambda: _in_list_blocks(e, blocks[e.arg.name]))
    return np.full(n, CHECK, np.int8), np.full(n, 1.0)  # an expression of several columns: tested row by row


def _in_list_blocks(e: InList, b: ZoneBlocks) -> tuple[np.ndarray, np.ndarray]:
    """_classify_blocks of `column IN (...)` (or NOT IN) over the column's blocks."""
    values = np.array(sorted({int(x.value) for x in e.values}), dtype=np.int64)  # within int64: lower
    # values within a block's outer envelope [low_min, high_max], and within every frame ([low_max, high_min])
    outer = _count_within(values, b.low_min, b.high_max)
    inner = _count_within(values, b.low_max, b.high_min)
    all_points = (b.low_min == b.high_max)  # every frame holds the one value (then within or not, alike)
    cls = np.where(outer == 0, NEVER, np.where(all_points, ALWAYS, np.where((inner > 0) & (b.points == 0), CHECK, MIXED)))
    # each frame's hits: the values within it over its span, alike where every value within the block is within
    # every frame, and not cut at 1 where no frame is narrower than the values
    even = (inner == outer) & (outer <= b.span_min)
    frac = np.where(outer == 0, 0.0, np.where(all_points, 1.0, outer * b.inv_span / b.frames))
    cls = np.where((cls != NEVER) & (cls != ALWAYS) & ~even, MIXED, cls).astype(np.int8)
    return (np.where(cls == MIXED, MIXED, ALWAYS - cls).astype(np.int8), 1 - frac) if e.negated else (cls, frac)


# A WHERE's atoms classed over a column's blocks, and its ranges' means, kept with the blocks: a new constant of a
# query (Q6 with one bound changed) classes the atom that changed, its others found. A few shapes' worth: an entry
# holds two arrays a block (SF 100's ten parts: 36,620 blocks, 330 KB).
ATOMS_KEPT = 64
_atoms: dict = {}  # (atom, id of the blocks) → (the blocks; the atom's arrays, read only)


def _kept_blocks(key, b: ZoneBlocks, make) -> tuple[np.ndarray, np.ndarray]:
    """make() of an atom over blocks b, made once while kept (read only: every caller makes arrays of its own)."""
    return kept(_atoms, ATOMS_KEPT, key, [b], lambda: _read_only(make()))


def _read_only(arrays: tuple) -> tuple:
    for x in arrays:
        x.setflags(write=False)
    return arrays


def _count_within(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """How many of the sorted values lie in each [lo, hi]."""
    return np.searchsorted(values, hi, "right") - np.searchsorted(values, lo, "left")


def _compare_blocks(op: str, b: ZoneBlocks, c: int) -> tuple[np.ndarray, np.ndarray]:
    """_compare a block at a time: a class where the envelopes give every frame that class, else MIXED, and the
    mean of the frames' estimates (a fraction within [0, 1] wherever a frame is tested, so never cut there)."""
    if op in ("=", "<>"):
        always = (b.low_min == c) & (b.high_max == c)  # every frame holds c alone
        never = (c < b.low_min) | (c > b.high_max)
        tested = (b.low_max <= c) & (c <= b.high_min) & (b.points == 0)  # c within every frame, none of one value
        cls = np.where(always, ALWAYS, np.where(never, NEVER, np.where(tested, CHECK, MIXED)))
        frac = b.inv_span / b.frames  # 1/span a frame, whatever its class
        if op == "<>":
            return np.where(cls == MIXED, MIXED, ALWAYS - cls).astype(np.int8), 1 - frac
        return cls.astype(np.int8), frac
    c_ = c if op in ("<", ">=") else c + 1  # x < c_, or x >= c_
    below, above = b.high_max < c_, b.low_min >= c_  # every frame's every value below c_; at or above it
    tested = (b.low_max < c_) & (c_ <= b.high_min)  # every frame holds values on both sides
    if op in ("<", "<="):
        cls = np.where(below, ALWAYS, np.where(above, NEVER, np.where(tested, CHECK, MIXED)))
        frac = np.where(below, 1.0, np.where(above, 0.0, (c_ * b.inv_span - b.low_per_span) / b.frames))
    else:
        cls = np.where(above, ALWAYS, np.where(below, NEVER, np.where(tested, CHECK, MIXED)))
        frac = np.where(above, 1.0, np.where(below, 0.0, (b.high_per_span - (c_ - 1) * b.inv_span) / b.frames))
    return cls.astype(np.int8), frac


def _range_mean(b: ZoneBlocks, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """(the mean over each block's frames of _range_fraction's share of [lo, hi], where each of its bounds cuts every
    frame alike; whether it does not: a block classed frame by frame)."""
    low_own, low_cut = lo <= b.low_min, lo >= b.low_max  # max(frame's low, lo): the frame's low, or lo, in every frame
    high_own, high_cut = hi >= b.high_max, hi <= b.high_min
    n = b.frames
    # [low, hi]: hi - low + 1 of span, at most 1 (hi is within every frame); none where hi is below every low
    # (the bounds are Python integers, a comparison with int64 exact beyond its ends: the envelopes take no + 1)
    left = np.where(hi + 1 <= b.low_min, 0.0, ((hi + 1) * b.inv_span - b.low_per_span) / n)
    left_sure = (hi + 1 >= b.low_max) | (hi + 1 <= b.low_min)
    # [lo, high]: high - lo + 1 of span; none where lo is above every high
    right = np.where(lo - 1 >= b.high_max, 0.0, (b.high_per_span - (lo - 1) * b.inv_span) / n)
    right_sure = (lo - 1 <= b.high_min) | (lo - 1 >= b.high_max)
    frac = np.where(low_own & high_own, 1.0, np.where(low_own & high_cut, left, np.where(
        low_cut & high_own, right, max(0, hi - lo + 1) * b.inv_span / n)))
    sure = (low_own & high_own) | (low_own & high_cut & left_sure) | (low_cut & high_own & right_sure) | (low_cut & high_cut)
    return frac, ~sure


def _classify(e: Expr, z: Zones, n: int, estimate: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """(each frame's class, the fraction of its rows e selects; None where not `estimate`d: an And's range
    of a column is estimated once, its comparisons' own estimates unused)."""
    if isinstance(e, And):  # fractions multiply (independent columns); ranges on one column intersect first
        ranges = [_range_of(a) for a in e.args]
        parts = [_classify(a, z, n, r is None) for a, r in zip(e.args, ranges)]
        frac, ranged = _and_estimates(ranges, parts, n)
        for name, (lo, hi) in ranged.items():
            frac *= _range_fraction(z.high[name], *z.spans_of(name), lo, hi)
        classes = parts[0][0].copy()
        for c, _ in parts[1:]:
            np.minimum(classes, c, out=classes, casting="unsafe")
        return classes, frac
    if isinstance(e, Or):
        parts = [_classify(a, z, n) for a in e.args]
        return np.maximum.reduce([c for c, _ in parts]), 1 - np.prod([1 - f for _, f in parts], axis=0)
    if isinstance(e, Not):
        c, f = _classify(e.arg, z, n)
        return ALWAYS - c, 1 - f
    if isinstance(e, Literal) and e.type == BOOLEAN:
        return np.full(n, ALWAYS if e.value else NEVER), np.full(n, 1.0 if e.value else 0.0)
    if isinstance(e, Compare) and isinstance(e.left, Column) and isinstance(e.right, Literal):
        name = e.left.name
        return _compare(e.op, z.low[name], z.high[name], int(e.right.value), z.spans_of(name) if estimate else None)
    if isinstance(e, InList) and isinstance(e.arg, Column):
        lo, hi = z.low[e.arg.name], z.high[e.arg.name]
        hits = np.zeros(n)
        point = lo == hi
        inside = np.zeros(n, bool)
        for v in {int(x.value) for x in e.values}:
            within = (lo <= v) & (v <= hi)
            inside |= within
            hits += within / (hi.astype(np.float64) - lo + 1)
        cls = np.where(inside, np.where(point, ALWAYS, CHECK), NEVER)
        frac = np.minimum(hits, 1.0)
        return (ALWAYS - cls, 1 - frac) if e.negated else (cls, frac)
    return np.full(n, CHECK), np.full(n, 1.0)  # an expression of several columns: tested row by row


def _and_estimates(ranges: list, parts: list, n: int) -> tuple[np.ndarray, dict[str, tuple[int, int]]]:
    """An AND's estimate from its parts' that are not a column's range (multiplied: independent columns), and
    each column's range, its parts' intersected (estimated once, by the caller)."""
    frac, ranged = np.ones(n), {}
    for r, (_, f) in zip(ranges, parts):
        if r is None:
            frac *= f
        else:
            lo, hi = ranged.get(r[0], (-(2**63), 2**63 - 1))
            ranged[r[0]] = (max(lo, r[1]), min(hi, r[2]))
    return frac, ranged


def _range_of(e: Expr) -> tuple[str, int, int] | None:
    """(column, lowest, highest value) that `column op constant` lets through, for op in < <= > >= =."""
    if not (isinstance(e, Compare) and isinstance(e.left, Column) and isinstance(e.right, Literal)):
        return None
    c = int(e.right.value)
    bound = {"<": (-(2**63), c - 1), "<=": (-(2**63), c), ">": (c + 1, 2**63 - 1), ">=": (c, 2**63 - 1),
             "=": (c, c)}.get(e.op)
    return None if bound is None else (e.left.name, *bound)


def _range_fraction(high: np.ndarray, low_f: np.ndarray, span: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The share of each frame's span [low, high] that lies in [lo, hi] (values taken as uniform)."""
    inside = np.minimum(high.astype(np.float64), float(hi))
    inside -= np.maximum(low_f, float(lo))
    inside += 1
    inside /= span
    return np.clip(inside, 0.0, 1.0, out=inside)


def _compare(op: str, lo: np.ndarray, hi: np.ndarray, c: int, spans: tuple | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Three answers for x op c when x lies in [lo, hi] (c is within int64: lowering clamps it), and the fraction
    of each frame's rows that pass where `spans` (zone_spans) are given."""
    if op in ("<", "<="):
        c_ = c if op == "<" else c + 1  # x < c_
        always, never = hi < c_, lo >= c_
    elif op in (">", ">="):
        c_ = c if op == ">=" else c + 1  # x >= c_
        always, never = lo >= c_, hi < c_
    elif op == "=":
        always, never = (lo == c) & (hi == c), (c < lo) | (c > hi)
    else:  # <>
        always, never = (c < lo) | (c > hi), (lo == c) & (hi == c)
    cls = always.view(np.int8) - never.view(np.int8)  # the two exclude each other (lo <= hi)
    cls += CHECK  # ALWAYS 2, CHECK 1, NEVER 0
    if spans is None:
        return cls, None
    low_f, span = spans
    if op in ("<", "<="):
        frac = c_ - low_f
        frac /= span
    elif op in (">", ">="):
        frac = hi.astype(np.float64) - c_ + 1
        frac /= span
    elif op == "=":
        frac = 1 / span
    else:
        frac = 1 - 1 / span
    return cls, np.clip(frac, 0.0, 1.0, out=frac)


def frame_zones(table, columns, rows: int) -> Zones:
    """The zone maps of some columns of a Table (each column's packed frames' reference and top)."""
    frames = -(-rows // FRAME_ROWS)
    frame_rows = _frame_rows(rows)
    low, high, spans = {}, {}, {}
    blocks = {} if frames >= BLOCKED_FRAMES else None
    for name in columns:
        low[name], high[name] = table.columns[name].zones()
        spans[name] = table.columns[name].zone_spans()
        if blocks is not None:
            blocks[name] = table.columns[name].zone_blocks()
    return Zones(frame_rows, low, high, spans, blocks)


@functools.lru_cache(maxsize=256)
def every_frame(n: int, cls: int) -> np.ndarray:
    """n frames' classes, every one `cls`: read only, made once a size (a new constant testing every frame of SF 100's
    ten parts faulted ten fresh arrays' pages in, 0.5 ms a plan)."""
    out = np.full(n, cls, np.int8)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=256)
def _frame_rows(rows: int) -> np.ndarray:
    """Each frame's rows (FRAME_ROWS, but the last), made once a table's size: read only."""
    frames = -(-rows // FRAME_ROWS)
    out = np.full(frames, FRAME_ROWS, np.int64)
    if frames:
        out[-1] = rows - FRAME_ROWS * (frames - 1)
    out.setflags(write=False)
    return out


# --- buckets of a sliced column ----------------------------------------------------------------------------------
def decided_buckets(e: Expr | None, column: str, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """For buckets of a column's values [low[t], high[t]]: whether every atom of the lowered predicate that
    reads the column (a comparison, an IN list) has one truth value over the whole bucket. Where it has,
    any value of the bucket decides the predicate as the row's own value would (the sliced scan reads no
    low bits there); an atom that reads the column with another, or in arithmetic, decides no bucket."""
    decided = np.ones(len(low), bool)
    zones = Zones(np.ones(len(low), np.int64), {column: low}, {column: high})

    def visit(a: Expr) -> None:
        nonlocal decided
        if isinstance(a, (And, Or)):
            for x in a.args:
                visit(x)
        elif isinstance(a, Not):
            visit(a.arg)
        elif column in a.columns():
            cls, _ = _classify(a, zones, len(low), estimate=False) if len(a.columns()) == 1 else (np.full(len(low), CHECK), None)
            decided &= cls != CHECK

    if e is not None:
        visit(e)
    return decided


# --- a new constant's frames, proven tested ----------------------------------------------------------------------
def every_frame_classed(e: Expr | None, ranges: list[dict], cls: int) -> bool:
    """Whether classify classes every frame of some tables `cls` (CHECK or ALWAYS) under `e`, proven without a
    frame's zone map, from a range of each column `e` reads (`ranges`: dicts, column → (low, high), or None): for
    CHECK the values every frame holds in its range (Column.common_range), for ALWAYS every value a frame can hold
    (the column's range). Each atom of e (a leaf of its ANDs and ORs, and for CHECK of its NOTs) is classed over
    those ranges as classify classes a frame (_classify). A class is monotone in the range: an atom of one column
    CHECK over a range is CHECK over any range that holds it (a comparison's class is exact: CHECK where the range
    holds a value that passes and one that fails; an IN list's is CHECK where a value of the list lies in a range
    of more than one value), and ALWAYS over a range is ALWAYS over any range within it; an atom of several columns
    is CHECK in every frame. An AND or an OR of atoms of one class in a frame, and a NOT of CHECK, is of that
    class there: so every atom of the class over the ranges makes every frame of it."""
    if e is None or cls not in (CHECK, ALWAYS):
        return False
    names = e.columns()
    if any(r[c] is None for r in ranges for c in names):
        return False
    n = len(ranges)
    zones = Zones(np.ones(n, np.int64), {c: np.array([r[c][0] for r in ranges], np.int64) for c in names},
                  {c: np.array([r[c][1] for r in ranges], np.int64) for c in names})
    stack = [e]
    while stack:  # (a loop: a predicate may nest thousands of terms)
        a = stack.pop()
        if isinstance(a, (And, Or)):
            stack += a.args
        elif isinstance(a, Not):
            if cls != CHECK:  # (a NOT of ALWAYS is NEVER)
                return False
            stack.append(a.arg)
        elif not (_classify(a, zones, n, estimate=False)[0] == cls).all():
            return False
    return True


SAMPLE_FRAMES = 256  # frames of a table whose estimates stand for its rows' (sampled_fraction)
_samples: dict = {}  # (columns, every k-th frame, ids of the table's zone maps) → the sampled Zones


def sampled_fraction(e: Expr | None, table) -> float:
    """The mean of classify's estimates of `e` over a fixed sample of a table's frames (every k-th, about
    SAMPLE_FRAMES): a proxy of the share of rows `e` selects, compared between two constants of one shape
    (fusedplan's kept choices), found in a few NumPy calls a term. 1 without a predicate."""
    if e is None:
        return 1.0
    names = e.columns()
    n = -(-table.rows // FRAME_ROWS)
    step = max(1, n // SAMPLE_FRAMES)
    zones = kept(_samples, 64, (names, step), [table.columns[c].zones()[0] for c in names],
                 lambda: frame_zones(table, names, table.rows).frames(np.arange(0, n, step)))
    _, fractions = _classify(e, zones, len(zones.rows))
    return float(fractions.mean()) if len(fractions) else 0.0


def columns_of(e: Expr | None) -> tuple[str, ...]:
    return () if e is None else e.columns()


__all__ = ["NEVER", "CHECK", "ALWAYS", "lower", "classify", "classify_parts", "classify_counted", "Estimate", "EveryRow", "frame_zones", "Zones"]
