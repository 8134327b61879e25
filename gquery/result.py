"""Partial aggregates that merge across parts and machines, and the final answer as DuckDB gives it.

An engine answers one part of the table with a Partial: for each group (its key in engine values,
str for a VARCHAR column) one state per aggregate of `query.aggregates`, exact Python integers (a
MIN or MAX of a VARCHAR column: its string):

    sum, avg    [total, rows]        the unscaled total of the argument and the rows it summed
    count       [rows]
    min, max    [value or None, rows]

Partials of any parts merge in any order to the same Partial; `finalize` turns the merged one into
the rows DuckDB's Python client returns for the same SQL: Decimal at the type's scale, int, date,
str, and AVG's double as the correctly rounded exact mean (`exact_mean`), which DuckDB's equals within
one unit in the last place (`compare` counts where they differ).
"""

from __future__ import annotations

import datetime
import functools
import math
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from gquery.errors import GqueryError
from gquery.query import Query, SqlType, python_column, scale_of

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
        return cls(aggregate_funcs(query))

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
        if not self.groups:  # the first part's groups as they are: states are replaced on merging, never changed
            self.groups = dict(other.groups)
        else:
            for key, states in other.groups.items():
                self.add(key, states)
        self.rows_selected += other.rows_selected
        return self

    def to_json(self) -> dict:
        """Plain JSON: integers as decimal strings (a 128-bit total survives any JSON reader), each
        key value tagged with its kind so that the string '7', the integer 7 and NULL stay apart."""
        return {"funcs": list(self.funcs), "rows_selected": str(self.rows_selected),
                "groups": [{"key": [["s", v] if isinstance(v, str) else ["n", None] if v is None else ["i", str(v)]
                                    for v in key],
                            "states": [[None if v is None else ["s", v] if isinstance(v, str) else str(v) for v in s]
                                       for s in states]}
                           for key, states in self.groups.items()]}

    @classmethod
    def from_json(cls, d: dict) -> "Partial":
        partial = cls(tuple(d["funcs"]), rows_selected=int(d["rows_selected"]))
        for group in d["groups"]:
            key = tuple(v if kind == "s" else None if kind == "n" else int(v) for kind, v in group["key"])
            partial.add(key, [[None if v is None else v[1] if isinstance(v, list) else int(v) for v in s]
                              for s in group["states"]])
        return partial


