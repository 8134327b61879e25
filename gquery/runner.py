"""One query end to end, as `gquery run` asks it: find or generate the data and its store, parse the
SQL against the store's schema, ask DuckDB the same text, answer on each backend and mode asked for
(gquery.answer), and check each answer against DuckDB or the CPU reference. Tables are opened here
for the API too (open_table)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from gquery.errors import GqueryError, UsageError, deep_expressions
from gquery.options import check_repeat
from gquery.plan import MODES
from gquery.table import Table
from gquery.sources import LineitemSource


def parse_modes(mode: str) -> list[str]:
    if mode == "all":
        return list(MODES)
    if mode not in MODES:
        raise UsageError(f"mode must be one of {', '.join(MODES)} or all, got {mode!r}")
    return [mode]


def open_table(data, memory=None, echo=lambda m: None, build_store: bool = False, window: int | None = None,
               every_column: bool = False):
    """A Table (or a PartedTable, for a parted store) from a store folder, a parquet/.tbl path or
    LineitemSource, a pyarrow.Table, or LineitemColumns. A fresh store beside the data is used
    instead of the data; a stale or corrupt one is rebuilt from the data, saying so; one built from other files is
    left as it is (the data read itself), unless `build_store`. `window`: read a
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
    if not isinstance(data, (str, os.PathLike, LineitemSource)):
        raise UsageError(f"a table is opened from a path (a store, parquet or .tbl files), a pyarrow.Table or "
                         f"lineitem's columns, not {type(data).__name__}")
    path = Path(data.path if isinstance(data, LineitemSource) else data)
    if store.is_store(path):
        return _open_store(path, memory, window)
    source = data if isinstance(data, LineitemSource) else find_lineitem(path)
    beside = store.store_path_for(source)
    if store.is_store(beside) and not store.built_from(beside, source):  # (x.gq of a folder x/, beside x.parquet)
        echo(f"{beside}: built from other files than {source}; " +
             (f"rebuilding it from {source}" if build_store else f"reading {source} itself, the store left as it is"))
    elif store.is_store(beside):
        try:
            return _open_store(beside, memory, window)
        except store.StoreError as e:  # (stale or damaged: a store of these very files, built again from them)
            echo(f"{e}; rebuilding it from {source}")
            build_store = True
    if window is not None:
        raise GqueryError(f"{source}: a window reads a parted store's parts from disk; build one with "
                          "'gquery encode' (a folder of parquet parts makes one part a file)")
    if build_store:
        return _open_store(store.ensure_store(source, echo=echo), memory, None)
    if every_column:
        from gquery.arrow import read_table

        return read_table(source)
    return Table.from_columns(load_lineitem(source))


def source_of(data):
    """The files DuckDB reads for open_table(data): a LineitemSource (a store's, where its files are
    all still there: store.as_source), or None for arrays and Arrow tables."""
    from gquery import store
    from gquery.tpch import find_lineitem

    if isinstance(data, LineitemSource):
        return data
    if not isinstance(data, (str, Path)):
        return None
    path = Path(data)
    return store.as_source(path) if store.is_store(path) else find_lineitem(path)


def table_name_of(data) -> str:
    """What SQL calls the table open_table(data) opens: a store's or a file's name (sources.table_name),
    `lineitem` for arrays or an Arrow table."""
    from gquery import store
    from gquery.sources import DEFAULT_TABLE
    from gquery.tpch import find_lineitem

    if isinstance(data, LineitemSource):
        return store.table_name(data.path) if store.is_store(data.path) else data.name
    if not isinstance(data, (str, Path)):
        return DEFAULT_TABLE
    path = Path(data)
    return store.table_name(path) if store.is_store(path) else find_lineitem(path).name


