"""Partial aggregates that merge across parts and machines, and the final answer as DuckDB gives it.

An engine answers one part of the table with a Partial: for each group (its key in engine values,
str for a VARCHAR column) one state per aggregate of `query.aggregates`, exact Python integers:

    sum, avg    [total, rows]        the unscaled total of the argument and the rows it summed
    count       [rows]
    min, max    [value or None, rows]

Partials of any parts merge in any order to the same Partial; `finalize` turns the merged one into
the rows DuckDB's Python client returns for the same SQL: Decimal at the type's scale, int, date,
str, and AVG's float computed the way DuckDB 2.0 computes it (`duckdb_avg`), not merely nearly so.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from gquery.query import (INTEGER_TYPES, And, Column, Compare, Expr, Literal, Not, Or, Query, SqlType, scale_of,
                          to_python)

DOUBLE_BITS, LONG_DOUBLE_BITS = 53, 64  # significand bits of IEEE double and x87 80-bit long double


# --- partial aggregates --------------------------------------------------------------------------------
def initial_state(func: str) -> list:
    """The state of an aggregate over no rows."""
    return {"sum": [0, 0], "avg": [0, 0], "count": [0], "min": [None, 0], "max": [None, 0]}[func]


def merged_state(func: str, a: list, b: list) -> list:
    if func in ("sum", "avg"):
        return [a[0] + b[0], a[1] + b[1]]
    if func == "count":
        return [a[0] + b[0]]
    values = [v for v in (a[0], b[0]) if v is not None]
    best = (min if func == "min" else max)(values) if values else None
    return [best, a[1] + b[1]]


@dataclass
class Partial:
    """Per group key, one state per aggregate (in `funcs` order, which is query.aggregates')."""

    funcs: tuple[str, ...]
    groups: dict[tuple, list[list]] = field(default_factory=dict)
    rows_selected: int = 0

    @classmethod
    def empty(cls, query: Query) -> "Partial":
        return cls(tuple(a.func for a in query.aggregates))

    def add(self, key: tuple, states: list[list]) -> None:
        """Fold one group's states into this partial."""
        if len(states) != len(self.funcs):
            raise ValueError(f"{len(states)} states for {len(self.funcs)} aggregates")
        mine = self.groups.get(key)
        self.groups[key] = [list(s) for s in states] if mine is None else \
            [merged_state(f, a, b) for f, a, b in zip(self.funcs, mine, states)]

    def merge(self, other: "Partial") -> "Partial":
        """Fold another part's partial into this one (in place) and return this one."""
        if other.funcs != self.funcs:
            raise ValueError(f"partials of different aggregates: {self.funcs} and {other.funcs}")
        for key, states in other.groups.items():
            self.add(key, states)
        self.rows_selected += other.rows_selected
        return self

    def to_json(self) -> dict:
        """Plain JSON: integers as decimal strings (a 128-bit total survives any JSON reader), each
        key value tagged with its kind so that the string '7' and the integer 7 stay apart."""
        return {"funcs": list(self.funcs), "rows_selected": str(self.rows_selected),
                "groups": [{"key": [["s", v] if isinstance(v, str) else ["i", str(v)] for v in key],
                            "states": [[None if v is None else str(v) for v in s] for s in states]}
                           for key, states in self.groups.items()]}

    @classmethod
    def from_json(cls, d: dict) -> "Partial":
        partial = cls(tuple(d["funcs"]), rows_selected=int(d["rows_selected"]))
        for group in d["groups"]:
            key = tuple(v if kind == "s" else int(v) for kind, v in group["key"])
            partial.add(key, [[None if v is None else int(v) for v in s] for s in group["states"]])
        return partial


# --- the answer ------------------------------------------------------------------------------------------------
@dataclass
class Result:
    """The answer's columns (name, SQL type) and rows of Python values as DuckDB's client gives them."""

    columns: list[tuple[str, SqlType]]
    rows: list[tuple]

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.columns]

    def __str__(self) -> str:
        """The rows as a plain text table, numbers right-aligned, NULL spelled out."""
        cells = [self.names] + [["NULL" if v is None else str(v) for v in row] for row in self.rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(self.columns))]
        lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)


