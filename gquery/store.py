"""The encoded store on disk: lineitem.gq/, a manifest and one file per buffer.

    lineitem.gq/manifest.json     rows, columns, encodings (with their statistics), buffer files
                                  with sizes and CRC-32s, the source files it was built from
    lineitem.gq/<column>.<encoding>.<buffer>.bin

A parted store (the store of a multi-file source, and of every SF above 10) is a folder of such
stores, one a part, with a manifest of its own listing them:

    lineitem.gq/manifest.json     rows, largest factors, sources, and "parts": [{name, rows, bytes}]
    lineitem.gq/part-00001.gq/    a store as above, for the first part's rows, and so on

Each part is written atomically as it is made; the parted manifest is written last (a temporary
file renamed), so a parted store whose manifest exists has every part, and a folder without one is
a build in progress that a rerun resumes, keeping the parts already there.

It holds the key sliced (top byte, low bits, a histogram of top bytes), indexed (each bucket's row
ids and low bits, listed together) and packed, and both factors packed (per-frame reference and
width: the frame statistics). A store is written into a temporary
folder, verified against the columns it came from (every stored encoding decoded and compared),
and renamed into place only then, so a store that exists is complete. Opening checks the version,
every file's size and checksum, and whether its source files changed since (stale); each failure is
one line naming the store. Buffers are read straight into page-locked, mapped host memory when a
GPU memory layer is given, so a query ships them without a second copy.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import threading
import time
import zlib
from pathlib import Path

import numpy as np

from gquery.encodings import Indexed, Packed, Sliced
from gquery.errors import GqueryError
from gquery.host import parallel_map
from gquery.table import KEY, PRICE, QUANTITY, Column, PartedTable, Table

STORE_NAME = "lineitem.gq"
PART_NAME = "part-{:05d}.gq"
FORMAT, VERSION = "gquery-store", 3  # 3: the key's bucket lists (indexed); 2: sliced keys in equal buckets
STORED = {KEY: ("sliced", "indexed", "packed"), QUANTITY: ("packed",), PRICE: ("packed",)}
CRC_PIECE = 64 << 20
READ_PIECE = 32 << 20  # a buffer is read in pieces on every host thread: one reader reaches ~2 GB/s


class StoreError(GqueryError):
    """A store that is missing pieces, corrupt or stale."""


def is_store(path: Path | str) -> bool:
    return (Path(path) / "manifest.json").is_file()


def store_path_for(source) -> Path:
    """Where the store of a parquet/.tbl source lives: beside it, named lineitem.gq."""
    return Path(source.path).parent / STORE_NAME


def _crc(a: np.ndarray) -> int:
    """CRC-32 of an array's bytes, in pieces (zlib drops the GIL on large buffers)."""
    view = memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    crc = 0
    for start in range(0, len(view), CRC_PIECE):
        crc = zlib.crc32(view[start:start + CRC_PIECE], crc)
    return crc


def _source_info(source) -> list[dict]:
    if source is None:
        return []
    return [{"path": str(Path(f).resolve()), "bytes": Path(f).stat().st_size,
             "mtime_ns": Path(f).stat().st_mtime_ns} for f in source.files]


def _params(enc) -> dict:
    if isinstance(enc, Packed):
        return {"rows": enc.rows, "dtype": np.dtype(enc.dtype).str, "factor": enc.factor}
    return {"rows": enc.rows, "dtype": np.dtype(enc.dtype).str, "reference": enc.reference,
            "bucket": enc.bucket, "histogram": [int(x) for x in enc.histogram]}


