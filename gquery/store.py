"""The encoded store on disk: lineitem.gq/, a manifest and one file per buffer.

    lineitem.gq/manifest.json     rows, columns, encodings (with their statistics), buffer files
                                  with sizes and CRC-32s, the source files it was built from
    lineitem.gq/<column>.<encoding>.<buffer>.bin

It holds the key sliced (top byte, low bits, a histogram of top bytes) and packed, and both factors
packed (per-frame reference and width: the frame statistics). A store is written into a temporary
folder, verified against the columns it came from (every stored encoding decoded and compared),
and renamed into place only then, so a store that exists is complete. Opening checks the version,
every file's size and checksum, and whether its source files changed since (stale); each failure is
one line naming the store. Buffers are read straight into page-locked, mapped host memory when a
GPU memory layer is given, so a query ships them without a second copy.
"""

from __future__ import annotations

import json
import os
import shutil
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from gquery.encodings import Packed, Sliced
from gquery.errors import GqueryError
from gquery.plan import host_threads
from gquery.table import KEY, PRICE, QUANTITY, Column, Table

STORE_NAME = "lineitem.gq"
FORMAT, VERSION = "gquery-store", 1
STORED = {KEY: ("sliced", "packed"), QUANTITY: ("packed",), PRICE: ("packed",)}
CRC_PIECE = 64 << 20


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


def _parallel(fn, items):
    with ThreadPoolExecutor(max(1, min(host_threads(), len(items)))) as pool:
        return list(pool.map(fn, items))


def _source_info(source) -> list[dict]:
    if source is None:
        return []
    return [{"path": str(Path(f).resolve()), "bytes": Path(f).stat().st_size,
             "mtime_ns": Path(f).stat().st_mtime_ns} for f in source.files]


def _params(enc) -> dict:
    if isinstance(enc, Packed):
        return {"rows": enc.rows, "dtype": np.dtype(enc.dtype).str, "factor": enc.factor}
    return {"rows": enc.rows, "dtype": np.dtype(enc.dtype).str, "reference": enc.reference,
            "low_bits": enc.low_bits, "histogram": [int(x) for x in enc.histogram]}


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

        _parallel(write, writes)
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
            if not np.array_equal(stored.columns[column].encodings[name].decode(), expected[column]):
                raise StoreError(f"{column} {name} does not decode to the values it was written from")


def _fail(path: Path, why: str):
    raise StoreError(f"{path}: {why}; rebuild it with 'gquery encode --data <parquet or .tbl>'")


def open_store(path: Path | str, memory=None, check_source: bool = True) -> Table:
    """A Table from a store. With `memory` (gpu.memory.GpuMemory), buffers land in mapped pinned
    memory and the table says so; without, in ordinary NumPy arrays."""
    path = Path(path)
    try:
        manifest = json.loads((path / "manifest.json").read_text())
    except (OSError, ValueError) as e:
        _fail(path, f"unreadable manifest ({e.__class__.__name__})")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        _fail(path, "not a gquery store manifest")
    if manifest.get("version") != VERSION:
        _fail(path, f"store version {manifest.get('version')!r}, this gquery reads {VERSION}")
    if check_source:
        for src in manifest.get("source", []):
            f = Path(src["path"])
            if f.exists() and (f.stat().st_size != src["bytes"] or f.stat().st_mtime_ns != src["mtime_ns"]):
                _fail(path, f"stale: {f} changed after the store was written")
    try:
        rows = int(manifest["rows"])
        reads = []
        for column, encodings in STORED.items():
            for name in encodings:
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
        targets.append(memory.mapped_empty(n, dtype) if memory is not None else np.empty(n, dtype))

    def read(item):
        (column, name, buf, meta), array = item
        file = path / meta["file"]
        with open(file, "rb") as f:
            f.readinto(memoryview(array.view(np.uint8)))
        if _crc(array) != meta["crc32"]:
            _fail(path, f"{meta['file']} is corrupt (checksum)")
        return (column, name, buf), array.reshape(meta["shape"])

    arrays = dict(_parallel(read, list(zip(reads, targets))))
    columns = {}
    for column, encodings in STORED.items():
        col = columns[column] = Column(column)
        for name in encodings:
            p = manifest["columns"][column][name]["params"]
            get = lambda buf: arrays[(column, name, buf)]
            if name == "packed":
                col.encodings[name] = Packed(p["rows"], np.dtype(p["dtype"]), int(p["factor"]), get("meta"), get("words"))
            else:
                low = arrays.get((column, name, "low"))
                col.encodings[name] = Sliced(p["rows"], np.dtype(p["dtype"]), int(p["reference"]), int(p["low_bits"]),
                                             get("top"), low, np.array(p["histogram"], dtype=np.int64))
            if col.encodings[name].rows != rows:
                _fail(path, f"{column} {name} holds {col.encodings[name].rows:,} rows, the manifest {rows:,}")
    largest = {k: int(v) for k, v in manifest["largest"].items()}
    return Table(rows, columns, str(path), largest, pinned=memory is not None)


def source_files(path: Path | str) -> list[Path]:
    """The files a store was built from that still exist unchanged (DuckDB reads those)."""
    try:
        manifest = json.loads((Path(path) / "manifest.json").read_text())
    except (OSError, ValueError):
        return []
    return [Path(s["path"]) for s in manifest.get("source", []) if Path(s["path"]).exists()]


def ensure_store(source, echo=print) -> Path:
    """The store beside a parquet/.tbl source: kept when whole and fresh, else (re)built from it."""
    from gquery.columns import load_lineitem

    path = store_path_for(source)
    if is_store(path):
        try:
            open_store(path)
            return path
        except StoreError as e:
            echo(f"{e}; rebuilding it from {source}")
    return write_store(Table.from_columns(load_lineitem(source)), path, source, echo=echo)


def as_source(path: Path | str):
    """A store folder as the LineitemSource of the files it was built from (DuckDB reads those);
    the source's path is the store, so the engine opens the store itself."""
    from gquery.tpch import LineitemSource

    try:
        manifest = json.loads((Path(path) / "manifest.json").read_text())
    except (OSError, ValueError) as e:
        _fail(Path(path), f"unreadable manifest ({e.__class__.__name__})")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        _fail(Path(path), "not a gquery store manifest")
    files = tuple(source_files(path))
    fmt = "tbl" if files and (files[0].suffix == ".tbl" or ".tbl." in files[0].name) else "parquet"
    return LineitemSource(Path(path), fmt, files)
