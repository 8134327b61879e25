"""DuckDB as the CPU reference: the exact answer and its warm timing.

DuckDB reads the source files itself into its own in-memory table (not our numpy columns), so a bug
in our loader cannot agree with itself. The timed statement is the query's SQL on that table, the
best case for DuckDB; loading is not timed. Where DuckDB's DECIMAL(18) multiplication overflows,
the query is asked again on factors cast to DECIMAL(38,2), and the result says so; where even that
sum overflows, the result carries DuckDB's reason instead of a value.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from decimal import Decimal

import pyarrow as pa

from gquery.contract import QUERY_COLUMNS, TBL_COLUMNS, TBL_TYPES
from gquery.errors import GqueryError
from gquery.mission import MissionQuery
from gquery.sources import LineitemSource


@dataclass
class DuckDBResult:
    value: Decimal | None
    times_ms: list[float] = field(default_factory=list)
    threads: int = 0
    version: str = ""
    widened: bool = False  # answered on DECIMAL(38,2) factors: DECIMAL(18) products overflowed
    unavailable: str | None = None  # DuckDB's one-line reason where even the widened query failed

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.times_ms) if self.times_ms else None


def _duckdb_type(t) -> str:
    return "BIGINT" if t == pa.int64() else f"DECIMAL({t.precision},{t.scale})"


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0]


def _sql_list(paths) -> str:
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


class DuckDBReference:
    """One connection holding lineitem's three columns; run() any number of queries on it."""

    def __init__(self, source: LineitemSource, threads: int | None = None):
        import duckdb

        self.version = duckdb.__version__
        self.con = duckdb.connect(":memory:")
        self.threads = threads or os.cpu_count() or 1
        self.con.execute(f"SET threads = {int(self.threads)}")
        cols = ", ".join(QUERY_COLUMNS)
        files = _sql_list(source.files)
        if source.format == "parquet":
            scan = f"read_parquet({files})"
        else:
            types = {c: "VARCHAR" for c in TBL_COLUMNS} | {c: _duckdb_type(t) for c, t in TBL_TYPES.items()}
            spec = ", ".join(f"'{c}': '{t}'" for c, t in types.items())
            scan = f"read_csv({files}, delim='|', header=false, quote='', columns={{{spec}, '_trailing': 'VARCHAR'}})"
        try:
            self.con.execute(f"CREATE TABLE lineitem AS SELECT {cols} FROM {scan}").fetchall()
        except duckdb.Error as e:
            raise GqueryError(f"{source}: DuckDB cannot read it: {_first_line(e)}") from None

    def run(self, query: MissionQuery, repeat: int = 5, warmup: int = 1) -> DuckDBResult:
        """Exact result and the wall time of each timed repeat (results fully fetched)."""
        import duckdb

        if repeat < 1:
            raise ValueError("repeat must be >= 1")
        result = DuckDBResult(None, [], self.threads, self.version)
        try:
            try:
                rows = self._timed(query.sql("lineitem"), repeat, warmup, result.times_ms)
            except duckdb.OutOfRangeException:
                result.widened = True
                result.times_ms.clear()
                rows = self._timed(query.sql("lineitem", widened=True), repeat, warmup, result.times_ms)
        except duckdb.OutOfRangeException as e:
            result.times_ms.clear()
            result.unavailable = _first_line(e)
            return result
        except duckdb.Error as e:
            raise GqueryError(f"DuckDB failed: {_first_line(e)}") from None
        result.value = rows[0][0]
        return result

    def _timed(self, sql: str, repeat: int, warmup: int, times_ms: list[float]) -> list:
        for _ in range(warmup):
            self.con.execute(sql).fetchall()
        for _ in range(repeat):
            t0 = time.perf_counter()
            rows = self.con.execute(sql).fetchall()
            times_ms.append((time.perf_counter() - t0) * 1e3)
        return rows

    def close(self) -> None:
        self.con.close()