class ColumnarPartial(Partial):
    """A Partial as an engine reads it back: per group column its keys, per aggregate its state's
    components (the i-th entries are one group's), each an int64 array, or a list of Python values
    (strings, integers past 64 bits). `groups` makes the dict of Python values on first use (merging
    does); finalize orders the columns and cuts at LIMIT first, making rows only of the groups it keeps
    (the top 10 of 100,000 groups builds 10 groups)."""

    def __init__(self, funcs: tuple[str, ...], keys: list[list], states: list[list[list]], size: int,
                 rows_selected: int):
        self.funcs, self.keys, self.states, self.size, self.rows_selected = funcs, keys, states, size, rows_selected
        self._groups = None

    @property
    def groups(self) -> dict[tuple, list[list]]:
        if self._groups is None:
            keys = zip(*(python_values(c) for c in self.keys)) if self.keys else [()] * self.size
            states = [list(zip(*(python_values(c) for c in state))) for state in self.states]
            self._groups = {key: [list(state[i]) for state in states] for i, key in enumerate(keys)}
        return self._groups

    @groups.setter
    def groups(self, value: dict) -> None:
        self._groups = value
        self.keys = None  # the dict is the truth from now

    def add(self, key: tuple, states: list[list]) -> None:
        self.groups = self.groups  # merged into: the dict from now, the columns no longer this partial's groups
        super().add(key, states)

    @classmethod
    def combine(cls, parts: list["ColumnarPartial"]) -> "ColumnarPartial | None":
        """The parts' groups added by key with NumPy (a parted table's, or several GPUs'): rows and sums
        added, minima and maxima kept, exactly (a sum that might pass 64 bits is added as Python
        integers). None where a key or a state is NULL: merge() adds those."""
        if any(p.keys is None for p in parts):
            return None
        keys = [_joined([p.keys[c] for p in parts]) for c in range(len(parts[0].keys))]
        ranks = [_sortable(column) for column in keys]
        if not keys or any(r is None for r in ranks):
            return None
        _, first, inverse = np.unique(np.stack(ranks, axis=1), axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        states = []
        for a, func in enumerate(parts[0].funcs):
            state = []
            for k in range(len(parts[0].states[a])):
                values = _joined([p.states[a][k] for p in parts])
                kind = "add" if func == "count" or k == len(parts[0].states[a]) - 1 or func in ("sum", "avg") else func
                added = _grouped(values, inverse, len(first), kind)
                if added is None:
                    return None
                state.append(added)
            states.append(state)
        return cls(parts[0].funcs, [column[first] if isinstance(column, np.ndarray) else [column[i] for i in first.tolist()]
                                    for column in keys], states, len(first), sum(p.rows_selected for p in parts))


def python_values(column) -> list:
    """A column's values as Python values (an int64 array's, or the list it is): exact arithmetic, not NumPy's."""
    return column.tolist() if hasattr(column, "tolist") else column


def _taken(column, at) -> list:
    """A column's values at the positions `at` (an int array), as Python values."""
    return column[at].tolist() if hasattr(column, "tolist") else [column[i] for i in at.tolist()]


def _joined(columns: list):
    """Parts' columns one after another: one int64 array where every part's is one, else Python values."""
    if all(isinstance(c, np.ndarray) and c.dtype == np.int64 for c in columns):
        return np.concatenate(columns)
    return [v for c in columns for v in python_values(c)]


# --- the answer ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OtherType:
    """A column type DuckDB answers that the engines do not hold (UBIGINT, LIST, INTERVAL, BLOB, ...), by DuckDB's
    name: backend duckdb's answer holds it, its rows as DuckDB's client gives them, its Arrow table DuckDB's own."""

    name: str
    width: int = 0
    scale: int = 0
    is_integer = is_decimal = is_numeric = is_temporal = is_unsigned = False

    def __str__(self) -> str:
        return self.name


class Result:
    """The answer's columns (name, SQL type) and rows of Python values as DuckDB's client gives them;
    `raw`, where the engines made it, the same cells as the engines hold them (unscaled integers, day
    and microsecond counts), from which arrow() builds its arrays without Python's Decimals and dates.
    An engine's answer is made as columns (Result.of_columns): its rows are made when first read.
    `arrow_table`: DuckDB's own Arrow table of its answer (backend duckdb), which arrow() gives as it is."""

    def __init__(self, columns: list[tuple[str, SqlType]], rows: list[tuple] | None = None,
                 raw: list[tuple] | None = None, *, cells: list[list] | None = None, raw_cells: list[list] | None = None,
                 arrow_table=None):
        self.columns = columns
        self._rows, self._raw, self._arrow = rows, raw, arrow_table
        self._cells, self._raw_cells = cells, raw_cells  # a list a column: the client's values, the engines'

    @classmethod
    def of_columns(cls, columns: list[tuple[str, SqlType]], cells: list, raw_cells: list[list]) -> "Result":
        """`cells`: each column's client values, or a callable that makes them when rows are first read."""
        return cls(columns, cells=cells, raw_cells=raw_cells)

    @property
    def rows(self) -> list[tuple]:
        if self._rows is None:
            self._rows = list(zip(*(self._column(i) for i in range(len(self._cells))))) if self._cells else []
        return self._rows

    @property
    def raw(self) -> list[tuple] | None:
        if self._raw is None and self._raw_cells is not None:
            self._raw = list(zip(*self._raw_cells))
        return self._raw

    def __eq__(self, other) -> bool:
        return isinstance(other, Result) and self.columns == other.columns and self.rows == other.rows

    __hash__ = None

    def __repr__(self) -> str:
        return f"Result(columns={self.columns!r}, rows={self.rows!r})"

    def _column(self, i: int) -> list:
        """Column i's client values; made now where it was given as how to make them (a callable)."""
        if self._cells is None:
            return [row[i] for row in self.rows]
        if callable(self._cells[i]):
            self._cells[i] = self._cells[i]()
        return self._cells[i]

    def _raw_column(self, i: int) -> list | None:
        if self._raw_cells is not None:
            return self._raw_cells[i]
        return None if self.raw is None else [row[i] for row in self.raw]

    def arrow(self):
        """The rows as a pyarrow.Table typed as DuckDB's .arrow() types them: DECIMAL(w,s) as
        decimal128(w,s), HUGEINT as decimal128(38,0), integers by width, DATE as date32, TIMESTAMP as
        timestamp[us], DOUBLE, VARCHAR, BOOLEAN. Made from the engines' values where it has them: an
        unscaled int64 is a decimal128's low word, a day count a date32's."""
        import pyarrow as pa

        if self._arrow is not None:
            return self._arrow

        arrays = []
        for i, (name, t) in enumerate(self.columns):
            raw = self._raw_column(i)
            _check_held(name, raw if raw is not None else self._column(i), t)
            made = None
            if raw is not None and (t.is_decimal or t.name == "HUGEINT"):
                made = _decimal_array(raw, arrow_type(t))
            elif raw is not None and t.name in ("DATE", "TIMESTAMP"):  # day or microsecond counts
                made = pa.array(raw, pa.int32() if t.name == "DATE" else pa.int64()).cast(arrow_type(t))
            if made is None:
                cells = self._column(i)
                if t.name in ("DATE", "TIMESTAMP") and any(isinstance(v, str) for v in cells):
                    raise ValueError(f"column {self.columns[i][0]}: a date past Python's years, and no engine values")
                made = pa.array(cells, arrow_type(t))
            arrays.append(made)
        return pa.Table.from_arrays(arrays, names=self.names)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.columns]

    def __str__(self) -> str:
        """The rows as a plain text table, numbers right-aligned, NULL spelled out."""
        cells = [self.names] + [[cell_text(v) for v in row] for row in self.rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(self.columns))]
        lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)