def finalize(query: Query, partial: Partial, table_statistics: bool = True) -> Result:
    """The rows of the query's answer from the merged partial: SQL's rules for empty input (without
    GROUP BY one row, SUM/AVG/MIN/MAX NULL and COUNT 0; with GROUP BY no row per absent group),
    then ORDER BY (stable) and LIMIT. Each AVG is the double DuckDB 2.0 returns for the same SQL
    over a DuckDB table (table_statistics, as the references load one), or over parquet files read
    in place (not table_statistics): the two can differ in the last bit (avg_as_sum_over_count)."""
    aggregates = query.aggregates
    if partial.funcs != tuple(a.func for a in aggregates):
        raise ValueError(f"a partial of {partial.funcs} for a query of {tuple(a.func for a in aggregates)}")
    over_count = avg_as_sum_over_count(query, table_statistics)
    groups = dict(partial.groups)
    if not query.group_by and () not in groups:
        groups[()] = [initial_state(a.func) for a in aggregates]
    rows = []  # (the row as DuckDB's client gives it, the values ORDER BY compares)
    for key in sorted(groups):
        states = groups[key]
        row, order = [], []
        for output in query.outputs:
            if output.expr in aggregates:
                i = aggregates.index(output.expr)
                value = _final_value(output.expr, states[i], over_count[i])
                row.append(value)
                order.append(states[i][0] if output.expr.func in ("min", "max") else value)
            else:
                k = key[query.group_by.index(output.expr)]
                row.append(to_python(k, output.expr.type))
                order.append(k)
        rows.append((tuple(row), tuple(order)))
    # ordered by the engine's values, not the client's: a date past Python's years is DuckDB's text
    # ('0902-02-05 (BC)'), which neither compares with a datetime.date nor sorts as the date does
    for index, descending in reversed(query.order_by):
        rows.sort(key=lambda r: _sort_key(r[1][index], descending), reverse=descending)
    if query.limit is not None:
        rows = rows[:query.limit]
    return Result([(o.name, o.expr.type) for o in query.outputs], [row for row, _ in rows])


def _final_value(aggregate, state: list, over_count: bool):
    func = aggregate.func
    if func == "count":
        return state[0]
    if func in ("sum", "avg"):
        total, rows = state
        if rows == 0:
            return None
        if func == "sum":
            return to_python(total, aggregate.type)
        return (duckdb_sum_over_count if over_count else duckdb_avg)(total, rows, aggregate.arg.type)
    return to_python(state[0], aggregate.type)


def _sort_key(value, descending: bool):
    """NULLs last in either direction (DuckDB's default order), values by their own order."""
    return (value is not None, value) if descending else (value is None, value)


# --- AVG as DuckDB 2.0 computes it --------------------------------------------------------------------------
def nearest(x: Fraction | int, bits: int) -> Fraction:
    """x rounded to `bits` significant bits, ties to even: IEEE round-to-nearest for a binary float
    of that significand. The exponent is unbounded: every AVG lies far inside double's range."""
    x = Fraction(x)
    if x == 0:
        return x
    n, d = abs(x.numerator), x.denominator
    e = n.bit_length() - d.bit_length() - bits  # |x| / 2^e lies in [2^(bits-1), 2^(bits+1))
    while True:
        num, den = (n, d << e) if e >= 0 else (n << -e, d)
        q, r = divmod(num, den)
        if q < 1 << bits:
            break
        e += 1
    if 2 * r > den or (2 * r == den and q & 1):
        q += 1
    magnitude = Fraction(q << e) if e >= 0 else Fraction(q, 1 << -e)
    return magnitude if x > 0 else -magnitude


def duckdb_hugeint_to_float(value: int, bits: int) -> Fraction:
    """DuckDB's Hugeint::Cast to double (53 bits) or long double (64), CastBigintToFloating: the
    128-bit value's halves converted apart and added, so a double can round twice. Its multiplier
    REAL(UINT64_MAX) + 1 is exactly 2^64 in both precisions."""
    upper, lower = divmod(value, 1 << 64)  # upper signed, lower unsigned: the two's-complement halves
    if upper == -1:  # DuckDB's special case, so small negative numbers are not rounded through 2^64
        return nearest(-nearest(((1 << 64) - 1) - lower, bits) - 1, bits)
    return nearest(nearest(lower, bits) + nearest(upper, bits) * (1 << 64), bits)


