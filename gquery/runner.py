"""One query end to end: find or generate the data, ask DuckDB, run the GPU modes, compare.
The CLI, the Python API (gquery.api), the benchmark and the ladder all go through here; every timed
GPU run goes through measure(): warm-up runs, then the median of `repeat` or more (gquery.timing)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from decimal import Decimal

from gquery.columns import load_lineitem
from gquery.contract import check_source
from gquery.errors import GqueryError, UsageError
from gquery.plan import ENCODING_CHOICES, MODES, runnable
from gquery.mission import MissionQuery, ModeRun, measure, numpy_select_sum
from gquery.table import PartedTable, Table
from gquery.reference import DuckDBReference, DuckDBResult
from gquery.sources import LineitemSource

BACKENDS = ("auto", "gpu", "duckdb")


@dataclass
class CpuAnswer:
    """NumPy's exact answer, given where DuckDB cannot answer and no GPU runs."""

    value: Decimal | None
    ms: float


@dataclass
class Outcome:
    query: MissionQuery
    source: str
    rows: int | None = None
    load_ms: float | None = None  # parquet/.tbl → encoded numpy columns
    duckdb: DuckDBResult | None = None
    gpu_reason: str | None = None  # why the GPU did not run, when it did not
    device: dict | None = None
    limits: dict | None = None
    kernel: dict | None = None
    runs: list[ModeRun] = field(default_factory=list)
    table: list[str] = field(default_factory=list)  # each encoding's columns, as the runs read them
    numpy: CpuAnswer | None = None

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
            "numpy": None if self.numpy is None else {"result": _str(self.numpy.value), "ms": self.numpy.ms},
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


def parse_encodings(encoding: str) -> list[str]:
    if encoding == "all":
        return [e for e in ENCODING_CHOICES if e != "auto"]
    if encoding not in ENCODING_CHOICES:
        raise UsageError(f"encoding must be one of {', '.join(ENCODING_CHOICES)} or all, got {encoding!r}")
    return [encoding]


def parse_modes(mode: str) -> list[str]:
    if mode == "all":
        return list(MODES)
    if mode not in MODES:
        raise UsageError(f"mode must be one of {', '.join(MODES)} or all, got {mode!r}")
    return [mode]


def check_options(backend: str, repeat: int) -> None:
    """Refuse bad options before any work (no data is generated for a command that cannot run)."""
    if backend not in BACKENDS:
        raise UsageError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if repeat < 1:
        raise UsageError(f"repeat must be at least 1, got {repeat}")


def run_modes(engine, table: Table, query: MissionQuery, modes, repeat: int, expected: Decimal | None = None,
              validate: bool = True, encodings=("auto",), **plan_options) -> list[ModeRun]:
    """Every mode x encoding that can run (plan.runnable: not the indexed key in pageable memory)."""
    return [measure(engine, table, query, mode, encoding, repeat, expected, validate, **plan_options)
            for encoding, mode in runnable(modes, encodings)[0]]


def make_engine(gpus=1, window: int | None = None):
    """One GPU's Engine for a table in memory; the MultiEngine for several GPUs or a window."""
    if gpus in (1, "1") and window is None:
        from gquery.gpu.executor import Engine

        return Engine()
    from gquery.gpu.multi import MultiEngine

    return MultiEngine(gpus)


