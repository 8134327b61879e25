"""The key-scan engine's input contract: the mission's three columns as its loader (columns.py), the
ladder and the key-scan benchmark read them, checked before they are read, with the file and column in
the message. (SQL of the class reads any schema the engines hold: gquery.schema says which.)

    l_suppkey                     an integer type, every value within int32, no nulls
    l_quantity, l_extendedprice   decimal(p, 2) with p <= 38, no nulls, every value within int64
                                  hundredths (always true for p <= 18)

Parquet is checked from its footer: the schema, and the row groups' null counts and min/max; a column
is read only where those statistics are absent. A .tbl file has no schema or statistics: it is parsed
with the types above, one batch at a time, so memory stays small.
"""

from __future__ import annotations

import re
from decimal import Context, Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from gquery.errors import GqueryError
from gquery.sources import LineitemSource

if TYPE_CHECKING:  # annotations only: pyarrow is imported where a file is read
    import pyarrow as pa

QUERY_COLUMNS = ("l_suppkey", "l_quantity", "l_extendedprice")
TBL_COLUMNS = (
    "l_orderkey", "l_partkey", "l_suppkey", "l_linenumber", "l_quantity", "l_extendedprice",
    "l_discount", "l_tax", "l_returnflag", "l_linestatus", "l_shipdate", "l_commitdate",
    "l_receiptdate", "l_shipinstruct", "l_shipmode", "l_comment",
)
DECIMAL_SCALE = 2
KEY_MIN, KEY_MAX = -(2**31), 2**31 - 1

KEY_COLUMN = "l_suppkey"
MAX_PRECISION = 38  # decimal128; wider parquet decimals arrive as decimal256
INT64_EXACT_PRECISION = 18  # every decimal(18, s) value fits an int64 of its unit
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
EXACT = Context(prec=100)  # decimal arithmetic without rounding for any decimal(38) value


def tbl_types() -> dict:
    """The query columns' Arrow types in a .tbl file: TPC-H's own (what DuckDB is told too). A function,
    so that importing gquery does not import pyarrow (a store's queries never need it)."""
    import pyarrow as pa

    decimal = pa.decimal128(15, DECIMAL_SCALE)
    return {KEY_COLUMN: pa.int64(), "l_quantity": decimal, "l_extendedprice": decimal}


def check_source(source: LineitemSource) -> None:
    """Every file of the source meets the contract, or a GqueryError names the file and column."""
    for f in source.files:
        if f.stat().st_size == 0:
            raise GqueryError(f"{f}: empty file (0 bytes)")
        (_check_parquet if source.format == "parquet" else _check_tbl)(f)


def check_schema(schema: pa.Schema, where) -> None:
    import pyarrow as pa

    for name in QUERY_COLUMNS:
        if name not in schema.names:
            raise GqueryError(f"{where}: missing column {name}")
        t = schema.field(name).type
        if name == KEY_COLUMN:
            if not pa.types.is_integer(t):
                raise GqueryError(f"{where}: column {name} is {t}, expected an integer type")
        elif not pa.types.is_decimal128(t):
            raise GqueryError(f"{where}: column {name} is {t}, expected decimal(p, {DECIMAL_SCALE}) "
                              f"with p <= {MAX_PRECISION}")
        elif t.scale != DECIMAL_SCALE:
            raise GqueryError(f"{where}: column {name} has scale {t.scale}, expected {DECIMAL_SCALE}")


def check_table(table: pa.Table, where) -> None:
    """The contract on columns already in memory."""
    check_schema(table.schema, where)
    for name in QUERY_COLUMNS:
        column = table.column(name)
        _check_values(where, name, column.type, column.null_count, *_min_max(column))


def _needs_range(name: str, t: pa.DataType) -> bool:
    return name == KEY_COLUMN or t.precision > INT64_EXACT_PRECISION


def _min_max(column) -> tuple:
    import pyarrow.compute as pc

    if len(column) == column.null_count:
        return None, None
    m = pc.min_max(column)
    return m["min"].as_py(), m["max"].as_py()