def write_store(table: Table, path: Path | str, source=None, echo=print) -> Path:
    """Encode the table's columns as STORED, write them atomically, verify, rename into place."""
    path = Path(path)
    if path.exists() and not is_store(path):
        raise StoreError(f"{path}: exists and is not a gquery store; not overwriting it")
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        manifest = {"format": FORMAT, "version": VERSION, "rows": table.rows, "source": _source_info(source),
                    "largest": {k: str(v) for k, v in table.largest.items()}, "columns": {}}
        writes = []
        for column, encodings in STORED.items():
            entry = manifest["columns"][column] = {}
            for name in encodings:
                enc = table.columns[column].get(name)
                buffers = {}
                for buf, array in enc.buffers().items():
                    file = f"{column}.{name}.{buf}.bin"
                    buffers[buf] = {"file": file, "dtype": array.dtype.str, "shape": list(array.shape),
                                    "bytes": array.nbytes}
                    writes.append((buffers[buf], tmp / file, array))
                entry[name] = {"params": _params(enc), "buffers": buffers}

        def write(item):
            meta, file, array = item
            meta["crc32"] = _crc(array)
            np.ascontiguousarray(array).tofile(file)

        parallel_map(write, writes)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        check = open_store(tmp, check_source=False)  # read back from disk, then compare every value
        _verify(check, table)
        if path.exists():
            old = path.parent / f".{path.name}.old-{os.getpid()}"
            os.replace(path, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, path)  # the one step that makes the store visible
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    echo(f"wrote {path} ({sum(m['bytes'] for m, _, _ in writes) / 1e6:,.1f} MB, verified)")
    return path


def _verify(stored: Table, original: Table) -> None:
    plain = original.plain_columns()
    expected = {KEY: plain.suppkey, QUANTITY: plain.quantity, PRICE: plain.extendedprice}
    for column, encodings in STORED.items():
        for name in encodings:
            try:
                same = np.array_equal(stored.columns[column].encodings[name].decode(), expected[column])
            except ValueError as e:  # lists that are not every row once
                raise StoreError(f"{column} {name} does not decode: {e}") from None
            if not same:
                raise StoreError(f"{column} {name} does not decode to the values it was written from")


def stored_encodings(skip_lists: bool = False) -> dict:
    """STORED, less the key's bucket lists when a reader will not use them (a windowed query that
    did not ask for them reads 5 or 9 bytes a row less from disk)."""
    return {c: tuple(e for e in names if not (skip_lists and e == "indexed")) for c, names in STORED.items()}


def _fail(path: Path, why: str):
    raise StoreError(f"{path}: {why}; rebuild it with 'gquery encode --data <parquet or .tbl>'")


def _manifest(path: Path) -> dict:
    try:
        manifest = json.loads((path / "manifest.json").read_text())
    except (OSError, ValueError) as e:
        _fail(path, f"unreadable manifest ({e.__class__.__name__})")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        _fail(path, "not a gquery store manifest")
    if manifest.get("version") != VERSION:
        _fail(path, f"store version {manifest.get('version')!r}, this gquery reads {VERSION}")
    return manifest


def is_parted(path: Path | str) -> bool:
    try:
        return "parts" in json.loads((Path(path) / "manifest.json").read_text())
    except (OSError, ValueError, TypeError):
        return False


def part_path(path: Path | str, part: int) -> Path:
    """Part `part` (1-based, as tpchgen-cli numbers them) of a parted store."""
    return Path(path) / PART_NAME.format(part)


def _buffer_bytes(manifest: dict) -> int:
    """The bytes of a single store's buffers, from its manifest."""
    return sum(b["bytes"] for c in manifest["columns"].values() for e in c.values() for b in e["buffers"].values())


def size_text(nbytes: float) -> str:
    return f"{nbytes / 1e9:,.1f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:,.1f} MB"


def part_rows(path: Path | str, part: int, source_file: Path | None = None, echo=print) -> int | None:
    """The rows of part `part` when it is whole (it opens: sizes, checksums, staleness) and, given
    `source_file`, was built from exactly that file; None when it must be written (again)."""
    p = part_path(path, part)
    if not is_store(p):
        return None
    try:
        rows = open_store(p).rows
    except StoreError as e:
        echo(f"{e}; writing it again")
        return None
    if source_file is not None and source_files(p) != [Path(source_file).resolve()]:
        echo(f"{p}: not built from {source_file}; writing it again")
        return None
    return rows