def run_query(source: LineitemSource, query: MissionQuery, *, backend: str = "auto", modes=("resident",),
              encodings=("auto",), repeat: int = 5, validate: bool = True, echo=print, gpus=1,
              window: int | None = None, **plan_options) -> Outcome:
    check_options(backend, repeat)
    if source.files:  # a store without its source files was checked when it was encoded
        check_source(source)  # the one input contract, before any engine reads the data
    outcome = Outcome(query, str(source))
    engine = None
    if backend != "duckdb":
        from gquery.gpu.device import probe

        info, reason = probe()
        if info is None:
            outcome.gpu_reason = reason
        else:
            engine = make_engine(gpus, window)
            outcome.device = info.to_dict()
    if not source.files:  # a store whose parquet was deleted (part-by-part generation does so)
        return _run_store_only(outcome, source, query, engine, modes, encodings, repeat, validate, echo,
                               gpus, window, plan_options)
    if engine is None or validate:
        echo(f"DuckDB: loading {source}")
        ref = DuckDBReference(source)
        outcome.duckdb = ref.run(query, repeat=repeat)
        ref.close()
        if outcome.duckdb.widened:
            echo("DuckDB: DECIMAL(18) products overflow; asked again on DECIMAL(38,2) factors")
    check_with_numpy = bool(outcome.duckdb and outcome.duckdb.unavailable)
    if check_with_numpy:
        echo(f"DuckDB cannot answer ({outcome.duckdb.unavailable}): "
             + ("the GPU is checked against NumPy's exact answer" if engine is not None
                else "the result is not validated; NumPy answers exactly"))
        if engine is None:  # a user always gets an exact answer: NumPy's, in 128-bit products
            columns = load_lineitem(source)
            outcome.rows = columns.rows
            t0 = time.perf_counter()
            value = numpy_select_sum(columns, query)
            outcome.numpy = CpuAnswer(value, (time.perf_counter() - t0) * 1e3)
    if engine is not None:
        expected = outcome.duckdb.value if outcome.duckdb else None
        _run_gpu(outcome, source, query, engine, modes, encodings, repeat, validate, echo, window, plan_options,
                 expected, check_with_numpy)
    return outcome


def open_table(data, memory=None, echo=lambda m: None, build_store: bool = False, window: int | None = None,
               every_column: bool = False):
    """A Table (or a PartedTable, for a parted store) from a store folder, a parquet/.tbl path or
    LineitemSource, a pyarrow.Table, or LineitemColumns. A fresh store beside the data is used
    instead of the data; a stale or corrupt one is rebuilt from the data, saying so. `window`: read a
    parted store's parts from disk during queries, that many at a time, instead of holding them.
    Files or an Arrow table without a store give the mission's three columns, or with every_column
    every column the engines can hold (what SQL over them needs)."""
    import sys

    from gquery import store
    from gquery.columns import LineitemColumns, encode, load_lineitem
    from gquery.sources import LineitemSource
    from gquery.tpch import find_lineitem

    if isinstance(data, Table):
        return data
    if isinstance(data, LineitemColumns):
        return Table.from_columns(data)
    arrow = sys.modules.get("pyarrow")  # an Arrow table comes with pyarrow imported: a store's open does not import it
    if arrow is not None and isinstance(data, arrow.Table):
        if every_column:
            from gquery.arrow import table_of_arrow

            return table_of_arrow(data)
        return Table.from_columns(encode(data, "<arrow table>"))
    path = Path(data.path if isinstance(data, LineitemSource) else data)
    if store.is_store(path):
        return _open_store(path, memory, window)
    source = data if isinstance(data, LineitemSource) else find_lineitem(path)
    beside = store.store_path_for(source)
    if store.is_store(beside):
        try:
            store.require_built_from(beside, source)
            return _open_store(beside, memory, window)
        except store.StoreError as e:
            echo(f"{e}; rebuilding it from {source}")
            build_store = True
    if window is not None:
        raise GqueryError(f"{source}: --window reads a parted store's parts from disk; build one with "
                          "'gquery encode' (a folder of parquet parts makes one part a file)")
    if build_store:
        return _open_store(store.ensure_store(source, echo=echo), memory, None)
    if every_column:
        from gquery.arrow import read_table

        return read_table(source)
    return Table.from_columns(load_lineitem(source))


def _open_store(path: Path, memory, window: int | None):
    from gquery import store

    if window is not None and not store.is_parted(path):
        raise GqueryError(f"{path}: --window reads a parted store's parts from disk; this store is one part")
    return store.open_store(path, memory, window=window)


