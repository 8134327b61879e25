"""DuckDB as the reference and the peer: the exact answer and its warm timing.

DuckDB reads the source files itself into its own in-memory table (not our numpy columns), so a bug
in our loader cannot agree with itself. DuckDBTable holds just the columns the queries read, loaded
once (optionally sorted: the clustered design); each query's rows, names, types and timings come from
the query's SQL on that table, the best case for DuckDB (loading is not timed). duckdb_over_files
answers one query on the files themselves: the no-load figure.
"""

from __future__ import annotations

import os
import re
import statistics
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from gquery.errors import GqueryError
from gquery.sources import LineitemSource, named_columns


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0]


def _sql_list(paths) -> str:
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


# lineitem's TPC-H types, as DuckDB is told them for a .tbl file (its parquet carries the same)
LINEITEM_SQL_TYPES = {
    "l_orderkey": "BIGINT", "l_partkey": "BIGINT", "l_suppkey": "BIGINT", "l_linenumber": "INTEGER",
    "l_quantity": "DECIMAL(15,2)", "l_extendedprice": "DECIMAL(15,2)", "l_discount": "DECIMAL(15,2)",
    "l_tax": "DECIMAL(15,2)", "l_returnflag": "VARCHAR", "l_linestatus": "VARCHAR", "l_shipdate": "DATE",
    "l_commitdate": "DATE", "l_receiptdate": "DATE", "l_shipinstruct": "VARCHAR", "l_shipmode": "VARCHAR",
    "l_comment": "VARCHAR",
}
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class SqlAnswer:
    """One query's answer from DuckDB: rows as its Python client returns them, column names and
    types as its cursor describes them, and the wall time of the first (cold) and each timed run."""

    rows: list[tuple]
    columns: list[str]
    types: list[str]
    times_ms: list[float] = field(default_factory=list)
    first_query_ms: float | None = None
    unavailable: str | None = None  # DuckDB's one-line reason where it raised an out-of-range error
    arrow: object | None = None  # its own pyarrow.Table of the answer, where asked for (run_sql's `arrow`)

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.times_ms) if self.times_ms else None


def _scan(source: LineitemSource) -> str:
    """The table function that reads the source's files."""
    files = _sql_list(source.files)
    if source.format == "parquet":
        return f"read_parquet({files})"
    spec = ", ".join(f"'{c}': '{t}'" for c, t in LINEITEM_SQL_TYPES.items())
    return f"read_csv({files}, delim='|', header=false, quote='', columns={{{spec}, '_trailing': 'VARCHAR'}})"


def duckdb_columns(text: str, query_columns, columns) -> list[str]:
    """The columns DuckDB's own table must hold to answer `text` as written: those its query reads, and every other
    one the text names (a predicate the binder folds away, n NOT IN (1, NULL), still names n to DuckDB's binder); any
    one where it names none (COUNT(*))."""
    found = list(dict.fromkeys([*query_columns, *named_columns(text, columns)]))
    return found or list(columns)[:1]


def _identifiers(names: Sequence[str], what: str) -> list[str]:
    bad = [n for n in names if not IDENTIFIER.fullmatch(n)]
    if bad:
        raise GqueryError(f"{what}: {', '.join(map(repr, bad))} is not a column name")
    return list(names)


