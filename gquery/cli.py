"""gquery's commands: generate · run · bandwidth · ladder · bench.

Errors a user can fix print one line, 'gquery: error: ...', and exit 1 (2 for bad arguments);
progress and notes go to stderr so that --json leaves stdout to one JSON object.
"""

from __future__ import annotations

import io
import json
import signal
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from gquery.errors import GqueryError, Stopped, UsageError

# Plain click help: rich markup would eat "[...]" in help texts and show flags as "<bool>".
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="A columnar GPU query engine for selection+aggregate SQL over parquet or .tbl tables (TPC-H's "
                       "Q6 and Q1, the mission's SUM(l_quantity*l_extendedprice) WHERE l_suppkey < Z, your own): one "
                       "planner scans each table by its frames (a column by its top byte where that reads less) or a "
                       "column's bucket lists into a generated kernel, "
                       "and each answer is checked against DuckDB.")
out = Console(highlight=False, width=None if sys.stdout is not None and sys.stdout.isatty() else 200)  # pipes get whole tables
err = Console(stderr=True, highlight=False, soft_wrap=True)

DATA_DIR = typer.Option(None, "--data-dir", help="Folder of generated datasets (default: $GQUERY_DATA_DIR, else ./dbgen_data).")
DATA = typer.Option(None, "--data", help="Read lineitem from this parquet/.tbl file or folder, or an encoded store (lineitem.gq), instead of a generated SF.")
JSON = typer.Option(False, "--json", help="Print one JSON object instead of tables.")


QUIET = {"on": False}  # --quiet: progress and notes unsaid; errors and the answer still printed


def note(message: str) -> None:
    if not QUIET["on"]:
        err.print(message, style="dim", markup=False)


def _one_dataset(sf: Optional[float], data: Optional[Path]) -> None:
    """--sf and --data name two datasets: one was left out of the run, silently."""
    if sf is not None and data is not None:
        raise UsageError("give --sf (a generated dataset) or --data PATH, not both")


def _source(sf: Optional[float], data: Optional[Path], data_dir: Optional[Path]):
    from gquery import tpch

    if data is not None:
        from gquery import store

        _one_dataset(sf, data)
        return store.as_source(data) if store.is_store(data) else tpch.find_lineitem(data)
    if sf is None:
        raise UsageError("give --sf (a generated dataset) or --data PATH")
    return tpch.generate(sf, data_dir, echo=note)


def _fmt(value) -> str:
    return "NULL" if value is None else str(value)


def _ms(v) -> str:
    return "" if v is None else f"{v:,.3f}"


@app.command()
def generate(sf: float = typer.Option(..., "--sf", help="Scale factor, 0.01 to 1000."),
             fmt: str = typer.Option("parquet", "--format", help="parquet, or tbl (dbgen's pipe format)."),
             parts: Optional[int] = typer.Option(None, "--parts", help="Generate and encode in this many parts, one at a time [default: one part per SF 10 above SF 10]."),
             keep_parquet: bool = typer.Option(False, "--keep-parquet", help="Keep each part's parquet in lineitem/ (by default it is deleted once encoded)."),
             check: bool = typer.Option(False, "--check", help="Read a store generated part by part whole, checking every buffer against its checksums, and generate its damaged parts again."),
             data_dir: Optional[Path] = DATA_DIR):
    """Generate TPC-H lineitem with tpchgen-cli and encode its store (both reused when complete).
    Above SF 10, or with --parts, part by part: a rerun resumes where a stopped one ended."""
    from gquery import store, tpch

    source = tpch.generate(sf, data_dir, fmt=fmt, parts=parts, keep_parquet=keep_parquet, echo=note, check=check)
    path = source.path if store.is_store(source.path) else store.ensure_store(source, echo=note)
    n = len(source.files)
    kept = f"{n} {source.format} file{'s' * (n > 1)} in {source.files[0].parent}" if n else f"no {source.format} kept"
    out.print(f"store {path} ({store.summary(path)}); {kept}")


