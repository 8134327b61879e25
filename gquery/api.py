"""The Python API: open a table, ask it SQL (or the mission's Z), check and profile the answer.

    import gquery
    table = gquery.open("dbgen_data/sf10")          # a store, parquet, .tbl, an Arrow table or arrays
    a = table.sql("SELECT SUM(l_extendedprice * l_discount) FROM lineitem WHERE l_quantity < 24")
    a.rows, a.check, a.profile.total_ms, print(a.explain())
    m = table.query(30, mode="pinned")              # the mission query at Z = 30: the same Answer as its SQL's
    table.close()

`open` prefers the encoded store (lineitem.gq beside the data); it reads only its manifest, and a
query reads the columns it needs, page-locked in place when a GPU is usable.

Any thread may query, several at once. Each GPU is driven by one thread of its own
(gpu.device.device_thread): a query's GPU work is handed to it and waited for, so the right context
is current wherever GPU work runs, and every engine, stream, allocation and page-locked buffer is
made and freed there. Queries on one GPU take turns; their CPU work (the reference an answer is
checked against) runs on the asking thread. A closed table refuses further queries in one line,
from any thread.

Without a usable GPU, backend="auto" (the default) answers on the CPU (the NumPy reference over
the same table) and says why in the answer; backend="gpu" raises GqueryError saying what is missing.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import os
import sys
import threading
import time

from gquery import textcache
from gquery.errors import GqueryError, TableClosed, UsageError, deep_expressions
from gquery.gpu.device import GpuUnavailable, device_thread, parse_gpus, probe
from gquery.gpu.warm import no_pycuda, warm_up
from gquery.options import GPU_BACKENDS, check_repeat
from gquery.plan import MODES
from gquery.sources import LineitemSource, named_columns
from gquery.table import Table, read_ahead

BACKENDS = ("auto", "gpu", "cpu", "duckdb")
PARSED_KEPT = 4096  # texts a table keeps parsed: a loop over generated texts must not grow it without bound


_engine = None
_engines: dict = {}
_lock = threading.Lock()


def engine():
    """The process's GPU engine, made on GPU 0's own thread on first use (raises GpuUnavailable, one
    line, without a GPU). Run its work there: gpu.device.device_thread(0).call(...)."""
    return device_thread(0).call(_engine_here)


def _engine_here():
    """On GPU 0's thread, where engines are made one at a time: no lock is held while it waits."""
    global _engine
    if _engine is None:
        from gquery.gpu.executor import Engine

        _engine = Engine()
        atexit.register(shutdown)  # after the device threads' own: runs before it
    return _engine


def engines(gpus=1):
    """The process's engine over `gpus` GPUs (a number or "all"), which also runs parted tables."""
    with _lock:
        if gpus in _engines:
            return _engines[gpus]
    from gquery.gpu.multi import MultiEngine

    made = MultiEngine(gpus)  # made with no lock held: its workers' threads may be running jobs that ask for it
    with _lock:
        kept = _engines.setdefault(gpus, made)
        if kept is made:
            atexit.register(shutdown)
    if kept is not made:
        made.close()
    return kept


def shutdown() -> None:
    """Free what the process's engines hold (streams, events, modules, and what they cached in tables),
    each on its GPU's thread: at exit, where PyCUDA would otherwise warn of each object the interpreter's
    last collection meets, or before a benchmark leaves the GPU to fresh processes. A later query makes
    its engine again."""
    global _engine
    with _lock:
        multi, single = list(_engines.values()), _engine
        _engines.clear()
        _engine = None
    for e in multi:
        e.close()
    if single is not None:
        from gquery.gpu.executor import close_last

        device_thread(0).call(close_last, single)


def gpu_reason() -> str | None:
    """None where a GPU is usable, else why not (one line)."""
    return probe()[1]