def _open_store(path: Path, memory, window: int | None):
    from gquery import store

    if window is not None and not store.is_parted(path):
        raise GqueryError(f"{path}: a window reads a parted store's parts from disk; this store is one part")
    return store.open_store(path, memory, window=window)


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
    duckdb_why: str | None = None  # why DuckDB answered (no usable GPU), where it did inside the class
    duckdb_in_place: bool = False  # DuckDB read the files in place (it answered), not a table of its own
    no_files: bool = False  # a check was asked for, and the store's source files are gone: DuckDB has none to read

    @property
    def all_match(self) -> bool:
        return all(a.check is not False for a in self.answers)

    def first(self):
        return self.answers[0] if self.answers else None

    def arrow(self):
        """The answer shown (the first backend's, else DuckDB's) as a pyarrow.Table."""
        a = self.first()
        if a is not None:
            return a.arrow()
        if self.duckdb is None:
            raise GqueryError("no answer to write: DuckDB was not asked and no engine answered")
        return _duckdb_arrow(self.duckdb)

    def to_dict(self) -> dict:
        a = self.first()
        if a is not None:
            out = a.to_dict()
        else:  # DuckDB answered alone (--backend duckdb, or outside the class): the same keys as an engine's answer
            d = self.duckdb
            out = {"sql": self.sql, "columns": d.columns if d else [], "types": d.types if d else [],
                   "rows": [[_plain(v) for v in r] for r in d.rows] if d else [], "backend": "duckdb",
                   "why": f"outside the GPU's class: {self.outside}" if self.outside is not None else self.duckdb_why,
                   "check": None, "checked_against": None, "check_note": None, "gpu_ms": None,
                   "times_ms": d.times_ms if d else [], "call_ms": d.median_ms if d else None, "wall_ms": None,
                   "host_ms": {}, "notes": [], "plan": None, "profile": None}
        out.update({"source": self.source, "rows_in_table": self.rows, "outside_class": self.outside,
                    "gpu": None if self.gpu_reason is None else {"unavailable": self.gpu_reason}, "device": self.device,
                    "built": self.build_notes,
                    "duckdb": None if self.duckdb is None else {
                        "median_ms": self.duckdb_ms, "times_ms": self.duckdb.times_ms, "unavailable": self.duckdb.unavailable,
                        "rows": [[_plain(v) for v in r] for r in self.duckdb.rows]},
                    "runs": [{"backend": x.backend, "mode": getattr(x.profile, "mode", None), "check": x.check,
                              "checked_against": x.checked_against, "call_ms": x.call_ms,
                              "gpu_ms": x.profile.total_ms if x.profile else None,
                              "times_ms": x.times_ms, "rows": [[_plain(v) for v in r] for r in x.rows],
                              "plan": None if x.plan is None else x.plan.to_dict(),
                              "profile": None if x.profile is None else x.profile.summary(),
                              "pcie_bytes_per_row": x.profile.pcie_bytes_per_row if x.profile else None,
                              "speedup_vs_duckdb": (self.duckdb_ms / x.call_ms) if self.duckdb_ms and x.call_ms else None}
                             for x in self.answers]})
        return out


def _duckdb_arrow(d):
    """DuckDB's answer as a pyarrow.Table: its own (run_sql's `arrow`: every type as DuckDB holds it, a nanosecond, a
    FLOAT, an infinite date, a UBIGINT), else its rows, each column typed as its cursor named the type where gquery
    knows the type (its Arrow type as DuckDB gives it), else as Arrow infers it from the values."""
    import pyarrow as pa

    if d.arrow is not None:
        return d.arrow

    from gquery.query import sql_type_of
    from gquery.result import arrow_type

    arrays = []
    for i, name in enumerate(d.types):
        cells = [row[i] for row in d.rows]
        try:
            arrays.append(pa.array(cells, arrow_type(sql_type_of(name))))
        except (ValueError, KeyError, pa.ArrowException):  # a type outside gquery's (or a date past Python's years)
            arrays.append(pa.array(cells))
    return pa.Table.from_arrays(arrays, names=list(d.columns))


def _plain(v):
    from gquery.answer import json_value

    return json_value(v)


def check_run_options(backend: str, modes, repeat: int):
    """A run's options, before any data is found or generated: (the GPU's DeviceInfo or None, why
    not where the backend would use it). --backend gpu without a usable GPU is refused here."""
    if backend not in SQL_BACKENDS:
        raise UsageError(f"backend must be one of {', '.join(SQL_BACKENDS)}, got {backend!r}")
    check_repeat(repeat)
    for mode in modes:
        parse_modes(mode)
    if backend not in ("auto", "gpu"):
        return None, None
    from gquery.gpu.device import probe

    info, reason = probe()
    if info is None and backend == "gpu":
        raise GqueryError(f"no usable GPU: {reason}")
    return info, reason