def _int16_storage(t: SqlType) -> bool:
    """Types DuckDB averages in double through an int64 state: SMALLINT (TINYINT binds to it) and a
    DECIMAL kept in 16 bits (width <= 4). Every other integer and DECIMAL goes through a hugeint
    state and x87 long double."""
    return t.name in ("TINYINT", "SMALLINT") or (t.is_decimal and t.width <= 4)


def duckdb_avg(total: int, rows: int, arg_type: SqlType) -> float:
    """AVG of values of arg_type summing (unscaled) to `total` over `rows` rows, bit for bit as
    DuckDB 2.0 on x86-64 computes it (extension/core_functions/aggregate/algebraic/avg.cpp):

        16-bit storage: double(sum) / (double(count) * scale)                     in double
        otherwise:      (long double)sum / ((long double)count * scale), then to double
    where scale is 10^scale as DuckDB's Hugeint::Cast<double> gives it. Each operation rounds once
    to its precision; the long double quotient rounds again to double (the double rounding that
    makes a correctly rounded quotient differ from DuckDB's)."""
    if rows <= 0:
        raise ValueError("AVG of no rows is NULL, not a number")
    power = duckdb_hugeint_to_float(10 ** scale_of(arg_type), DOUBLE_BITS)
    if _int16_storage(arg_type):
        divisor = nearest(nearest(rows, DOUBLE_BITS) * power, DOUBLE_BITS)
        return float(nearest(nearest(total, DOUBLE_BITS) / divisor, DOUBLE_BITS))
    divisor = nearest(rows * power, LONG_DOUBLE_BITS)
    quotient = nearest(duckdb_hugeint_to_float(total, LONG_DOUBLE_BITS) / divisor, LONG_DOUBLE_BITS)
    return float(nearest(quotient, DOUBLE_BITS))


def duckdb_sum_over_count(total: int, rows: int, arg_type: SqlType) -> float:
    """AVG as DuckDB 2.0 computes it once its optimizer has rewritten it to
    CAST(SUM(x) AS DOUBLE) / CAST(COUNT(x) AS DOUBLE): the sum's cast is DuckDB's DECIMAL to DOUBLE
    (correctly rounded at a scale above 0) or HUGEINT to DOUBLE (Hugeint::Cast, which can round
    twice); the count is exact; the division rounds once."""
    if rows <= 0:
        raise ValueError("AVG of no rows is NULL, not a number")
    scale = scale_of(arg_type)
    numerator = nearest(Fraction(total, 10 ** scale), DOUBLE_BITS) if scale else \
        duckdb_hugeint_to_float(total, DOUBLE_BITS)
    return float(nearest(numerator / rows, DOUBLE_BITS))


def avg_as_sum_over_count(query: Query, table_statistics: bool = True) -> list[bool]:
    """For each of query.aggregates, whether DuckDB 2.0 computes it (an AVG) as SUM / COUNT: its
    AggregateFunctionRewriter's AvgRewriteRule, followed step by step. Without GROUP BY every AVG is
    rewritten. With GROUP BY, AVG(x) is rewritten where another aggregate already is SUM(x) or
    COUNT(x), or where x is proven non-NULL and another is COUNT(*), or COUNT or AVG of an argument
    proven non-NULL; each rewrite leaves SUM(x) in the AVG's place and adds COUNT(x), which later
    AVGs see. What DuckDB proves non-NULL (`proven_non_null`) is where a table and parquet differ."""
    listed: list[tuple[str, Expr | None]] = [(a.func, a.arg) for a in query.aggregates]
    rewritten = [False] * len(listed)
    for i, aggregate in enumerate(query.aggregates):
        x = aggregate.arg
        if aggregate.func != "avg":
            continue
        if query.group_by and not _shares_count(x, listed, i, query, table_statistics):
            continue
        rewritten[i] = True
        listed[i] = ("sum", x)
        listed.append(("count", x))
    return rewritten


def _shares_count(x: Expr, listed, index: int, query: Query, table_statistics: bool) -> bool:
    proven = proven_non_null(x, query, table_statistics)
    for j, (func, arg) in enumerate(listed):
        if j == index:
            continue
        if (func, arg) in (("sum", x), ("count", x)):
            return True
        if proven and func in ("count", "avg") and (arg is None or proven_non_null(arg, query, table_statistics)):
            return True
    return False


