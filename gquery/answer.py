"""A query of the class answered: on the GPU (the fused kernel its plan composes, or the mission's
key scan where its slices or bucket lists read fewer bytes), by the CPU reference (NumPy over the
same store), or by DuckDB; checked, and timed. The Python API, the CLI, the benchmark and the Dask
tasks all answer through here, so they answer alike.

Every engine answers a table part with a Partial (gquery.result: exact sums, counts, min and max a
group); the parts' partials are added in Python and finalized once into the rows DuckDB would give.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from gquery import timing
from gquery.encodings import packed_bytes
from gquery.errors import GqueryError
from gquery.host import host_threads
from gquery.query import Aggregate, Arith, Column, Compare, Literal, Query
from gquery.result import Partial, Result, finalize
from gquery.table import KEY, PRICE, QUANTITY, PartedTable, Table

GPU_BACKENDS = ("gpu", "auto")
# A byte still on disk costs about ten over PCIe: read from the page cache, checksummed and page-locked at
# about 5 GB/s against 55 GB/s copied (H100 host, scripts/first_answer_profile.py). Weighed only for runs
# without warm-up, where reading it is part of the answer's time.
COLD_READ_WEIGHT = 10
PLANS_KEPT = 1024  # fused plans a table keeps (a plan holds its chunks): queries past it are planned each time


@dataclass
class Answer:
    sql: str
    query: Query | None
    result: Result
    backend: str  # "gpu", "cpu" or "duckdb": who answered
    why: str | None = None  # why not the GPU, where it did not answer
    plan: object | None = None  # the FusedPlan, or the mission scan's QueryPlan
    profile: object | None = None  # the median GPU run's
    times_ms: list[float] = field(default_factory=list)  # every timed run's, sorted
    check: bool | None = None  # equal to the reference; None when not checked
    checked_against: str | None = None
    check_note: str | None = None  # equal, but said: doubles one unit in the last place apart (result.compare)
    expected: Result | list | None = None  # the reference's rows
    notes: list[str] = field(default_factory=list)
    partial: Partial | None = field(default=None, repr=False)  # what it was finalized from: parts and GPUs add these

    @property
    def rows(self) -> list[tuple]:
        return self.result.rows

    @property
    def columns(self) -> list[str]:
        return self.result.names

    def __str__(self) -> str:
        checked = {True: f", equal to {self.checked_against}", False: f", NOT equal to {self.checked_against}",
                   None: ""}[self.check]
        timed = f" in {self.times_ms[len(self.times_ms) // 2]:.2f} ms (median)" if self.times_ms else ""
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
        """The answer as a pandas DataFrame (pandas must be installed), by way of Arrow, as DuckDB's .df()."""
        try:
            import pandas  # noqa: F401 (pyarrow's to_pandas needs it)
        except ImportError as e:
            raise GqueryError(f"Answer.df() needs pandas ({e}); install it with pip install pandas") from None
        return self.arrow().to_pandas()

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
                "times_ms": self.times_ms, "notes": self.notes,
                "plan": None if self.plan is None else self.plan.to_dict(),
                "profile": None if self.profile is None else self.profile.summary()}


def json_value(v):
    import datetime
    from decimal import Decimal

    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
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
        return cpu.evaluate(query, columns, dictionaries)

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
def duckdb_answer(text: str, source, name: str, repeat: int = 1) -> Answer:
    """DuckDB's answer to the text over the source's files read in place (the table a view called
    `name`), as an Answer: its rows as its client gives them, typed as its cursor types them."""
    from gquery.query import sql_type_of
    from gquery.reference import DuckDBTable

    ref = DuckDBTable(source, [], name=name, in_place=True)
    try:
        d = ref.run_sql(text, repeat=repeat)
    finally:
        ref.close()
    if d.unavailable:
        raise GqueryError(f"DuckDB cannot answer: {d.unavailable}")
    try:
        columns = [(c, sql_type_of(t)) for c, t in zip(d.columns, d.types)]
    except ValueError as e:
        raise GqueryError(f"DuckDB answered a column gquery's answers do not hold ({e}): ask DuckDB itself") from None
    return Answer(text, None, Result(columns, list(d.rows)), "duckdb", times_ms=sorted(d.times_ms))


# --- the GPU ----------------------------------------------------------------------------------------------------------
def fused_partial(query: Query, run) -> Partial:
    """A fused run's accumulators as a Partial: each table's groups decoded to their keys (a VARCHAR
    group column's code to its string in that part's dictionary)."""
    from gquery.gpu.codegen import accumulator_index

    spec = run.plan.spec
    index = accumulator_index(query, spec)
    total = Partial.empty(query)
    for t in run.tables:
        table = t.plan.table
        for g, (rows, values) in t.groups.items():
            key, rest = [], g
            digits = []
            for card in reversed(spec.group_cards):
                digits.append(rest % card)
                rest //= card
            for c, base, step, digit in zip(query.group_by, t.plan.group_bases, spec.group_steps, reversed(digits)):
                v = (base + digit) * step
                d = table.columns[c.name].dictionary
                key.append(d[v] if d is not None else v)
            states = [[rows] if k is None else [values[k], rows] for a, k in zip(query.aggregates, index)]
            total.add(tuple(key), states)
            total.rows_selected += rows
    if not query.group_by and () not in total.groups:
        total.add((), [[0] if a.func == "count" else [None, 0] if a.func in ("min", "max") else [0, 0]
                       for a in query.aggregates])
    return total