def cell_text(v) -> str:
    """A value as a table of the answer shows it: NULL spelled out, a DECIMAL in positional notation at its scale
    (str of Decimal('1.79E-16') is that; DuckDB writes 0.000000000000000179), the others as Python writes them."""
    if v is None:
        return "NULL"
    return format(v, "f") if isinstance(v, Decimal) else str(v)


def _check_held(name: str, values, t: SqlType) -> None:
    """A GqueryError where a column holds a value its type does not (a MAX of a TINYINT sum past 127): DuckDB
    raises an out-of-range error for such a query; the engines' answer is exact, in its rows, but no Arrow array
    of the type DuckDB gives the column holds it."""
    if t.is_decimal:
        lo, hi = -(10**t.width - 1), 10**t.width - 1
    elif t.is_integer:  # (a HUGEINT's Arrow type, DuckDB's decimal128(38, 0), holds its 128 bits: _decimal_array)
        lo, hi = t.integer_range
    else:
        return
    if isinstance(values, np.ndarray) and values.dtype == np.int64:
        if not len(values) or (lo <= int(values.min()) and int(values.max()) <= hi):
            return
        values = values.tolist()
    past = next((v for v in values if v is not None and not lo <= int(v) <= hi), None)
    if past is not None:
        from gquery.query import to_python

        shown = to_python(past, t) if t.is_decimal else past
        raise GqueryError(f"column {name}: {shown} is past {t}, the type DuckDB gives it (DuckDB raises an out-of-range "
                          "error for this query); the answer's rows hold the exact values")