def proven_non_null(e: Expr, query: Query, table_statistics: bool) -> bool:
    """Whether DuckDB 2.0 proves e non-NULL when it plans the aggregate (NotNullExpressionAnalyzer):
    a constant; a column of a table, by its statistics (parquet read in place has none at that
    point); or any expression a WHERE conjunct compares directly, uncast, which no NULL passes."""
    if isinstance(e, Literal):
        return True
    if table_statistics and isinstance(e, Column):
        return True
    return query.where is not None and _rejects_null(query.where, e)


def _rejects_null(predicate: Expr, e: Expr, negated: bool = False) -> bool:
    """Whether no row with e NULL passes `predicate` (or, negated, its NOT): DuckDB pushes a NOT down
    (NOT of AND is OR of NOTs, NOT of OR is AND of NOTs, NOT a < b is a >= b: so NOT BETWEEN is two
    comparisons either of which rejects NULL) before it plans the aggregate."""
    if isinstance(predicate, (And, Or)):
        every = isinstance(predicate, Or) != negated  # an OR (or a NOT of an AND) rejects where each branch does
        found = (_rejects_null(p, e, negated) for p in predicate.args)
        return all(found) if every else any(found)
    if isinstance(predicate, Not):
        return _rejects_null(predicate.arg, e, not negated)
    if not isinstance(predicate, Compare):
        return False  # IN is not a comparison to DuckDB's analyzer
    for side, other in ((predicate.left, predicate.right), (predicate.right, predicate.left)):
        if side == e and _compared_uncast(side, other):
            return True
    return False


def _compared_uncast(side: Expr, other: Expr) -> bool:
    """Whether DuckDB compares `side` without casting it: the other side's type fits in side's, or
    is a constant that converts to side's type exactly (DuckDB then moves the cast onto it)."""
    a, b = side.type, other.type
    if not (a.is_numeric and b.is_numeric):
        return a == b
    if isinstance(other, Literal):
        shift = scale_of(a) - scale_of(b)
        value = other.value * 10 ** shift if shift >= 0 else \
            (other.value // 10 ** -shift if other.value % 10 ** -shift == 0 else None)
        return value is not None and _holds_value(value, a)
    if a.is_integer and b.is_integer:
        return INTEGER_TYPES[a.name] >= INTEGER_TYPES[b.name]
    da, db = a.as_decimal(), b.as_decimal()
    return da.scale >= db.scale and da.width - da.scale >= db.width - db.scale


def _holds_value(value: int, t: SqlType) -> bool:
    if t.is_integer:
        bits = INTEGER_TYPES[t.name]
        return -(1 << (bits - 1)) <= value < 1 << (bits - 1)
    return abs(value) < 10 ** t.width


# --- comparing answers ----------------------------------------------------------------------------------------
def same(ours: Result, theirs_rows: list[tuple], ordered: bool) -> bool:
    """Whether our rows are DuckDB's exactly: Decimals equal in value and in printed digits, floats
    equal (no tolerance), dates, ints and strings equal and of the same kind. Unordered, the rows
    are compared as multisets."""
    mine, theirs = list(ours.rows), [tuple(r) for r in theirs_rows]
    if len(mine) != len(theirs):
        return False
    if not ordered:
        mine, theirs = sorted(mine, key=_canonical_row), sorted(theirs, key=_canonical_row)
    return all(len(a) == len(b) and all(map(same_value, a, b)) for a, b in zip(mine, theirs))


def same_value(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if type(a) is not type(b):  # date and datetime, int and bool, Decimal and float all differ
        return False
    if isinstance(a, Decimal):
        return a == b and str(a) == str(b)
    return a == b


def _canonical_row(row: tuple) -> tuple:
    return tuple(_canonical_value(v) for v in row)


def _canonical_value(v) -> tuple:
    """A total order over values of any kind, so rows sort the same whichever side they came from."""
    if v is None:
        return (0, "", 0)
    if isinstance(v, (Decimal, float, int)) and not isinstance(v, bool):
        return (1, type(v).__name__, Decimal(v), str(v))
    if isinstance(v, datetime.date):
        return (2, type(v).__name__, v.isoformat())
    return (3, type(v).__name__, str(v))