def mission_z(query: Query) -> int | None:
    """Z where the query is the mission's own (SUM(l_quantity * l_extendedprice) WHERE l_suppkey < Z, as
    <, <=, or either side): the shape the key's slices and bucket lists answer; else None."""
    if query.group_by or len(query.outputs) != 1 or query.order_by or query.limit is not None:
        return None
    a = query.outputs[0].expr
    if not (isinstance(a, Aggregate) and a.func == "sum" and isinstance(a.arg, Arith) and a.arg.op == "*"):
        return None
    factors = {getattr(a.arg.left, "name", None), getattr(a.arg.right, "name", None)}
    if factors != {QUANTITY, PRICE} or not all(isinstance(x, Column) and x.type.is_decimal and x.type.scale == 2
                                                for x in (a.arg.left, a.arg.right)):
        return None
    w = query.where
    if not isinstance(w, Compare):
        return None
    left, op, right = w.left, w.op, w.right
    if isinstance(left, Literal):
        left, right, op = right, left, {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
    if not (isinstance(left, Column) and left.name == KEY and isinstance(right, Literal) and right.type.is_integer
            and op in ("<", "<=")):
        return None
    return int(right.value) + (op == "<=")


def gpu_answer(query: Query, data, engine, mode: str = "pinned", repeat: int = 1, warmup: bool = True,
               chunk_frames: int | None = None, scan: str = "auto", multi=None, one_shot: bool = False,
               plans: dict | None = None) -> Answer:
    """The query on one GPU, on the calling thread (the engine's device thread: see api). `scan`:
    auto (the planner's choice between the fused kernel and the mission's key scan), fused, or mission.
    `multi`: a many-table engine (gpu/multi.py) that runs the mission's key scan over a parted table.
    Without warm-up, what a scan must still read from disk is part of the answer's time, and the
    planner weighs it (COLD_READ_WEIGHT) against the runs it would serve: this call's, or on a table
    kept open (`plans` given, not `one_shot`) also every earlier run of the same query, as a renter
    buys once the rent paid would have bought it: the fused kernel over what is read already until a
    key's slices, read once, have paid for themselves. (Weighing this call alone chose the fused
    kernel for ever: its bytes were read by then, the slices never.) `plans`: a held table's fused
    plans, and the runs each has answered, by query and mode: a repeated text is not planned again."""
    from gquery.gpu.fusedplan import plan_fused

    tables = parts_of(data)
    key = (query, mode, chunk_frames)
    kept = plans.get(key) if plans is not None else None  # [the plan, the runs it has answered]
    if kept is None:
        kept = [plan_fused(query, tables, mode, engine.device.sm_count, chunk_frames), 0]
        if plans is not None and len(plans) < PLANS_KEPT:
            plans[key] = kept
    plan, earlier = kept[0], 0 if one_shot else kept[1]
    kept[1] += repeat
    notes = []
    z = mission_z(query)
    scanner = engine if isinstance(data, Table) else multi
    if z is not None and scan != "fused" and scanner is not None and all(t.columns[KEY].has("sliced") for t in tables):
        runs = None if warmup else earlier + repeat  # without warm-up, what is on disk counts, over these runs
        pick, specialist = _mission_bytes(tables, mode, sum(t.selected for t in plan.tables), runs)
        fused_bytes = sum(t.stream_bytes + t.zero_copy_bytes for t in plan.tables)
        if runs is not None:
            cold = sum(t.table.columns[c].cold_bytes("packed") for t in plan.tables if t.chunks for c in plan.spec.columns)
            fused_bytes = fused_bytes * runs + COLD_READ_WEIGHT * cold
        per = (f" for {runs} run{'s' * (runs > 1)}, a byte still on disk weighed as {COLD_READ_WEIGHT} read over the "
               f"link" if runs is not None else "")
        if scan == "mission" or specialist < fused_bytes:
            notes.append(f"the mission's key scan ({pick} key): about {specialist / 1e6:,.1f} MB to read against "
                         f"{fused_bytes / 1e6:,.1f} MB for the fused kernel{per}")
            return _mission_answer(query, data, scanner, mode, repeat, warmup, z, pick, notes)
        notes.append(f"the fused kernel: about {fused_bytes / 1e6:,.1f} MB to read against {specialist / 1e6:,.1f} MB "
                     f"for the mission's key scan ({pick} key){per}")
    from gquery.gpu.fused import runner_of

    runner = runner_of(engine)
    run = lambda: runner.run(plan)  # noqa: E731
    warm = timing.warm_up(run) if warmup else []
    runs = sorted(timing.timed_runs(run, repeat, timing.MIN_TIMED_MS if warmup else 0.0),
                  key=lambda r: r.profile.total_ms)
    median = runs[len(runs) // 2]
    median.profile.setup_ms = (warm or runs)[0].profile.setup_ms
    partials = [fused_partial(query, r) for r in [*warm, *runs]]
    first = partials[0]
    if any(p.groups != first.groups for p in partials[1:]):
        raise GqueryError("repeated GPU runs gave different answers")  # exact by construction: a bug if seen
    plan = dataclasses.replace(plan, reasons=[*plan.reasons, *notes])  # a kept plan keeps its own reasons
    return Answer(query.sql, query, finalize(query, first), "gpu", None, plan, median.profile,
                  [r.profile.total_ms for r in runs], notes=notes, partial=first)


def _mission_bytes(tables: list[Table], mode: str, selected: float, runs: int | None = None) -> tuple[str, int]:
    """(the key scan's better key, about the bytes it reads), estimated from the rows the zone maps say
    are selected: the key's slices and lists are not read from disk to decide whether to read them.
    Sliced: a top byte a row, a tied bucket's low bits in place (1/256 of the rows), the selected rows'
    factors in place or in bulk; indexed: the selected rows' ids and the tied bucket's low bits in
    order, and their factors gathered by id. `runs`: the bytes of that many runs, and those the key
    and the factors still have to read from disk, weighed by COLD_READ_WEIGHT."""
    from gquery.plan import FACTOR_READS_PER_ROW, LIST_MODES, ZERO_COPY_READ_BYTES, ZERO_COPY_SECTOR

    rows = sum(t.rows for t in tables)
    factors = sum(packed_bytes(t.columns[c].zone_buffers()[0]) for t in tables for c in (QUANTITY, PRICE))
    gathered = selected * FACTOR_READS_PER_ROW * ZERO_COPY_READ_BYTES
    cost = {"sliced": rows + rows / 256 * ZERO_COPY_READ_BYTES + min(gathered, factors)}
    if mode in LIST_MODES:
        cost["indexed"] = selected * (4 + ZERO_COPY_SECTOR) + rows / 256 * 2 + gathered
    if runs is not None:
        factors_cold = sum(t.columns[c].cold_bytes("packed") for t in tables for c in (QUANTITY, PRICE))
        cost = {k: v * runs + COLD_READ_WEIGHT * (factors_cold + sum(t.columns[KEY].cold_bytes(k) for t in tables))
                for k, v in cost.items()}
    pick = min(cost, key=cost.get)
    return pick, int(cost[pick])


def _mission_answer(query, data, engine, mode, repeat, warmup, z, encoding, notes) -> Answer:
    from gquery.mission import MissionQuery, measure, scaled_int

    run = measure(engine, data, MissionQuery(z), mode, encoding, repeat, None, False, warmup,
                  min_ms=None if warmup else 0.0)
    partial = Partial.empty(query)
    selected = int(run.result.profile.counters.get("selected_rows", 0))
    partial.add((), [[scaled_int(run.value) if selected else 0, selected]])
    partial.rows_selected = selected
    plan = run.result.plan
    return Answer(query.sql, query, finalize(query, partial), "gpu", None, plan, run.result.profile,
                  list(run.totals_ms), notes=notes, partial=partial)


def gpu_answer_multi(query: Query, data, multi, mode: str = "pinned", repeat: int = 1, warmup: bool = True) -> Answer:
    """The query on every GPU of a many-GPU engine (gpu/multi.py): each GPU a share of nearly equal
    frames (whole parts where they fall inside a share, frame views of a part cut by a boundary), its
    share's fused plan run on its own thread, all at once; the exact partials added here. Timed as one:
    from handing the shares out to the last partial back, the median of `repeat` rounds."""
    from gquery.gpu.fusedplan import plan_fused
    from gquery.gpu.fused import runner_of
    from gquery.gpu.multi import _frame_shares
    from gquery.profile import Profile

    held = isinstance(data, Table) or data.tables is not None
    shares = multi.shares(data) if held else _frame_shares(parts_of(data), multi.gpus)  # held: kept in its cache
    plans = [multi.workers[s.device].submit(lambda s=s: plan_fused(query, s.tables, mode, multi.device.sm_count)).result()
             for s in shares]

    def round_() -> tuple[float, list]:
        t0 = time.perf_counter()
        jobs = [multi.workers[s.device].submit(lambda s=s, p=p: runner_of(multi.workers[s.device].engine).run(p))
                for s, p in zip(shares, plans)]
        runs = [j.result() for j in jobs]
        return (time.perf_counter() - t0) * 1e3, runs

    warm = timing.warm_up(round_) if warmup else []
    rounds = sorted(timing.timed_runs(round_, repeat, timing.MIN_TIMED_MS if warmup else 0.0), key=lambda r: r[0])
    wall, runs = rounds[len(rounds) // 2]
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
    return Answer(query.sql, query, finalize(query, partial), "gpu", None, plans[0], profile,
                  [w for w, _ in rounds], notes=[f"{len(shares)} GPUs, each a share of the frames"], partial=partial)