def _decimal_array(values: list, arrow):
    """A decimal128 array of unscaled integers: each one's low word, its sign the high word, where all fit int64;
    else each one's 128-bit two's complement (a HUGEINT past 38 digits, as DuckDB's Arrow holds one, which Python's
    Decimals could not give to a decimal128(38, 0)); a NULL a value of none, its validity bit clear."""
    import pyarrow as pa

    nulls = None if isinstance(values, np.ndarray) else [v is None for v in values]
    validity, null_count = None, 0
    if nulls is not None and any(nulls):
        null_count = sum(nulls)
        validity = pa.py_buffer(np.packbits(~np.array(nulls), bitorder="little"))
        values = [0 if v is None else v for v in values]
    try:
        low = np.array(values, dtype=np.int64)
    except OverflowError:
        mask = (1 << 64) - 1
        words = np.array([(v & mask, v >> 64 & mask) for v in map(int, values)], dtype=np.uint64)
    except TypeError:  # (not the engines' integers: pa.array makes it of the client's values)
        return None
    else:
        words = np.empty((len(low), 2), dtype=np.int64)
        words[:, 0], words[:, 1] = low, low >> 63
    return pa.Array.from_buffers(arrow, len(values), [validity, pa.py_buffer(words)], null_count=null_count)


def pandas_frame(pd, table, types: list[SqlType]):
    """An answer's Arrow table as the pandas DataFrame DuckDB's .df() makes of it (`pd`: pandas): an integer or BOOLEAN
    column as NumPy's type of its width, or pandas' nullable one where it holds a NULL (its values exact: a double
    would round an integer past 2^53); DECIMAL and HUGEINT as doubles, made as DuckDB makes them; DATE and
    TIMESTAMP as datetime64[us] (a date past 9999 too); VARCHAR as pandas makes a column of strings; NULL as pandas'
    missing value of the column's type; two columns of one name, the second x_1 (schema.column_names), as DuckDB's."""
    import pyarrow as pa

    from gquery.schema import column_names

    out = []
    for k, t in enumerate(types):
        column = table.column(k).combine_chunks()
        nulls = column.null_count > 0
        if t.is_integer and t.name != "HUGEINT" or t.name == "BOOLEAN":
            values = column.fill_null(False if t.name == "BOOLEAN" else 0).to_numpy(zero_copy_only=False)
            if nulls:
                mask = column.is_null().to_numpy(zero_copy_only=False)
                values = (pd.arrays.BooleanArray if t.name == "BOOLEAN" else pd.arrays.IntegerArray)(values, mask)
        elif t.is_decimal or t.name == "HUGEINT":  # as DuckDB casts one to DOUBLE: the unscaled integer's nearest
            # double over 10^scale's (not the double nearest the exact value: one ulp apart for about a quarter of them)
            scale = t.scale if t.is_decimal else 0
            power = float(f"1e{scale}")
            values = np.array([np.nan if v is None else float(int(v.scaleb(scale))) / power for v in column.to_pylist()],
                              np.float64)
        elif t.is_temporal:
            try:
                values = column.cast(pa.timestamp("us")).to_numpy(zero_copy_only=False)
            except pa.ArrowInvalid:  # DuckDB's infinite dates, a day past datetime64[us]'s: its .df() raises too
                raise GqueryError(f"column {table.column_names[k]}: a {t} past what pandas' datetime64[us] holds "
                                  "(an infinite date, or one outside its years -290308 to 294247: DuckDB's .df() "
                                  "raises a conversion error too); a.rows and a.arrow() give it") from None
        elif t.name == "DOUBLE":
            values = column.to_numpy(zero_copy_only=False)
        elif isinstance(t, OtherType):  # (backend duckdb's: as pyarrow gives it to pandas)
            values = column.to_pandas()
        else:
            values = column.to_pylist()
        out.append(pd.Series(values, name=k))
    frame = pd.concat(out, axis=1)
    frame.columns = column_names(table.column_names)
    return frame