def _run_store_only(outcome, source, query, engine, modes, encodings, repeat, validate, echo, gpus, window,
                    plan_options) -> Outcome:
    """A store without the files it was built from: DuckDB has nothing to read, so the CPU
    reference over the same store (exact, in 128-bit products) checks the GPU, or answers alone."""
    outcome.duckdb = DuckDBResult(None, unavailable="the parquet this store was built from is gone")
    if engine is None:
        from gquery.store import open_store
        from gquery.mission import select_sum

        echo(f"CPU: the exact reference over {source} (no GPU: {outcome.gpu_reason})")
        table = open_store(source.path, window=window)
        outcome.rows = table.rows
        t0 = time.perf_counter()
        outcome.numpy = CpuAnswer(select_sum(table, query), (time.perf_counter() - t0) * 1e3)
        return outcome
    echo("DuckDB: the parquet this store was built from is gone; "
         + ("the GPU is checked against the CPU's exact answer over the store" if validate else "not validated"))
    _run_gpu(outcome, source, query, engine, modes, encodings, repeat, validate, echo, window, plan_options,
             None, validate)
    return outcome


def _run_gpu(outcome, source, query, engine, modes, encodings, repeat, validate, echo, window, plan_options,
             expected, check_on_cpu: bool) -> None:
    from gquery.gpu.bandwidth import measure as bandwidth
    from gquery.mission import select_sum

    echo(f"GPU: loading columns from {source}")
    t0 = time.perf_counter()
    table = open_table(source, memory=engine.memory, echo=echo, window=window)
    outcome.load_ms = (time.perf_counter() - t0) * 1e3
    held = "" if window is None else f"; parts read from disk {window} at a time"
    echo(f"GPU: opened {table.rows:,} rows ({table.logical_bytes() / 1e9:.2f} GB of logical columns) "
         f"in {outcome.load_ms / 1e3:.2f} s{held}")
    if isinstance(table, PartedTable) and not hasattr(engine, "workers"):
        engine.close()  # parts go through the many-table engine; the table's memory is portable
        engine = make_engine(1, 0)
    outcome.rows = table.rows
    outcome.limits = bandwidth(engine.memory)
    outcome.kernel = engine.resources()
    if check_on_cpu:  # exact in 128-bit products: where DuckDB's DECIMAL(38) overflows, or it has no files
        t0 = time.perf_counter()
        expected = select_sum(table, query)
        outcome.numpy = CpuAnswer(expected, (time.perf_counter() - t0) * 1e3)
    outcome.runs = run_modes(engine, table, query, modes, repeat, expected, validate, encodings, **plan_options)
    if not isinstance(table, PartedTable) or table.tables:
        outcome.table = [f"{e}: " + "; ".join(table.describe(e)) for e in {r.encoding for r in outcome.runs}
                         if e != "mixed"]
    engine.memory.release_table(table)
    engine.close()



# --- SQL -------------------------------------------------------------------------------------------------------
SQL_BACKENDS = ("auto", "gpu", "cpu", "duckdb")