def write_part(path: Path | str, part: int, parts: int, source, *, record_source: bool = True, rows_before: int = 0,
               started: float | None = None, echo=print) -> int:
    """Part `part` of a parted store from a one-file source: contract-checked, loaded, encoded,
    verified and written atomically; one line of progress. Returns its rows. Without
    `record_source` the store names no source (its file is about to be deleted)."""
    from gquery.columns import load_lineitem
    from gquery.contract import check_source

    started = time.perf_counter() if started is None else started
    check_source(source)
    written = write_store(Table.from_columns(load_lineitem(source)), part_path(path, part),
                          source if record_source else None, echo=lambda m: None)
    m = _manifest(written)
    rows = int(m["rows"])
    echo(f"part {part}/{parts}: {rows:,} rows encoded ({size_text(_buffer_bytes(m))} store) in "
         f"{time.perf_counter() - started:.1f} s; {rows_before + rows:,} rows so far")
    return rows


def finish_parted(path: Path | str, parts: int, echo=print) -> Path:
    """Write the manifest of a parted store whose parts 1..parts are all written: the one step that
    makes it a store. Each part's manifest gives its rows, factor bounds and sources."""
    path = Path(path)
    entries, largest, sources, rows = [], {}, [], 0
    for k in range(1, parts + 1):
        part = part_path(path, k)
        if not is_store(part):
            _fail(path, f"part {k} of {parts} ({part.name}) is missing")
        m = _manifest(part)
        entries.append({"name": part.name, "rows": int(m["rows"]), "bytes": _buffer_bytes(m)})
        rows += int(m["rows"])
        for column, bound in m["largest"].items():
            largest[column] = str(max(int(largest.get(column, 0)), int(bound)))
        sources += m.get("source", [])
    manifest = {"format": FORMAT, "version": VERSION, "rows": rows, "source": sources, "largest": largest,
                "parts": entries}
    tmp = path / f".manifest.json.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(tmp, path / "manifest.json")
    echo(f"wrote {path} ({summary(path)})")
    return path


def part_count(path: Path | str) -> int:
    """How many parts a store holds: 1 for a single store."""
    return len(_manifest(Path(path)).get("parts", [None]))


def summary(path: Path | str) -> str:
    """'3 parts, 179,838 rows, 1.3 MB': what a store holds, from its manifest."""
    m = _manifest(Path(path))
    if "parts" in m:
        return (f"{len(m['parts'])} part{'s' * (len(m['parts']) > 1)}, {int(m['rows']):,} rows, "
                f"{size_text(sum(p['bytes'] for p in m['parts']))}")
    return f"{int(m['rows']):,} rows, {size_text(_buffer_bytes(m))}"


def open_store(path: Path | str, memory=None, check_source: bool = True, window: int | None = None):
    """A Table from a store, or a PartedTable from a parted one. With `memory` (gpu.memory.GpuMemory),
    buffers land in mapped pinned memory and the table says so; without, in ordinary NumPy arrays.
    `window` (parted stores only): hold no part now; queries read parts from disk, `window` at a time."""
    path = Path(path)
    manifest = _manifest(path)
    if "parts" in manifest:
        return _open_parted(path, manifest, memory, check_source, window)
    return _open_single(path, manifest, memory, check_source)


def _open_parted(path: Path, manifest: dict, memory, check_source: bool, window: int | None) -> PartedTable:
    try:
        names = [p["name"] for p in manifest["parts"]]
        part_rows = [int(p["rows"]) for p in manifest["parts"]]
        largest = {k: int(v) for k, v in manifest["largest"].items()}
        rows = int(manifest["rows"])
    except (KeyError, TypeError, ValueError) as e:
        _fail(path, f"manifest lacks {e}")
    if sum(part_rows) != rows or not names:
        _fail(path, f"its parts hold {sum(part_rows):,} rows, the manifest {rows:,}")
    paths = [path / n for n in names]
    for p, n in zip(paths, part_rows):
        if not is_store(p):
            _fail(path, f"part {p.name} is missing")
    if window is not None:
        if window < 1:
            raise GqueryError(f"window must be at least 1 part, got {window}")
        return PartedTable(rows, paths, part_rows, str(path), largest, None, window, pinned=memory is not None)
    tables = []
    for p, n in zip(paths, part_rows):
        t = _open_single(p, _manifest(p), memory, check_source)
        if t.rows != n:
            _fail(path, f"part {p.name} holds {t.rows:,} rows, the manifest {n:,}")
        tables.append(t)
    return PartedTable(rows, paths, part_rows, str(path), largest, tables, 0, pinned=memory is not None)