@app.command()
def encode(data: Path = typer.Option(..., "--data", help="A parquet/.tbl file or folder to encode."),
           to: Optional[Path] = typer.Option(None, "--out", help="The store folder [default: beside the data, named for it: lineitem.gq for lineitem.parquet]."),
           force: bool = typer.Option(False, "--force", help="Rebuild even when a whole, fresh store is there."),
           sort_by: Optional[str] = typer.Option(None, "--sort-by", help="Cluster the rows by this column (each part by itself): zone maps then skip the frames a range on it rules out."),
           columns: Optional[str] = typer.Option(None, "--columns", help="Store only these columns (comma-separated) [default: every column the engines can hold]."),
           index: Optional[str] = typer.Option(None, "--index", help="The column that also keeps its top bytes and bucket lists: the planner may read it by its top byte in the frames, or scan a narrow range of it by its lists; or none [default: l_suppkey where the data has it].")):
    """Build the encoded store (every column packed per frame with zone maps; one column's bucket lists) from parquet or .tbl, verified before it appears."""
    from gquery import store
    from gquery.tpch import find_lineitem

    if store.is_store(data):  # (find_lineitem said it held no table's files "nor a gquery store")
        raise UsageError(f"{data} is a gquery store already: encode reads parquet or .tbl files into one "
                         "(gquery encode --data <parquet or .tbl> --force builds it again)")
    source = find_lineitem(data)
    names = None if columns is None else [c.strip() for c in columns.split(",") if c.strip()]
    if names == []:
        raise UsageError("--columns names no column: give them comma-separated, or leave the option out for every column")
    key = store.KEY if index is None else None if index.strip().lower() == "none" else index.strip()
    if names is not None or sort_by is not None or index is not None:  # names in any ASCII case, as SQL binds them
        from gquery.arrow import source_schema

        schema = source_schema(source)
        names = None if names is None else [schema.named(n) for n in names]
        sort_by = None if sort_by is None else schema.named(sort_by)
        key = key if key in (None, store.KEY) else schema.named(key)
    if to is None and not force and names is None and index is None:
        path = store.ensure_store(source, echo=note, sort_by=sort_by)
    else:
        path = to or store.store_path_for(source)
        if not force:
            store.refuse_replacing(path, source)
        if len(source.files) > 1:
            store.write_parted(source, path, echo=note, sort_by=sort_by, columns=names, key=key)
        else:
            store.write_store(source, path, source, echo=note, sort_by=sort_by, columns=names, key=key)
    out.print(f"{path} ({store.summary(path)})")


@app.command()
def run(sf: Optional[float] = typer.Option(None, "--sf", help="Scale factor; generated if absent."),
        z: Optional[int] = typer.Option(None, "--z", help="The mission query's bound, l_suppkey < Z (any integer): alone, the mission query, as --query mission does."),
        sql_text: Optional[str] = typer.Option(None, "--sql", help="A selection+aggregate over lineitem, in SQL; DuckDB is asked the same text."),
        named: Optional[str] = typer.Option(None, "--query", help="A named query: mission (with --z), q1 or q6 (TPC-H's own)."),
        backend: str = typer.Option("auto", "--backend", help="auto (GPU when usable; outside the class, DuckDB), gpu, cpu (the NumPy reference over the store) or duckdb; with --scheduler, cpu or gpu."),
        mode: Optional[str] = typer.Option(None, "--mode", help="How the GPU reads host memory: resident, pinned, registered, pageable or all [default: all with --backend gpu, else pinned; with --scheduler, pinned]."),
        repeat: int = typer.Option(5, "--repeat", help="Timed runs of each engine, at least (GPU runs go on for 0.1 s); medians are reported."),
        validate: bool = typer.Option(True, "--validate/--no-validate", help="Check the answer against DuckDB (or the CPU reference over the store, where DuckDB cannot answer)."),
        explain: bool = typer.Option(False, "--explain", help="Print each answer's plan (the planner's choices and why) and its generated kernel."),
        chunk_rows: Optional[int] = typer.Option(None, "--chunk-rows", help="Rows per chunk the fused plan copies (pinned, pageable) [default: the planner's]."),
        gpus: str = typer.Option("1", "--gpus", help="GPUs to divide the rows among: a number, or all."),
        data: Optional[Path] = DATA, data_dir: Optional[Path] = DATA_DIR, as_json: bool = JSON,
        sql_file: Optional[Path] = typer.Option(None, "--file", help="Read the SQL from this file ('-': standard input); --sql - reads standard input too."),
        output: Optional[str] = typer.Option(None, "--output", help="table (the default: the answer, the check and the time), json (one object, as --json), csv or parquet (the answer's rows alone, typed as DuckDB types them)."),
        out_file: Optional[Path] = typer.Option(None, "--out", help="Write the output to this file, whole or not at all, instead of standard output (parquet needs it)."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="Print no progress or notes on standard error: the answer, and errors, only."),
        store_at: Optional[Path] = typer.Option(None, "--store", help="The store (a .gq folder) to read, or to build there from --data [default: one beside the data made by gquery encode, else gquery's cache folder: $GQUERY_STORE_DIR or ~/.cache/gquery/stores]."),
        scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Run on Dask, a task a store part: 'local' (a cluster on this host) or a scheduler's address."),
        workers: Optional[int] = typer.Option(None, "--workers", help="With --scheduler local: worker processes (gpu: one a GPU, at most the GPUs); else wait for this many.")):
    """Answer a query of the class (SQL, a named query, or the mission's --z) on the GPU or the CPU
    reference, checked against DuckDB asked the same text; print the rows, the check and the time."""
    QUIET["on"] = quiet
    text = _sql_text(_read_sql(sql_text, sql_file), named, z)
    if text is None:
        raise UsageError("give --z (the mission query), --sql TEXT, --file FILE or --query mission|q1|q6")
    if data is None and sf is None and not callable(text):
        from gquery.sql import files_in_from

        found = files_in_from(text)  # FROM read_parquet('...'): the data the SQL names, as DuckDB reads it
        if found is not None:
            data, text = Path(found[0]), found[1]
    from gquery.store import is_store

    _one_dataset(sf, data)  # (said before any work)
    if store_at is not None and data is not None and is_store(data):
        raise UsageError(f"--store names the store to build from --data or read: --data {data} is a store already")
    emit = Output.of(output, as_json, out_file, reads=[sql_file, data, store_at])
    if scheduler is None and workers is None:
        from gquery.options import run_gpus

        return _run_sql(text, sf, data, data_dir, backend, mode, repeat, validate, explain, emit,
                        run_gpus(gpus, backend, chunk_rows, echo=note), chunk_rows, store_at)
    flags = [f for f, given in {"--explain": explain, "--chunk-rows": chunk_rows is not None,
                                "--gpus": gpus != "1"}.items() if given]
    if flags:
        raise UsageError(f"{', '.join(flags)}: not with --scheduler (a Dask run reports its parts, not plans or profiles)")
    return _run_dask_sql(text, scheduler, workers, backend, mode, repeat, validate, emit,
                         lambda: _store(sf, data, data_dir, store_at))