@dataclass
class SqlOutcome:
    """`gquery run --sql`: the answers of every backend and mode asked for, and DuckDB's to check them."""

    sql: str
    source: str
    query: object | None = None  # gquery.query.Query; None outside the class
    outside: str | None = None  # why the query is outside the class, where it is
    duckdb: object | None = None  # reference.SqlAnswer
    duckdb_ms: float | None = None
    answers: list = field(default_factory=list)  # gquery.answer.Answer, one a mode
    gpu_reason: str | None = None
    device: dict | None = None
    rows: int | None = None
    build_notes: list[str] = field(default_factory=list)  # a store built for this query: what, how long

    @property
    def all_match(self) -> bool:
        return all(a.check is not False for a in self.answers)

    def first(self):
        return self.answers[0] if self.answers else None

    def to_dict(self) -> dict:
        a = self.first()
        out = a.to_json() if a is not None else {"sql": self.sql, "columns": self.duckdb.columns if self.duckdb else [],
                                                 "rows": [[_plain(v) for v in r] for r in self.duckdb.rows] if self.duckdb else []}
        out.update({"source": self.source, "rows_in_table": self.rows, "outside_class": self.outside,
                    "gpu": None if self.gpu_reason is None else {"unavailable": self.gpu_reason}, "device": self.device,
                    "built": self.build_notes,
                    "duckdb": None if self.duckdb is None else {
                        "median_ms": self.duckdb_ms, "times_ms": self.duckdb.times_ms, "unavailable": self.duckdb.unavailable,
                        "rows": [[_plain(v) for v in r] for r in self.duckdb.rows]},
                    "runs": [{"backend": x.backend, "mode": getattr(x.profile, "mode", None), "check": x.check,
                              "checked_against": x.checked_against, "gpu_ms": x.profile.total_ms if x.profile else None,
                              "times_ms": x.times_ms, "rows": [[_plain(v) for v in r] for r in x.rows],
                              "plan": None if x.plan is None else x.plan.to_dict(),
                              "profile": None if x.profile is None else x.profile.summary(),
                              "pcie_bytes_per_row": x.profile.pcie_bytes_per_row if x.profile else None,
                              "speedup_vs_duckdb": (self.duckdb_ms / x.profile.total_ms)
                              if x.profile and self.duckdb_ms and x.profile.total_ms else None}
                             for x in self.answers]})
        return out


def _plain(v):
    from gquery.answer import json_value

    return json_value(v)


def store_for(source: LineitemSource, echo=print) -> tuple[Path, list[str]]:
    """The store of a source: the one beside it (checked as it is read), or one built now, saying
    what was built and how long it took (a one-shot query over a file with no store pays for it)."""
    from gquery import store

    path = source.path if store.is_store(source.path) else store.store_path_for(source)
    if store.is_store(path) and (path == source.path or store.built_from(path, source)):
        return Path(path), []
    t0 = time.perf_counter()
    echo(f"{path} was built from other files: rebuilding it from {source}" if store.is_store(path)
         else f"no store beside {source}: building {path}")
    built = store.ensure_store(source, echo=echo)
    note = f"built {built} ({store.summary(built)}) from {source} in {time.perf_counter() - t0:.1f} s"
    echo(note)
    return Path(built), [note]


