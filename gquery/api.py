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

from gquery.errors import GqueryError
from gquery.mission import MissionQuery
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


class TableHandle:
    """An opened table: the data (a Table, or a PartedTable for a parted store) and the queries asked
    of it. close() frees what it holds on the GPUs and in page-locked memory."""

    def __init__(self, data):
        self.data = data

    @property
    def rows(self) -> int:
        return self.data.rows

    def query(self, z: int, **options) -> "Result":
        """The mission query at Z (see gquery.api.query for the options)."""
        return query(self.data, z, **options)

    def close(self) -> None:
        close(self.data)


def open(data, pinned: bool | None = None) -> TableHandle:  # noqa: A001 (the API's verb, as in gquery.open)
    """Open a table; with a usable GPU (or pinned=True) a store lands in mapped pinned memory."""
    from gquery.gpu.device import probe

    from gquery.runner import open_table

    use_gpu = probe()[0] is not None if pinned is None else pinned
    return TableHandle(open_table(data, memory=engine().memory if use_gpu else None))


def _data(table):
    """The data of an opened table, or the table itself (a Table or PartedTable)."""
    return table.data if isinstance(table, TableHandle) else table


def query(table, z: int, mode: str = "pinned", encoding: str = "auto", repeat: int = 1,
          check: bool = True, gpus=1, warmup: bool = True, **plan_options) -> Result:
    """SELECT SUM(l_quantity * l_extendedprice) FROM table WHERE l_suppkey < z, on the GPU (on
    `gpus` GPUs: a number or "all"; a parted table goes through the many-table engine). Untimed
    warm-up runs come first (25 ms of them) unless warmup=False; the result is the median of
    `repeat` runs."""
    from gquery.plan import runnable
    from gquery.runner import check_options, measure, parse_encodings, parse_modes
    from gquery.mission import select_sum

    check_options("gpu", repeat)
    runnable(parse_modes(mode), parse_encodings(encoding))
    table = _data(table)
    q = MissionQuery(z)
    reference = select_sum(table, q) if check else None
    eng = engine() if gpus == 1 and isinstance(table, Table) else engines(gpus)
    run = measure(eng, table, q, mode, encoding, repeat, reference, check, warmup, min_ms=0.0, **plan_options)
    return Result(run.value, run.match, reference, run.result.profile, run.result.plan, run.totals_ms)


def close(table) -> None:
    """Free what the table holds on the GPUs and in page-locked memory."""
    table = _data(table)
    for e in [_engine, *_engines.values()]:
        if e is not None:
            e.memory.release_table(table)


__all__ = ["open", "query", "close", "engine", "engines", "Result", "TableHandle", "GqueryError"]
