"""DuckDB as the CPU reference: the exact answer and its warm timing.

DuckDB reads the source files itself into its own in-memory table (not our numpy columns), so a bug
in our loader cannot agree with itself. The timed statement is the query's SQL on that table, the
best case for DuckDB; loading is not timed.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from decimal import Decimal

from gquery.columns import QUERY_COLUMNS, TBL_COLUMNS
from gquery.errors import GqueryError
from gquery.query import Query
from gquery.tpch import LineitemSource


@dataclass
class DuckDBResult:
    value: Decimal | None
    times_ms: list[float] = field(default_factory=list)
    threads: int = 0
    version: str = ""

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)


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
            types = {c: "VARCHAR" for c in TBL_COLUMNS} | {
                "l_suppkey": "BIGINT", "l_quantity": "DECIMAL(15,2)", "l_extendedprice": "DECIMAL(15,2)"}
            spec = ", ".join(f"'{c}': '{t}'" for c, t in types.items())
            scan = f"read_csv({files}, delim='|', header=false, quote='', columns={{{spec}, '_trailing': 'VARCHAR'}})"
        try:
            self.con.execute(f"CREATE TABLE lineitem AS SELECT {cols} FROM {scan}").fetchall()
        except duckdb.Error as e:
            raise GqueryError(f"{source}: DuckDB cannot read it: {str(e).splitlines()[0]}") from None

    def run(self, query: Query, repeat: int = 5, warmup: int = 1) -> DuckDBResult:
        """Exact result and the wall time of each timed repeat (results fully fetched)."""
        if repeat < 1:
            raise ValueError("repeat must be >= 1")
        sql = query.sql("lineitem")
        for _ in range(warmup):
            self.con.execute(sql).fetchall()
        result = DuckDBResult(None, [], self.threads, self.version)
        for _ in range(repeat):
            t0 = time.perf_counter()
            rows = self.con.execute(sql).fetchall()
            result.times_ms.append((time.perf_counter() - t0) * 1e3)
        result.value = rows[0][0]
        return result

    def close(self) -> None:
        self.con.close()