def store_for(source: LineitemSource, echo=print, where: Path | str | None = None,
              beside: bool = False) -> tuple[Path, list[str]]:
    """The store of a source, and what was built for it: the source itself where it is a store; else
    `where` (the user's --store); else one beside the data built from exactly its files (`gquery
    encode` or `gquery generate` made it); else, built now where asked (`beside`: data in gquery's own
    data folder) or in gquery's cache folder (store.cache_dir), never unasked beside a user's files."""
    from gquery import store

    if store.is_store(source.path):
        return Path(source.path), []
    near = store.store_path_for(source)
    if where is None and store.is_store(near) and store.built_from(near, source):
        return near, []
    cached = where is None and not beside
    path = Path(where) if where is not None else near if beside else store.cache_path_for(source)
    if cached:  # (processes asking of one file at once: one builds, the others find it built)
        from gquery.cachefiles import held

        with held(path.parent):
            return _store_at(source, echo, path, cached)
    return _store_at(source, echo, path, cached)


def _store_at(source: LineitemSource, echo, path: Path, cached: bool) -> tuple[Path, list[str]]:
    """store_for's store at `path`: found there, or built there now."""
    from gquery import store

    ours = store.is_store(path) and store.built_from(path, source)
    # (gquery's cache's own store of files changed since: built again, as a cache is; a store the user made or
    # named is refused when stale, naming the command that rebuilds it)
    stale = ours and cached and not store.unchanged_sources(path)
    if ours and not stale:
        return path, []
    store.refuse_replacing(path, source)
    t0 = time.perf_counter()
    if not ours:  # (a stale one: ensure_store says so, and that it rebuilds it)
        echo(f"{path} was built from other files: rebuilding it from {source}" if store.is_store(path)
             else f"building the store of {source} in {path}" + ("" if not cached else
                                                                " (gquery's cache; --store PATH puts it elsewhere)"))
    built = store.ensure_store(source, echo=echo, path=path)
    note = f"built {built} ({store.summary(built)}) from {source} in {time.perf_counter() - t0:.1f} s"
    echo(note)
    return Path(built), [note]