def _read_sql(sql_text: Optional[str], sql_file: Optional[Path]) -> Optional[str]:
    """--sql TEXT, --sql - (standard input) or --file FILE (- too): the SQL, or None where none is given."""
    if sql_text is not None and sql_file is not None:
        raise UsageError("give --sql or --file, not both")
    if sql_text == "-" or (sql_file is not None and str(sql_file) == "-"):
        text = sys.stdin.read()
    elif sql_file is not None:
        try:
            text = sql_file.read_text()
        except UnicodeDecodeError:
            raise GqueryError(f"{sql_file}: not a text file of SQL") from None
    else:
        return sql_text
    if not text.strip():
        raise UsageError(f"{'standard input' if sql_text == '-' or str(sql_file) == '-' else sql_file} holds no SQL")
    return text.strip()


def _apart_from_reads(path: Path, reads) -> None:
    """Refuse an --out that is a file the command reads, or lies in a folder it reads or in a store: the answer,
    written whole by a rename, would replace the SQL, the data or a store's file (and exit 0)."""
    from gquery.store import is_store

    target = path.resolve()
    for read in reads:
        if read is None or str(read) == "-":
            continue
        source = Path(read).resolve()
        if target == source or (target.exists() and source.exists() and target.samefile(source)):
            raise UsageError(f"--out {path}: the file {read} this command reads; write the answer elsewhere")
        if source in target.parents:
            raise UsageError(f"--out {path}: inside {read}, which this command reads; write the answer elsewhere")
    store = next((folder for folder in target.parents if is_store(folder)), None)
    if store is not None:
        raise UsageError(f"--out {path}: inside the store {store}; write the answer elsewhere")


class Output:
    """Where and how `gquery run` writes its answer: the tables (progress and notes stay on stderr), one
    JSON object, or the answer's rows as CSV or Parquet; to standard output or to a file written whole
    (a temporary file beside it, renamed once complete)."""

    FORMATS = ("table", "json", "csv", "parquet")

    def __init__(self, form: str, path: Optional[Path]):
        self.form, self.path = form, path

    @classmethod
    def of(cls, output: Optional[str], as_json: bool, path: Optional[Path], reads: tuple = ()) -> "Output":
        """`reads`: the files and folders the command reads (--file, --data, --store), which --out must not replace."""
        if output is not None and output not in cls.FORMATS:
            raise UsageError(f"--output must be one of {', '.join(cls.FORMATS)}, got {output!r}")
        if as_json and output not in (None, "json"):
            raise UsageError(f"--json is --output json: not with --output {output}")
        form = "json" if as_json else output or "table"
        if form == "parquet" and path is None:
            raise UsageError("--output parquet writes a file: give --out FILE")
        if path is not None and path.is_dir():
            raise UsageError(f"--out {path}: a folder, not a file")
        if path is not None and not path.parent.is_dir():  # (said now, not after the query, of a temporary file)
            raise UsageError(f"--out {path}: no such folder {path.parent}")
        if path is not None and (path.is_symlink() or path.exists() and not path.is_file()):  # (written whole, by a
            # rename: it would replace the link, pipe or device itself)
            raise UsageError(f"--out {path}: a link, a pipe or a device, not a file (leave --out out for standard output)")
        if path is None and sys.stdout is None:  # (started with its standard output closed)
            raise UsageError("standard output is closed: give --out FILE for the answer")
        if path is not None:
            _apart_from_reads(path, reads)
        return cls(form, path)

    def write(self, *, obj: dict, rows_arrow, print_table) -> None:
        """obj: the JSON object; rows_arrow(): the answer as a pyarrow.Table; print_table(console)."""
        if self.form == "table" and self.path is None:
            return print_table(out)
        if self.form == "json":
            data = (json.dumps(obj, indent=2, default=str) + "\n").encode()
        elif self.form == "table":
            console = Console(highlight=False, width=200, record=True, file=io.StringIO())
            print_table(console)
            data = console.export_text().encode()
        else:
            import pyarrow as pa

            if self.form == "csv":
                data = csv_bytes(rows_arrow())
            else:
                import pyarrow.parquet

                sink = pa.BufferOutputStream()
                pyarrow.parquet.write_table(rows_arrow(), sink)
                data = sink.getvalue().to_pybytes()
        if self.path is None:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            return
        from gquery.reports import write_whole

        write_whole(self.path, data)
        note(f"wrote {self.path}")


