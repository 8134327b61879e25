"""The CPU reference: a query over one part's engine columns (NumPy int64), exact for any values.

Each expression node is computed in int64 only where its exact range (query.bounds over the part's
column minima and maxima) and its operands' ranges fit int64; anywhere else it is computed on
Python integers (NumPy object arrays), so no product, sum or rescaling ever wraps. Comparisons
align both sides to the larger scale the same way. Sums per group are exact: one int64 reduction
where no partial sum can overflow, else the high and low 32-bit halves reduced apart.

VARCHAR predicates are decided on this part's dictionary (sorted, so a code's order is its
string's); group keys leave as strings, since another part's codes mean other strings.

NULLs (a column's validity: False where a row holds NULL) follow SQL: an expression is NULL where a
column it reads is; a comparison or IN with NULL is unknown, NOT unknown is unknown, AND and OR by
Kleene's rules, and WHERE keeps the rows where the whole is true (`_Rows.truth`); IS NULL is true or
false. SUM, AVG, MIN, MAX and COUNT(x) take the rows where their argument is not NULL (each state's
row count is those rows: none makes the aggregate NULL, COUNT 0); NULL is one group key of its own.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence

import numpy as np

from gquery.exact import INT64_MAX, INT64_MIN, LOW32
from gquery.query import (DATE_INFINITY, FLIPPED, Aggregate, And, Arith, Cast, Column, Compare, Expr, InList, IsNull,
                          Literal, Negate, Not, Or, Query, bounds, date_shifted, magnitude, scale_of)
from gquery.result import Partial, initial_state
from gquery.schema import as_dictionary

Values = np.ndarray | int  # int64 or object array of one value per row, or one constant for all rows


def evaluate(query: Query, columns: Mapping[str, np.ndarray], dictionaries: Mapping[str, Sequence[str]],
             valid: Mapping[str, np.ndarray] | None = None) -> Partial:
    """The partial aggregates of `query` over one part: `columns` holds each column the query reads
    (COUNT(*) alone reads none: any one column then gives the part's rows) as int64 engine values
    of equal length, `dictionaries` each VARCHAR column's sorted strings, `valid` each column's with
    NULLs validity (a bool a row, False where NULL; a NULL's value is any of the column's)."""
    missing = [n for n in query.columns() if n not in columns]
    if missing:
        raise ValueError(f"columns missing for the query: {', '.join(missing)}")
    strings = [n for n, t in _column_types(query).items() if t.name == "VARCHAR" and n not in dictionaries]
    if strings:
        raise ValueError(f"dictionaries missing for the VARCHAR columns {', '.join(strings)}")
    dictionaries = {n: as_dictionary(d) for n, d in dictionaries.items()}  # a tuple given: codes decoded at once
    lengths = {len(a) for a in columns.values()}
    if len(lengths) != 1:
        raise ValueError(f"one part's columns must have one length, not {sorted(lengths)}")
    rows = lengths.pop()
    arrays = {n: np.asarray(columns[n], dtype=np.int64) for n in query.columns()}
    masks = {n: np.asarray(v, dtype=bool) for n, v in (valid or {}).items() if v is not None and n in arrays}
    if any(len(m) != rows for m in masks.values()):
        raise ValueError(f"a column's validity is not one a row of its {rows} rows")
    ranges = {n: (int(a.min()), int(a.max())) for n, a in arrays.items()} if rows else {}
    selected = np.arange(rows) if query.where is None or rows == 0 else \
        np.flatnonzero(_Rows(arrays, dictionaries, ranges, None, rows, masks).truth(query.where, True))
    partial = Partial.empty(query)
    partial.rows_selected = len(selected)
    if len(selected) == 0:
        if not query.group_by:
            partial.add((), [initial_state(f) for f in partial.funcs])
        return partial
    selected, starts, keys = _groups(query, arrays, dictionaries, selected, masks)
    chosen = _Rows(arrays, dictionaries, ranges, selected, len(selected), masks)
    states = [_aggregate(chosen, a, starts, ranges) for a in query.aggregates]
    partial.groups = {key: [s[g] for s in states] for g, key in enumerate(keys)}  # keys are distinct within a part
    return partial


def _column_types(query: Query) -> dict:
    types = {}
    for e in (query.where, *query.group_by, *(o.expr for o in query.outputs)):
        for node in () if e is None else e.walk():
            if isinstance(node, Column):
                types[node.name] = node.type
    return types


def _groups(query: Query, arrays, dictionaries, selected: np.ndarray, masks):
    """The selected rows ordered by group, each group's first position, and each group's key (None where
    NULL: a group of its own, whatever value its rows' places hold)."""
    if not query.group_by:
        return selected, np.zeros(1, dtype=np.int64), [()]
    keys = []  # each group column's values, NULLs as 0 and a column more telling them apart
    for c in query.group_by:
        values = arrays[c.name][selected]
        if c.name in masks:
            null = ~masks[c.name][selected]
            keys += [np.where(null, 0, values), null]
        else:
            keys.append(values)
    order = np.lexsort(keys[::-1])  # lexsort sorts by its last key first
    selected = selected[order]
    keys = [k[order] for k in keys]
    changes = np.zeros(len(selected), dtype=bool)
    changes[0] = True
    for k in keys:
        changes[1:] |= k[1:] != k[:-1]
    starts = np.flatnonzero(changes)
    columns = []
    for c in query.group_by:
        firsts = arrays[c.name][selected[starts]].tolist()
        if c.type.name == "VARCHAR":
            firsts = dictionaries[c.name].decode(firsts)
        if c.name in masks:
            firsts = [v if ok else None for v, ok in zip(firsts, masks[c.name][selected[starts]].tolist())]
        columns.append(firsts)
    return selected, starts, list(zip(*columns))


def _aggregate(rows: "_Rows", a: Aggregate, starts: np.ndarray, ranges) -> list[list]:
    """One aggregate's state for each group (groups are the row runs beginning at `starts`), over the rows
    where its argument is not NULL."""
    valid = None if a.arg is None else rows.valid(a.arg)
    if valid is not None:  # the rows where the argument is NULL left out: the rest, in runs of their own
        kept = np.flatnonzero(valid)
        counts = np.add.reduceat(valid.astype(np.int64), starts) if len(starts) and rows.count else np.zeros(len(starts), np.int64)
        fewer = _Rows(rows.arrays, rows.dictionaries, rows.ranges, rows.positions(kept), len(kept), {})
        firsts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        present = np.flatnonzero(counts)  # groups with a row to aggregate
        states = _aggregate(fewer, a, firsts[present], ranges) if len(kept) else []
        out = [[0] if a.func == "count" else [None, 0] if a.func in ("min", "max") else [0, 0] for _ in starts]
        for g, state in zip(present.tolist(), states):
            out[g] = state
        return out
    sizes = np.diff(np.append(starts, rows.count)).tolist()
    if a.func == "count":
        return [[n] for n in sizes]
    values = rows.value(a.arg)
    if a.func in ("sum", "avg"):
        totals = [values * n for n in sizes] if isinstance(values, int) else \
            _group_sums(values, starts, magnitude(a.arg, ranges))
        return [[t, n] for t, n in zip(totals, sizes)]
    if isinstance(values, int):
        return [[values, n] for n in sizes]
    reduce = np.minimum if a.func == "min" else np.maximum
    found = reduce.reduceat(values, starts).tolist()
    if a.arg.type.name == "VARCHAR":  # the least or greatest code: the part's dictionary is sorted as the strings
        found = rows.dictionaries[a.arg.name].decode(found)
    return [[v if isinstance(v, str) else int(v), n] for v, n in zip(found, sizes)]


def _group_sums(values: np.ndarray, starts: np.ndarray, bound: int) -> list[int]:
    """Exact sums of each run: one int64 reduction where |value| x rows < 2^63; else the signed high
    and unsigned low 32-bit halves apart, each run's half-sums then below 2^63 for < 2^31 rows."""
    if values.dtype == object or len(values) >= 1 << 31:
        return [int(v) for v in np.add.reduceat(values.astype(object), starts)]
    if bound * len(values) < 2**63:
        return np.add.reduceat(values, starts).tolist()
    high = np.add.reduceat(values >> 32, starts).tolist()
    low = np.add.reduceat(values & LOW32, starts).tolist()
    return [(h << 32) + lo for h, lo in zip(high, low)]


def _fits(lo: int, hi: int) -> bool:
    return INT64_MIN <= lo and hi <= INT64_MAX


def _scaled_fits(bounds: tuple[int, int], k: int) -> bool:
    """Whether values within `bounds` times k fit int64, k with them (NumPy cannot multiply by a k past int64, even
    a column of zeros: a DECIMAL(38,20) cast)."""
    lo, hi = bounds
    return k <= INT64_MAX and _fits(lo * k, hi * k)


def _exact(x: Values) -> Values:
    """The same values as Python integers, on which no arithmetic overflows."""
    return x.astype(object) if isinstance(x, np.ndarray) and x.dtype != object else x


def _int64(x: Values) -> Values:
    return x.astype(np.int64) if isinstance(x, np.ndarray) and x.dtype == object else x


class _Rows:
    """Expressions over some rows of a part (`take`: their positions, or None for all), each value
    exact: int64 where the node's range allows, Python integers where it does not; `masks`: each column's
    with NULLs validity over the part's rows."""

    def __init__(self, arrays, dictionaries, ranges, take: np.ndarray | None, count: int, masks=None):
        self.arrays, self.dictionaries, self.ranges = arrays, dictionaries, ranges
        self.bounds: dict = {}  # each node's range, found once (query.bounds)
        self.take, self.count, self.masks = take, count, masks or {}
        self.gathered: dict[str, np.ndarray] = {}

    def column(self, name: str) -> np.ndarray:
        if name not in self.gathered:
            a = self.arrays[name]
            self.gathered[name] = a if self.take is None else a[self.take]
        return self.gathered[name]

    def positions(self, at: np.ndarray) -> np.ndarray:
        """The part's positions of these rows' `at`-th."""
        return at if self.take is None else self.take[at]

    def valid(self, e: Expr) -> np.ndarray | None:
        """Where e is not NULL (every column it reads holds a value); None where no column it reads has NULLs."""
        out = None
        for name in e.columns():
            if name in self.masks:
                m = self.masks[name] if self.take is None else self.masks[name][self.take]
                out = m if out is None else out & m
        return out

    # -- values --
    def value(self, e: Expr) -> Values:
        if isinstance(e, Column):
            return self.column(e.name)
        if isinstance(e, Literal):
            return int(e.value)
        if isinstance(e, Negate):
            return self._computed(e, lambda x: -x, [(e.arg, 1)])
        if isinstance(e, Cast):
            return self.scaled(e.arg, scale_of(e.type))
        if isinstance(e, Arith):
            if e.op == "*":
                return self._computed(e, lambda x, y: x * y, [(e.left, 1), (e.right, 1)])
            s = scale_of(e.type)
            operands = [(e.left, 10 ** (s - scale_of(e.left.type))), (e.right, 10 ** (s - scale_of(e.right.type)))]
            found = self._computed(e, (lambda x, y: x + y) if e.op == "+" else (lambda x, y: x - y), operands)
            return self._infinity_kept(date_shifted(e), found) if e.type.name == "DATE" else found
        raise TypeError(f"{type(e).__name__} is not a value the CPU reference computes")

    def _infinity_kept(self, date: Expr, shifted: Values) -> Values:
        """A date plus days (`shifted`) where the date is DuckDB's infinity or -infinity: that date, as DuckDB keeps
        it (a constant date is a finite one)."""
        days = self.value(date)
        if isinstance(days, int):
            return shifted
        infinite = np.abs(days) == DATE_INFINITY
        return np.where(infinite, days, shifted) if infinite.any() else shifted

    def _computed(self, e: Expr, op, operands: list[tuple[Expr, int]]) -> Values:
        """op over the operands (each times its power of ten), in int64 where e's range and each
        scaled operand's range fit int64, else on Python integers."""
        args, exact64 = [], _fits(*bounds(e, self.ranges, self.bounds))
        for arg, k in operands:
            exact64 = exact64 and _scaled_fits(bounds(arg, self.ranges, self.bounds), k)
            args.append((self.value(arg), k))
        if exact64:
            return op(*(_int64(v) * k if k != 1 else _int64(v) for v, k in args))
        return op(*(_exact(v) * k if k != 1 else _exact(v) for v, k in args))

    def scaled(self, e: Expr, scale: int) -> Values:
        """e's values at a scale at least its own, exactly."""
        k = 10 ** (scale - scale_of(e.type))
        values = self.value(e)
        if k == 1:
            return values
        return _int64(values) * k if _scaled_fits(bounds(e, self.ranges, self.bounds), k) else _exact(values) * k

    # -- predicates --
    def truth(self, e: Expr, value: bool) -> np.ndarray:
        """Where the predicate is `value` (TRUE or FALSE) by SQL's three truth values: a comparison or IN is
        neither where a side is NULL; NOT swaps TRUE and FALSE; AND is TRUE where every part is, FALSE where
        one is; OR the other way round. Where nothing is NULL, the rows where it is FALSE are the others."""
        if isinstance(e, Not):
            return self.truth(e.arg, not value)
        if isinstance(e, (And, Or)):
            every = isinstance(e, And) == value  # TRUE of an AND and FALSE of an OR: every part so
            mask = self.truth(e.args[0], value)
            for a in e.args[1:]:
                mask = mask & self.truth(a, value) if every else mask | self.truth(a, value)
            return mask
        if isinstance(e, IsNull):
            valid = self.valid(e.arg)
            is_null = np.zeros(self.count, dtype=bool) if valid is None else ~valid
            return is_null if value else ~is_null
        if isinstance(e, Literal):
            return np.full(self.count, bool(e.value) == value)
        holds = self._atom(e)
        valid = self.valid(e)
        if not value:
            holds = ~holds
        return holds if valid is None else holds & valid

    def _atom(self, e: Expr) -> np.ndarray:
        """Where a comparison or IN holds, taking each NULL's place as the value it holds (truth masks them)."""
        if isinstance(e, Compare):
            if e.left.type.name == "VARCHAR" or e.right.type.name == "VARCHAR":
                return self._compare_string(e)
            if "TIMESTAMP" in (e.left.type.name, e.right.type.name):
                raise TypeError(f"{e}: sql.py rewrites a date compared with a timestamp into days")
            s = max(scale_of(e.left.type), scale_of(e.right.type))
            return _compare(self.scaled(e.left, s), e.op, self.scaled(e.right, s), self.count)
        if isinstance(e, InList):
            mask = self._in(e)
            return ~mask if e.negated else mask
        raise TypeError(f"{type(e).__name__} is not a predicate the CPU reference decides")

    def _compare_string(self, e: Compare) -> np.ndarray:
        if isinstance(e.left, Column) and isinstance(e.right, Column):  # two columns: their strings, by Arrow (bytes)
            import pyarrow as pa
            import pyarrow.compute as pc

            a, b = (self.dictionaries[c.name].strings.take(pa.array(self.column(c.name))) for c in (e.left, e.right))
            holds = {"<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal, "=": pc.equal,
                     "<>": pc.not_equal}[e.op](a, b)
            return np.asarray(holds.to_numpy(zero_copy_only=False), dtype=bool)
        column, op, literal = (e.left, e.op, e.right) if isinstance(e.left, Column) else (e.right, FLIPPED[e.op], e.left)
        codes, dictionary, s = self.column(column.name), self.dictionaries[column.name], literal.value
        if op in ("=", "<>"):
            i = dictionary.code(s)
            equal = codes == i if i is not None else np.zeros(self.count, dtype=bool)
            return equal if op == "=" else ~equal
        # the codes of strings below s are those below its insertion point, the same for <= past it
        cut = bisect_left(dictionary, s) if op in ("<", ">=") else bisect_right(dictionary, s)
        return codes < cut if op in ("<", "<=") else codes >= cut

    def _in(self, e: InList) -> np.ndarray:
        if e.arg.type.name == "VARCHAR":
            dictionary = self.dictionaries[e.arg.name]
            present = [c for c in (dictionary.code(v.value) for v in e.values) if c is not None]
            return np.isin(self.column(e.arg.name), np.array(present, dtype=np.int64))
        scale = scale_of(e.arg.type)
        wanted = []
        for v in e.values:  # each constant at the argument's scale; one finer than it equals no value
            shift = scale - scale_of(v.type)
            if shift >= 0:
                wanted.append(int(v.value) * 10 ** shift)
            elif int(v.value) % 10 ** -shift == 0:
                wanted.append(int(v.value) // 10 ** -shift)
        values = self.value(e.arg)
        if isinstance(values, int):
            return np.full(self.count, values in wanted)
        if values.dtype != object:
            wanted = [w for w in wanted if _fits(w, w)]
        return np.isin(values, np.array(wanted, dtype=values.dtype))


def _compare(a: Values, op: str, b: Values, count: int) -> np.ndarray:
    """a op b elementwise, exactly: a constant outside int64 decides the comparison by its sign
    alone against int64 values."""
    if isinstance(a, int) and isinstance(b, int):
        return np.full(count, _holds(a, op, b))
    if isinstance(a, int):
        a, op, b = b, FLIPPED[op], a
    if isinstance(b, int) and a.dtype != object and not _fits(b, b):
        return np.full(count, _holds(0, op, 1) if b > 0 else _holds(1, op, 0))
    if isinstance(b, np.ndarray) and (a.dtype == object) != (b.dtype == object):
        a, b = _exact(a), _exact(b)
    result = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
              "=": np.equal, "<>": np.not_equal}[op](a, b)
    return np.asarray(result, dtype=bool)


def _holds(a: int, op: str, b: int) -> bool:
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "=": a == b, "<>": a != b}[op]