@deep_expressions
def run_sql(source: LineitemSource, text, *, backend: str = "auto", modes=("pinned",), repeat: int = 5,
            validate: bool = True, echo=print, gpus: int = 1,
            chunk_frames: int | None = None, store_path: Path | str | None = None,
            store_beside: bool = False) -> SqlOutcome:
    """SQL text over the source's table (named as its files name it: sources.table_name), parsed and
    planned against the store's schema; DuckDB asked the same text (its own table of the columns it
    reads, of the same name); each backend/mode's answer checked against it exactly. `text` may be a
    function of the table's name (a named query: `FROM lineitem` over TPC-H, `FROM trips` over trips.parquet).
    `gpus`: the frames divided among this many GPUs, each its share's fused kernel."""
    from gquery import answer, sql, store
    from gquery.reference import DuckDBTable, duckdb_columns

    info, gpu_reason = check_run_options(backend, modes, repeat)
    name = table_name_of(source)
    text = text(name) if callable(text) else text
    sql.check_table(text, name)  # asking another table is the user's typo: said before a store is built
    # without a usable GPU, `auto` asks DuckDB (the fast engine on a CPU) over the files in place: no
    # store is built for it; the NumPy reference answers where DuckDB cannot, and with --backend cpu
    duckdb_first = backend == "duckdb" or (backend == "auto" and gpu_reason is not None and bool(source.files))
    path, build_notes = (None, []) if duckdb_first else store_for(source, echo, store_path, store_beside)
    outcome = SqlOutcome(text, str(source), gpu_reason=gpu_reason, device=info.to_dict() if info is not None else None,
                         build_notes=build_notes)
    table = None
    if path is not None:
        table = store.open_store(path)
        schema = answer.schema_of(table)
    else:
        from gquery.arrow import ColumnReader

        schema = ColumnReader(source).schema
    try:
        outcome.query = sql.parse(text, schema, name)
    except sql.OutOfClass as e:
        if backend not in ("auto", "duckdb") or not source.files:
            raise
        outcome.outside = str(e)
        echo(f"GPU not used: {e}; DuckDB answers")
        validate, backend = True, "duckdb"
    if backend == "auto" and duckdb_first:
        outcome.duckdb_why = f"GPU not used: {gpu_reason}; DuckDB answered (--backend cpu: the NumPy reference)"
        echo(outcome.duckdb_why.replace("answered", "answers"))
    outcome.no_files = validate and not source.files
    if (validate or duckdb_first) and source.files:
        in_place = duckdb_first or outcome.query is None  # DuckDB answers: it reads the files as a user's DuckDB does
        columns = [] if in_place else duckdb_columns(text, outcome.query.columns(), schema.types)
        echo(f"DuckDB: {'reading' if in_place else 'loading ' + ', '.join(columns) + ' from'} {source}")
        ref = DuckDBTable(source, columns, name=name, in_place=in_place)
        outcome.duckdb_in_place = in_place
        outcome.duckdb = ref.run_sql(text, repeat=repeat, arrow=True)  # (its own Arrow table: what --output writes)
        ref.close()
        if outcome.duckdb.times_ms:
            outcome.duckdb_ms = sorted(outcome.duckdb.times_ms)[len(outcome.duckdb.times_ms) // 2]
        if outcome.duckdb.unavailable:
            gpu = backend in ("auto", "gpu") and outcome.gpu_reason is None
            echo(f"DuckDB cannot answer ({outcome.duckdb.unavailable}): " +
                 ("the CPU reference over the store checks the GPU's answer" if gpu else
                  "the CPU reference over the store answers, unchecked (exact by construction)"))
    if backend == "duckdb" or outcome.query is None or (duckdb_first and not outcome.duckdb.unavailable):
        return outcome
    if table is None:  # DuckDB could not answer: the CPU reference does, exactly, over a store of the files
        path, notes = store_for(source, echo, store_path, store_beside)
        outcome.build_notes += notes
        table = store.open_store(path)
    outcome.rows = table.rows
    answer.check_values_over(outcome.query, table)  # (a cast or a date past its type: refused, as DuckDB refuses it)
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
        if gpus > 1:
            from gquery.gpu.multi import MultiEngine

            multi = MultiEngine(gpus)
        try:
            for mode in modes:
                outcome.answers.append(
                    answer.gpu_answer_multi(outcome.query, gpu_table, multi, mode, repeat) if gpus > 1 else
                    answer.gpu_answer(outcome.query, gpu_table, engine, mode, repeat, chunk_frames=chunk_frames))
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

    if outcome.duckdb is not None and not outcome.duckdb.unavailable:
        for a in outcome.answers:
            _checked(a, outcome.duckdb.rows, outcome.query, "DuckDB")
        return
    # DuckDB refuses the text for its own typing (a DECIMAL(18) product's overflow): the answer says so
    refused = f"DuckDB refuses: {outcome.duckdb.unavailable}" if outcome.duckdb is not None else None
    if not any(a.backend == "gpu" for a in outcome.answers):  # the CPU reference alone: nothing to check it against
        gone = "the store's files are gone: DuckDB has none to read" if outcome.no_files else None
        for a in outcome.answers:
            a.checked_against = f"none — {refused or gone}" if refused or gone else None
        return
    reference = answer.cpu_answer(outcome.query, table).result
    for a in outcome.answers:
        _checked(a, reference.rows, outcome.query, "the CPU reference")
        if refused:
            a.check_note = "; ".join(n for n in (a.check_note, refused) if n)


def _checked(a, rows: list[tuple], query, against: str) -> None:
    from gquery.result import compare

    comparison = compare(a.result, rows, query=query)
    a.check, a.checked_against, a.expected = comparison.equal, against, rows
    a.check_note = comparison.says(against)