class TableHandle:
    """An opened table: the data (a Table, or a PartedTable for a parted store), the queries asked
    of it, from any thread, and what it holds on the GPU until close()."""

    def __init__(self, data, gpu: bool, source=None, one_shot: bool = False, name: str = "lineitem", part: bool = False):
        self.data = data
        self.name = name  # what SQL calls it: FROM <name>
        self.gpu = gpu
        self._source = source  # the files it came from (DuckDB reads those): a LineitemSource, the path, or None
        self.one_shot = one_shot  # opened for one query, then closed (a Dask task's part): see answer.gpu_answer
        self.part = part  # a part of a larger table: its answers' partials hold every group (answer.gpu_plan's whole)
        self._closed = False
        self._lock = threading.Lock()
        # what a repeated text reuses, for as long as the table is open (its data cannot change meanwhile):
        # the parsed query by text, the parsed shape of texts that differ only in their literals, and the
        # fused plans by query and mode (a windowed table's parts are opened afresh each query, so its plans
        # are not kept)
        self._parsed: dict[str, object] = {}
        self._shapes: dict[str, object] = {}
        self._plans: dict | None = {} if isinstance(data, Table) or data.tables is not None else None
        # the warm choices of plans whose every frame is tested or passes whole, by shape: a new constant that
        # classes every frame so too keeps them (fusedplan._kept_choice)
        self._choices: dict | None = {} if self._plans is not None else None

    @property
    def source(self):
        """The files the table was opened from, found on first use (a store's means reading every part's
        manifest, which opening does not): a LineitemSource, or None for arrays and Arrow tables."""
        if self._source is not None and not hasattr(self._source, "files"):
            from gquery.runner import source_of

            self._source = source_of(self._source)
        return self._source

    @property
    def rows(self) -> int:
        return self.data.rows

    @functools.cached_property
    def _table_key(self) -> str:
        from gquery.answer import schema_of

        return textcache.table_key(self.name, schema_of(self.data))

    def _live(self):
        with self._lock:
            if self._closed:
                raise TableClosed(f"{self.data.source}: this table is closed; open it again to query it")
            return self.data

    @deep_expressions
    def sql(self, text: str, backend: str = "auto", mode: str = "pinned", repeat: int = 1, check: bool = True,
            warmup: bool = False, gpus=1):
        """The SQL text's answer (gquery.answer.Answer: columns, rows, check, profile, explain()).
        backend: auto (the GPU where usable, else the CPU reference, saying why), gpu, cpu, or duckdb
        (DuckDB alone over the table's files, any SQL it answers). A query outside the class raises
        OutOfClass naming the construct. `check`: compare with the CPU reference over the same table.
        `repeat`: runs of the query (its time is their median); `warmup`: untimed runs first, and then at
        least `repeat` runs and 0.1 s of them, as a benchmark times (gquery.timing): by default a call is
        one run, what a user waits for. `gpus`: a number or "all": the frames divided among the GPUs, each
        its share's fused kernel."""
        return self._answer(text, None, backend, mode, repeat, check, warmup, gpus)

    def _answer(self, text: str, query, backend: str, mode: str, repeat: int, check: bool, warmup: bool, gpus,
                statement: tuple | None = None):
        """sql()'s answer; `query`: the text's Query where its caller parsed it otherwise (Prepared.run's, its
        parameters typed as DuckDB types parameters), else None; `statement`: (the prepared text, its parameters),
        what backend duckdb asks DuckDB where the text is a prepared statement's with its parameters bound."""
        started = time.perf_counter()
        data = self._live()
        if backend not in BACKENDS:
            raise UsageError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if mode not in MODES:  # said whichever engine answers: a typo is not left to a later call on a GPU
            raise UsageError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        for name, flag in (("check", check), ("warmup", warmup)):
            if not isinstance(flag, bool):
                raise UsageError(f"{name} must be True or False, got {flag!r}")
        check_repeat(repeat)
        parse_gpus(gpus)
        held = [data] if isinstance(data, Table) else data.tables  # (None: a window's parts, opened as they are read)
        ahead = ()  # a table's first query on a GPU: the columns its text names read from here on, while the
        # engine's modules and sqlglot are imported, the text parsed, and the GPU's context made
        if self.gpu and _engine is None and not self._parsed and backend in GPU_BACKENDS and isinstance(text, str) \
                and held is not None:
            columns, where = held[0].columns, text.lower().find("where")
            ahead = named_columns(text, columns)
            read_ahead(list(held), ahead, named_columns(text[where:], columns) if where >= 0 else ())
        from gquery import answer

        if backend == "duckdb":  # DuckDB alone, over the files the table was opened from, read in place
            if self.source is None or not self.source.files:
                raise UsageError("backend duckdb reads the table's files: this table was opened from arrays, an "
                                 "Arrow table, or a store whose files are gone")
            if not isinstance(text, str):
                raise GqueryError(f"SQL must be text, not {type(text).__name__}")
            if statement is None:
                return answer.duckdb_answer(text, self.source, self.name, repeat)
            asked = answer.duckdb_answer(statement[0], self.source, self.name, repeat, list(statement[1]))
            asked.sql = text  # (the answer's text as the GPU's and the CPU's give it: the parameters bound)
            return asked
        if query is None and isinstance(text, str):
            query = self._parsed.get(text)
            if query is None and "gquery.sql" not in sys.modules:  # parsed in an earlier process: no sqlglot to
                # import (once it is, a parse of a known shape is as quick as the file's read)
                query = textcache.load(text, self.name, self._table_key)
                if query is not None and len(self._parsed) < PARSED_KEPT:
                    self._parsed[text] = query
        if query is None:
            from gquery import sql  # (sqlglot's import waits for a first query, beside the GPU's context)

            query = sql.parse_shaped(text, answer.schema_of(data), self.name, self._shapes)
            if len(self._parsed) < PARSED_KEPT:
                self._parsed[text] = query
                textcache.keep(text, self._table_key, query)
        answer.check_values_over(query, data)  # (a cast or a date past its type here: refused, as DuckDB refuses it)
        parsed = time.perf_counter()
        reason = gpu_reason() if backend != "cpu" else "backend cpu"
        if backend == "gpu" and reason is not None:
            raise GqueryError(f"no usable GPU: {reason}")
        result = None
        if reason is None:
            if _engine is None and held is not None:  # the process's first GPU query: its columns (those its text
                # did not name as words) are read while GPU 0's context is made
                missed = [c for c in query.columns() if c not in ahead]
                if missed:
                    read_ahead(list(held), missed)
            try:
                if gpus != 1:  # each share on its own GPU's thread, handed out from here
                    result = answer.gpu_answer_multi(query, data, engines(gpus), mode, repeat, warmup, plans=self._plans)
                else:  # planned and compiled here, run on GPU 0's thread (here where it is idle), read into rows
                    # here: neither a query waits for another's compile or read-out, nor the GPU for a compile
                    info = probe()[0]
                    planned = answer.gpu_plan(query, data, info.sm_count, mode, repeat, warmup, one_shot=self.one_shot,
                                              plans=self._plans, arch=info.arch, whole=not self.part,
                                              choices=self._choices)
                    handed = time.perf_counter()
                    if planned[0].empty:  # nothing to read: answered here, no GPU job (fused.empty_run)
                        done = answer.gpu_runs(query, data, None, mode, repeat, warmup, planned=planned)
                    else:
                        here = _engine is not None and answer.loaded(_engine, planned[0])  # no module to load
                        done = _on_gpu(lambda: answer.gpu_runs(query, self._live(), engine(), mode, repeat, warmup,
                                                               planned=planned), here)
                    back = (time.perf_counter() - handed) * 1e3
                    result = answer.gpu_finish(query, done)
                    result.host_ms["queue"] += back - done.run_ms
            except answer.NotOnGpu as e:  # in the class, but not the fused kernel's: the CPU answers, saying why
                if backend == "gpu":
                    raise
                reason = str(e)
        if result is None:
            result = answer.cpu_answer(query, data, f"GPU not used: {reason}" if backend == "auto" else None)
        if check and result.backend == "gpu":
            expected = answer.cpu_answer(query, data).result
            result.check, result.checked_against, result.expected = expected.rows == result.rows, "the CPU reference", expected
        result.host_ms = {"parse": (parsed - started) * 1e3, **result.host_ms}
        result.wall_ms = (time.perf_counter() - started) * 1e3
        return result

    @deep_expressions
    def prepare(self, text: str, **options) -> "Prepared":
        """A statement with qmark parameters (`... WHERE l_suppkey < ?`), its syntax checked now; each
        run(*parameters, **options) binds them as exact literals and asks sql() with this call's options
        and its own. A repeated run of the same parameters reuses the parsed query and plan of the text."""
        from gquery import sql

        if not isinstance(text, str):
            raise GqueryError(f"SQL must be text, not {type(text).__name__}")
        self._live()
        _chosen(options)  # (an unknown option said now, not at the first run)
        statement = Prepared(self, text, options)
        if statement._template is None:  # not parsed as a template: its syntax checked as written
            sql.check_syntax(text)
        else:
            sql.check_parameters(statement._template)
        return statement

    def query(self, z: int, **options):
        """The mission query at Z, SELECT SUM(l_quantity * l_extendedprice) FROM <this table> WHERE
        l_suppkey < z: its SQL asked of sql() with the same options, answered alike."""
        from gquery.sql import named_sql

        if isinstance(z, bool) or not isinstance(z, int):
            raise UsageError(f"Z must be an integer, got {z!r}")
        return self.sql(named_sql("mission", z, self.name), **options)

    def close(self) -> None:
        """Free what the table holds on the GPUs and in page-locked memory; later queries are refused."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._parsed.clear()
        self._shapes.clear()
        self._plans = None
        self._choices = None
        close(self.data)

    def __enter__(self) -> "TableHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Prepared:
    """table.prepare's statement: run(*parameters, **options) → the Answer of the text with them bound.
    The text is parsed once: a run binds each parameter's literal into the parsed tree (sql.parse_template),
    the Query of the bound text with each integer parameter typed by its value, as DuckDB types a parameter (the
    bound text's own literal beside a TINYINT would be a TINYINT), without parsing it again. Kept by the
    parameters' text, for a repeated run."""

    def __init__(self, table: "TableHandle", text: str, options: dict):
        from gquery import sql

        self.table, self.text, self.options = table, text, options
        self._template = sql.template(text)
        self._parsed: dict[tuple, object] = {}  # (bound text, the parameters' types) → its Query

    @deep_expressions
    def run(self, *parameters, **options):
        from gquery import answer, sql
        from gquery.parameters import bound_spans, parameter_type

        chosen = _chosen({**self.options, **options})
        bound, spans = bound_spans(self.text, parameters)
        table = self.table
        query = None
        if chosen["backend"] != "duckdb":  # (DuckDB alone is asked the text and its parameters: any SQL it answers)
            types = tuple(parameter_type(p) for p in parameters)  # (the int 100 and Decimal('100') bind alike)
            query = self._parsed.get((bound, types))
            if query is None and self._template is not None:
                query = sql.parse_template(self._template, bound, spans, answer.schema_of(table._live()), table.name,
                                           types=types)
                if len(self._parsed) < PARSED_KEPT:
                    self._parsed[(bound, types)] = query
        return table._answer(bound, query, **chosen, statement=(self.text, parameters))

    def __repr__(self) -> str:
        return f"Prepared({self.text!r})"


def _chosen(options: dict) -> dict:
    """sql()'s options with these in place of its defaults; an option it does not take refused in one line."""
    defaults = sql_options()
    unknown = set(options) - set(defaults)
    if unknown:
        raise UsageError(f"unknown option(s) {', '.join(sorted(unknown))}: sql() takes {', '.join(defaults)}")
    return {**defaults, **options}


@functools.cache
def sql_options() -> dict:
    """TableHandle.sql's options and their defaults, from its signature (what a prepared statement's run passes on)."""
    return {name: p.default for name, p in inspect.signature(TableHandle.sql).parameters.items()
            if p.default is not inspect.Parameter.empty}


def _on_gpu(job, here_if_idle: bool = False):
    """A GPU job on GPU 0's thread, waited for: from any thread, with its context current there (on the
    asking thread instead where GPU 0's is idle and `here_if_idle`: DeviceThread.call)."""
    return device_thread(0).call(job, here_if_idle=here_if_idle)


class _EngineMemory:
    """The API engine's memory layer for a table opened before the engine is made: GPU 0's thread
    makes its context and engine while the first query parses and reads its columns (queued there at
    open, so before any query's job: a column read by a job's helper thread never waits for a job
    behind its own), and the columns wait for it only to be page-locked. Without a GPU nothing is."""

    def __init__(self, checked: bool):
        from gquery.gpu.kernels import warm_up_compiler

        warm_up()  # the driver's start and the context, without the GIL, from now
        warm_up_compiler()  # and NVRTC's
        self._engine = device_thread(0, checked=checked).submit(_engine_here)

    def pin_in_place(self, table, arrays) -> None:
        if not self._engine.done():  # read ahead of the engine: page-locked once it is made, on GPU 0's thread
            self._engine.add_done_callback(lambda made: self._pin(made, table, arrays))  # before any job after it
            return
        self._pin(self._engine, table, arrays)

    @staticmethod
    def _pin(made, table, arrays) -> None:
        try:
            engine = made.result()
        except GpuUnavailable:  # opened unchecked on a host without a GPU: the CPU reads it as it is
            return
        engine.memory.pin_in_place(table, arrays)


def open(data, pinned: bool | None = None, one_shot: bool = False, name: str | None = None,  # noqa: A001
         part: bool = False) -> TableHandle:
    """Open a table; with a usable GPU (or pinned=True) what a query reads of a store is page-locked in
    place. Opening a store reads its manifest only: the driver's start and the GPU's context are made
    meanwhile, on threads of their own (pinned=True waits for the driver's answer, raising without a GPU).
    one_shot: the table answers one query and is closed (its scans are chosen counting what is on disk).
    name: what SQL calls the table [default: as its files name it, trips.parquet `trips`, TPC-H's
    `lineitem` (sources.table_name); an Arrow table or arrays `lineitem`]. part: the table is a part of a larger
    one, its answers' partials added to the other parts' (a Dask task's): every group is read back, none cut
    by ORDER BY ... LIMIT (gpu.fusedplan.plan_fused)."""
    from gquery.host import keep_heap
    from gquery.runner import open_table, table_name_of

    keep_heap()  # a query's arrays reuse freed memory, not pages faulted in afresh
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise UsageError(f"name must be a table name, got {name!r}")
    if pinned is not None and not isinstance(pinned, bool):
        raise UsageError(f"pinned must be True, False or None, got {pinned!r}")

    if pinned is None:  # whether a GPU is usable is learnt on its thread, not waited for here
        memory = None if no_pycuda() else _EngineMemory(checked=False)
    else:
        memory = _EngineMemory(checked=True) if pinned else None
    path = data if isinstance(data, (str, os.PathLike, LineitemSource)) else None  # files found when DuckDB is asked
    return TableHandle(open_table(data, memory=memory, every_column=True), memory is not None, source=path,
                       one_shot=one_shot, name=name if name is not None else table_name_of(data), part=part)


def close(table) -> None:
    """Free what the table holds on the GPUs and in page-locked memory."""
    table = table.data if isinstance(table, TableHandle) else table
    with _lock:
        single, multi = _engine, list(_engines.values())
    for e in multi:
        e.memory.release_table(table)
    if single is not None:
        _on_gpu(lambda: single.memory.release_table(table))


__all__ = ["open", "close", "engine", "engines", "TableHandle", "GqueryError"]