def arrow_type(t: SqlType):
    """The Arrow type DuckDB's .arrow() gives a column of SQL type t."""
    import pyarrow as pa

    if t.is_decimal:
        return pa.decimal128(t.width, t.scale)
    if t.name == "HUGEINT":
        return pa.decimal128(38, 0)
    return {"TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INTEGER": pa.int32(), "BIGINT": pa.int64(),
            "UTINYINT": pa.uint8(), "USMALLINT": pa.uint16(), "UINTEGER": pa.uint32(),
            "DATE": pa.date32(), "TIMESTAMP": pa.timestamp("us"), "DOUBLE": pa.float64(), "VARCHAR": pa.string(),
            "BOOLEAN": pa.bool_()}[t.name]


def finalize(query: Query, partial: Partial) -> Result:
    """The rows of the query's answer from the merged partial: SQL's rules for empty input (without
    GROUP BY one row, SUM/AVG/MIN/MAX NULL and COUNT 0; with GROUP BY no row per absent group),
    then ORDER BY (stable) and LIMIT. Each AVG is the correctly rounded exact mean (exact_mean).
    The groups are ordered by the engines' values of the ORDER BY columns alone and cut at the LIMIT
    before any row is built: the top 10 of 100,000 groups builds 10 rows."""
    aggregates = query.aggregates
    if partial.funcs != aggregate_funcs(query):
        raise ValueError(f"a partial of {partial.funcs} for a query of {aggregate_funcs(query)}")
    if isinstance(partial, ColumnarPartial) and partial.keys is not None and query.group_by:
        order = _columnar_order(query, partial)
        if order is not None:  # NumPy ordered the groups: rows are made of those LIMIT keeps only
            kept = order[:query.limit] if query.limit is not None else order
            return _column_rows(query, [_taken(c, kept) for c in partial.keys],
                                [[_taken(c, kept) for c in state] for state in partial.states])
    elif isinstance(partial, ColumnarPartial) and partial.keys is not None and partial.size == 1:  # the whole
        kept = 0 if query.limit == 0 else 1  # table's one group, as read (LIMIT 0: no row)
        return _column_rows(query, [], [[c[:kept] for c in state] for state in partial.states])
    groups = partial.groups
    if not query.group_by and () not in groups:
        groups = {**groups, (): [initial_state(a.func) for a in aggregates]}
    keys, states = _columns(query, groups, sorted(groups, key=_group_order))
    # ordered by the engine's values, not the client's: a date past Python's years is DuckDB's text
    # ('0902-02-05 (BC)'), which neither compares with a datetime.date nor sorts as the date does
    outputs, order = _outputs(query), list(range(len(groups)))
    for k in reversed(range(len(query.order_by))):
        (index, descending), first = query.order_by[k], k in query.nulls_first
        i, expr, j = outputs[index]
        column = keys[j] if i is None else python_values(_engine_values(expr, states[i]))
        order.sort(key=lambda e: _sort_key(column[e], descending, first), reverse=descending)
    if query.limit is not None:
        order = order[:query.limit]
    return _column_rows(query, [[c[e] for e in order] for c in keys], [[[c[e] for e in order] for c in state]
                                                                       for state in states])


def _group_order(key: tuple) -> tuple:
    """A group key's place among the groups: by its values, a NULL after every value (as DuckDB orders)."""
    return tuple((v is None, v) if v is not None else (True, 0) for v in key)


@functools.lru_cache(maxsize=256)
def aggregate_funcs(query: Query) -> tuple[str, ...]:
    """Each aggregate's function, in order: what a partial of the query holds (found once a query)."""
    return tuple(a.func for a in query.aggregates)


@functools.lru_cache(maxsize=256)
def _outputs(query: Query) -> tuple[tuple, ...]:
    """Each output as (its aggregate's index, the expression, its group column's index): found once a query
    (a Query hashes once; finding an expression among the aggregates compares trees, 30 us of Q1's call)."""
    return tuple((query.aggregates.index(o.expr), o.expr, None) if o.expr in query.aggregates else
                 (None, o.expr, query.group_by.index(o.expr)) for o in query.outputs)


def _columns(query: Query, groups: dict, entries: list) -> tuple[list[list], list[list[list]]]:
    """The groups of `entries` (keys, in order) as columns: each group column's keys, each aggregate's
    state components."""
    keys = [list(c) for c in zip(*entries)] if query.group_by and entries else [[] for _ in query.group_by]
    states = [[list(c) for c in zip(*(groups[key][i] for key in entries))] or [[] for _ in initial_state(a.func)]
              for i, a in enumerate(query.aggregates)]
    return keys, states


