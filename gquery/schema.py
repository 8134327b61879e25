"""The schema, read from the data: each column's SQL type (as DuckDB reads the same parquet), and
its values as the engines hold them.

    integers        TINYINT .. BIGINT, UTINYINT .. UINTEGER                     int64 values
                    (Arrow int8 .. int64, uint8 .. uint32)
    decimal(p, s)   DECIMAL(p, s), p <= 38, every unscaled value within int64   int64 unscaled values
    date32          DATE                                                        int64 days since 1970-01-01
    strings         VARCHAR with at most MAX_DICTIONARY distinct values         int64 codes into the sorted
                                                                                distinct values (per part:
                                                                                a Dictionary)

A column the engines cannot hold exactly is left out with its reason (floating point, a decimal past
int64, more than 2^31 distinct strings): a query that names it is refused in one line saying why,
and `--backend auto` has DuckDB answer it.
"""

from __future__ import annotations

import bisect
import operator
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gquery.query import DATE, DATE_INFINITY, SqlType, VARCHAR

if TYPE_CHECKING:  # annotations only: pyarrow is imported where a file is read
    import pyarrow as pa

MAX_DICTIONARY = (1 << 31) - 1  # distinct strings a VARCHAR column held as codes may have (Arrow's int32 indices)
SMALL_DICTIONARY = 4096  # strings a dictionary keeps as a Python list once decoded: a group key's decode is a lookup


class Dictionary(Sequence):
    """A VARCHAR column's distinct strings in order of code point (UTF-8's byte order, DuckDB's order of
    strings): code k is the k-th, so < and > on codes are < and > on strings. Held as one Arrow array,
    not a Python string a value (a column may keep millions); a store's is read when first asked for
    (`load`), its length known before (`count`). `digest`: a checksum of a store's dictionary bytes, so
    that two parts' dictionaries of other digests are told apart without reading either."""

    def __init__(self, strings=None, count: int | None = None, load=None, digest: int | None = None):
        if strings is not None:  # (pyarrow imported only then: a store's is opened without it)
            import pyarrow as pa

            if not isinstance(strings, pa.LargeStringArray):
                strings = pa.array(list(strings), pa.large_string())
        self._strings, self._load, self.digest = strings, load, digest
        self._listed: list | None = None  # a small dictionary's strings as Python's (decode)
        self._count = len(strings) if strings is not None else int(count)
        self._lock = threading.Lock()

    @property
    def strings(self) -> "pa.LargeStringArray":
        """The strings as one Arrow array (read from the store the first time)."""
        if self._strings is None:
            with self._lock:
                if self._strings is None:
                    self._strings = self._load()
        return self._strings

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, k):
        if isinstance(k, slice):
            return self.strings[k].to_pylist()
        k = operator.index(k)
        if not -self._count <= k < self._count:
            raise IndexError(f"code {k} is past a dictionary of {self._count:,} strings")
        return self.strings[k % self._count].as_py()

    def __iter__(self):
        return iter(self.strings.to_pylist())

    def code(self, s: str) -> int | None:
        """The code of a string, None where the dictionary lacks it."""
        k, found = position(self, s)
        return k if found else None

    def index(self, s, start: int = 0, stop: int | None = None) -> int:
        k = self.code(s) if isinstance(s, str) else None
        if k is None or k < start or (stop is not None and k >= stop):
            raise ValueError(f"{s!r} is not in the dictionary")
        return k

    def __contains__(self, s) -> bool:
        return isinstance(s, str) and self.code(s) is not None

    def decode(self, codes) -> list[str]:
        """Each code's string, at once (a group key column, say): from a small dictionary's list (Q1's four keys
        in microseconds, where an Arrow take costs tens), else by an Arrow take."""
        if self._count <= SMALL_DICTIONARY:
            listed = self._listed
            if listed is None:
                listed = self._listed = self.strings.to_pylist()
            return [listed[c] for c in np.asarray(codes, dtype=np.int64).tolist()]
        import pyarrow as pa

        return self.strings.take(pa.array(np.asarray(codes, dtype=np.int64))).to_pylist()

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if isinstance(other, Dictionary):
            if len(self) != len(other) or (self.digest is not None and other.digest is not None
                                           and self.digest != other.digest):
                return False
            return self.strings.equals(other.strings)
        if isinstance(other, (tuple, list)):
            return len(self) == len(other) and self.strings.to_pylist() == list(other)
        return NotImplemented

    __hash__ = None  # equal by value: a hash would have to read every string

    def __reduce__(self):  # pickled (a Dask worker's part) with its strings, not its lock or loader
        return Dictionary, (self.strings, None, None, self.digest)

    def __repr__(self) -> str:
        shown = ", ".join(repr(s) for s in self[:3]) + (", ..." if self._count > 3 else "")
        return f"Dictionary({self._count:,} strings: {shown})"


def position(strings: Sequence[str], s: str) -> tuple[int, bool]:
    """Where s lies among sorted distinct strings (how many are below it: a binary search), and whether it is
    one of them (a Dictionary, or a tuple a caller wrote)."""
    k = bisect.bisect_left(strings, s)
    return k, k < len(strings) and strings[k] == s