def _open_single(path: Path, manifest: dict, memory, check_source: bool, allocate=None, verify: bool = True,
                 encodings: dict | None = None) -> Table:
    """`allocate(key, n, dtype)`: where each buffer is read (a window's slot), else new memory.
    `verify`: compare checksums (a window reading a part again checks sizes only).
    `encodings`: which of STORED to read (all of them by default)."""
    encodings = STORED if encodings is None else encodings
    if check_source:
        for src in manifest.get("source", []):
            if Path(src["path"]).exists() and _changed(src):
                _fail(path, f"stale: {src['path']} changed after the store was written")
    try:
        rows = int(manifest["rows"])
        reads = []
        for column, names in encodings.items():
            for name in names:
                for buf, meta in manifest["columns"][column][name]["buffers"].items():
                    reads.append((column, name, buf, meta))
    except (KeyError, TypeError, ValueError) as e:
        _fail(path, f"manifest lacks {e}")

    targets = []
    for column, name, buf, meta in reads:  # sizes checked and memory taken here: the CUDA context
        file = path / meta["file"]  # is current on this thread only
        if not file.is_file():
            _fail(path, f"missing {meta['file']}")
        if file.stat().st_size != meta["bytes"]:
            _fail(path, f"{meta['file']} is truncated ({file.stat().st_size:,} of {meta['bytes']:,} bytes)")
        dtype = np.dtype(meta["dtype"])
        n = meta["bytes"] // dtype.itemsize
        if allocate is not None:
            targets.append(allocate((column, name, buf), n, dtype))
        else:
            targets.append(memory.mapped_empty(n, dtype) if memory is not None else np.empty(n, dtype))

    pieces = []  # (file, offset, destination): every buffer in pieces, read on all threads at once
    for (column, name, buf, meta), array in zip(reads, targets):
        view = memoryview(array.view(np.uint8).reshape(-1))
        pieces += [(path / meta["file"], a, view[a:a + READ_PIECE]) for a in range(0, len(view), READ_PIECE)]

    def read_piece(item):
        file, offset, into = item
        with open(file, "rb") as f:
            f.seek(offset)
            f.readinto(into)

    parallel_map(read_piece, pieces)

    def check(item):
        (column, name, buf, meta), array = item
        if verify and _crc(array) != meta["crc32"]:
            _fail(path, f"{meta['file']} is corrupt (checksum)")
        return (column, name, buf), array.reshape(meta["shape"])

    arrays = dict(parallel_map(check, list(zip(reads, targets))))
    columns = {}
    for column, names in encodings.items():
        col = columns[column] = Column(column)
        for name in names:
            p = manifest["columns"][column][name]["params"]
            get = lambda buf: arrays[(column, name, buf)]
            if name == "packed":
                col.encodings[name] = Packed(p["rows"], np.dtype(p["dtype"]), int(p["factor"]), get("meta"), get("words"))
            else:
                low = arrays.get((column, name, "low"))
                rows_by = get("ids") if name == "indexed" else get("top")
                col.encodings[name] = (Indexed if name == "indexed" else Sliced)(
                    p["rows"], np.dtype(p["dtype"]), int(p["reference"]), int(p["bucket"]), rows_by, low,
                    np.array(p["histogram"], dtype=np.int64))
            if col.encodings[name].rows != rows:
                _fail(path, f"{column} {name} holds {col.encodings[name].rows:,} rows, the manifest {rows:,}")
            if name == "indexed" and verify:
                _check_lists(path, col.encodings[name])
    largest = {k: int(v) for k, v in manifest["largest"].items()}
    return Table(rows, columns, str(path), largest, pinned=memory is not None)


