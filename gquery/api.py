"""The Python API: open a table, query it, check and profile the answer.

    import gquery
    table = gquery.open("dbgen_data/sf10")          # a store, parquet, .tbl, an Arrow table or arrays
    r = table.query(30, mode="pinned")              # encoding and placement chosen by the planner
    r.value, r.check, r.profile.total_ms, print(r.plan.describe())

`open` prefers the encoded store (lineitem.gq beside the data) and reads it into page-locked,
mapped host memory when a GPU is usable; a query then ships only what its plan needs. The CLI's
`run` goes through the same engine and runner (gquery.runner).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from gquery.errors import GqueryError
from gquery.query import Query, numpy_select_sum
from gquery.table import Table


@dataclass
class Result:
    value: Decimal | None  # SQL's NULL (None) for an empty selection
    check: bool | None  # equal to the CPU reference; None when not checked
    reference: Decimal | None
    profile: object  # gquery.profile.Profile of the median run
    plan: object  # gquery.plan.QueryPlan
    times_ms: list[float]

    def explain(self) -> str:
        return self.plan.describe()


def open_table(data, memory=None, echo=lambda m: None, build_store: bool = False) -> Table:
    """A Table from a store folder, a parquet/.tbl path or LineitemSource, a pyarrow.Table, or
    LineitemColumns. A fresh store beside the data is used instead of the data; a stale or corrupt
    one is rebuilt from the data, saying so."""
    import pyarrow as pa

    from gquery import store
    from gquery.columns import LineitemColumns, encode, load_lineitem
    from gquery.tpch import LineitemSource, find_lineitem

    if isinstance(data, Table):
        return data
    if isinstance(data, LineitemColumns):
        return Table.from_columns(data)
    if isinstance(data, pa.Table):
        return Table.from_columns(encode(data, "<arrow table>"))
    path = Path(data.path if isinstance(data, LineitemSource) else data)
    if store.is_store(path):
        return store.open_store(path, memory)
    source = data if isinstance(data, LineitemSource) else find_lineitem(path)
    beside = store.store_path_for(source)
    if store.is_store(beside):
        try:
            return store.open_store(beside, memory)
        except store.StoreError as e:
            echo(f"{e}; rebuilding it from {source}")
            build_store = True
    table = Table.from_columns(load_lineitem(source))
    if build_store:
        store.write_store(table, beside, source, echo=echo)
    return table


_engine = None


def engine():
    """The process's GPU engine, made on first use (raises GpuUnavailable, one line, without a GPU)."""
    global _engine
    if _engine is None:
        from gquery.gpu.executor import Engine

        _engine = Engine()
    return _engine


def open(data, pinned: bool | None = None) -> Table:  # noqa: A001 (the API's verb, as in gquery.open)
    """Open a table; with a usable GPU (or pinned=True) a store lands in mapped pinned memory."""
    from gquery.gpu.device import probe

    use_gpu = probe()[0] is not None if pinned is None else pinned
    return open_table(data, memory=engine().memory if use_gpu else None)


def query(table: Table, z: int, mode: str = "pinned", encoding: str = "auto", repeat: int = 1,
          check: bool = True, **plan_options) -> Result:
    """SELECT SUM(l_quantity * l_extendedprice) FROM table WHERE l_suppkey < z, on the GPU."""
    from gquery.runner import check_options, measure, parse_encodings, parse_modes

    check_options("gpu", repeat)
    parse_modes(mode), parse_encodings(encoding)
    q = Query(z)
    reference = numpy_select_sum(table.plain_columns(), q) if check else None
    run = measure(engine(), table, q, mode, encoding, repeat, reference, check, **plan_options)
    return Result(run.value, run.match, reference, run.result.profile, run.result.plan, run.totals_ms)


def close(table: Table) -> None:
    """Free what the table holds on the GPU and in page-locked memory."""
    if _engine is not None:
        _engine.memory.release_table(table)


Table.query = query
Table.close = close
__all__ = ["open", "open_table", "query", "close", "engine", "Result", "GqueryError"]