def merged_ranks(a: Dictionary, b: Dictionary) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Each code's rank among both dictionaries' strings merged and sorted (equal strings, equal ranks):
    a's and b's codes compared by their ranks compare as their strings."""
    import pyarrow as pa
    import pyarrow.compute as pc

    merged = pc.unique(pa.concat_arrays([a.strings, b.strings]))
    merged = merged.take(pc.array_sort_indices(merged))
    return tuple(pc.index_in(a.strings, value_set=merged).to_pylist()), \
        tuple(pc.index_in(b.strings, value_set=merged).to_pylist())


def as_dictionary(strings) -> Dictionary | None:
    """A Dictionary of sorted distinct strings given as any sequence (a tuple a caller wrote, say)."""
    return strings if strings is None or isinstance(strings, Dictionary) else Dictionary(strings)


def _arrow_integers() -> dict:
    import pyarrow as pa

    return {pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
            pa.uint8(): "UTINYINT", pa.uint16(): "USMALLINT", pa.uint32(): "UINTEGER"}


@dataclass(frozen=True)
class Schema:
    """Column name → SQL type for the columns the engines hold, and name → reason for those they do
    not. Stated once: read from the data, kept in the store's manifest."""

    types: dict[str, SqlType]
    left_out: dict[str, str]

    def type_of(self, name: str) -> SqlType:
        if name in self.types:
            return self.types[name]
        if name in self.left_out:
            raise KeyError(f"column {name} is not held by the engines: {self.left_out[name]}")
        raise KeyError(f"no column {name}")

    def named(self, name: str) -> str:
        """The column's name as the data writes it, for a name written in any ASCII case (as SQL binds a name:
        folded); the name itself where no column is so named (its caller says so)."""
        if name in self.types or name in self.left_out:
            return name
        return next((n for n in (*self.types, *self.left_out) if folded(n) == folded(name)), name)

    def to_json(self) -> dict:
        return {"types": {n: [t.name, t.width, t.scale] for n, t in self.types.items()}, "left_out": self.left_out}

    @classmethod
    def from_json(cls, d: dict) -> "Schema":
        return cls({n: SqlType(*v) for n, v in d["types"].items()}, dict(d.get("left_out", {})))


def holds_strings(t: pa.DataType) -> bool:
    """Whether an Arrow type holds strings: plain, large, a view, or a dictionary of them (one VARCHAR to the engines)."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", lambda _: False)(t)


def column_type(t: pa.DataType) -> tuple[SqlType | None, str | None]:
    """(the SQL type, None), or (None, why the engines cannot hold the column) from its Arrow type
    alone (nulls, ranges and distinct counts are checked on the values)."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    integers = _arrow_integers()
    if t in integers:
        return SqlType(integers[t]), None
    if pa.types.is_decimal(t):
        if t.precision > 38:
            return None, f"decimal({t.precision}, {t.scale}) is wider than DECIMAL(38)"
        return SqlType("DECIMAL", t.precision, t.scale), None
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        return DATE, None
    if holds_strings(t):
        return VARCHAR, None
    return None, f"type {t} is not one the engines hold exactly (integers, decimals, dates, low-cardinality strings)"


def read_schema(arrow_schema: pa.Schema) -> Schema:
    """Types from an Arrow schema (values are checked when read: engine_values), each column by its name as DuckDB
    names it (column_names)."""
    types, left_out = {}, {}
    for name, f in zip(column_names(arrow_schema.names), arrow_schema):
        t, why = column_type(f.type)
        if t is None:
            left_out[name] = why
        else:
            types[name] = t
    return Schema(types, left_out)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def folded(name: str) -> str:
    """A name as DuckDB compares names: its ASCII letters lower-cased, every other character as it is (StringUtil's
    Lower): `ǅ` and `ǆ`, `K` (the Kelvin sign) and `k`, `É` and `é` are different names to DuckDB, so two columns so
    named are two, and neither names the other."""
    return name.lower() if name.isascii() else name.translate(_ASCII_LOWER)  # (lower() is ASCII's on ASCII, and fast)


def column_names(names: list[str]) -> list[str]:
    """A file's column names as DuckDB names them: a name already taken (as DuckDB compares names: ASCII letters
    in any case, folded) gets _1, _2 ... by its own count, and a name so made that is taken too gets its own
    suffix in turn (["x", "x_1", "x", "x"] are x, x_1, x_1_1, x_2; ["a", "A"] are a, A_1): so `a` is the first
    column, as DuckDB binds it, never the last. A name still empty then is C and its place (["", "a", ""] are C0, a,
    _1), and where that is taken too DuckDB raises, as here."""
    taken: set = set()
    counts: dict = {}
    out = []
    for name in names:
        while folded(name) in taken:
            counts[folded(name)] = counts.get(folded(name), 0) + 1
            name = f"{name}_{counts[folded(name)]}"
        taken.add(folded(name))
        out.append(name)
    for i, name in enumerate(out):
        if name == "":
            if folded(f"C{i}") in taken:
                from gquery.errors import GqueryError

                raise GqueryError(f'duplicate column name "C{i}": DuckDB names the column of no name at place {i} so, '
                                  "and another column is named so")
            out[i] = f"C{i}"
    return out


