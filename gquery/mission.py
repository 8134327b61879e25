"""The mission query and its CPU reference:

    SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < Z

Both factors are hundredths, so the sum is in ten-thousandths: DuckDB types it DECIMAL(38,4).
SQL's SUM over no rows is NULL; every engine here returns None for it. Factors are any int64, so a
product may need 127 bits: exact_product_sum multiplies in 32-bit halves and never rounds.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from gquery import timing
from gquery.columns import LineitemColumns
from gquery.contract import QUERY_COLUMNS
from gquery.exact import INT64_MAX, INT64_MIN, exact_product_sum
from gquery.host import host_threads
from gquery.plan import runnable
from gquery.store import open_store
from gquery.table import Table

RESULT_SCALE = 4


@dataclass(frozen=True)
class MissionQuery:
    z: int

    def __post_init__(self):
        if isinstance(self.z, bool) or not isinstance(self.z, int):
            raise TypeError(f"Z must be an integer, got {self.z!r}")

    def sql(self, table: str = "lineitem", widened: bool = False) -> str:
        """The query; `widened` casts both factors to DECIMAL(38,2), so that a SQL engine multiplies in
        128 bits (DuckDB multiplies two DECIMAL(<=18) in 64 bits and fails on overflow)."""
        q, p = ("CAST(l_quantity AS DECIMAL(38,2))", "CAST(l_extendedprice AS DECIMAL(38,2))") if widened \
            else ("l_quantity", "l_extendedprice")
        return f"SELECT SUM({q} * {p}) FROM {table} WHERE l_suppkey < {self.z}"

    @property
    def z_int64(self) -> int:
        """Z clamped into int64 for kernels: keys are int32, so the predicate is unchanged."""
        return min(max(self.z, INT64_MIN), INT64_MAX)

    def __str__(self) -> str:
        return self.sql()


def to_decimal(scaled_total: int, selected_rows: int) -> Decimal | None:
    """An exact result in ten-thousandths as SQL gives it: NULL (None) when no row was selected."""
    if selected_rows == 0:
        return None
    return Decimal(f"{scaled_total}E-{RESULT_SCALE}")  # exact at any size: scaleb would round to 28 digits


def numpy_select_sum_exact(columns: LineitemColumns, query: MissionQuery) -> tuple[int, int]:
    """The CPU reference in NumPy on the loaded columns (a mask, a product, an exact sum):
    (total in ten-thousandths, selected rows)."""
    mask = columns.suppkey < query.z_int64
    return exact_product_sum(columns.quantity[mask], columns.extendedprice[mask]), int(np.count_nonzero(mask))


def numpy_select_sum(columns: LineitemColumns, query: MissionQuery) -> Decimal | None:
    return to_decimal(*numpy_select_sum_exact(columns, query))


def scaled_int(value: Decimal | None) -> int:
    """An exact result back in ten-thousandths as an int (0 for NULL), with no rounding at any length."""
    if value is None:
        return 0
    sign, digits, exponent = value.as_tuple()
    n = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    shift = exponent + RESULT_SCALE
    return n * 10**shift if shift >= 0 else n // 10**(-shift)


def select_sum_exact(table, query: MissionQuery, threads: int | None = None) -> tuple[int, int]:
    """The CPU reference over a Table or a PartedTable: (exact total in ten-thousandths, selected
    rows). Parts are summed on threads (NumPy drops the GIL), each part read from disk when the
    table holds none; the parts' exact integers are added in Python."""
    if isinstance(table, Table):
        return numpy_select_sum_exact(_decoded(table), query)

    def part(i: int) -> tuple[int, int]:
        t = table.tables[i] if table.tables is not None else open_store(table.paths[i], check_source=False)
        return numpy_select_sum_exact(_decoded(t), query)

    # each part's decode is itself threaded: a few parts at once keep every core busy
    with ThreadPoolExecutor(max(1, min(threads or max(2, host_threads() // 4), table.parts))) as pool:
        sums = list(pool.map(part, range(table.parts)))
    return sum(s for s, _ in sums), sum(n for _, n in sums)


def _decoded(table: Table) -> LineitemColumns:
    """The plain values, decoded for the moment and not kept in the table (a parted SF 1000 would
    otherwise keep 120 GB of them)."""
    return LineitemColumns.from_values(*(table.columns[name].values() for name in QUERY_COLUMNS), source=table.source)


def select_sum(table, query: MissionQuery):
    """select_sum_exact as SQL gives it: a Decimal, or None (NULL) for an empty selection."""
    return to_decimal(*select_sum_exact(table, query))


@dataclass
class ModeRun:
    mode: str
    result: object  # GpuResult of the median run
    totals_ms: list[float]
    match: bool | None  # None: not validated

    @property
    def encoding(self) -> str:
        return self.result.plan.encoding

    @property
    def value(self) -> Decimal | None:
        return self.result.value


def measure(engine, table, query: MissionQuery, mode: str, encoding: str = "auto", repeat: int = 5,
            expected: Decimal | None = None, validate: bool = True, warmup: bool = True,
            min_ms: float | None = None, **plan_options) -> ModeRun:
    """Untimed warm-up runs (setup, module load, first touch, clocks: gquery.timing), then `repeat`
    runs or more, until `min_ms` (default timing.MIN_TIMED_MS); the median run's profile is kept,
    with the first run's one-time setup. warmup=False: exactly `repeat` runs (a one-shot query, as
    a Dask task runs its part: the first run's setup is then inside its time)."""
    plan = engine.plan(table, query, mode, encoding, **plan_options)
    run = lambda: engine.run(table, query, plan)  # noqa: E731
    warm = timing.warm_up(run) if warmup else []
    runs = timing.timed_runs(run, repeat, (timing.MIN_TIMED_MS if warmup else 0.0) if min_ms is None else min_ms)
    results = sorted(runs, key=lambda r: r.profile.total_ms)
    median = results[len(results) // 2]
    median.profile.setup_ms = (warm or runs)[0].profile.setup_ms  # the one-time upload, page-locking or registration
    values = {r.value for r in results + warm}
    match = (values == {expected}) if validate else None
    return ModeRun(mode, median, [r.profile.total_ms for r in results], match)


def run_modes(engine, table: Table, query: MissionQuery, modes, repeat: int, expected: Decimal | None = None,
              validate: bool = True, encodings=("auto",), **plan_options) -> list[ModeRun]:
    """Every mode x encoding that can run (plan.runnable: not the indexed key in pageable memory)."""
    return [measure(engine, table, query, mode, encoding, repeat, expected, validate, **plan_options)
            for encoding, mode in runnable(modes, encodings)[0]]


@dataclass
class Outcome:
    """The mission query on the key-scan engine in every mode (the ladder's modes table)."""

    query: MissionQuery
    source: str
    rows: int | None = None
    load_ms: float | None = None  # parquet/.tbl → encoded numpy columns
    duckdb: object | None = None  # reference.DuckDBResult
    gpu_reason: str | None = None  # why the GPU did not run, when it did not
    device: dict | None = None
    limits: dict | None = None
    kernel: dict | None = None
    runs: list[ModeRun] = field(default_factory=list)
    table: list[str] = field(default_factory=list)  # each encoding's columns, as the runs read them

    @property
    def all_match(self) -> bool:
        return all(r.match is not False for r in self.runs)

    def to_dict(self) -> dict:
        d = self.duckdb
        return {
            "query": self.query.sql(), "z": self.query.z, "source": self.source, "rows": self.rows,
            "load_ms": self.load_ms,
            "duckdb": None if d is None else {
                "result": _str(d.value), "median_ms": d.median_ms, "times_ms": d.times_ms,
                "threads": d.threads, "version": d.version, "widened": d.widened,
                "unavailable": d.unavailable},
            "gpu": None if self.gpu_reason is None else {"unavailable": self.gpu_reason},
            "device": self.device, "limits": self.limits, "kernel": self.kernel, "encodings": self.table,
            "runs": [{
                "mode": r.mode, "encoding": r.encoding, "result": _str(r.value),
                "selected_rows": r.result.selected_rows,
                "match": r.match, "plan": r.result.plan.to_dict(),
                "profile": r.result.profile.to_dict(self.limits), "totals_ms": r.totals_ms,
                "speedup_vs_duckdb": (d.median_ms / r.result.profile.total_ms) if d and d.median_ms else None,
                "pcie_bytes": r.result.profile.pcie_bytes, "pcie_bytes_per_row": r.result.profile.pcie_bytes_per_row,
            } for r in self.runs],
        }


def _str(v: Decimal | None) -> str | None:
    return None if v is None else str(v)


def _str(v: Decimal | None) -> str | None:
    return None if v is None else str(v)