def _check_values(where, name: str, t: pa.DataType, nulls: int, lo, hi) -> None:
    if nulls:
        raise GqueryError(f"{where}: column {name} has {nulls} nulls")
    if lo is None or not _needs_range(name, t):
        return
    if name == KEY_COLUMN:
        if lo < KEY_MIN or hi > KEY_MAX:
            raise GqueryError(f"{where}: column {name} has values outside int32")
    elif not INT64_MIN <= int(Decimal(lo).scaleb(DECIMAL_SCALE, EXACT)) <= int(Decimal(hi).scaleb(DECIMAL_SCALE, EXACT)) <= INT64_MAX:
        raise GqueryError(f"{where}: column {name} has values outside int64 hundredths")


def _parquet_error(f: Path, e: Exception) -> GqueryError:
    return GqueryError(f"{f}: cannot read parquet: {str(e).splitlines()[0] if str(e) else type(e).__name__}")


def _check_parquet(f: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(f)
        schema = pf.schema_arrow
    except (pa.ArrowException, OSError) as e:
        raise _parquet_error(f, e) from None
    check_schema(schema, f)
    meta = pf.metadata
    leaves = [meta.schema.column(i).path for i in range(meta.num_columns)]
    for name in QUERY_COLUMNS:
        t = schema.field(name).type
        stats = _statistics(meta, leaves.index(name), _needs_range(name, t))
        if stats is None:  # no usable statistics: read this one column
            try:
                column = pf.read(columns=[name]).column(0)
            except (pa.ArrowException, OSError) as e:
                raise _parquet_error(f, e) from None
            stats = (column.null_count, *_min_max(column))
        _check_values(f, name, t, *stats)


def _statistics(meta, index: int, need_range: bool):
    """(nulls, min, max) of one column from every row group's statistics, or None where a row
    group lacks them (min and max only when the range matters)."""
    nulls, lows, highs = 0, [], []
    for r in range(meta.num_row_groups):
        group = meta.row_group(r)
        if group.num_rows == 0:
            continue
        s = group.column(index).statistics
        if s is None or not s.has_null_count:
            return None
        nulls += s.null_count
        if need_range and s.null_count < group.num_rows:
            if not s.has_min_max or not isinstance(s.min, (int, Decimal)):
                return None
            lows.append(s.min)
            highs.append(s.max)
    return nulls, min(lows, default=None), max(highs, default=None)


def tbl_reader_options() -> dict:
    """How both our .tbl reader and this check parse dbgen's pipe format: the three query columns,
    typed, with an empty field as a null."""
    from pyarrow import csv

    return dict(
        read_options=csv.ReadOptions(column_names=[*TBL_COLUMNS, "_trailing"], block_size=64 << 20),
        parse_options=csv.ParseOptions(delimiter="|", quote_char=False),
        convert_options=csv.ConvertOptions(
            include_columns=list(QUERY_COLUMNS),
            column_types=tbl_types(),
            strings_can_be_null=False, quoted_strings_can_be_null=False, null_values=[""]),
    )


def tbl_error(f: Path, e: Exception) -> GqueryError:
    """Arrow's CSV error in one line, its column number replaced by the column's name."""
    line = str(e).splitlines()[0] if str(e) else type(e).__name__
    line = re.sub(r"In CSV column #(\d+)", lambda m: f"column {TBL_COLUMNS[int(m.group(1))]}"
                  if int(m.group(1)) < len(TBL_COLUMNS) else m.group(0), line)
    return GqueryError(f"{f}: cannot read .tbl: {line}")


def _check_tbl(f: Path) -> None:
    import pyarrow as pa
    from pyarrow import csv

    nulls = dict.fromkeys(QUERY_COLUMNS, 0)
    lows, highs = {n: [] for n in QUERY_COLUMNS}, {n: [] for n in QUERY_COLUMNS}
    try:
        for batch in csv.open_csv(f, **tbl_reader_options()):
            for name in QUERY_COLUMNS:
                column = batch.column(name)
                nulls[name] += column.null_count
                lo, hi = _min_max(column)
                if lo is not None:
                    lows[name].append(lo)
                    highs[name].append(hi)
    except (pa.ArrowException, OSError) as e:
        raise tbl_error(f, e) from None
    for name in QUERY_COLUMNS:
        _check_values(f, name, tbl_types()[name], nulls[name], min(lows[name], default=None),
                      max(highs[name], default=None))