class NotHeld(ValueError):
    """A column whose values the engines cannot hold exactly (the message says why)."""


def engine_values(column: pa.ChunkedArray | pa.Array, t: SqlType) -> tuple[np.ndarray, Dictionary | None,
                                                                          np.ndarray | None]:
    """(int64 values, the sorted dictionary for VARCHAR else None, where the column has NULLs a bool a row: True
    where it holds a value, else None), exactly; NotHeld where a value cannot be (a decimal past int64, too many
    distinct strings). A NULL's place holds the column's smallest value (0 where it has none), so that its zone
    maps and bit widths stay those of its values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.Array):
        column = pa.chunked_array([column], type=column.type)
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if holds_strings(column.type):  # one string type from here on (Arrow finds no smallest value of a string_view)
        column = column.cast(pa.large_string())
    if pa.types.is_decimal(column.type) and column.type.byte_width < 16:  # decimal32/64: Arrow finds no min of them
        column = column.cast(pa.decimal128(column.type.precision, column.type.scale))
    if not column.null_count:
        return (*_values(column, t), None)
    valid = np.asarray(pc.is_valid(column).to_numpy(zero_copy_only=False), dtype=bool)
    if column.null_count == len(column):  # every value NULL: the one string of its dictionary is never seen
        return np.zeros(len(column), dtype=np.int64), Dictionary([""]) if t.name == "VARCHAR" else None, valid
    return (*_values(column.fill_null(pc.min(column)), t), valid)


def _values(column: pa.ChunkedArray, t: SqlType) -> tuple[np.ndarray, Dictionary | None]:
    """(int64 values, the sorted dictionary for VARCHAR else None) of a column without NULLs."""
    if t.name == "VARCHAR":
        return _codes(column)
    out = np.empty(len(column), dtype=np.int64)
    pos = 0
    for chunk in column.chunks:
        n = len(chunk)
        if t.is_decimal:
            values = _unscaled(chunk)
        elif t.name == "DATE":
            values = _days(chunk)
        else:
            values = chunk.to_numpy(zero_copy_only=False)
        out[pos:pos + n] = values
        pos += n
    return out, None


def _unscaled(chunk: pa.Array) -> np.ndarray:
    """decimal128 / decimal256 → int64 unscaled, exactly: the low word, after checking that every
    higher word is only its sign."""
    n = len(chunk)
    words_per_value = chunk.type.byte_width // 8
    words = np.frombuffer(chunk.buffers()[1], dtype=np.int64, count=words_per_value * (chunk.offset + n))
    words = words[words_per_value * chunk.offset:].reshape(n, words_per_value)
    low = words[:, 0]
    sign = low >> 63
    for k in range(1, words_per_value):
        if not np.array_equal(words[:, k], sign):
            raise NotHeld("a value is outside int64 once unscaled")
    return low


def _days(chunk: pa.Array) -> np.ndarray:
    import pyarrow as pa

    if pa.types.is_date64(chunk.type):
        ms = chunk.cast(pa.int64()).to_numpy(zero_copy_only=False)
        if np.any(ms % 86_400_000):
            raise NotHeld("a date64 value is not a whole day")
        days = ms // 86_400_000
        if len(days) and max(-days.min(), days.max()) > DATE_INFINITY:  # (DuckDB wraps such a day to 32 bits)
            raise NotHeld("a date64 value is past DuckDB's DATE, a 32-bit count of days")
        return days
    return chunk.cast(pa.int32()).to_numpy(zero_copy_only=False).astype(np.int64)


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, Dictionary]:
    """Codes into the sorted distinct strings: order of codes is the strings' order (by code point,
    which is UTF-8's byte order and DuckDB's), so < and > on codes are < and > on strings. Arrow encodes
    them in first-seen order, sorts the distinct strings once, and each code becomes its string's rank."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.cast(pa.large_string())
    encoded = pc.dictionary_encode(column.combine_chunks())  # int32 indices: at most 2^31 distinct strings
    distinct = encoded.dictionary
    if len(distinct) > MAX_DICTIONARY:
        raise NotHeld(f"it has more than {MAX_DICTIONARY:,} distinct strings")
    try:  # (Arrow reads a file's strings unchecked: one not UTF-8 would fail only when an answer decodes it)
        distinct.validate(full=True)
    except pa.ArrowInvalid:
        raise NotHeld("a string is not UTF-8 (DuckDB refuses the file)") from None
    order = pc.array_sort_indices(distinct).to_numpy()
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    codes = rank[encoded.indices.to_numpy(zero_copy_only=False)] if len(column) else np.zeros(0, dtype=np.int64)
    return codes, Dictionary(distinct.take(pa.array(order)))
