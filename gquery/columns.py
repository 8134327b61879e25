"""lineitem's three query columns: read into Arrow, then encoded as contiguous numpy columns.

Every column encoding lives here. Today's encodings, the contract the kernels rely on:
    l_suppkey        int32                       (TPC-H keys < 2^31 up to SF 20000)
    l_quantity       int64, exact hundredths     decimal(_, 2) scaled by 100
    l_extendedprice  int64, exact hundredths
Any int64 of hundredths is accepted (every decimal(<=18, 2) value); a product may need 127 bits.
Narrower and bit-packed encodings join this module, next to these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gquery.contract import (DECIMAL_SCALE, KEY_MAX, KEY_MIN, QUERY_COLUMNS, check_schema, check_table, tbl_error,
                             tbl_reader_options)
from gquery.errors import GqueryError
from gquery.sources import LineitemSource

if TYPE_CHECKING:  # annotations only: pyarrow is imported where a file is read
    import pyarrow as pa


@dataclass(frozen=True)
class LineitemColumns:
    """Contiguous host columns in the encodings above; `source` names where they came from."""

    suppkey: np.ndarray
    quantity: np.ndarray
    extendedprice: np.ndarray
    source: str = "<arrays>"

    def __post_init__(self):
        expected = {"suppkey": np.int32, "quantity": np.int64, "extendedprice": np.int64}
        for name, dtype in expected.items():
            a = getattr(self, name)
            if not isinstance(a, np.ndarray) or a.dtype != dtype or a.ndim != 1 or not a.flags.c_contiguous:
                raise GqueryError(f"{self.source}: column {name} must be a contiguous 1-D {np.dtype(dtype)} array")
        if not (len(self.suppkey) == len(self.quantity) == len(self.extendedprice)):
            raise GqueryError(f"{self.source}: columns differ in length")

    @property
    def rows(self) -> int:
        return len(self.suppkey)

    @property
    def bytes_per_row(self) -> int:
        return self.suppkey.itemsize + self.quantity.itemsize + self.extendedprice.itemsize

    @property
    def nbytes(self) -> int:
        return self.rows * self.bytes_per_row

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.suppkey, self.quantity, self.extendedprice

    @classmethod
    def from_values(cls, suppkey, quantity, extendedprice, source="<arrays>") -> "LineitemColumns":
        """Synthetic columns (tests, benchmarks), range-checked like loaded ones."""
        s = np.ascontiguousarray(suppkey)
        if s.size and (s.min() < KEY_MIN or s.max() > KEY_MAX):
            raise GqueryError(f"{source}: column l_suppkey has values outside int32")
        q, p = (np.ascontiguousarray(v, dtype=np.int64) for v in (quantity, extendedprice))
        return cls(s.astype(np.int32, copy=False), q, p, source)


def _encode_key(column: pa.ChunkedArray, where, name: str) -> np.ndarray:
    """Any Arrow integer key → int32, range-checked."""
    import pyarrow as pa

    if not pa.types.is_integer(column.type):
        raise GqueryError(f"{where}: column {name} is {column.type}, expected an integer type")
    out = np.empty(len(column), dtype=np.int32)
    pos = 0
    for chunk in column.chunks:
        values = chunk.to_numpy(zero_copy_only=True)
        if values.size and (values.min() < KEY_MIN or values.max() > KEY_MAX):
            raise GqueryError(f"{where}: column {name} has values outside int32")
        out[pos:pos + len(values)] = values
        pos += len(values)
    return out


def _encode_decimal(column: pa.ChunkedArray, where, name: str) -> np.ndarray:
    """decimal128(_, 2) → int64 hundredths, exactly: the low word of each 128-bit value, after
    checking that the high word is only its sign."""
    import pyarrow as pa

    t = column.type
    if not pa.types.is_decimal128(t):
        raise GqueryError(f"{where}: column {name} is {t}, expected decimal(_, {DECIMAL_SCALE})")
    if t.scale != DECIMAL_SCALE:
        raise GqueryError(f"{where}: column {name} has scale {t.scale}, expected {DECIMAL_SCALE}")
    out = np.empty(len(column), dtype=np.int64)
    pos = 0
    for chunk in column.chunks:
        n = len(chunk)
        words = np.frombuffer(chunk.buffers()[1], dtype=np.int64, count=2 * (chunk.offset + n))
        words = words[2 * chunk.offset:].reshape(n, 2)
        low, high = words[:, 0], words[:, 1]
        if not np.array_equal(high, low >> 63):
            raise GqueryError(f"{where}: column {name} has values outside int64 hundredths")
        out[pos:pos + n] = low
        pos += n
    return out


ENCODERS = {"l_suppkey": _encode_key, "l_quantity": _encode_decimal, "l_extendedprice": _encode_decimal}


def _check_columns(table: pa.Table, where) -> None:
    check_table(table, where)


def _read_parquet(source: LineitemSource) -> pa.Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for f in source.files:
        try:
            check_schema(pq.read_schema(f), f)
            tables.append(pq.read_table(f, columns=list(QUERY_COLUMNS)))
        except (pa.ArrowException, OSError) as e:
            raise GqueryError(f"{f}: cannot read parquet: {str(e).splitlines()[0]}") from None
    try:  # parts may differ in integer width or decimal precision; the widest type holds all
        return pa.concat_tables(tables, promote_options="permissive")
    except pa.ArrowException as e:
        raise GqueryError(f"{source}: parts do not share a schema: {str(e).splitlines()[0]}") from None


def _read_tbl(source: LineitemSource) -> pa.Table:
    import pyarrow as pa
    from pyarrow import csv

    tables = []
    for f in source.files:
        try:
            tables.append(csv.read_csv(f, **tbl_reader_options()))
        except (pa.ArrowException, OSError) as e:
            raise tbl_error(f, e) from None
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def read_lineitem_arrow(source: LineitemSource) -> pa.Table:
    """The three query columns as Arrow, as stored (decimals stay decimal128)."""
    table = (_read_parquet if source.format == "parquet" else _read_tbl)(source)
    _check_columns(table, source)
    return table


def encode(table: pa.Table, where="<table>") -> LineitemColumns:
    """Arrow → the engine's encodings: one copy per column, exact and checked."""
    _check_columns(table, where)
    s, q, p = (ENCODERS[name](table.column(name), where, name) for name in QUERY_COLUMNS)
    return LineitemColumns(s, q, p, str(where))


def load_lineitem(source: LineitemSource) -> LineitemColumns:
    return encode(read_lineitem_arrow(source), source)