def _column_rows(query: Query, keys: list[list], states: list[list[list]]) -> Result:
    """The rows of groups given as columns (each group column's keys; each aggregate's state components),
    made a column at a time: the engines' values (what ORDER BY compared, _engine_values') and the
    client's (DuckDB's Python values: Decimal, int, date, AVG's exact mean), NULL where an aggregate saw
    no rows."""
    raw, client = [], []
    for i, expr, j in _outputs(query):
        column = keys[j] if i is None else python_values(_engine_values(expr, states[i]))
        raw.append(column)
        if i is not None and expr.func in ("count", "avg"):  # the client's value is the engine's
            client.append(column)
        else:
            client.append(lambda c=column, t=expr.type: python_column(c, t))  # made when rows are read
    return Result.of_columns([(o.name, o.expr.type) for o in query.outputs], client, raw)


def _columnar_order(query: Query, partial: ColumnarPartial):
    """The groups' indices in the answer's order, found by NumPy: ORDER BY's columns (their engine
    values, as finalize orders them), ties by the group key ascending (finalize's sorted(groups)).
    None where a value is NULL or NaN (NULLs sort last either way: finalize's own loop says so)."""
    outputs = _outputs(query)
    keys = []  # np.lexsort's: the last the first compared
    ordered = {outputs[index][2] for index, _ in query.order_by}  # the group columns ORDER BY names
    if not ordered.issuperset(range(len(partial.keys))):  # else no two groups tie: each is one key
        for column in reversed(partial.keys):
            keys.append(_sortable(column))
    for index, descending in reversed(query.order_by):
        i, expr, j = outputs[index]
        column = partial.keys[j] if i is None else _engine_values(expr, partial.states[i])
        a = _sortable(column)
        keys.append(None if a is None else (~a if a.dtype == np.int64 else -a) if descending else a)
    if any(k is None for k in keys):
        return None
    if not keys:
        return np.arange(partial.size)
    limit = query.limit
    if limit is not None and limit * 4 < partial.size:  # top k: only rows first by the first key can be kept
        if limit == 0:
            return np.arange(0)
        kth = np.partition(keys[-1], limit - 1)[limit - 1]
        candidates = np.flatnonzero(keys[-1] <= kth)  # ties with the k-th included
        return candidates[np.lexsort([k[candidates] for k in keys])]
    return np.lexsort(keys)


def _engine_values(aggregate, state: list) -> list:
    """An aggregate's values over the groups as the engines hold them, what ORDER BY compares: COUNT's rows,
    MIN/MAX's engine value, SUM's exact unscaled total (its Decimal orders alike), AVG's exact mean rounded
    once; NULL where a group saw no rows. The state's own column where nothing needs making (an int64
    array stays one)."""
    if aggregate.func in ("count", "min", "max"):
        return state[0]
    values, rows = state[0], state[-1]
    if aggregate.func == "avg":  # Python's int / int: one rounding of the exact mean
        return [None if n == 0 else exact_mean(total, n, aggregate.arg.type)
                for total, n in zip(python_values(values), python_values(rows))]
    if (rows == 0).any() if hasattr(rows, "any") else 0 in rows:
        return [None if n == 0 else v for v, n in zip(python_values(values), python_values(rows))]
    return values