def csv_bytes(table) -> bytes:
    """An answer's Arrow table as DuckDB's COPY ... TO writes CSV: its dates as DuckDB writes them (infinity,
    0769-02-04 (BC), 10000-01-01, which pyarrow's writer wrote as '<value out of range: ...>' or a year -768), a
    DECIMAL at its scale (0.0000000610, not 6.10E-8), a DOUBLE as 1.0, a header of the names, quoted only where needed."""
    import tempfile

    import duckdb

    with tempfile.TemporaryDirectory() as folder, duckdb.connect() as con:
        path = Path(folder) / "answer.csv"  # (written by the relation's own call: no path spelled inside SQL text)
        con.from_arrow(table).write_csv(str(path))
        return path.read_bytes()


def _sql_text(sql_text: Optional[str], named: Optional[str], z: Optional[int]):
    """The SQL a run asks: --sql, or the named query (the mission with --z, or --z alone) as a function
    of the table's name, which only the data tells; None for none."""
    from gquery.sql import NAMED, named_sql

    if sql_text is not None and named is not None:
        raise UsageError("give --sql or --query, not both")
    if named is not None:
        if named not in NAMED:
            raise UsageError(f"--query must be one of {', '.join(NAMED)}, got {named!r}")
        if named != "mission" and z is not None:
            raise UsageError(f"--z sets the mission query's bound; --query {named} has none")
        named_sql(named, z)  # a bad Z, said before any data is read
        return lambda table: named_sql(named, z, table)
    if sql_text is not None and z is not None:
        raise UsageError("--z sets the mission query's bound; with --sql, write it in the SQL")
    if sql_text is None and z is not None:
        return lambda table: named_sql("mission", z, table)
    return sql_text


