"""lineitem's files read a column at a time, as the engines hold columns (gquery.schema): what the
store is encoded from, and what a query over files with no store reads.

A column is read from every file of the source, checked and turned into int64 engine values, and
let go before the next is read, so encoding a part of SF 10 holds one column (480 MB), not
sixteen. A string column of too many distinct values (l_comment) is found out from its first row
group and left out without reading the rest.
"""

from __future__ import annotations

import pyarrow as pa

from gquery.errors import GqueryError
from gquery.schema import NotHeld, Schema, column_names, engine_values, holds_strings, read_schema
from gquery.sources import LineitemSource

# dbgen's .tbl columns and the types DuckDB and tpchgen-cli give them
TBL_SCHEMA = pa.schema([
    ("l_orderkey", pa.int64()), ("l_partkey", pa.int64()), ("l_suppkey", pa.int64()), ("l_linenumber", pa.int32()),
    ("l_quantity", pa.decimal128(15, 2)), ("l_extendedprice", pa.decimal128(15, 2)),
    ("l_discount", pa.decimal128(15, 2)), ("l_tax", pa.decimal128(15, 2)), ("l_returnflag", pa.string()),
    ("l_linestatus", pa.string()), ("l_shipdate", pa.date32()), ("l_commitdate", pa.date32()),
    ("l_receiptdate", pa.date32()), ("l_shipinstruct", pa.string()), ("l_shipmode", pa.string()),
    ("l_comment", pa.string())])


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def source_schema(source: LineitemSource) -> Schema:
    """A source's schema, from its first file's metadata alone (a .tbl file's is dbgen's): what a command checks
    names against before it reads a column."""
    if source.format != "parquet":
        return read_schema(TBL_SCHEMA)
    import pyarrow.parquet as pq

    try:
        return read_schema(pq.read_schema(source.files[0]))
    except (pa.ArrowException, OSError) as e:
        raise GqueryError(f"{source.files[0]}: cannot read parquet: {_first_line(e)}") from None


class ColumnReader:
    """A source's schema (from the first file's metadata) and its columns one at a time."""

    def __init__(self, source: LineitemSource):
        self.source = source
        if not source.files:
            raise GqueryError(f"{source}: no files to read")
        if source.format == "parquet":
            import pyarrow.parquet as pq

            self._files = []
            for f in source.files:  # (the file that fails named, not the first)
                try:
                    self._files.append(pq.ParquetFile(f))
                    names = self._files[-1].schema_arrow.names
                except (pa.ArrowException, OSError) as e:
                    raise GqueryError(f"{f}: cannot read parquet: {_first_line(e)}") from None
                if names != self._files[0].schema_arrow.names:
                    raise GqueryError(f"{f}: its columns differ from {source.files[0]}'s")
            arrow = self._files[0].schema_arrow
            self.rows = sum(pf.metadata.num_rows for pf in self._files)
        else:
            arrow, self._tbl = TBL_SCHEMA, self._read_tbl()
            self.rows = self._tbl.num_rows
        self.schema: Schema = read_schema(arrow)
        # each column's place in the files, by its name as DuckDB names it (two columns of one name are read by place)
        self._at = {name: i for i, name in enumerate(column_names(arrow.names))}
        self._alone = {n for n in arrow.names if arrow.names.count(n) == 1}

    def _read_tbl(self) -> pa.Table:
        from pyarrow import csv

        tables = []
        for f in self.source.files:
            try:
                tables.append(csv.read_csv(f, read_options=csv.ReadOptions(column_names=[*TBL_SCHEMA.names, "_end"]),
                                           parse_options=csv.ParseOptions(delimiter="|", quote_char=False),
                                           convert_options=csv.ConvertOptions(
                                               column_types=TBL_SCHEMA, include_columns=TBL_SCHEMA.names,
                                               strings_can_be_null=False, null_values=[""])))
            except (pa.ArrowException, OSError) as e:
                raise GqueryError(f"{f}: cannot read .tbl: {_first_line(e)}") from None
        return pa.concat_tables(tables)

    def column(self, name: str) -> pa.ChunkedArray:
        if self.source.format != "parquet":
            return self._tbl.column(name)
        chunks, at = [], self._at[name]
        written = self._files[0].schema_arrow.names[at]  # (its name in the files)
        for f, pf in zip(self.source.files, self._files):
            try:
                column = pf.read(columns=[written]).column(0) if written in self._alone else pf.reader.read_column(at)
                chunks += column.chunks
            except (pa.ArrowException, OSError) as e:
                raise GqueryError(f"{f}: cannot read parquet column {name}: {_first_line(e)}") from None
        first = self._files[0].schema_arrow.field(at).type
        if any(c.type != first for c in chunks) and all(holds_strings(c.type) for c in chunks):
            # string, large_string, a dictionary of strings: one string type (the same values)
            first, chunks = pa.large_string(), [c.cast(pa.large_string()) for c in chunks]
        kinds = sorted({str(c.type) for c in chunks})
        if len(kinds) > 1:  # parts of one source typed differently (DuckDB casts to the first file's type)
            raise GqueryError(f"{self.source}: column {name} differs in type between files ({', '.join(kinds)})")
        return pa.chunked_array(chunks, type=first)

    def values(self, name: str):
        """(int64 engine values, dictionary or None, validity or None: schema.engine_values); NotHeld (a ValueError)
        saying why it cannot be."""
        return engine_values(self.column(name), self.schema.types[name])


def read_table(source: LineitemSource, columns=None):
    """A Table of a source's columns (every column the engines can hold by default), read now."""
    reader = ColumnReader(source)
    return _table_of(reader.schema, columns, reader.values, str(source))


def table_of_arrow(table: pa.Table, source: str = "<arrow table>"):
    """A Table of every column of a pyarrow.Table the engines can hold (the rest left out, saying why)."""
    schema = read_schema(table.schema)
    at = {name: i for i, name in enumerate(column_names(table.schema.names))}  # (by place: two columns of one name)
    return _table_of(schema, None, lambda name: engine_values(table.column(at[name]), schema.types[name]), source)


def _table_of(schema: Schema, columns, values_of, source: str):
    """A Table of the named columns (default: every typed one), each read by values_of(name)."""
    from gquery.table import Table

    values, dictionaries, valid, left_out = {}, {}, {}, dict(schema.left_out)
    for name in columns or schema.types:
        if name not in schema.types:
            raise GqueryError(f"{source}: column {name}: {schema.left_out.get(name, 'no such column')}")
        try:
            values[name], dictionaries[name], valid[name] = values_of(name)
        except NotHeld as e:
            left_out[name] = str(e)
    held = Schema({n: schema.types[n] for n in values}, left_out)
    return Table.from_values(values, held, dictionaries, source, valid=valid)