class DuckDBTable:
    """One in-memory DuckDB connection holding its own table of just `columns` (named `name`, by
    default as the source's files name it: sources.table_name), read from the source's files (sorted by
    `order_by` where given); run_sql any number of queries on it."""

    def __init__(self, source: LineitemSource, columns: Sequence[str], order_by: str | None = None,
                 threads: int | None = None, name: str | None = None, in_place: bool = False):
        import duckdb

        started = time.perf_counter()
        from gquery.sources import quoted

        names = [quoted(c) for c in columns] if not in_place else ["*"]  # (any name: a keyword, é, a space)
        if not names:
            raise GqueryError("DuckDBTable needs at least one column")
        order = _identifiers([c.strip() for c in order_by.split(",")], "order_by") if order_by else []
        self.version = duckdb.__version__
        self.threads = threads or os.cpu_count() or 1
        self.con = duckdb.connect(":memory:")
        self.con.execute(f"SET threads = {int(self.threads)}")
        # in_place: a view over the files, of which DuckDB reads what each query needs (as a user's
        # DuckDB over parquet does); else a table of just `columns`, loaded once
        sql = f"CREATE {'VIEW' if in_place else 'TABLE'} {quoted(name or source.name)} AS SELECT {', '.join(names)} " \
              f"FROM {_scan(source)}"
        if order:
            sql += f" ORDER BY {', '.join(order)}"
        try:
            self.con.execute(sql).fetchall()
        except duckdb.Error as e:
            self.con.close()
            raise GqueryError(f"{source}: DuckDB cannot load {', '.join(names)}: {_first_line(e)}") from None
        self.columns = list(columns) if not in_place else names
        self.load_s = time.perf_counter() - started

    def run_sql(self, sql: str, repeat: int = 5, warmup: int = 1, parameters: list | None = None,
                arrow: bool = False) -> SqlAnswer:
        """The answer and timings of `sql` (with its `parameters`, a prepared statement's, where it has them): the
        first run timed cold (and counted as a warm-up), then the rest of the warm-ups, then `repeat` timed runs,
        each result fully fetched. `arrow`: the cold run fetches DuckDB's own Arrow table of the answer (its types,
        and dates past Python's years, as DuckDB holds them), and the first timed run the rows."""
        import duckdb

        if repeat < 1:
            raise ValueError("repeat must be >= 1")
        try:
            started = time.perf_counter()
            cursor = self.con.execute(sql, parameters)
            if cursor is None or cursor.description is None:  # (an empty text, or a comment alone: no statement)
                raise GqueryError("no SQL statement: DuckDB ran nothing that answers rows")
            with warnings.catch_warnings():  # (DuckDB's note that a DB-API result's Arrow is a copy: a small answer's)
                warnings.simplefilter("ignore")
                table = cursor.to_arrow_table() if arrow else None
            answer = SqlAnswer(None if arrow else cursor.fetchall(), [d[0] for d in cursor.description],
                               [str(d[1]) for d in cursor.description], first_query_ms=(time.perf_counter() - started) * 1e3,
                               arrow=table)
            for _ in range(max(warmup - 1, 0)):
                self.con.execute(sql, parameters).fetchall()
            for _ in range(repeat):
                started = time.perf_counter()
                rows = self.con.execute(sql, parameters).fetchall()
                answer.times_ms.append((time.perf_counter() - started) * 1e3)
                if answer.rows is None:
                    answer.rows = rows
        except duckdb.OutOfRangeException as e:
            return SqlAnswer([], [], [], unavailable=_first_line(e))
        except duckdb.Error as e:
            raise GqueryError(f"DuckDB failed: {_first_line(e)}") from None
        return answer

    def close(self) -> None:
        self.con.close()


def duckdb_over_files(source: LineitemSource, sql: str, threads: int | None = None,
                      name: str | None = None) -> tuple[list[tuple], float]:
    """(rows, milliseconds) of one cold run of `sql` with the table (`name`, or as the files name it) a
    view over the source's files: what DuckDB answers with nothing loaded beforehand."""
    import duckdb

    from gquery.sources import quoted

    con = duckdb.connect(":memory:")
    try:
        con.execute(f"SET threads = {int(threads or os.cpu_count() or 1)}")
        con.execute(f"CREATE VIEW {quoted(name or source.name)} AS SELECT * FROM {_scan(source)}")
        started = time.perf_counter()
        rows = con.execute(sql).fetchall()
        return rows, (time.perf_counter() - started) * 1e3
    except duckdb.Error as e:
        raise GqueryError(f"DuckDB failed over {source}: {_first_line(e)}") from None
    finally:
        con.close()