def _run_sql(text, sf, data, data_dir, backend, mode, repeat, validate, explain, emit: Output, gpus: int,
             chunk_rows: Optional[int], store_at: Optional[Path] = None) -> None:
    from gquery.runner import check_run_options, parse_modes, run_sql

    modes = parse_modes(mode if mode is not None else "all" if backend == "gpu" else "pinned")
    check_run_options(backend, modes, repeat)  # before any data is generated
    source = _source(sf, data, data_dir)
    outcome = run_sql(source, text, backend=backend, modes=modes, repeat=repeat, validate=validate, echo=note,
                      gpus=gpus, chunk_frames=None if chunk_rows is None else -(-chunk_rows // 1024),
                      store_path=store_at, store_beside=data is None)  # a generated SF's store lives beside it
    emit.write(obj=outcome.to_dict(), rows_arrow=outcome.arrow, print_table=lambda console: _print_sql(outcome, explain, console))
    if not outcome.all_match:
        raise GqueryError("an answer differs from " + ", ".join(sorted({a.checked_against for a in outcome.answers
                                                                         if a.check is False})))


def _print_sql(o, explain: bool, out: Console = out) -> None:
    from gquery.result import cell_text

    out.print(o.sql, markup=False)
    out.print(f"data     {o.source}" + (f"  ({o.rows:,} rows)" if o.rows else ""), markup=False)
    for line in o.build_notes:
        out.print(f"store    {line}", markup=False)
    if o.device:
        d = o.device
        out.print(f"device   {d['name']} ({d['arch']}, {d['sm_count']} SMs, {d['total_bytes'] / 2**30:.0f} GiB)")
    if o.outside:
        out.print(f"class    outside the GPU's class ({o.outside}): DuckDB answers", markup=False)
    if o.duckdb is not None:
        if o.duckdb.unavailable:
            out.print(f"DuckDB   cannot answer: {o.duckdb.unavailable}", markup=False)
        else:
            over = "over the files, read in place" if o.duckdb_in_place else "over its own table of the columns read"
            out.print(f"DuckDB   median {o.duckdb_ms:.2f} ms of {len(o.duckdb.times_ms)} {over}")
    shown = o.first()
    columns = shown.columns if shown is not None else (o.duckdb.columns if o.duckdb else [])
    rows = shown.rows if shown is not None else (o.duckdb.rows if o.duckdb else [])
    t = Table(title=f"answer ({shown.backend if shown else 'DuckDB'})", title_justify="left")
    for c in columns:
        t.add_column(c, justify="right")
    for row in rows:
        t.add_row(*(cell_text(v) for v in row))
    out.print(t)
    if o.answers:
        runs = Table(title="runs (medians; ms)", title_justify="left")
        for col in ("backend", "mode", "check", "wall", "GPU", "H2D", "kernel", "PCIe B/row", "vs DuckDB"):
            runs.add_column(col, justify="left" if col in ("backend", "mode", "check") else "right")
        for a in o.answers:
            p = a.profile
            s = p.summary() if p is not None else {}
            check = {True: f"[green]MATCH[/green] {a.checked_against}", False: f"[red]MISMATCH[/red] {a.checked_against}",
                     None: a.checked_against or "not checked"}[a.check]
            wall = a.call_ms
            runs.add_row(a.backend, getattr(p, "mode", ""), check, _ms(wall), _ms(p.total_ms if p is not None else None),
                         _ms(s.get("h2d_ms") or None), _ms(s.get("kernel_ms")),
                         f"{p.pcie_bytes_per_row:,.2f}" if p is not None else "",
                         f"{o.duckdb_ms / wall:.1f}x" if o.duckdb_ms and wall else "")
        out.print(runs)
        for a in o.answers:
            if a.why:
                note(a.why)
            if a.check_note:
                note(a.check_note)
            if explain:
                out.print(a.explain(), markup=False)
                for n in a.notes:
                    out.print(f"  why: {n}", markup=False)


def _store(sf: Optional[float], data: Optional[Path], data_dir: Optional[Path], store_at: Optional[Path] = None) -> Path:
    """The store that --data names, or the data's (runner.store_for: --store, one beside it that gquery
    encode made, a generated SF's beside it, else gquery's cache folder; built when absent)."""
    from gquery import store
    from gquery.runner import store_for

    if data is not None and store.is_store(data):
        return data
    return store_for(_source(sf, data, data_dir), note, store_at, beside=data is None)[0]


def _dask_backend(backend: str, mode: str, workers) -> tuple[str, str]:
    """--backend and --mode as a Dask run takes them: cpu (auto) or gpu, and the GPU's host memory mode."""
    from gquery import distributed as D

    if backend == "duckdb":
        raise UsageError("--backend duckdb runs no Dask workers: with --scheduler give cpu or gpu")
    backend = "cpu" if backend == "auto" else backend
    if backend == "cpu" and mode is not None:
        raise UsageError("--mode chooses how the GPU engine reads host memory: give it with --backend gpu")
    mode = "pinned" if mode in (None, "all") else mode
    D.check(backend, mode, workers)
    return backend, mode


def _run_dask_sql(text, scheduler, workers, backend, mode, repeat, validate, emit: Output, store_path) -> None:
    """`run --scheduler`: the query as Dask tasks, a store part each (gquery.distributed), each worker's
    exact partials added on the client; checked against DuckDB over the store's source files, or the CPU
    reference over the store where they are gone."""
    from gquery import distributed as D
    from gquery import store
    from gquery.options import check_repeat
    from gquery.result import compare

    if scheduler is None:
        raise UsageError("--workers runs on Dask workers: give --scheduler local or an address")
    backend, mode = _dask_backend(backend, mode, workers)
    check_repeat(repeat)
    D.require_dask()  # without dask: one line saying how to install it, before any data is made
    path = store_path()
    if callable(text):  # a named query, over the store's table by its name
        text = text(store.table_name(path))
    r = D.run_distributed(path, text, scheduler, backend, workers, mode, repeat)
    check = None
    if validate:
        if store.unchanged_sources(path):
            from gquery.reference import DuckDBTable, duckdb_columns

            duck = DuckDBTable(store.as_source(path), duckdb_columns(text, r.query.columns(), store.column_names(path)),
                               name=store.table_name(path))  # (the table as the SQL names it, not its store's folder)
            answer = duck.run_sql(text, repeat=1)
            duck.close()
            if answer.unavailable is None:
                check = ("DuckDB", compare(r.result, answer.rows, query=r.query))
            else:
                note(f"DuckDB cannot answer ({answer.unavailable}): checking against the CPU reference over the store")
        else:
            note("the store's source files are gone or changed: checking against the CPU reference over the store")
        if check is None:
            from gquery.answer import cpu_answer

            reference = cpu_answer(r.query, store.open_store(path, check_source=False, window=1))
            check = ("the CPU reference over the store", compare(r.result, reference.rows, query=r.query))

    def print_table(out: Console) -> None:
        from gquery.result import cell_text

        out.print(r.sql, markup=False)
        out.print(f"data     {path}  ({len(r.parts)} part{'s' * (len(r.parts) > 1)}, {r.rows:,} rows)")
        out.print(f"dask     {'a local cluster at ' if r.local else 'the scheduler at '}{r.scheduler}, {r.workers} "
                  f"worker{'s' * (r.workers > 1)}, backend {backend}" + f", mode {mode}" * (backend == "gpu"))
        t = Table(title="answer", title_justify="left")
        for c in r.result.names:
            t.add_column(c, justify="right")
        for row in r.result.rows:
            t.add_row(*(cell_text(v) for v in row))
        out.print(t)
        out.print("check    not validated (--no-validate)" if check is None else
                  f"check    {'[green]MATCH[/green]' if check[1].equal else '[red]MISMATCH[/red]'} against {check[0]}")
        out.print(f"wall     median {r.wall_ms:,.1f} ms of {len(r.times_ms)} (first {r.times_ms[0]:,.1f} ms); "
                  f"{'cluster start' if r.local else 'connect'} {r.connect_ms:,.0f} ms, not in wall")
        parts = Table(title="parts (the median run)", title_justify="left")
        for col in ("part", "rows", "selected", "ms", "worker"):
            parts.add_column(col, justify="left" if col in ("part", "worker") else "right")
        for p in r.parts:
            parts.add_row(Path(p.part).name, f"{p.rows:,}", f"{p.selected_rows:,}", f"{p.ms:,.1f}", p.worker)
        out.print(parts)

    if check is not None and check[1].says(check[0]):
        note(check[1].says(check[0]))
    emit.write(obj=r.to_dict() | {"store": str(path), "backend": backend,
                                  "types": [str(t) for _, t in r.result.columns],
                                  "check": None if check is None else check[1].equal, "checked_against": check and check[0],
                                  "check_note": None if check is None else check[1].says(check[0])},
               rows_arrow=r.result.arrow, print_table=print_table)
    if check is not None and not check[1].equal:
        raise GqueryError(f"the Dask answer differs from {check[0]}'s")


@app.command()
def bandwidth(size_mb: int = typer.Option(256, "--size-mb", help="Bytes per copy, in MiB."),
              repeat: int = typer.Option(10, "--repeat"), as_json: bool = JSON):
    """Measure host↔device copy rates (pinned, pageable) and device-to-device rate."""
    from gquery.gpu.bandwidth import measure
    from gquery.gpu.device import require
    from gquery.gpu.memory import GpuMemory
    from gquery.options import check_positive, check_repeat

    check_positive(size_mb=size_mb)
    check_repeat(repeat)
    info = require()
    limits = measure(GpuMemory(), size_mb << 20, repeat)
    if as_json:
        print(json.dumps({"device": info.to_dict(), "limits": limits}, indent=2))
        return
    t = Table(title=f"{info.name}: copies of {size_mb} MiB, median of {repeat}", title_justify="left")
    t.add_column("copy"), t.add_column("GB/s", justify="right")
    for key, label in (("h2d_pinned_gbps", "host→device, pinned"), ("h2d_pageable_gbps", "host→device, pageable"),
                       ("d2h_pinned_gbps", "device→host, pinned"), ("d2h_pageable_gbps", "device→host, pageable"),
                       ("d2d_gbps", "device→device (read+write)"),
                       ("host_staging_gbps", f"host pageable→pinned, {limits['host_staging_threads']} threads")):
        t.add_row(label, f"{limits[key]:,.1f}")
    out.print(t)


@app.command()
def ladder(sf: float = typer.Option(1.0, "--sf", help="Scale factor (the course used 1)."),
           z: int = typer.Option(30, "--z", help="l_suppkey < Z (the course used 30)."),
           repeat: int = typer.Option(10, "--repeat", help="Timed runs of each step; medians are reported."),
           plot: Optional[Path] = typer.Option(None, "--plot", help="Write the ladder's stacked bars as a PNG."),
           report_dir: Optional[Path] = typer.Option(None, "--report-dir", help="Write ladder-<gpu>.md/.json and PNGs here."),
           as_json: bool = JSON, data: Optional[Path] = DATA, data_dir: Optional[Path] = DATA_DIR):
    """Run the course's optimization ladder and its modern steps; every step checked against DuckDB."""
    from gquery.options import check_repeat, require_gpu
    from gquery.tpch import check_sf

    check_repeat(repeat)  # a bad option says so before a missing GPU does
    if data is None:
        check_sf(sf)
    require_gpu("ladder")  # before the imports below, which need pycuda
    import statistics
    import time


    from gquery import ladder as L
    from gquery import reports, sql as S
    from gquery.answer import cpu_answer, gpu_answer, schema_of
    from gquery.columns import load_lineitem
    from gquery.contract import QUERY_COLUMNS
    from gquery.gpu.bandwidth import measure
    from gquery.gpu.device import require
    from gquery.gpu.executor import Engine
    from gquery.bench.ladder import LadderRunner
    from gquery.plan import MODES
    from gquery.plots import plot_ladder, plot_run
    from gquery.reference import DuckDBTable

    for p in (plot,):
        if p is not None and p.suffix.lower() != ".png":
            raise UsageError(f"--plot writes a PNG: give a path ending in .png, got {p}")
    info = require()
    source = _source(sf, data, data_dir)
    text = S.named_sql("mission", z)
    note(f"DuckDB: loading {source}")
    ref = DuckDBTable(source, QUERY_COLUMNS)
    duck = ref.run_sql(text, repeat=repeat)
    ref.close()
    if duck.unavailable:
        raise GqueryError(f"DuckDB cannot answer the mission's query: {duck.unavailable}")
    value = duck.rows[0][0]
    expected = 0 if value is None else int(value.scaleb(4, context=L.EXACT))  # ten-thousandths, exactly
    columns = load_lineitem(source)
    engine = Engine()
    runner = LadderRunner(engine)
    table = runner.table(columns)
    query = S.parse(text, schema_of(table))
    numpy_times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        cpu_answer(query, table)
        numpy_times.append((time.perf_counter() - t0) * 1e3)
    limits = measure(engine.memory)
    rows = []
    for step in L.STEPS:
        note(f"step {step.name}")
        rows.append(runner.measure(step, columns, z, expected, repeat))
    modes = [gpu_answer(query, table, engine, mode, repeat) for mode in MODES]  # the engine in each mode
    modes_match = all(a.rows == [(value,)] for a in modes)
    runner.release()
    engine.close()
    notes = L.findings(rows, duck.median_ms, statistics.median(numpy_times))
    meta = {"device": info.name, **reports.stamp(), "sf": sf, "z": z, "rows": columns.rows, "repeat": repeat,
            "result": _fmt(value), "duckdb_ms": duck.median_ms, "duckdb_threads": ref.threads,
            "duckdb_version": ref.version, "numpy_ms": statistics.median(numpy_times), "limits": limits,
            "command": "gquery " + " ".join(sys.argv[1:]) if sys.argv[1:] else "gquery ladder"}
    if plot is not None:
        plot_ladder(rows, plot, info.name)
        note(f"wrote {plot}")
    if report_dir is not None:
        name = f"ladder-{reports.slug(info.name)}"
        report_dir.mkdir(parents=True, exist_ok=True)
        plot_ladder(rows, report_dir / f"{name}.png", info.name)
        plot_run([a.profile for a in modes], limits, report_dir / f"{name}-modes.png")
        runs = [{"mode": a.profile.mode, "result": _fmt(a.rows[0][0]), "match": a.rows == [(value,)],
                 "profile": a.profile.to_dict(limits), "totals_ms": a.times_ms} for a in modes]
        data_out = meta | {"steps": [r.to_dict() for r in rows], "modes": runs, "findings": notes}
        j, m = reports.write(report_dir, name, data_out,
                             L.markdown(rows, meta, notes, [f"{name}.png", f"{name}-modes.png"]))
        note(f"wrote {j}, {m}")
    if as_json:
        print(json.dumps(meta | {"steps": [r.to_dict() for r in rows], "findings": notes}, indent=2, default=str))
    else:
        t = Table(title=f"the ladder on {info.name}, SF {sf:g}, Z = {z} (ms, medians of {repeat})", title_justify="left")
        for h in L.HEADERS:
            t.add_column(h, justify="left" if h in ("step", "course step", "check") else "right")
        for row in L.table_rows(rows):
            t.add_row(*row)
        out.print(t)
        out.print(f"CPU: DuckDB {duck.median_ms:.3f} ms ({ref.threads} threads), NumPy "
                  f"{meta['numpy_ms']:.3f} ms; 2012: {L.COURSE_CPU_MS} ms on a Core i5-750")
        for n in notes:
            out.print(f"- {n}")
    if any(r.match is False for r in rows) or not modes_match:
        raise GqueryError("a step's result differs from DuckDB's")


@app.command()
def bench(sf: list[float] = typer.Option([10.0, 100.0], "--sf", help="Scale factors (repeat the option)."),
          repeat: int = typer.Option(10, "--repeat", help="Timed runs of everything; medians are reported."),
          out_dir: Path = typer.Option(Path("reports"), "--out", help="Where the report's .json and .md go."),
          scale: bool = typer.Option(False, "--scale", help="The class at scale instead: Q6, Q1 and the mission at each SF on one GPU, at --gpu-sf on each --gpus count and as Dask tasks on GPU workers; writes scale-queries-<gpu>.json/.md."),
          gpus: list[int] = typer.Option([1, 2, 4], "--gpus", help="--scale: GPU counts (repeat; those the host has)."),
          gpu_sf: Optional[float] = typer.Option(None, "--gpu-sf", help="--scale: the SF run on several GPUs [default: 100 if given, else the largest]."),
          queries: bool = typer.Option(True, "--queries", hidden=True, help="The default: SQL of the class against DuckDB."),
          all_columns: bool = typer.Option(False, "--all-columns", help="Store every column (default: the columns the queries read)."),
          design: Optional[list[str]] = typer.Option(None, "--design", help="Designs to run (repeat): as-generated, clustered:l_suppkey, clustered:l_shipdate [default: all]."),
          query: Optional[list[str]] = typer.Option(None, "--query", help="Queries to run (repeat): mission, q6, q1, top-suppliers, per-day, top-orders, top-parts, first-answer (a fresh process's, as generated) [default: all, then also threads, cold compiles and first answers]."),
          add: bool = typer.Option(False, "--add", help="Add the runs to the report already in --out (same commit and GPU): a large SF's designs run in calls of their own, one report."),
          data_dir: Optional[Path] = DATA_DIR):
    """Benchmark and write a report: SQL of the class (the mission's Z sweep, Q6, Q1 and four GROUP BYs) in
    two designs against DuckDB, timed as table.sql() on the host's clock, cold compiles, 8 threads through
    one table and the first answer, into queries-<gpu>.json/.md; --scale, the class at scale."""
    from gquery import tpch
    from gquery.options import check_positive, check_repeat, require_gpu

    from gquery.bench import queries as Q

    check_repeat(repeat)
    sfs = sorted({tpch.check_sf(x) for x in sf})
    designs = tuple(design) if design else tuple(Q.DESIGNS)
    unknown = [d for d in designs if d not in Q.DESIGNS]
    if unknown:
        raise UsageError(f"--design must be one of {', '.join(Q.DESIGNS)}, got {unknown[0]!r}")
    named = sorted({q for qs in Q.QUERIES_OF.values() for q in qs}, key=Q.QUERIES_OF["as-generated"].index) + [Q.FIRST_ANSWER]
    if query and any(q not in named for q in query):
        raise UsageError(f"--query must be one of {', '.join(named)}, got {next(q for q in query if q not in named)!r}")
    require_gpu("bench")
    if scale:
        from gquery.bench import scale as SQ
        from gquery.gpu.device import device_count

        check_positive(gpus=min(gpus))
        counts = sorted({g for g in gpus if g <= device_count()})
        stores = {x: Q.class_store(x, data_dir, note) for x in sfs}
        target = gpu_sf if gpu_sf is not None else (100.0 if 100.0 in sfs else sfs[-1])
        if target not in stores:
            raise UsageError(f"--gpu-sf {target:g} must be one of the --sf values")
        data = SQ.run_class_scale(stores, counts, target, repeat, echo=note)
        j, m = SQ.write(data, out_dir, "gquery " + " ".join(sys.argv[1:]))
        out.print(m.read_text())
        if not all(r["match"] for r in data["runs"]):
            raise GqueryError("a GPU answer differs from the reference")
        return
    written = Q.report_writer(out_dir, "gquery " + " ".join(sys.argv[1:]), add)  # after each design, and at the end
    data = written(Q.run_queries(sfs, repeat, data_dir, echo=note, columns=None if all_columns else Q.NEEDED,
                                 designs=designs, names=tuple(query) if query else None, progress=written))
    out.print(Q.markdown(data, "gquery " + " ".join(sys.argv[1:])))
    if not all(r["match"] for r in data["runs"]):
        raise GqueryError("a GPU answer differs from DuckDB's")


def _version(value: bool) -> None:
    if value:
        from gquery import __version__

        print(f"gquery {__version__}")
        raise typer.Exit()


@app.callback()
def _options(version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                          help="Print gquery's version and exit.")) -> None:
    """A columnar GPU query engine for selection+aggregate SQL, each answer checked against DuckDB."""