def _grouped(values: list, group, groups: int, kind: str) -> list | None:
    """Each group's values (`group`: each value's group) added ("add"), or its least ("min") or greatest
    ("max"), exactly: int64 where no total can pass 64 bits, else Python integers. None where a value is
    NULL."""
    try:
        a = np.asarray(values)
    except OverflowError:
        a = np.array(values, dtype=object)
    if a.dtype != np.int64:
        if any(v is None or type(v) is not int for v in values):
            return None
        a = np.array(values, dtype=object)
    elif kind == "add" and len(a) and max(-int(a.min()), int(a.max())) >= (2**63 - 1) // len(a):
        a = a.astype(object)  # a total might pass 64 bits
    if kind == "add":
        out = np.zeros(groups, dtype=a.dtype)
        np.add.at(out, group, a)
    else:
        member = np.empty(groups, dtype=np.int64)
        member[group] = np.arange(len(group))  # any of a group's values starts its minimum or maximum
        out = a[member]
        (np.minimum if kind == "min" else np.maximum).at(out, group, a)
    return out if out.dtype == np.int64 else out.tolist()


SMALL_RANKS = 256  # values _sortable ranks in Python (past it, np.unique over an object array)


def _sortable(values: list):
    """The values as a NumPy array that orders as Python orders them: int64, float64, or the ranks of
    anything else (strings, integers past 64 bits); None where one is None or NaN."""
    if values is None:
        return None
    if isinstance(values, np.ndarray) and values.dtype == np.int64:
        return values
    try:
        a = np.array(values)  # int64 or float64 where every value is one (a None makes an object array)
    except OverflowError:  # integers past 64 bits
        a = np.array(values, dtype=object)
    if a.dtype == np.int64 or a.dtype == np.bool_:
        return a.astype(np.int64, copy=False)
    if a.dtype == np.float64:
        if np.isnan(a).any() or {type(v) for v in values} != {float}:  # an int beside a double: not exact as one
            return None
        return a
    if any(v is None for v in values) or len({type(v) for v in values}) > 1:
        return None
    if len(values) <= SMALL_RANKS:  # a few keys: ranked by Python's sort, as np.unique ranks them, without its setup
        rank = {v: i for i, v in enumerate(sorted(set(values)))}
        return np.array([rank[v] for v in values], dtype=np.int64)
    return np.unique(np.array(values, dtype=object), return_inverse=True)[1].astype(np.int64)


def _sort_key(value, descending: bool, nulls_first: bool = False):
    """NULLs last in either direction (DuckDB's default order), or first (NULLS FIRST); values by their own order
    (the sort is reversed for DESC)."""
    return ((value is None) == (descending == nulls_first), value)


# --- AVG: one rounding of the exact mean ---------------------------------------------------------------------------
def exact_mean(total: int, rows: int, arg_type: SqlType) -> float:
    """AVG of values of arg_type summing (unscaled) to `total` over `rows` rows: the double nearest the
    exact rational total / (rows * 10^scale), ties to even (Python's int / int rounds once). DuckDB
    rounds through doubles or x87 long doubles, differently from one version to the next (2.0.0 and
    2.0.1 differ), and lands within one unit in the last place of this value; `compare` says where."""
    if rows <= 0:
        raise ValueError("AVG of no rows is NULL, not a number")
    return total / (rows * 10 ** scale_of(arg_type))