def _check_lists(path: Path, key: Indexed) -> None:
    """The bounds a GPU relies on when it gathers by row id: as many entries as rows, as the
    histogram says, and no id past the last row (whether they are every row once, the write's
    verification proved; the checksums say the files are still what was written)."""
    if len(key.ids) != key.rows or int(key.histogram.sum()) != key.rows or (key.histogram < 0).any():
        _fail(path, f"the key's bucket lists hold {len(key.ids):,} entries and a histogram of "
                    f"{int(key.histogram.sum()):,} for {key.rows:,} rows")
    if key.low is not None and len(key.low) != key.rows:
        _fail(path, f"the key's bucket lists hold {len(key.low):,} low parts for {key.rows:,} rows")
    if key.rows and int(key.ids.max()) >= key.rows:
        _fail(path, "the key's bucket lists name a row past the last")


def _changed(src: dict) -> bool:
    """Whether a source file differs in size or time from when the store was written."""
    st = Path(src["path"]).stat()
    return st.st_size != src["bytes"] or st.st_mtime_ns != src["mtime_ns"]


def store_parts(path: Path | str) -> list[tuple[Path, int]]:
    """Each part's folder and rows, from the manifests alone (a single store is its own one part):
    what a distributed query hands out, checked before any part is read."""
    path = Path(path)
    manifest = _manifest(path)
    if "parts" in manifest:
        table = _open_parted(path, manifest, None, False, window=1)
        return list(zip(table.paths, table.part_rows))
    try:
        return [(path, int(manifest["rows"]))]
    except (KeyError, TypeError, ValueError) as e:
        _fail(path, f"manifest lacks {e}")


def unchanged_sources(path: Path | str) -> tuple[Path, ...]:
    """The files a store was built from when every one is still there as it was written (then DuckDB
    can check an answer over the store against them), else ()."""
    sources = _manifest(Path(path)).get("source", [])
    if not sources or any(not Path(s["path"]).is_file() or _changed(s) for s in sources):
        return ()
    return tuple(Path(s["path"]) for s in sources)