def _click_class(name: str) -> type:
    """A class of the click that typer uses: typer vendors click in recent versions and depends on
    it in older ones, and BadParameter derives from UsageError in both."""
    return next(c for c in typer.BadParameter.__mro__ if c.__name__ == name)


def _stop(signum, frame) -> None:
    raise Stopped(signum)


PATH_OPTIONS = ("--data", "--data-dir", "--out", "--file", "--store", "--plot", "--report-dir")


def _refuse_empty_paths(args: list[str]) -> None:
    """UsageError for a path option given an empty string: Click makes it Path(""), the current folder (--data ""
    read whatever table lay there, --data-dir "" generated into it)."""
    for k, arg in enumerate(args):
        if arg == "--":
            return
        name, eq, value = arg.partition("=")
        if name in PATH_OPTIONS and ((eq and not value) or (not eq and k + 1 < len(args) and args[k + 1] == "")):
            raise UsageError(f"{name} names no path (an empty string)")


def main(argv: list[str] | None = None) -> None:
    """Entry point: turns every error a user can act on into one line and an exit code."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _stop)
    command = typer.main.get_command(app)
    try:
        _refuse_empty_paths(sys.argv[1:] if argv is None else argv)
        code = command.main(args=argv, prog_name="gquery", standalone_mode=False)
    except typer.Exit as e:
        code = e.exit_code
    except _click_class("UsageError") as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # plain `gquery`: its help is no error
            print(e.ctx.get_help())
            code = 0
        else:
            print(f"gquery: error: {e.format_message()}", file=sys.stderr)
            code = 2
    except GqueryError as e:
        print(f"gquery: error: {e}", file=sys.stderr)
        code = e.exit_code
    except Stopped as e:
        print(f"gquery: {e.message}", file=sys.stderr)
        code = e.exit_code
    except (KeyboardInterrupt, typer.Abort):
        print("gquery: interrupted", file=sys.stderr)
        code = 130
    except BrokenPipeError:
        code = 0
    except OSError as e:  # a file or folder the system refused (permissions, a full disk)
        print(f"gquery: error: {e.filename + ': ' if e.filename else ''}{e.strerror or e}", file=sys.stderr)
        code = 1
    sys.exit(code if isinstance(code, int) else 0)
