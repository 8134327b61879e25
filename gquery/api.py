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

import atexit

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from gquery.errors import GqueryError
from gquery.query import Query
from gquery.table import PartedTable, Table


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


def open_table(data, memory=None, echo=lambda m: None, build_store: bool = False, window: int | None = None):
    """A Table (or a PartedTable, for a parted store) from a store folder, a parquet/.tbl path or
    LineitemSource, a pyarrow.Table, or LineitemColumns. A fresh store beside the data is used
    instead of the data; a stale or corrupt one is rebuilt from the data, saying so. `window`: read a
    parted store's parts from disk during queries, that many at a time, instead of holding them."""
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
        return _open_store(path, memory, window)
    source = data if isinstance(data, LineitemSource) else find_lineitem(path)
    beside = store.store_path_for(source)
    if store.is_store(beside):
        try:
            return _open_store(beside, memory, window)
        except store.StoreError as e:
            echo(f"{e}; rebuilding it from {source}")
            build_store = True
    if window is not None:
        raise GqueryError(f"{source}: --window reads a parted store's parts from disk; build one with "
                          "'gquery encode' (a folder of parquet parts makes one part a file)")
    table = Table.from_columns(load_lineitem(source))
    if build_store:
        store.write_store(table, beside, source, echo=echo)
    return table


def _open_store(path: Path, memory, window: int | None):
    from gquery import store

    if window is not None and not store.is_parted(path):
        raise GqueryError(f"{path}: --window reads a parted store's parts from disk; this store is one part")
    return store.open_store(path, memory, window=window)


_engine = None
_engines: dict = {}


def engine():
    """The process's GPU engine, made on first use (raises GpuUnavailable, one line, without a GPU)."""
    global _engine
    if _engine is None:
        from gquery.gpu.executor import Engine

        _engine = Engine()
        atexit.register(_shutdown)  # after PyCUDA's own (autoprimaryctx): runs before it
    return _engine


def engines(gpus=1):
    """The process's engine over `gpus` GPUs (a number or "all"), which also runs parted tables."""
    if gpus not in _engines:
        from gquery.gpu.multi import MultiEngine

        _engines[gpus] = MultiEngine(gpus)
        atexit.register(_shutdown)
    return _engines[gpus]


def _shutdown() -> None:
    """At exit, free what the process's engines hold (streams, events, modules, and what they
    cached in tables), each on the thread whose context made it, while the contexts are current:
    PyCUDA would otherwise warn of each object the interpreter's last collection meets."""
    global _engine
    for e in list(_engines.values()):
        e.close()
    _engines.clear()
    if _engine is not None:
        from gquery.gpu.executor import close_last

        engine, _engine = _engine, None
        close_last(engine)


def open(data, pinned: bool | None = None) -> Table:  # noqa: A001 (the API's verb, as in gquery.open)
    """Open a table; with a usable GPU (or pinned=True) a store lands in mapped pinned memory."""
    from gquery.gpu.device import probe

    use_gpu = probe()[0] is not None if pinned is None else pinned
    return open_table(data, memory=engine().memory if use_gpu else None)


def query(table, z: int, mode: str = "pinned", encoding: str = "auto", repeat: int = 1,
          check: bool = True, gpus=1, warmup: bool = True, **plan_options) -> Result:
    """SELECT SUM(l_quantity * l_extendedprice) FROM table WHERE l_suppkey < z, on the GPU (on
    `gpus` GPUs: a number or "all"; a parted table goes through the many-table engine). Untimed
    warm-up runs come first (25 ms of them) unless warmup=False; the result is the median of
    `repeat` runs."""
    from gquery.plan import runnable
    from gquery.runner import check_options, measure, parse_encodings, parse_modes
    from gquery.table import select_sum

    check_options("gpu", repeat)
    runnable(parse_modes(mode), parse_encodings(encoding))
    q = Query(z)
    reference = select_sum(table, q) if check else None
    eng = engine() if gpus == 1 and isinstance(table, Table) else engines(gpus)
    run = measure(eng, table, q, mode, encoding, repeat, reference, check, warmup, min_ms=0.0, **plan_options)
    return Result(run.value, run.match, reference, run.result.profile, run.result.plan, run.totals_ms)


def close(table) -> None:
    """Free what the table holds on the GPUs and in page-locked memory."""
    for e in [_engine, *_engines.values()]:
        if e is not None:
            e.memory.release_table(table)


Table.query = PartedTable.query = query
Table.close = PartedTable.close = close
__all__ = ["open", "open_table", "query", "close", "engine", "engines", "Result", "GqueryError"]