def run_sql(source: LineitemSource, text: str, *, backend: str = "auto", modes=("pinned",), repeat: int = 5,
            validate: bool = True, echo=print, scan: str = "auto", gpus: int = 1,
            chunk_frames: int | None = None) -> SqlOutcome:
    """SQL text over lineitem: parsed and planned against the store's schema; DuckDB asked the same text
    (its own table of the columns it reads); each backend/mode's answer checked against it exactly.
    `gpus`: the frames divided among this many GPUs, each its share's fused kernel."""
    from gquery import answer, sql, store
    from gquery.reference import DuckDBTable

    if backend not in SQL_BACKENDS:
        raise UsageError(f"backend must be one of {', '.join(SQL_BACKENDS)}, got {backend!r}")
    check_options("auto", repeat)
    outcome = SqlOutcome(text, str(source))
    if backend in ("auto", "gpu"):
        from gquery.gpu.device import probe

        info, outcome.gpu_reason = probe()
        if info is None and backend == "gpu":
            raise GqueryError(f"no usable GPU: {outcome.gpu_reason}")
        outcome.device = info.to_dict() if info is not None else None
    path, outcome.build_notes = (None, []) if backend == "duckdb" else store_for(source, echo)
    table = None
    if path is not None:
        table = store.open_store(path)
        schema = answer.schema_of(table)
    else:
        from gquery.arrow import ColumnReader

        schema = ColumnReader(source).schema
    try:
        outcome.query = sql.parse(text, schema)
    except sql.OutOfClass as e:
        if backend != "auto" or not source.files:
            raise
        outcome.outside = str(e)
        echo(f"GPU not used: {e}; DuckDB answers")
        validate, backend = True, "duckdb"
    if validate and source.files:
        if outcome.query is not None:
            columns = outcome.query.columns() or [next(iter(schema.types))]  # COUNT(*) alone: any one column
        else:  # outside the class: DuckDB reads what it needs of every column the files have
            columns = [*schema.types, *schema.left_out]
        echo(f"DuckDB: loading {', '.join(columns)} from {source}")
        ref = DuckDBTable(source, columns)
        outcome.duckdb = ref.run_sql(text, repeat=repeat)
        ref.close()
        if outcome.duckdb.times_ms:
            outcome.duckdb_ms = sorted(outcome.duckdb.times_ms)[len(outcome.duckdb.times_ms) // 2]
        if outcome.duckdb.unavailable:
            echo(f"DuckDB cannot answer ({outcome.duckdb.unavailable}): the CPU reference over the store checks the answer")
    if backend == "duckdb" or outcome.query is None:
        return outcome
    outcome.rows = table.rows
    use_gpu = backend in ("auto", "gpu") and outcome.gpu_reason is None
    if not use_gpu:
        a = answer.cpu_answer(outcome.query, table, f"GPU not used: {outcome.gpu_reason}" if backend == "auto" else None)
        outcome.answers.append(a)
    else:
        from gquery.gpu.codegen import NotOnGpu
        from gquery.gpu.executor import Engine

        engine = Engine()
        gpu_table = store.open_store(path, engine.memory)
        multi = None
        if gpus > 1 or (isinstance(gpu_table, PartedTable) and answer.mission_z(outcome.query) is not None):
            from gquery.gpu.multi import MultiEngine

            multi = MultiEngine(gpus)  # several GPUs, or the mission's key scan over a parted store
        try:
            for mode in modes:
                outcome.answers.append(
                    answer.gpu_answer_multi(outcome.query, gpu_table, multi, mode, repeat) if gpus > 1 else
                    answer.gpu_answer(outcome.query, gpu_table, engine, mode, repeat, chunk_frames=chunk_frames, scan=scan,
                                      multi=multi))
        except NotOnGpu as e:  # in the class, but not the fused kernel's: the CPU reference answers, saying why
            if backend == "gpu":
                raise
            outcome.answers = [answer.cpu_answer(outcome.query, table, f"GPU not used: {e}")]
        finally:
            if multi is not None:
                multi.memory.release_table(gpu_table)
                multi.close()
            engine.memory.release_table(gpu_table)
            engine.close()
    _check(outcome, table)
    return outcome


def _check(outcome: SqlOutcome, table) -> None:
    """Each answer against DuckDB's rows, to the last digit (a double within one unit in the last place,
    said in a note); against the CPU reference over the store where DuckDB cannot answer or has no
    files to read."""
    from gquery import answer

    ordered = bool(outcome.query.order_by)
    if outcome.duckdb is not None and not outcome.duckdb.unavailable:
        for a in outcome.answers:
            _checked(a, outcome.duckdb.rows, ordered, "DuckDB")
        return
    if not any(a.backend == "gpu" for a in outcome.answers):
        return  # the CPU reference alone: nothing to check it against
    reference = answer.cpu_answer(outcome.query, table).result
    for a in outcome.answers:
        _checked(a, reference.rows, ordered, "the CPU reference")


def _checked(a, rows: list[tuple], ordered: bool, against: str) -> None:
    from gquery.result import compare

    comparison = compare(a.result, rows, ordered)
    a.check, a.checked_against, a.expected = comparison.equal, against, rows
    a.check_note = comparison.says(against)