class PartReader:
    """Reads parts of a windowed PartedTable from disk in order, ahead of the query, into `window`
    slots of host memory (page-locked and mapped with `memory`), so host memory holds at most
    `window` parts however large the store. Iterating yields (part index, Table); a part's slot is
    reused once the next part is asked for, so window = 2 reads one part while the GPU scans
    another. Slots are sized up front to each buffer's largest part (the CUDA context that pins
    them is current on the caller's thread only), and a re-read checks sizes, not checksums."""

    def __init__(self, table: PartedTable, indices, memory=None, window: int | None = None, slots=None,
                 lists: bool = True):
        """`slots`: a previous reader's slots (same table, indices, window and lists) to read into
        again: page-locking them anew costs more than reading the parts. `lists`: read the key's
        bucket lists too (only a query that asked for the indexed encoding reads them)."""
        self.table, self.indices = table, list(indices)
        self.encodings = stored_encodings(skip_lists=not lists)
        self.window = max(1, min(window or table.window or 2, len(self.indices) or 1))
        self.manifests = {i: _manifest(table.paths[i]) for i in self.indices}
        sizes: dict = {}
        for m in self.manifests.values():
            for column, names in self.encodings.items():
                for name in names:
                    for buf, meta in m["columns"][column][name]["buffers"].items():
                        key = (column, name, buf)
                        dtype = np.dtype(meta["dtype"])
                        sizes[key] = (max(sizes.get(key, (0,))[0], meta["bytes"] // dtype.itemsize), dtype)
        alloc = (lambda n, d: memory.mapped_empty(n, d)) if memory is not None else (lambda n, d: np.empty(n, d))
        self.slots = slots or [{k: alloc(n, d) for k, (n, d) in sizes.items()} for _ in range(self.window)]
        self.slot_bytes = sum(a.nbytes for a in self.slots[0].values()) if self.slots else 0
        self._free: queue.Queue = queue.Queue()
        self._ready: queue.Queue = queue.Queue()
        for s in range(self.window):
            self._free.put(s)
        self._stop = False
        self._thread = threading.Thread(target=self._read_all, name="gquery-parts", daemon=True)
        self._thread.start()

    def _read_all(self) -> None:
        for i in self.indices:
            slot = self._free.get()
            if self._stop:
                return
            try:
                into = self.slots[slot]
                t = _open_single(self.table.paths[i], self.manifests[i], None, False,
                                 allocate=lambda key, n, dtype: into[key][:n], verify=False, encodings=self.encodings)
                t.pinned = self.table.pinned
                self._ready.put((slot, i, t))
            except BaseException as e:  # handed to the consumer, raised there
                self._ready.put(e)
                return

    def __iter__(self):
        held = None
        for _ in self.indices:
            if held is not None:
                self._free.put(held)  # before waiting: with one slot, the reader needs it back
            item = self._ready.get()
            if isinstance(item, BaseException):
                raise item
            held, i, t = item
            yield i, t
        if held is not None:
            self._free.put(held)

    def close(self) -> None:
        self._stop = True
        self._free.put(0)
        self._thread.join()


def source_files(path: Path | str) -> list[Path]:
    """The files a store was built from that still exist."""
    try:
        manifest = json.loads((Path(path) / "manifest.json").read_text())
    except (OSError, ValueError):
        return []
    return [Path(s["path"]) for s in manifest.get("source", []) if Path(s["path"]).exists()]


def ensure_store(source, echo=print) -> Path:
    """The store beside a parquet/.tbl source: kept when whole and fresh, else (re)built from it.
    A source of several files becomes a parted store, a part a file, so no step holds more than
    one file's rows; parts already written (an interrupted build) are kept."""
    path = store_path_for(source)
    if is_store(path):
        try:
            check_store(path)
            return path
        except StoreError as e:
            echo(f"{e}; rebuilding it from {source}")
    if len(source.files) > 1:
        return write_parted(source, path, echo=echo)
    from gquery.columns import load_lineitem

    return write_store(Table.from_columns(load_lineitem(source)), path, source, echo=echo)


def check_store(path: Path | str) -> None:
    """Open a store (every part of a parted one), checking sizes, checksums and staleness; keeps nothing."""
    path = Path(path)
    if is_parted(path):
        table = open_store(path, window=1)
        for p in table.paths:
            open_store(p)
    else:
        open_store(path)


def write_parted(source, path: Path, echo=print) -> Path:
    """A parted store of a multi-file source, one part a file, each part encoded, verified and written
    atomically before the next is read; parts already whole and fresh are kept."""
    from gquery.sources import LineitemSource

    path = Path(path)
    if path.exists() and is_store(path) and not is_parted(path):
        old = path.parent / f".{path.name}.old-{os.getpid()}"  # a single store of the same source
        os.replace(path, old)
        shutil.rmtree(old, ignore_errors=True)
    (path / "manifest.json").unlink(missing_ok=True)
    path.mkdir(parents=True, exist_ok=True)
    rows, parts = 0, len(source.files)
    for k, f in enumerate(source.files, start=1):
        done = part_rows(path, k, f, echo=echo)
        if done is None:
            done = write_part(path, k, parts, LineitemSource(f, source.format, (f,)), rows_before=rows, echo=echo)
        rows += done
    return finish_parted(path, parts, echo=echo)


def as_source(path: Path | str):
    """A store folder as the LineitemSource of the files it was built from (DuckDB reads those);
    the source's path is the store, so the engine opens the store itself. Files only when every
    one is still there: DuckDB over some of the parts would answer for other rows."""
    from gquery.sources import LineitemSource

    try:
        manifest = json.loads((Path(path) / "manifest.json").read_text())
    except (OSError, ValueError) as e:
        _fail(Path(path), f"unreadable manifest ({e.__class__.__name__})")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        _fail(Path(path), "not a gquery store manifest")
    files = []
    for single in [Path(path) / p["name"] for p in manifest["parts"]] if "parts" in manifest else [Path(path)]:
        recorded, present = _manifest(single).get("source", []), source_files(single)
        if not recorded or len(present) != len(recorded):  # a part built from a file since deleted, or from none
            files = []
            break
        files += present
    files = tuple(files)
    fmt = "tbl" if files and (files[0].suffix == ".tbl" or ".tbl." in files[0].name) else "parquet"
    return LineitemSource(Path(path), fmt, files)