# --- comparing answers ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    """Our rows against another engine's: equal, and in how many doubles the two differ by one unit in
    the last place (an AVG rounded another way: equal, but said)."""

    equal: bool
    last_place: int = 0
    tied_at_limit: int = 0  # rows LIMIT kept of a run of ties (or of unordered rows): counted, their values any of them

    def says(self, other: str) -> str | None:
        """The note a check leaves where the doubles differ at all, or LIMIT kept some of tied rows."""
        notes = []
        if self.equal and self.last_place:
            notes.append(f"{self.last_place} double{'s' * (self.last_place != 1)} differ{'s' * (self.last_place == 1)} "
                         f"from {other}'s by one unit in the last place: gquery's AVG is the correctly rounded exact mean")
        if self.equal and self.tied_at_limit:
            notes.append(f"{self.tied_at_limit} row{'s' * (self.tied_at_limit != 1)} LIMIT kept of rows tied in "
                         "ORDER BY (or unordered) counted, not compared: any of them is the answer")
        return "; ".join(notes) or None


def compare(ours: Result, theirs_rows: list[tuple], ordered: bool = False, query=None) -> Comparison:
    """Whether our rows are the other engine's: Decimals equal in value and in printed digits, doubles
    equal within one unit in the last place (counted), dates, ints and strings equal and of the same
    kind. Unordered, the rows are compared as multisets. Given the `query` they answer (`ordered` is then its own):
    its ORDER BY's values in the same sequence, and the rows of each run equal in them as a multiset (ties come in any order:
    gquery's by the group key, DuckDB's as its threads met them); the last run where LIMIT kept rows (or unordered
    rows LIMIT cut), where its rows differ, counted alone: any of the tied rows is the answer (Comparison.says so)."""
    mine, theirs = list(ours.rows), [tuple(r) for r in theirs_rows]
    if len(mine) != len(theirs):
        return Comparison(False)
    if query is not None:
        return _compare_runs(mine, theirs, query)
    return _compare_rows(mine, theirs) if ordered else _compare_multisets(mine, theirs)


def _compare_runs(mine: list[tuple], theirs: list[tuple], query) -> Comparison:
    cut = query.limit is not None and len(mine) == query.limit  # (LIMIT may have cut a run short: it kept some)
    keys = [i for i, _ in query.order_by]
    if not keys:
        found = _compare_multisets(mine, theirs)
        if not found.equal and cut and query.group_by:  # other rows LIMIT kept: any `limit` of the groups
            return Comparison(True, tied_at_limit=len(mine))
        return found
    mine_keys, their_keys = [tuple(r[i] for i in keys) for r in mine], [tuple(r[i] for i in keys) for r in theirs]
    found = _compare_rows(mine_keys, their_keys)  # the ORDER BY's values, in sequence
    if not found.equal:
        return found
    last_place, tied, start = 0, 0, 0
    for end in range(1, len(mine) + 1):
        if end < len(mine) and mine_keys[end] == mine_keys[start]:
            continue
        run = _compare_multisets(mine[start:end], theirs[start:end])
        if not run.equal and cut and end == len(mine) and query.group_by:  # the last run, which LIMIT may have cut:
            tied = end - start  # other rows of the tied ones kept
        elif not run.equal:
            return run
        last_place += run.last_place
        start = end
    return Comparison(True, last_place, tied)


def _compare_multisets(mine: list[tuple], theirs: list[tuple]) -> Comparison:
    """_compare_rows of the rows in an order of their own: doubles sort last, so one a unit in the last place apart
    does not put its row elsewhere."""
    return _compare_rows(sorted(mine, key=_matching_key), sorted(theirs, key=_matching_key))


def _compare_rows(mine: list[tuple], theirs: list[tuple]) -> Comparison:
    last_place = 0
    for a, b in zip(mine, theirs):
        if len(a) != len(b):
            return Comparison(False)
        for x, y in zip(a, b):
            if same_value(x, y):
                continue
            if not _one_ulp_apart(x, y):
                return Comparison(False)
            last_place += 1
    return Comparison(True, last_place)


def same(ours: Result, theirs_rows: list[tuple], ordered: bool = False, query=None) -> bool:
    """compare(...).equal: the rows are the other engine's, doubles within one unit in the last place."""
    return compare(ours, theirs_rows, ordered, query).equal


def same_value(a, b) -> bool:
    """Exactly the same value of the same kind (doubles bit for bit)."""
    if a is None or b is None:
        return a is None and b is None
    if type(a) is not type(b):  # date and datetime, int and bool, Decimal and float all differ
        return False
    if isinstance(a, Decimal):
        return a == b and str(a) == str(b)
    return a == b


def _one_ulp_apart(a, b) -> bool:
    return type(a) is float and type(b) is float and math.isfinite(a) and math.isfinite(b) and \
        (math.nextafter(a, math.inf) == b or math.nextafter(a, -math.inf) == b)


def _matching_key(row: tuple) -> tuple:
    """A row's place among rows compared as multisets: its exact values first, then its doubles."""
    return (tuple(_canonical_value(v) for v in row if type(v) is not float),
            tuple(_canonical_value(v) for v in row if type(v) is float))


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
