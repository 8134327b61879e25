"""A query of the class answered: on the GPU (the fused kernel its plan composes, over frames or by a
column's bucket lists, whichever reads fewer bytes), by the CPU reference (NumPy over the same store),
or by DuckDB; checked, and timed. The Python API, the CLI, the benchmark and the Dask
tasks all answer through here, so they answer alike.

Every engine answers a table part with a Partial (gquery.result: exact sums, counts, min and max a
group); the parts' partials are added in Python and finalized once into the rows DuckDB would give.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from gquery import timing
from gquery.errors import GqueryError
from gquery.gpu.codegen import NotOnGpu, accumulator_index, null_digit  # noqa: F401 (api catches answer.NotOnGpu)
from gquery.gpu.fused import compile_plan, empty_run, loaded, possible_builds, runner_of  # noqa: F401 (api asks loaded)
from gquery.gpu.fusedplan import plan_fused
from gquery.host import host_threads
from gquery.query import Query, check_casts, check_dates
from gquery.result import ColumnarPartial, OtherType, Partial, Result, aggregate_funcs, finalize, pandas_frame, python_values
from gquery.table import COMPILE_AHEAD, READ_AHEAD, PartedTable, Table, exiting

PLANS_KEPT = 1024  # fused plans a table keeps (a plan holds its chunks): queries past it are planned each time
HOST_PHASES = {  # Answer.host_ms: where the public call's wall clock goes, host clock each, in order
    "parse": "the text to a bound Query (a repeated text: looked up)",
    "plan": "the zone maps' pruning and the scan's choice (a repeated query: its plan looked up, its scan weighed again)",
    "queue": "the hand-off to the GPU's thread and back, and there holding and locating the columns before the first copy",
    "gpu": "from the first copy queued to the accumulators on the host (gpu_ms: the same span by CUDA events)",
    "finalize": "the accumulators read into groups, ordered, cut at LIMIT and made rows, on the asking thread",
}


@dataclass
class Answer:
    sql: str
    query: Query | None
    result: Result
    backend: str  # "gpu", "cpu" or "duckdb": who answered
    why: str | None = None  # why not the GPU, where it did not answer
    plan: object | None = None  # the FusedPlan
    profile: object | None = None  # the median GPU run's
    times_ms: list[float] = field(default_factory=list)  # every timed run's, sorted
    check: bool | None = None  # equal to the reference; None when not checked
    checked_against: str | None = None
    check_note: str | None = None  # equal, but said: doubles one unit in the last place apart (result.compare)
    expected: Result | list | None = None  # the reference's rows
    notes: list[str] = field(default_factory=list)
    # what it was finalized from, parts and GPUs add these: every group, but where a hashed run kept only those that
    # ORDER BY ... LIMIT can keep (gpu.codegen.TopCut; a table opened as a part keeps every one)
    partial: Partial | None = field(default=None, repr=False)
    wall_ms: float | None = None  # the public call's host clock, from the text to the rows (api.TableHandle.sql)
    # each timed run as a call would take it, by the host's clock: its plan looked up, the run and its read-out
    # into the answer (a GPU answer's; a CPU answer's times_ms are its host clock already)
    call_times_ms: list[float] = field(default_factory=list)
    host_ms: dict = field(default_factory=dict)  # where that went: parse, plan, queue, gpu, finalize (HOST_PHASES)

    @property
    def rows(self) -> list[tuple]:
        return self.result.rows

    @property
    def call_ms(self) -> float | None:
        """The median timed run as a call waits for it, by the host's clock (GPU events are the breakdown)."""
        times = self.call_times_ms or (self.times_ms if self.backend != "gpu" else [])
        return times[len(times) // 2] if times else None

    @property
    def columns(self) -> list[str]:
        return self.result.names

    def __str__(self) -> str:
        checked = {True: f", equal to {self.checked_against}", False: f", NOT equal to {self.checked_against}",
                   None: ""}[self.check]
        gpu = f", the GPU's own {self.profile.total_ms:.3f} ms" if self.backend == "gpu" and self.profile else ""
        timed = (f" in {self.wall_ms:.2f} ms{gpu}" if self.wall_ms is not None else  # the call's host clock
                 f" in {self.call_ms:.2f} ms (median){gpu}" if self.call_ms is not None else "")
        return f"{self.result}\n({len(self.rows)} row{'s' * (len(self.rows) != 1)}; answered by {self.backend}{timed}" \
               f"{checked}" + (f"; {self.why}" if self.why else "") + ")"

    def explain(self) -> str:
        from gquery.gpu.fusedplan import FusedPlan

        if self.plan is None:
            return f"answered by {self.backend}" + (f": {self.why}" if self.why else "")
        text = self.plan.describe()
        if isinstance(self.plan, FusedPlan):
            from gquery.gpu.fused import fused_build

            text += "\n  kernel (generated; constants are arguments):\n" + "\n".join(
                "    " + line for line in fused_build(self.plan.spec).text().splitlines())
        return text

    def fetchall(self) -> list[tuple]:
        """The rows, as DuckDB's execute(...).fetchall() gives them."""
        return list(self.result.rows)

    def arrow(self):
        """The answer as a pyarrow.Table, typed as DuckDB's .arrow() types the same SQL's answer."""
        return self.result.arrow()

    def df(self):
        """The answer as a pandas DataFrame (pandas must be installed), by way of Arrow, typed as DuckDB's .df() types
        it (result.pandas_frame): an integer column with a NULL as pandas' nullable integers, exact, not doubles."""
        try:
            import pandas
        except ImportError as e:
            raise GqueryError(f"Answer.df() needs pandas ({e}); install it with pip install pandas") from None
        return pandas_frame(pandas, self.arrow(), [t for _, t in self.result.columns])

    def pl(self):
        """The answer as a polars DataFrame (polars must be installed), by way of Arrow, as DuckDB's .pl()."""
        try:
            import polars
        except ImportError as e:
            raise GqueryError(f"Answer.pl() needs polars ({e}); install it with pip install polars") from None
        return polars.from_arrow(self.arrow())

    def to_json(self) -> str:
        """to_dict() as JSON text."""
        import json

        return json.dumps(self.to_dict(), default=str)

    def to_dict(self) -> dict:
        """One JSON object: exact decimals as strings, dates as ISO strings, AVG as a JSON number."""
        return {"sql": self.sql, "columns": self.result.names,
                "types": [str(t) for _, t in self.result.columns], "rows": [[json_value(v) for v in row] for row in self.rows],
                "backend": self.backend, "why": self.why, "check": self.check, "checked_against": self.checked_against,
                "check_note": self.check_note,
                "gpu_ms": self.profile.total_ms if self.profile is not None else None,
                "times_ms": self.times_ms, "call_ms": self.call_ms, "wall_ms": self.wall_ms, "host_ms": self.host_ms,
                "notes": self.notes,
                "plan": None if self.plan is None else self.plan.to_dict(),
                "profile": None if self.profile is None else self.profile.summary()}


def json_value(v):
    """A cell as JSON holds it: a DECIMAL's exact text, a date's ISO text, a double that is no JSON number (NaN,
    +-Infinity: DuckDB's MIN of a double column may be one) as its name, quoted; else the value."""
    import datetime
    from decimal import Decimal

    if isinstance(v, Decimal):  # (positional: 0.0000000610, not str's 6.10E-8)
        return format(v, "f")
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if v != v else "Infinity" if v > 0 else "-Infinity"
    return v


def parts_of(data) -> list[Table]:
    """A table's parts: itself, a parted table's parts held in memory, or (a window) its parts opened
    from disk as they are read (a store's part opens lazily: nothing is read until a query needs it)."""
    if isinstance(data, Table):
        return [data]
    if isinstance(data, PartedTable):
        if data.tables is not None:
            return list(data.tables)
        from gquery.store import open_store

        return [open_store(p, check_source=False) for p in data.paths]
    raise GqueryError(f"cannot query a {type(data).__name__}")


def check_values_over(query: Query, data) -> None:
    """The values DuckDB refuses to compute in this table, refused alike: query.check_casts and query.check_dates
    against the table's values, each part's exact least and greatest (its zone maps; a window's parts opened for
    them alone; a DATE column's finite days, Column.finite_range). Nothing to do for a query without a cast that
    may not hold its argument, or a date plus days."""
    if query.narrowing_casts:
        names = sorted({c for cast in query.narrowing_casts for c in cast.arg.columns()})
        found = [t.ranges(names) for t in parts_of(data)]
        check_casts(query, {n: (min(r[n][0] for r in found), max(r[n][1] for r in found)) for n in names})
    if query.date_shifts:
        ranges = {}
        for n in sorted({c for shift in query.date_shifts for c in shift.columns()}):
            found = [r for t in parts_of(data) if (r := t.columns[n].finite_range()) is not None]
            ranges[n] = (min(r[0] for r in found), max(r[1] for r in found)) if found else None  # (None: no finite day)
        check_dates(query, ranges)


def schema_of(data):
    """The table's schema (a parted table's: its first part's, which every part shares)."""
    return parts_of(data)[0].schema if isinstance(data, PartedTable) and data.tables is None else \
        (data.tables[0] if isinstance(data, PartedTable) else data).schema


# --- the CPU reference -------------------------------------------------------------------------------------------
def cpu_partial(query: Query, tables: list[Table]) -> Partial:
    """The NumPy reference over every part (a few parts at once: each part's decode is threaded)."""
    from gquery import cpu

    names = query.columns() or (next(iter(tables[0].columns)),)  # COUNT(*) alone: any column gives the rows

    def one(t: Table) -> Partial:
        columns = {n: t.columns[n].values() for n in names}
        dictionaries = {n: t.columns[n].dictionary for n in names if t.columns[n].dictionary is not None}
        return cpu.evaluate(query, columns, dictionaries, {n: t.columns[n].validity() for n in names})

    with ThreadPoolExecutor(max(1, min(len(tables), max(2, host_threads() // 4)))) as pool:
        partials = list(pool.map(one, tables))
    total = Partial.empty(query)
    for p in partials:
        total.merge(p)
    return total


def cpu_answer(query: Query, data, why: str | None = None) -> Answer:
    t0 = time.perf_counter()
    partial = cpu_partial(query, parts_of(data))
    ms = (time.perf_counter() - t0) * 1e3
    return Answer(query.sql, query, finalize(query, partial), "cpu", why, times_ms=[ms], partial=partial)


# --- DuckDB -----------------------------------------------------------------------------------------------------
def duckdb_answer(text: str, source, name: str, repeat: int = 1, parameters: list | None = None) -> Answer:
    """DuckDB's answer to the text (with its `parameters`: a prepared statement's, typed as DuckDB types them) over
    the source's files read in place (the table a view called `name`), as an Answer: its rows as its client gives
    them, typed as its cursor types them."""
    from gquery.query import sql_type_of
    from gquery.reference import DuckDBTable

    ref = DuckDBTable(source, [], name=name, in_place=True)
    try:
        d = ref.run_sql(text, repeat=repeat, parameters=parameters, arrow=True)
    finally:
        ref.close()
    if d.unavailable:
        raise GqueryError(f"DuckDB cannot answer: {d.unavailable}")

    def typed(name: str):  # a type the engines do not hold, by DuckDB's name: any answer DuckDB gives is one
        try:
            return sql_type_of(name)
        except ValueError:
            return OtherType(name)
    columns = [(c, typed(t)) for c, t in zip(d.columns, d.types)]
    return Answer(text, None, Result(columns, list(d.rows), arrow_table=d.arrow), "duckdb", times_ms=sorted(d.times_ms))


# --- the GPU ----------------------------------------------------------------------------------------------------------
def fused_partial(query: Query, run) -> Partial:
    """A fused run's accumulators as a Partial: each table's groups decoded to their keys (a VARCHAR
    group column's code to its string in that part's dictionary), the keys' digits found with NumPy,
    held as columns (result.ColumnarPartial); the parts' partials added."""
    parts = [table_partial(query, run.plan.spec, t) for t in run.tables]
    if len(parts) == 1 and (query.group_by or parts[0].size):  # one table's groups, as read
        return parts[0]
    total = None
    if query.group_by:  # a parted table's groups added by key as columns
        total = ColumnarPartial.combine(parts)
    if total is None:
        total = Partial.empty(query)
        for part in parts:
            total.merge(part)
    if not query.group_by and () not in total.groups:
        total.add((), [[0] if a.func == "count" else [None, 0] if a.func in ("min", "max") else [0, 0]
                       for a in query.aggregates])
    return total


def table_partial(query: Query, spec, t) -> ColumnarPartial:
    """One table's groups of a fused run, as columns: the group columns' keys and each aggregate's state."""
    if not query.group_by:  # the whole table's one group: no key
        digits = []
    elif spec.wide_keys:  # a wide key's three words: its NULL flags (bit j: column j), then each column's digit
        words = np.asarray(t.index, dtype=np.int64).reshape(-1, 3)
        digits = [(np.ascontiguousarray(words[:, 1 + j]).view(np.uint64), (words[:, 0] >> j & 1).astype(bool))
                  for j in range(len(spec.group_cards))]
    else:
        rest = np.asarray(t.index, dtype=np.int64)
        digits = []
        for n, card in enumerate(reversed(spec.group_cards)):  # the group's index: its columns' digits, the last fastest
            if n == len(spec.group_cards) - 1:
                digits.append(rest)  # the first column's digit is what is left (an index is below the cards' product)
            else:
                digits.append(rest % card)
                rest = rest // card
        null_digits = [null_digit(spec, j) for j in range(len(digits))]  # each column's digit of NULL, where it has one
        digits = [(digit, None if null is None else digit == null) for digit, null in zip(reversed(digits), null_digits)]
    keys = []
    for j, (c, base, step, (digit, null)) in enumerate(zip(query.group_by, t.plan.group_bases, spec.group_steps, digits)):
        if spec.wide_keys:  # the digit counts up from the base modulo 2^64: the sum wraps to the value's int64
            values = (digit + np.uint64(base % 2**64)).view(np.int64)
        else:
            values = digit + base if base else digit  # int64: a group column's values are its column's
        if step != 1:
            values = values * step
        d = t.plan.table.columns[c.name].dictionary
        nulls = None if null is None or not null.any() else null.tolist()  # the NULL group
        if d is not None:  # a VARCHAR's codes as its strings, at once (the NULL group's digit is no code)
            values = d.decode(values if nulls is None else np.where(null, 0, values))
        if nulls is not None:
            keys.append([None if n else v for v, n in zip(values if d is not None else values.tolist(), nulls)])
        else:
            keys.append(values)
    counts = t.counts
    states = []
    for a, k in zip(query.aggregates, accumulator_index(query, spec)):
        taken = counts if k is None or t.counted is None or t.counted[k] is None else t.counted[k]  # not NULL
        if k is None or a.func == "count":
            states.append([taken])
        else:
            values = t.values[k]
            if a.func in ("min", "max") and taken is not counts and not taken.all():  # no row: NULL, not the identity
                values = [v if n else None for v, n in zip(python_values(values), taken.tolist())]
            if a.arg.type.name == "VARCHAR":  # the least or greatest code, as this part's dictionary's string
                codes = python_values(values)
                found = t.plan.table.columns[a.arg.name].dictionary.decode([0 if v is None else v for v in codes])
                values = [None if v is None else s for v, s in zip(codes, found)]
            states.append([values, taken])
    return ColumnarPartial(aggregate_funcs(query), keys, states, len(counts), t.rows_selected)


@dataclass
class GpuRuns:
    """What the GPU's thread hands back for a query: the plan it chose and its runs (warm-up runs first
    in `warm`, timed runs sorted by GPU time), with the host's milliseconds planning and running them."""

    plan: object
    warm: list
    runs: list
    plan_ms: float
    run_ms: float  # the host's clock around every run: holding and locating columns, queueing, waiting


def gpu_plan(query: Query, data, sm_count: int, mode: str = "pinned", repeat: int = 1, warmup: bool = True,
             chunk_frames: int | None = None, one_shot: bool = False, plans: dict | None = None,
             scan: str = "auto", arch: str | None = None, whole: bool = True, choices: dict | None = None) -> tuple:
    """The query's fused plan for one GPU of `sm_count` SMs, made on the calling thread (host work alone),
    with the host's milliseconds making it. Without warm-up, what a scan must still read from disk is
    part of the answer's time: the planner weighs it (FusedPlan.choose) against the runs it would serve,
    this call's, or on a table kept open (`plans` given, not `one_shot`) also every earlier run of the
    same query. `plans`: a held table's fused plans, and the runs each has answered, by query and mode:
    a repeated text is not planned again. `scan`: auto (the planner's choice), or frames / index where a
    table can be scanned so. `arch` given: a plan made anew has its kernels compiled here too, off the
    GPU's thread (gpu.fused.compile_plan). `whole`: False where the answer's partial is added to other parts'
    (a Dask task's): every group read back (fusedplan.plan_fused). `choices`: a held table's kept choices, by shape:
    a new text whose constants, like an earlier text's of its shape, test every frame or pass every frame whole
    keeps that text's plan's choices (fusedplan._kept_choice)."""
    t0 = time.perf_counter()
    key = (query, mode, chunk_frames)
    kept = plans.get(key) if plans is not None else None  # [the plan, the runs it has answered]
    new = kept is None
    if new:
        kept = [plan_fused(query, parts_of(data), mode, sm_count, chunk_frames, whole, None if one_shot else choices), 0]
        if plans is not None and len(plans) < PLANS_KEPT:
            plans[key] = kept
    plan, earlier = kept[0], 0 if one_shot else kept[1]
    kept[1] += repeat
    plan = plan.choose(None if warmup else earlier + repeat, scan)  # without warm-up, what is on disk counts too
    launched = compile_plan(plan, arch) if new and arch is not None else []
    if new and plans is not None and not one_shot and scan == "auto":
        _read_in_background(plan.worth_reading(), plan.reads())
        if arch is not None:  # what a later choice of a kept plan may launch, compiled before it is asked for
            _compile_in_background([b for b in possible_builds(kept[0]) if b not in launched], arch)
    return plan, (time.perf_counter() - t0) * 1e3


def _compile_in_background(builds: list, arch: str) -> None:
    """Compile kernels a kept plan may launch once its choice changes (the lists read, say), on a thread of
    its own: no query waits for them, and the GPU's thread finds them compiled (kernels.cubin). A compile
    that fails is left for the run that needs it to report."""
    from gquery.gpu import kernels

    def run() -> None:
        for b in builds:
            if exiting():  # the process is exiting: no more compiles
                return
            try:
                kernels.cubin(b, arch)
            except Exception:  # noqa: BLE001 (the run that launches it compiles it again and says why)
                pass

    builds = [b for b in builds if not kernels.compiled(b, arch)]  # a thread only where a compile is left to do
    if builds:  # not a daemon: exit waits for a compile under way (see _read_in_background)
        threading.Thread(target=run, name=COMPILE_AHEAD).start()


_reading: set = set()  # (column, encoding) a thread is reading now
AFTER_WAIT_S = 30  # the longest a read in the background waits for the asking call's own reads
_reading_lock = threading.Lock()


def _read_in_background(wanted: list, after: list = ()) -> None:
    """Read these (column, encoding) pairs, a column's top bytes or bucket lists, on a thread of its own: this
    call rents (scans the packed frames, no call waits for the disk), and the calls after it, finding them
    in memory, buy (FusedPlan.choose weighs a byte already read as nothing). It starts once what this call
    reads (`after`, the same pairs) is in memory, so the two reads do not share the disk and the host's
    threads (measured on the H200: a process's first answer took 357 ms where it took 218 alone). A read
    that fails is left for a later scan to report."""
    with _reading_lock:  # two threads asking a new query at once read a column's encoding once
        wanted = [(c, e) for c, e in wanted if c.cold_bytes(e) and (id(c), e) not in _reading]
        _reading.update((id(c), e) for c, e in wanted)
    if not wanted:
        return

    def read() -> None:
        deadline = time.monotonic() + AFTER_WAIT_S
        while any(c.cold_bytes(e) for c, e in after) and time.monotonic() < deadline and not exiting():
            time.sleep(0.005)
        for c, e in wanted:
            try:
                if not exiting():
                    c.prefetch(e)
            except Exception:  # noqa: BLE001 (the scan that needs them reads them again and says why)
                pass
            finally:
                with _reading_lock:
                    _reading.discard((id(c), e))

    # not a daemon: a daemon thread that wakes after the interpreter began to finalize is ended where it stands
    # (pthread_exit), and one page-locking a column there has the GPU's context pushed: PyCUDA then aborts
    # the process ("context stack was not empty upon module cleanup"), or frees memory twice. Exit waits for
    # the read under way instead, and the thread reads no more once the main thread is done.
    threading.Thread(target=read, name=READ_AHEAD).start()


def settle(timeout_s: float = AFTER_WAIT_S) -> bool:
    """Wait (at most `timeout_s`) for the reads and compiles calls left running in the background; whether
    any was. A benchmark's warm-up ends here, so that its timed calls are those of a settled table (a call
    that finds the lists read chooses them) whatever the host's disk took to read them."""
    deadline, waited = time.monotonic() + timeout_s, False
    for thread in [t for t in threading.enumerate() if t.name in (READ_AHEAD, COMPILE_AHEAD)]:
        waited = True
        thread.join(max(0.0, deadline - time.monotonic()))
    return waited


def gpu_runs(query: Query, data, engine, mode: str = "pinned", repeat: int = 1, warmup: bool = True,
             chunk_frames: int | None = None, one_shot: bool = False, plans: dict | None = None,
             scan: str = "auto", planned: tuple | None = None) -> GpuRuns:
    """The query's plan (gpu_plan, unless `planned` brings it with its milliseconds) and runs on one GPU,
    on the calling thread (the engine's device thread: see api)."""
    plan, plan_ms = planned or gpu_plan(query, data, engine.device.sm_count, mode, repeat, warmup, chunk_frames,
                                        one_shot, plans, scan)
    if plan.empty:  # nothing to read: no GPU job (gpu.fused.empty_run)
        launch = lambda: empty_run(plan)  # noqa: E731
    else:
        runner = runner_of(engine)
        launch = lambda: runner.run(plan)  # noqa: E731

    def run():
        started = time.perf_counter()
        done = launch()
        done.host_ms = (time.perf_counter() - started) * 1e3
        return done

    t1 = time.perf_counter()
    warm = timing.warm_up(run) if warmup else []
    runs = sorted(timing.timed_runs(run, repeat, timing.MIN_TIMED_MS if warmup else 0.0),
                  key=lambda r: r.profile.total_ms)
    return GpuRuns(plan, warm, runs, plan_ms, (time.perf_counter() - t1) * 1e3)


def gpu_finish(query: Query, done: GpuRuns) -> Answer:
    """The runs' accumulators read into the Answer, off the GPU's thread (its next job need not wait):
    every run's partial compared (exact by construction, so equal), the first finalized into rows."""
    t0 = time.perf_counter()
    median = done.runs[len(done.runs) // 2]
    median.profile.setup_ms = (done.warm or done.runs)[0].profile.setup_ms
    partials = []
    for r in [*done.warm, *done.runs]:
        started = time.perf_counter()
        partials.append(fused_partial(query, r))
        r.host_ms += (time.perf_counter() - started) * 1e3
    first = partials[0]
    if any(p.groups != first.groups for p in partials[1:]):
        raise GqueryError("repeated GPU runs gave different answers")  # exact by construction: a bug if seen
    started = time.perf_counter()
    result = finalize(query, first)
    rows_ms = (time.perf_counter() - started) * 1e3
    a = Answer(query.sql, query, result, "gpu", None, done.plan, median.profile,
               [r.profile.total_ms for r in done.runs], partial=first,
               call_times_ms=sorted(done.plan_ms + r.host_ms + rows_ms for r in done.runs))
    if done.plan.empty:
        a.notes.append("the zone maps rule out every frame: nothing read, no GPU job")
    setup = sum(r.profile.setup_ms for r in [*done.warm, *done.runs])
    a.host_ms = {"plan": done.plan_ms, "queue": setup, "gpu": done.run_ms - setup,
                 "finalize": (time.perf_counter() - t0) * 1e3}
    return a


def gpu_answer(query: Query, data, engine, mode: str = "pinned", repeat: int = 1, warmup: bool = True,
               chunk_frames: int | None = None, one_shot: bool = False, plans: dict | None = None,
               scan: str = "auto") -> Answer:
    """The query on one GPU, planned, run and read on the calling thread (the engine's device thread):
    gpu_runs, then gpu_finish."""
    return gpu_finish(query, gpu_runs(query, data, engine, mode, repeat, warmup, chunk_frames, one_shot, plans, scan))


def gpu_answer_multi(query: Query, data, multi, mode: str = "pinned", repeat: int = 1, warmup: bool = True,
                     scan: str = "auto", plans: dict | None = None) -> Answer:
    """The query on every GPU of a many-GPU engine (gpu/multi.py): each GPU a share of nearly equal
    frames (whole parts where they fall inside a share, frame views of a part cut by a boundary), its
    share's fused plan run on its own thread, all at once; the exact partials added here. Timed as one:
    from handing the shares out to the last partial back, the median of `repeat` rounds. `plans`: a held
    table's plans (gpu_plan's), where each share's is kept by query, mode and GPU count: a repeated text is not
    planned again (SF 100's Q6 planned its two shares in 3 ms of a 28 ms call)."""
    from gquery.gpu.fusedplan import plan_fused
    from gquery.gpu.fused import runner_of
    from gquery.gpu.multi import _frame_shares
    from gquery.profile import Profile

    t_plan = time.perf_counter()
    held = isinstance(data, Table) or data.tables is not None
    shares = multi.shares(data) if held else _frame_shares(parts_of(data), multi.gpus)  # held: kept in its cache
    key = ("shares", query, mode, multi.gpus)
    made = plans.get(key) if plans is not None and held else None
    if made is None:
        made = [multi.workers[s.device].submit(lambda s=s: plan_fused(query, s.tables, mode, multi.device.sm_count)).result()
                for s in shares]
        if plans is not None and held and len(plans) < PLANS_KEPT:
            plans[key] = made
    chosen = [p.choose(scan=scan) for p in made]
    plan_ms = (time.perf_counter() - t_plan) * 1e3

    def round_() -> tuple[float, list]:
        t0 = time.perf_counter()
        jobs = [multi.workers[s.device].submit(lambda s=s, p=p: runner_of(multi.workers[s.device].engine).run(p))
                for s, p in zip(shares, chosen)]
        runs = [j.result() for j in jobs]
        return (time.perf_counter() - t0) * 1e3, runs

    warm = timing.warm_up(round_) if warmup else []
    rounds = sorted(timing.timed_runs(round_, repeat, timing.MIN_TIMED_MS if warmup else 0.0), key=lambda r: r[0])
    wall, runs = rounds[len(rounds) // 2]
    t_finish = time.perf_counter()
    partial = Partial.empty(query)
    for r in runs:
        partial.merge(fused_partial(query, r))
    for _, other in [*warm, *rounds]:
        again = Partial.empty(query)
        for r in other:
            again.merge(fused_partial(query, r))
        if again.groups != partial.groups:
            raise GqueryError("repeated GPU runs gave different answers")
    profiles = [r.profile for r in runs]
    profile = Profile(mode, sum(p.rows for p in profiles), sum(p.column_bytes for p in profiles),
                      sum(p.h2d_bytes for p in profiles), wall, [], sum(p.setup_ms for p in profiles), None,
                      encoding="fused", zero_copy_bytes=sum(p.zero_copy_bytes for p in profiles),
                      counters={"gpus": len(runs)}, host_path=profiles[0].host_path,
                      per_gpu=[{"gpu": s.device, "tables": len(s.tables), "rows": s.rows, "gpu_ms": p.total_ms,
                                "device_memory_peak_bytes": 0} for s, p in zip(shares, profiles)])
    a = Answer(query.sql, query, finalize(query, partial), "gpu", None, chosen[0], profile,
               [w for w, _ in rounds], notes=[f"{len(shares)} GPUs, each a share of the frames"], partial=partial,
               call_times_ms=[w for w, _ in rounds])
    a.host_ms = {"plan": plan_ms, "gpu": sum(w for w, _ in [*warm, *rounds]),  # the rounds: shares out, partials back
                 "finalize": (time.perf_counter() - t_finish) * 1e3}
    return a
