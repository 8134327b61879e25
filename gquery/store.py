"""The encoded store on disk: lineitem.gq/, a manifest and one file per buffer.

    lineitem.gq/manifest.json         rows, the schema (each column's SQL type, and the columns left
                                      out with why), each column's encoding and buffers (size and a
                                      CRC-32 for every piece of PIECE_BYTES), the sort column, the
                                      source files it was built from, and a checksum of itself
    lineitem.gq/<column>.<buffer>.bin packed per frame of 1024 rows (frame of reference + bit-packing):
                                      `meta` (reference and word offset | width), `words`, `zmax`
                                      (each frame's largest value: with the reference, the zone map)
    lineitem.gq/<key>.<top|low|ids|ids_low>.bin   the index column's slices and bucket lists

Every column the data has and the engines can hold exactly is stored (gquery.schema); `--sort-by`
orders the rows by one column first (a clustered store, whose zone maps let a range predicate skip
most frames). The index column (`--index`: l_suppkey by default where the data has it, unless it is
the sort column) also keeps its top byte a row and its bucket lists, the sliced and indexed encodings
the planner may scan it by (gpu/fusedplan.py).

A parted store (the store of a multi-file source, and of every SF above 10) is a folder of such
stores, one a part, with a manifest of its own listing them; each part is written atomically as it
is made and the parted manifest last, so a parted store whose manifest exists has every part.

A store proves itself when it opens. The manifest's checksum covers every number in it; a buffer
is checked against its pieces' CRCs when it is read; and what the planner or a kernel trusts is
checked against the buffers or derived from them: frame counts and word offsets against the
buffers' sizes, each frame's width against its zone map's span, the key's bucket histogram counted
from its top bytes, its reference and bucket size from the key's own zone maps, its bucket lists'
row ids against the rows, dictionary codes against the dictionary. A store that disagrees with
itself is refused in one line; `gquery run` rebuilds it from its source where that is still there.

Opening reads only the manifest. A column's buffers are read when a query first needs them, in
pieces on every host thread, each piece's CRC checked as it lands; with a GPU they are then
page-locked in place (registered), not copied.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import os
import shutil
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from gquery.encodings import (FRAME_ROWS, PAD_WORDS, TOP_BITS, Indexed, Packed, Sliced, bit_width, index_key, pack,
                              slice_geometry, slice_key)
from gquery.errors import GqueryError
from gquery.host import parallel_map
from gquery.query import SqlType
from gquery.schema import Dictionary, Schema, as_dictionary
from gquery.table import KEY, Column, ColumnBounds, PartedTable, Table

STORE_NAME = "lineitem.gq"
PART_NAME = "part-{:05d}.gq"
FORMAT, VERSION = "gquery-store", 5  # 5: dictionaries in buffers; 4: every column, zone maps, checksummed manifest
READ_VERSIONS = (4, VERSION)  # a version-4 store (its dictionaries in its manifest) is still read: not rebuilt
PIECE_BYTES = 16 << 20  # a buffer is read and checked in pieces of this size, on every host thread
KEY_BUFFERS = {"sliced": ("top", "low"), "indexed": ("ids", "ids_low")}
TYPE_CODES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "DECIMAL", "DATE", "TIMESTAMP", "VARCHAR",
              "UTINYINT", "USMALLINT", "UINTEGER")  # (appended: a store's codes stay what they were)
TRAILER_ROWS = 3  # after a column's frame metadata: what its values mean, written with them (see _trailer)


class StoreError(GqueryError):
    """A store that is missing pieces, corrupt, inconsistent or stale; `what`: what is wrong, without the advice
    on mending it (a caller that mends it says what it does instead)."""

    def __init__(self, message: str, what: str | None = None):
        super().__init__(message)
        self.what = what or message


def is_store(path: Path | str) -> bool:
    try:
        return (Path(path) / "manifest.json").is_file()
    except OSError as e:  # (a folder this user may not look into: pathlib says only "no such file" itself)
        _unreadable(Path(path), e)


def _unreadable(path: Path, e: OSError):
    """A store's file or folder the system will not let this process read: said so, without advice to rebuild it
    (its files may be whole)."""
    why = f"{path}: cannot be read ({e.strerror or e.__class__.__name__}{': ' + str(e.filename) if e.filename else ''})"
    raise StoreError(why)


def store_path_for(source) -> Path:
    """Where the store of a parquet/.tbl source lives: beside it, named for it (lineitem.parquet and a
    folder lineitem/ of parts: lineitem.gq; edge.parquet: edge.gq), so two files of one folder never
    share one store."""
    name = Path(source.path).name
    if any(c in name for c in "*?["):  # a glob's files: the store beside them is named for their table
        return Path(source.path).parent / f"{source.name}.gq"
    for suffix in (".parquet", ".tbl"):
        name = name.removesuffix(suffix)
    return Path(source.path).parent / f"{name}.gq"


PROGRESS_SECONDS = 2  # how often encoding a store says how far it has come


def cache_dir() -> Path:
    """Where gquery keeps the stores it builds for data it was not asked to write beside:
    $GQUERY_STORE_DIR, else $XDG_CACHE_HOME/gquery/stores, else ~/.cache/gquery/stores."""
    if os.environ.get("GQUERY_STORE_DIR"):
        return Path(os.environ["GQUERY_STORE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gquery" / "stores"


def cache_path_for(source) -> Path:
    """The store of a source in the cache folder: named for its table and for exactly its files (a
    digest of their resolved paths), so two sources never share one."""
    import hashlib

    digest = hashlib.sha256("\0".join(str(Path(f).resolve()) for f in source.files).encode()).hexdigest()[:16]
    return cache_dir() / f"{source.name}-{digest}.gq"


def built_from(path: Path | str, source) -> bool:
    """Whether a store was built from exactly the files of `source`, no more and no fewer: a store found
    beside data answers for that data only (a folder of parts that gained or lost a file, or the
    .tbl beside a parquet of the same name, is other data)."""
    recorded = [s.get("path") for s in _manifest(Path(path)).get("source", [])]
    return recorded == [str(Path(f).resolve()) for f in source.files]


def require_built_from(path: Path | str, source) -> None:
    """StoreError unless the store was built from exactly `source`'s files (built_from)."""
    if not built_from(path, source):
        _fail(Path(path), f"built from other files than {source}")


def size_text(nbytes: float) -> str:
    return f"{nbytes / 1e9:,.1f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:,.1f} MB"


def _fail(path: Path, why: str):
    cached = _in_cache(path)
    if cached is not None:  # (gquery's own store of a user's files: `gquery encode` would write another beside them)
        raise StoreError(f"{path}: {why}; remove {cached} (gquery's cache: the next run builds it again)", f"{path}: {why}")
    raise StoreError(f"{path}: {why}; rebuild it with 'gquery encode --data <parquet or .tbl>' (a store gquery generate "
                     "wrote part by part: 'gquery generate --sf SF --check' writes its damaged parts again)", f"{path}: {why}")


def _in_cache(path: Path) -> Path | None:
    """The store of gquery's cache folder (cache_dir) that `path` is, or is a part of; None where it is none."""
    try:
        folder, path = cache_dir().resolve(), Path(path).resolve()
    except (OSError, RuntimeError):
        return None
    return next((p for p in (path, *path.parents) if p.parent == folder), None)


# --- checksums ------------------------------------------------------------------------------------------
def _piece_crcs(a: np.ndarray) -> list[int]:
    """CRC-32 of each PIECE_BYTES piece of an array's bytes, the pieces on host threads (zlib drops the GIL)."""
    view = memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    starts = range(0, max(len(view), 1), PIECE_BYTES)
    return parallel_map(lambda s: zlib.crc32(view[s:s + PIECE_BYTES]), starts)


def _manifest_checksum(manifest: dict) -> str:
    """CRC-32 of the manifest's canonical text, its own checksum left out: any edit to any number shows."""
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    return f"{zlib.crc32(json.dumps(body, sort_keys=True, separators=(',', ':')).encode()):08x}"


def _write_manifest(folder: Path, manifest: dict, name: str = "manifest.json") -> None:
    manifest["checksum"] = _manifest_checksum(manifest)
    tmp = folder / f".{name}.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(tmp, folder / name)


def _manifest(path: Path) -> dict:
    try:
        manifest = json.loads((path / "manifest.json").read_text())
    except PermissionError as e:
        _unreadable(path, e)
    except (OSError, ValueError, RecursionError) as e:  # (RecursionError: JSON nested deeper than Python parses)
        _fail(path, f"unreadable manifest ({e.__class__.__name__})")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        _fail(path, "not a gquery store manifest")
    if manifest.get("version") not in READ_VERSIONS:
        versions = " and ".join(map(str, READ_VERSIONS))
        _fail(path, f"store version {manifest.get('version')!r}, this gquery reads {versions}")
    if manifest.get("checksum") != _manifest_checksum(manifest):
        _fail(path, "its manifest does not match its checksum (edited or damaged)")
    malformed = _malformed(manifest)
    if malformed:
        _fail(path, f"its manifest's {malformed} is not a store's")
    return manifest


def _malformed(manifest: dict) -> str | None:
    """The first entry of a manifest (that matched its checksum: still written by someone) whose shape is not what
    a store writes, where the store's readers would meet it as a value of another type (a column's entry a string,
    the schema's types a list); or a buffer's file that is not a name in the store's own folder. None if none."""
    def plain(name) -> bool:
        return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name \
            and "\0" not in name

    def buffers_ok(buffers) -> bool:
        return isinstance(buffers, dict) and all(isinstance(b, dict) and plain(b.get("file")) for b in buffers.values())

    schema = manifest.get("schema", {})
    if not isinstance(schema, dict) or not isinstance(schema.get("types", {}), dict) \
            or not all(isinstance(t, list) for t in schema.get("types", {}).values()) \
            or not isinstance(schema.get("left_out", {}), dict):
        return "schema"
    columns = manifest.get("columns", {})
    if not isinstance(columns, dict):
        return "columns"
    files: set = set()
    for name, entry in columns.items():
        if not isinstance(entry, dict) or not buffers_ok(entry.get("buffers", {})):
            return f"column {name}"
        named = {b["file"] for b in entry["buffers"].values()} if "buffers" in entry else set()
        if named & files:  # (each column's buffers are its own files: two names reading one file answer as each other)
            return f"column {name} (another column's files)"
        files |= named
    key = manifest.get("key")
    if key is not None and not (isinstance(key, dict) and isinstance(key.get("column"), str)
                                and key["column"] in columns and buffers_ok(key.get("buffers", {}))
                                and not {b["file"] for b in key.get("buffers", {}).values()} & files):
        return "key"
    parts = manifest.get("parts", [])
    if not isinstance(parts, list) or not all(isinstance(p, dict) and plain(p.get("name")) for p in parts):
        return "parts"
    source = manifest.get("source", [])
    if not isinstance(source, list) or not all(isinstance(f, dict) and isinstance(f.get("path"), str) for f in source):
        return "source"
    return None


def _int(path: Path, value, what: str, low: int = 0) -> int:
    """A manifest's integer, checked: a manifest that passes its checksum was still written by someone."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        _fail(path, f"manifest lacks a valid {what}")
    return value


# --- writing ------------------------------------------------------------------------------------------------
def _source_info(source) -> list[dict]:
    if source is None:
        return []
    return [{"path": str(Path(f).resolve()), "bytes": Path(f).stat().st_size,
             "mtime_ns": Path(f).stat().st_mtime_ns} for f in source.files]


class _Writer:
    """One store's buffers into a temporary folder: each written with its pieces' CRCs, then read back
    from disk and compared with what it was written from before the next."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.bytes = 0

    def buffer(self, name: str, array: np.ndarray) -> dict:
        array = np.ascontiguousarray(array)
        meta = {"file": f"{name}.bin", "dtype": array.dtype.str, "shape": list(array.shape), "bytes": array.nbytes,
                "crc32": _piece_crcs(array)}
        path = self.folder / meta["file"]
        try:  # not ndarray.tofile: on a full disk it says only "N requested and 0 written"
            with open(path, "wb") as f:
                f.write(memoryview(array.reshape(-1)).cast("B"))
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), str(path)) from None
        self.bytes += array.nbytes
        return meta


def _trailer(rows: int, factor: int, t: SqlType, dictionary: tuple[int, int] | None) -> np.ndarray:
    """Three rows after a column's frame metadata, under the buffer's CRCs: its rows and common
    factor, its type and scale, its dictionary's strings and digest (_dictionary_digest). Whatever the
    manifest says of them is checked against these, so a manifest that passes its checksum still cannot
    change what a value means."""
    count, digest = dictionary if dictionary is not None else (0, 0)
    return np.array([[rows, factor], [TYPE_CODES.index(t.name), (t.width << 8) | t.scale], [digest, count]],
                    dtype=np.int64)


def _dictionary_digest(count: int, strings: dict, offsets: dict) -> int:
    """A dictionary's checksum from its buffers' manifest entries (their pieces' CRCs, which its read checks):
    known without reading it, so a column's trailer and two parts' dictionaries are compared unread."""
    return zlib.crc32(np.array([count, *strings["crc32"], -1, *offsets["crc32"]], dtype=np.int64).tobytes())


def _dictionary_words(entry: dict, path: Path | None = None, name: str = "") -> tuple[int, int] | None:
    """(strings, digest) of a column's dictionary by its manifest entry; None where it has none."""
    count, buffers = entry.get("dictionary"), entry.get("buffers")
    if count is None:
        return None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0 or not isinstance(buffers, dict) \
            or not all(isinstance(buffers.get(b), dict) and isinstance(buffers[b].get("crc32"), list)
                       for b in ("strings", "offsets")):
        _fail(path, f"{name}: its dictionary's manifest entry disagrees with itself")
    return count, _dictionary_digest(count, buffers["strings"], buffers["offsets"])


def _dictionary_buffers(dictionary: Dictionary) -> tuple[np.ndarray, np.ndarray]:
    """(its strings' UTF-8 bytes end to end, int64 offsets: string k is bytes offsets[k]:offsets[k + 1])."""
    strings = dictionary.strings
    offsets_buffer, data_buffer = strings.buffers()[1:3]
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[strings.offset:strings.offset + len(strings) + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, dtype=np.uint8)
    return data[offsets[0]:offsets[-1]], offsets - offsets[0]


def _remove_left_behind(path: Path) -> None:
    """The temporary folders of this store's earlier writes whose process is gone (killed: nothing removed them),
    removed; a live process's is its own."""
    for left in path.parent.glob(f".{glob.escape(path.name)}.tmp-*"):
        pid = left.name.rsplit("-", 1)[1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(left, ignore_errors=True)
        except OSError:  # (another user's process: alive)
            pass


def write_store(data, path: Path | str, source=None, echo=print, sort_by: str | None = None, key: str | None = KEY,
                columns=None) -> Path:
    """Encode a table's columns (a Table, or a parquet/.tbl source read a column at a time), write them
    atomically, verify every buffer from disk, rename into place. `sort_by`: order the rows by this
    column first. `key`: the column that also keeps its bucket lists, an index the planner may scan by (None: none;
    the default, l_suppkey, only where the data has it).
    `columns`: store only these (default: every column the engines can hold)."""
    from gquery.arrow import ColumnReader

    path = Path(path)
    if path.exists() and not is_store(path):
        what = "no manifest.json in it" if path.is_dir() else "a file"
        raise StoreError(f"{path}: exists and is not a gquery store ({what}); not overwriting it: move it away or remove "
                         "it, and the store is written there")
    reader = data if isinstance(data, Table) else ColumnReader(data)
    schema = reader.schema
    names = [n for n in (columns or schema.types) if n in schema.types]
    missing = [n for n in (columns or ()) if n not in schema.types]
    if missing:
        raise GqueryError(f"{reader.source}: cannot store {', '.join(missing)}: "
                          + "; ".join(schema.left_out.get(n, "no such column") for n in missing))
    if key is not None and key not in names and key != KEY:  # the default key is kept only where the data has it
        raise GqueryError(f"--index {key}: " + (schema.left_out.get(key, "no such column") if key not in schema.types
                                                else "not among the stored columns"))
    if sort_by is not None and sort_by not in names:
        raise GqueryError(f"--sort-by {sort_by}: {schema.left_out.get(sort_by, 'no such column')}"
                          if sort_by not in schema.types else f"--sort-by {sort_by}: not among the stored columns")
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    _remove_left_behind(path)
    shutil.rmtree(tmp, ignore_errors=True)
    ahead = ThreadPoolExecutor(1, thread_name_prefix="gquery-encode-ahead")
    try:
        try:
            tmp.mkdir(parents=True)
        except OSError as e:  # (said of the store asked for, not of its temporary folder)
            raise StoreError(f"{path}: cannot be written there ({e.strerror or e})") from None
        writer = _Writer(tmp)
        order = None
        if sort_by is not None:  # a stable sort: rows of equal keys keep their order
            order = np.argsort(reader.values(sort_by)[0], kind="stable")  # a NULL's place holds the smallest value
        manifest = {"format": FORMAT, "version": VERSION, "rows": reader.rows, "frame_rows": FRAME_ROWS,
                    "schema": Schema({n: schema.types[n] for n in names},
                                     {**schema.left_out, **{n: "not stored (gquery encode --columns)"
                                                            for n in schema.types if n not in names}}).to_json(),
                    "sorted_by": sort_by, "columns": {}, "key": None, "source": _source_info(source)}
        if getattr(source, "name", None):  # what SQL calls it, as its files were named: a folder of one part, the folder
            manifest["table"] = source.name
        left_out = manifest["schema"]["left_out"]
        said = time.monotonic()
        # the next column read and made engine values (a string column's sort, Arrow's: the GIL let go) while
        # this one is packed, written and verified; one read at a time
        pending = ahead.submit(reader.values, names[0]) if names else None
        for k, name in enumerate(names):
            if time.monotonic() - said >= PROGRESS_SECONDS:  # a store of many columns takes seconds: say how far
                said = time.monotonic()
                echo(f"encoding {path.name}: {k} of {len(names)} columns done, {name} next")
            try:
                values, dictionary, valid = pending.result()
            except ValueError as e:  # a value the engines cannot hold (gquery.schema.NotHeld)
                left_out[name] = str(e)
                del manifest["schema"]["types"][name]
                continue
            finally:
                pending = ahead.submit(reader.values, names[k + 1]) if k + 1 < len(names) else None
            if order is not None:
                values = values[order]
                valid = None if valid is None else valid[order]
            t = schema.types[name]
            packed = pack(values, None if t.is_decimal else 1)
            entry = {"factor": packed.factor, "dictionary": None, "buffers": {}}
            if dictionary is not None:  # its strings first: the trailer holds their digest
                dictionary = as_dictionary(dictionary)
                data, offsets = _dictionary_buffers(dictionary)
                entry["dictionary"] = len(dictionary)
                entry["buffers"] |= {"strings": writer.buffer(f"{name}.strings", data),
                                     "offsets": writer.buffer(f"{name}.offsets", offsets)}
            meta = np.vstack([packed.meta, _trailer(reader.rows, packed.factor, t, _dictionary_words(entry))])
            entry["buffers"] |= {b: writer.buffer(f"{name}.{b}", a) for b, a in
                                 (("meta", meta), ("words", packed.words), ("zmax", packed.zmax))}
            if valid is not None:  # a bit a row, set where the row holds a value
                entry["nulls"] = int(len(valid) - np.count_nonzero(valid))
                entry["buffers"]["valid"] = writer.buffer(f"{name}.valid", np.packbits(valid, bitorder="little"))
            manifest["columns"][name] = entry
            if valid is not None:
                _verify_validity(tmp, manifest, name, valid)
            if name == key and key != sort_by and valid is None:  # a key with NULLs keeps no lists
                sliced = slice_key(values)
                indexed = index_key(sliced)
                buffers = {"top": writer.buffer(f"{name}.top", sliced.top), "ids": writer.buffer(f"{name}.ids", indexed.ids)}
                if sliced.low is not None:
                    buffers["low"] = writer.buffer(f"{name}.low", sliced.low)
                    buffers["ids_low"] = writer.buffer(f"{name}.ids_low", indexed.low)
                manifest["key"] = {"column": name, "buffers": buffers}
                _verify_key(tmp, manifest, name, values)
                del sliced, indexed
            _verify_column(tmp, manifest, name, values, dictionary)
            del values, packed, dictionary
        _write_manifest(tmp, manifest)
        if path.exists():
            old = path.parent / f".{path.name}.old-{os.getpid()}"
            os.replace(path, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, path)  # the one step that makes the store visible
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        ahead.shutdown(cancel_futures=True)  # a read under way (it writes nothing) ends; none is begun
    clustered = f", clustered by {sort_by}" if sort_by else ""
    nulls = [f"{n} {e['nulls']:,}" for n, e in manifest["columns"].items() if e.get("nulls")]
    held = f", NULLs held: {', '.join(nulls)}" if nulls else ""
    echo(f"wrote {path} ({size_text(writer.bytes)}{clustered}{held}, verified)")
    return path


def _verify_column(folder: Path, manifest: dict, name: str, values: np.ndarray, dictionary: Dictionary | None) -> None:
    """The column read back from disk, checked as a reader checks it, decodes to what it was written from."""
    files = StoreFiles(folder, manifest)
    try:
        same = np.array_equal(files.packed(name).decode(), values)
        read = files.dictionary(name)
        same_strings = (read is None) == (dictionary is None) and (
            read is None or read.strings.equals(dictionary.strings))
    except StoreError as e:
        raise StoreError(f"{name} packed does not read back: {e}") from None
    if not same:
        raise StoreError(f"{name} packed does not decode to the values it was written from")
    if not same_strings:
        raise StoreError(f"{name}'s dictionary does not read back as it was written")


def _verify_validity(folder: Path, manifest: dict, name: str, valid: np.ndarray) -> None:
    """The column's validity read back from disk, checked as a reader checks it, is what it was written from."""
    try:
        same = np.array_equal(StoreFiles(folder, manifest).validity(name), valid)
    except StoreError as e:
        raise StoreError(f"{name} validity does not read back: {e}") from None
    if not same:
        raise StoreError(f"{name} validity does not read back as it was written")


def _verify_key(folder: Path, manifest: dict, name: str, values: np.ndarray) -> None:
    files = StoreFiles(folder, {**manifest, "columns": {**manifest["columns"]}})
    for encoding in ("sliced", "indexed"):
        try:
            same = np.array_equal(files.key_encoding(encoding).decode(), values)
        except (StoreError, ValueError) as e:  # lists that are not every row once
            raise StoreError(f"{name} {encoding} does not decode: {e}") from None
        if not same:
            raise StoreError(f"{name} {encoding} does not decode to the values it was written from")


# --- reading -------------------------------------------------------------------------------------------------
_MISREAD = (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError, OSError)


@contextlib.contextmanager
def _reading(path: Path):
    """Reading a store's manifest (one that matched its checksum, yet written by someone) or its files: a failure
    the reader does not name is a StoreError in one line, never a traceback."""
    try:
        yield
    except StoreError:
        raise
    except OSError as e:
        _unreadable(path, e)
    except _MISREAD as e:
        _fail(path, f"its manifest is not a store's ({e.__class__.__name__} reading it: {e})")


def _reads_manifest(method):
    """A StoreFiles method read _reading its store."""
    @functools.wraps(method)
    def reading(self, *args, **kwargs):
        with _reading(self.path):
            return method(self, *args, **kwargs)
    return reading


class StoreFiles:
    """A single store's buffers, read when asked for: into new host memory, in pieces on every host
    thread, each piece's CRC checked as it lands; `pin` (the GPU's memory layer) then page-locks
    them in place. Everything a kernel trusts is checked here against the buffers it describes."""

    def __init__(self, path: Path, manifest: dict, pin=None, verify: bool = True):
        self.path, self.manifest, self.pin, self.verify = path, manifest, pin, verify
        self.rows = _int(path, manifest.get("rows"), "row count")
        if manifest.get("frame_rows") != FRAME_ROWS:
            _fail(path, f"frames of {manifest.get('frame_rows')!r} rows, this gquery reads frames of {FRAME_ROWS}")
        self.frames = -(-self.rows // FRAME_ROWS)

    @_reads_manifest
    def read(self, buffers: list[dict], into: list[np.ndarray] | None = None, pin: bool = True) -> list[np.ndarray]:
        """Each buffer (its manifest entry) as an array, sizes and checksums checked. `into`: arrays to
        read into (a window's slots) instead of new memory. `pin`: False for what only the host reads (a
        dictionary's strings: a kernel reads codes), never page-locked."""
        arrays = []
        for k, meta in enumerate(buffers):
            try:
                dtype, shape, nbytes = np.dtype(meta["dtype"]), [int(s) for s in meta["shape"]], int(meta["bytes"])
                crcs = list(meta["crc32"])
                file = self.path / meta["file"]
            except (KeyError, TypeError, ValueError) as e:
                _fail(self.path, f"manifest lacks {e}")
            if dtype.kind not in "iu" or int(np.prod(shape)) * dtype.itemsize != nbytes:
                _fail(self.path, f"{meta['file']}: its manifest entry disagrees with itself")
            if not file.is_file():
                _fail(self.path, f"missing {meta['file']}")
            size = file.stat().st_size
            if size != nbytes:
                _fail(self.path, f"{meta['file']} is {'truncated' if size < nbytes else 'longer than written'} "
                                 f"({size:,} of {nbytes:,} bytes)")
            if len(crcs) != max(1, -(-nbytes // PIECE_BYTES)):
                _fail(self.path, f"{meta['file']}: its manifest entry disagrees with itself")
            array = np.empty(nbytes // dtype.itemsize, dtype) if into is None else into[k][:nbytes // dtype.itemsize]
            arrays.append((file, crcs, array.reshape(shape) if into is None else array, array))
        pieces = [(file, crcs[i], start, flat) for file, crcs, _, flat in arrays
                  for i, start in enumerate(range(0, max(flat.nbytes, 1), PIECE_BYTES))]

        def read_piece(item) -> str | None:
            file, crc, start, flat = item
            view = memoryview(flat.view(np.uint8))[start:start + PIECE_BYTES]
            with open(file, "rb") as f:
                f.seek(start)
                got = f.readinto(view)
            if got != len(view):
                return f"{file.name} is truncated"
            if self.verify and zlib.crc32(view) != crc:
                return f"{file.name} is corrupt (checksum)"
            return None

        problems = [p for p in parallel_map(read_piece, pieces) if p]
        if problems:
            _fail(self.path, problems[0])
        out = [shaped for _, _, shaped, _ in arrays]
        if self.pin is not None and into is None and pin:
            self.pin([flat for _, _, _, flat in arrays])
        return out

    # --- columns ---------------------------------------------------------------------------------------
    @_reads_manifest
    def column_entry(self, name: str) -> dict:
        try:
            return self.manifest["columns"][name]
        except (KeyError, TypeError):
            _fail(self.path, f"manifest lacks column {name}")

    @_reads_manifest
    def zones(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(meta, zmax) of a packed column, checked: a frame a row of each, the column's trailer
        (rows, factor, type, dictionary) equal to what the manifest says, every width within 64 bits
        and equal to the bit width of its frame's span (zmax - reference), so that pruning by the zone
        maps can trust them."""
        entry = self.column_entry(name)
        factor = _int(self.path, entry.get("factor"), f"{name} factor", low=1)
        try:
            meta, zmax = self.read([entry["buffers"]["meta"], entry["buffers"]["zmax"]])
            t = SqlType(*self.manifest["schema"]["types"][name])
        except (KeyError, TypeError, ValueError) as e:
            _fail(self.path, f"manifest lacks {e}")
        if meta.shape != (self.frames + TRAILER_ROWS, 2) or zmax.shape != (self.frames,) or meta.dtype != np.int64 \
                or zmax.dtype != np.int64:
            _fail(self.path, f"{name}: {len(meta):,} rows of metadata and {len(zmax):,} zone maps for {self.rows:,} rows")
        meta, trailer = meta[:self.frames], meta[self.frames:]
        if not np.array_equal(trailer, _trailer(self.rows, factor, t, self._dictionary_trailer(name))):
            _fail(self.path, f"{name}: the manifest's rows, factor, type or dictionary disagree with the column's own")
        widths = meta[:, 1] & 0xFF
        if self.frames and (widths.max() > 64 or np.any(zmax % factor)):
            _fail(self.path, f"{name}: its frame metadata disagrees with its zone maps")
        span = (zmax // factor).view(np.uint64) - meta[:, 0].view(np.uint64)  # uint64: wraps as encoded
        if not np.array_equal(bit_width(span) if self.frames else widths, widths):
            _fail(self.path, f"{name}: its frame metadata disagrees with its zone maps")
        return meta, zmax

    @_reads_manifest
    def packed(self, name: str, zones=None) -> Packed:
        """A packed column: its words read and checked against its frames' offsets and widths."""
        entry = self.column_entry(name)
        meta, zmax = zones if zones is not None else self.zones(name)
        (words,) = self.read([entry["buffers"]["words"]])
        widths, offsets = meta[:, 1] & 0xFF, meta[:, 1] >> 8
        expected = np.concatenate([[0], np.cumsum(32 * widths)]) if self.frames else np.zeros(1, np.int64)
        if words.dtype != np.uint32 or not np.array_equal(offsets, expected[:-1]) or len(words) != int(expected[-1]) + PAD_WORDS:
            _fail(self.path, f"{name}: its words disagree with its frames' offsets and widths")
        return Packed(self.rows, np.dtype(np.int64), int(entry["factor"]), meta, words, zmax)

    @_reads_manifest
    def nulls(self, name: str) -> int:
        """The rows of a column that hold NULL, as its manifest says (validity checks the bits agree)."""
        entry = self.column_entry(name)
        nulls, buffers = entry.get("nulls", 0), entry.get("buffers")
        if type(nulls) is not int or not 0 <= nulls <= self.rows or not isinstance(buffers, dict) \
                or (nulls > 0) != ("valid" in buffers):
            _fail(self.path, f"{name}: its count of NULLs disagrees with its validity")
        return nulls

    @_reads_manifest
    def validity(self, name: str) -> np.ndarray | None:
        """A bool a row of the column, True where it holds a value (its bits, a row each from the first byte's
        lowest); None where it holds no NULL. The bits cover the rows exactly and count the manifest's NULLs."""
        nulls = self.nulls(name)
        if not nulls:
            return None
        (bits,) = self.read([self.column_entry(name)["buffers"]["valid"]])
        if bits.dtype != np.uint8 or len(bits) != -(-self.rows // 8):
            _fail(self.path, f"{name}: its validity does not cover its rows")
        valid = np.unpackbits(bits, count=self.rows, bitorder="little").astype(bool)
        if self.rows - int(np.count_nonzero(valid)) != nulls or np.unpackbits(bits, bitorder="little")[self.rows:].any():
            _fail(self.path, f"{name}: its count of NULLs disagrees with its validity")
        return valid

    def _legacy_strings(self, name: str) -> list[str] | None:
        """A version-4 store's dictionary: its strings listed in the manifest (sorted, distinct), else None."""
        d = self.column_entry(name).get("dictionary")
        if d is not None and not (isinstance(d, list) and all(isinstance(s, str) for s in d) and d == sorted(set(d))):
            _fail(self.path, f"{name}: its dictionary is not sorted distinct strings")
        return d

    def _dictionary_trailer(self, name: str) -> tuple[int, int] | None:
        """(strings, digest) its trailer holds of a column's dictionary; a version-4 store's: (0, the CRC of its
        strings joined by NULs)."""
        if self.manifest.get("version") == 4:
            d = self._legacy_strings(name)
            return None if d is None else (0, zlib.crc32("\x00".join(d).encode()))
        return _dictionary_words(self.column_entry(name), self.path, name)

    @_reads_manifest
    def dictionary(self, name: str) -> Dictionary | None:
        """A VARCHAR column's dictionary: its length and digest from the manifest now, its strings read when
        first asked for (checked then: offsets within the bytes, UTF-8, sorted and distinct); a version-4
        store's from its manifest."""
        entry = self.column_entry(name)
        if self.manifest.get("version") == 4:
            d = self._legacy_strings(name)
            return None if d is None else Dictionary(d)
        words = _dictionary_words(entry, self.path, name)
        return None if words is None else Dictionary(count=words[0], digest=words[1],
                                                     load=lambda: self._dictionary_strings(name, words[0]))

    def _dictionary_strings(self, name: str, count: int):
        import pyarrow as pa
        import pyarrow.compute as pc

        buffers = self.column_entry(name)["buffers"]
        data, offsets = self.read([buffers["strings"], buffers["offsets"]], pin=False)
        if data.dtype != np.uint8 or offsets.dtype != np.int64 or offsets.shape != (count + 1,) or offsets[0] != 0 \
                or offsets[-1] != len(data) or np.any(np.diff(offsets) < 0):
            _fail(self.path, f"{name}: its dictionary's offsets disagree with its strings")
        strings = pa.LargeStringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(data))
        try:
            strings.validate(full=True)
        except pa.ArrowInvalid:
            _fail(self.path, f"{name}: its dictionary is not UTF-8")
        if count > 1 and not pc.all(pc.less(strings[:-1], strings[1:])).as_py():
            _fail(self.path, f"{name}: its dictionary is not sorted distinct strings")
        return strings

    # --- the key's slices and bucket lists --------------------------------------------------------------
    @_reads_manifest
    def key_encoding(self, encoding: str, zones=None):
        """The key sliced or indexed. Its reference and bucket size come from the key's own zone maps
        (its smallest and largest value), its histogram is counted from its top bytes: none of them
        is taken on trust from the manifest."""
        key = self.manifest.get("key")
        if not isinstance(key, dict) or "column" not in key or "buffers" not in key:
            _fail(self.path, "manifest lacks the key's slices")
        name, buffers = key["column"], key["buffers"]
        meta, zmax = zones if zones is not None else self.zones(name)
        factor = _int(self.path, self.column_entry(name).get("factor"), "key factor", low=1)
        reference = int(meta[:, 0].min()) * factor if self.rows else 0
        span = int(zmax.max()) - reference if self.rows else 0
        bucket, low_bits, _ = slice_geometry(span)
        wanted = ["top"] + (["low"] if encoding == "sliced" else ["ids"])
        if bucket > 1:
            wanted += [] if encoding == "sliced" else ["ids_low"]
        elif "low" in buffers or "ids_low" in buffers:
            _fail(self.path, "the key's slices disagree with its zone maps")
        try:
            arrays = dict(zip(wanted, self.read([buffers[b] for b in wanted if not (b == "low" and bucket == 1)])))
        except (KeyError, TypeError) as e:
            _fail(self.path, f"manifest lacks the key's {e}")
        top = arrays["top"]
        if top.dtype != np.uint8 or len(top) != max(1, self.frames) * FRAME_ROWS:
            _fail(self.path, "the key's top bytes do not cover its frames")
        for b in ("low", "ids_low"):
            if b in arrays and (arrays[b].dtype.itemsize * 8 < low_bits or len(arrays[b]) != self.rows):
                _fail(self.path, f"the key's {b.replace('_', ' ')} bits disagree with its zone maps")
        histogram = np.bincount(top[:self.rows], minlength=1 << TOP_BITS).astype(np.int64)
        if len(histogram) != 1 << TOP_BITS:
            _fail(self.path, "a key's top byte is past its last bucket")
        if encoding == "sliced":
            return Sliced(self.rows, np.dtype(np.int64), reference, bucket, top, arrays.get("low"), histogram)
        ids = arrays["ids"]
        if ids.dtype not in (np.uint32, np.uint64) or len(ids) != self.rows:
            _fail(self.path, f"the key's bucket lists hold {len(ids):,} entries for {self.rows:,} rows")
        if self.rows and int(ids.max()) >= self.rows:
            _fail(self.path, "the key's bucket lists name a row past the last")
        return Indexed(self.rows, np.dtype(np.int64), reference, bucket, ids, arrays.get("ids_low"), histogram)


def _check_source_files(path: Path, manifest: dict) -> None:
    for src in manifest.get("source", []):
        if Path(src["path"]).exists() and _changed(src):
            _fail(path, f"stale: {src['path']} changed after the store was written")


def _open_single(path: Path, manifest: dict, memory=None, check_source: bool = True) -> Table:
    """A Table whose columns read their buffers from disk when first asked for (page-locked in place
    by `memory` as they land, where given)."""
    if check_source:
        _check_source_files(path, manifest)
    files = StoreFiles(path, manifest)
    try:
        schema = Schema.from_json(manifest["schema"])
        stored = list(manifest["columns"])
    except (KeyError, TypeError, ValueError) as e:
        _fail(path, f"manifest lacks {e}")
    if set(stored) != set(schema.types):
        _fail(path, "its schema and its columns disagree")
    key = (manifest.get("key") or {}).get("column")
    columns = {}
    for name in stored:
        col = Column(name, {}, schema.types[name], files.dictionary(name), nulls=files.nulls(name))
        col.load = _loader(files, col, name == key)
        col.stored = ("packed",) + (("sliced", "indexed") if name == key else ())
        col.on_disk = _disk_bytes(manifest, name, name == key)
        columns[name] = col
    table = Table(files.rows, columns, str(path), {}, pinned=memory is not None, sorted_by=manifest.get("sorted_by"),
                  left_out=dict(schema.left_out))
    table.largest = ColumnBounds(columns)
    if memory is not None:  # what the table reads is page-locked for it, and let go with it (release_table)
        files.pin = lambda arrays: memory.pin_in_place(table, arrays)
    return table


def _disk_bytes(manifest: dict, name: str, is_key: bool) -> dict[str, int]:
    """What reading each stored encoding of a column takes from disk, by its manifest (an estimate for
    the planner: the reads themselves check every size)."""
    try:
        out = {"packed": int(manifest["columns"][name]["buffers"]["words"]["bytes"])}
        if is_key:
            buffers = manifest["key"]["buffers"]
            for encoding, names in KEY_BUFFERS.items():
                out[encoding] = sum(int(buffers[b]["bytes"]) for b in ("top", *names) if b in buffers)
        return out
    except (KeyError, TypeError, ValueError):
        return {}


def _loader(files: StoreFiles, col: Column, is_key: bool):
    def load(encoding: str):  # called under the column's lock (Column.get), or by Column.prefetch without it
        # (its read kept unless a get read the same meanwhile), while other columns are read on other threads
        if encoding == "zones":
            meta, zmax = files.zones(col.name)
            if col.dictionary is not None and files.rows and not (0 <= meta[:, 0].min() and zmax.max() < len(col.dictionary)):
                _fail(files.path, f"{col.name}: a code is past its dictionary")
            return meta, zmax, int(files.column_entry(col.name)["factor"])
        if encoding == "valid":
            return files.validity(col.name)
        zones = col.zone_buffers()[:2]
        if encoding == "packed":
            return files.packed(col.name, zones)
        if is_key and encoding in KEY_BUFFERS:
            return files.key_encoding(encoding, zones)
        raise KeyError(encoding)
    return load


def is_parted(path: Path | str) -> bool:
    try:
        return "parts" in json.loads((Path(path) / "manifest.json").read_text())
    except (OSError, ValueError, TypeError, RecursionError):
        return False


def part_path(path: Path | str, part: int) -> Path:
    """Part `part` (1-based, as tpchgen-cli numbers them) of a parted store."""
    return Path(path) / PART_NAME.format(part)


def _buffer_bytes(manifest: dict) -> int:
    """The bytes of a single store's buffers, from its manifest."""
    cols = [b["bytes"] for c in manifest["columns"].values() for b in c["buffers"].values()]
    key = [b["bytes"] for b in (manifest.get("key") or {}).get("buffers", {}).values()]
    return sum(cols) + sum(key)


def part_rows(path: Path | str, part: int, source_file: Path | None = None, echo=print) -> int | None:
    """The rows of part `part` when it is whole (its manifest checks out and its buffers pass their
    checksums) and, given `source_file`, was built from exactly that file; None when it must be
    written (again)."""
    p = part_path(path, part)
    if not is_store(p):
        return None
    try:
        rows = check_store(p)
    except StoreError as e:
        echo(f"{e.what}; writing it again")
        return None
    if source_file is not None and source_files(p) != [Path(source_file).resolve()]:
        echo(f"{p}: not built from {source_file}; writing it again")
        return None
    return rows


def write_part(path: Path | str, part: int, parts: int, source, *, record_source: bool = True, rows_before: int | None = 0,
               started: float | None = None, echo=print, sort_by: str | None = None, columns=None, key: str | None = KEY) -> int:
    """Part `part` of a parted store from a one-file source: encoded, verified and written
    atomically; one line of progress. Returns its rows. Without `record_source` the store names no
    source (its file is about to be deleted)."""
    started = time.perf_counter() if started is None else started
    written = write_store(source, part_path(path, part), source if record_source else None, echo=lambda m: None,
                          sort_by=sort_by, columns=columns, key=key)
    m = _manifest(written)
    rows = int(m["rows"])
    so_far = "" if rows_before is None else f"; {rows_before + rows:,} rows so far"  # None: parts made at once
    echo(f"part {part}/{parts}: {rows:,} row{'s' * (rows != 1)} encoded ({size_text(_buffer_bytes(m))} store) in "
         f"{time.perf_counter() - started:.1f} s{so_far}")
    return rows


def finish_parted(path: Path | str, parts: int, echo=print) -> Path:
    """Write the manifest of a parted store whose parts 1..parts are all written: the one step that
    makes it a store. Each part's manifest gives its rows, schema and sources; parts must agree on
    the schema and the sort column."""
    path = Path(path)
    entries, sources, rows, schema, sorted_by = [], [], 0, None, None
    for k in range(1, parts + 1):
        part = part_path(path, k)
        if not is_store(part):
            _fail(path, f"part {k} of {parts} ({part.name}) is missing")
        m = _manifest(part)
        if schema is None:
            schema, sorted_by = m["schema"], m.get("sorted_by")
        elif m["schema"]["types"] != schema["types"]:  # the files disagree: no rebuild mends it, so no store is left
            first, other = schema["types"], m["schema"]["types"]

            def named(t, left_out: dict, c: str) -> str:  # a column a part holds, leaves out (saying why), or lacks
                return str(SqlType(*t)) if t is not None else f"left out ({left_out[c]})" if c in left_out else "absent"
            differ = [f"{c} {named(first.get(c), schema.get('left_out', {}), c)} in part 1, "
                      f"{named(other.get(c), m['schema'].get('left_out', {}), c)} in part {k}"
                      for c in dict.fromkeys([*first, *other]) if first.get(c) != other.get(c)]
            unequal = [c for c in dict.fromkeys([*first, *other]) if first.get(c) != other.get(c)]
            kept = [c for c in first if c not in unequal]
            shutil.rmtree(path, ignore_errors=True)
            raise StoreError(f"{path}: its files disagree on their columns ({'; '.join(differ)}): gquery reads the files "
                             "of one table as one schema (DuckDB casts each file to the first one's types)"
                             + (f"; 'gquery encode --columns {','.join(kept)}' stores the columns they agree on"
                                if kept else ""))
        elif m.get("sorted_by") != sorted_by:
            _fail(path, f"part {part.name} has another sort column than part 1")
        # (its manifest's checksum: a part of another store of as many rows, copied in its place, is not this one)
        entries.append({"name": part.name, "rows": int(m["rows"]), "bytes": _buffer_bytes(m), "checksum": m["checksum"]})
        rows += int(m["rows"])
        sources += m.get("source", [])
    manifest = {"format": FORMAT, "version": VERSION, "rows": rows, "schema": schema, "sorted_by": sorted_by,
                "source": sources, "parts": entries}
    k = parts + 1
    while part_path(path, k).exists():  # an earlier store's parts past this one's last (it had more): a store opens
        shutil.rmtree(part_path(path, k))  # none beside its own (_open_parted)
        k += 1
    _write_manifest(path, manifest)
    echo(f"wrote {path} ({summary(path)})")
    return path


def column_names(path: Path | str) -> list[str]:
    """The columns a store holds, from its manifest."""
    return list(_manifest(Path(path))["schema"]["types"])


def part_count(path: Path | str) -> int:
    """How many parts a store holds: 1 for a single store."""
    return len(_manifest(Path(path)).get("parts", [None]))


def summary(path: Path | str) -> str:
    """'3 parts, 179,838 rows, 1.3 MB': what a store holds, from its manifest."""
    m = _manifest(Path(path))
    clustered = f", clustered by {m['sorted_by']}" if m.get("sorted_by") else ""
    if "parts" in m:
        return (f"{len(m['parts'])} part{'s' * (len(m['parts']) > 1)}, {int(m['rows']):,} rows, "
                f"{size_text(sum(p['bytes'] for p in m['parts']))}{clustered}")
    return f"{int(m['rows']):,} rows, {size_text(_buffer_bytes(m))}{clustered}"


def open_store(path: Path | str, memory=None, check_source: bool = True, window: int | None = None):
    """A Table from a store, or a PartedTable from a parted one; only manifests are read. With
    `memory` (gpu.memory.GpuMemory: pin_in_place(table, arrays)), buffers are page-locked
    in place as they are read, and the table says so. `window` (parted stores only): hold no part
    now; queries read parts from disk, `window` at a time."""
    path = Path(path)
    manifest = _manifest(path)
    with _reading(path):
        if "parts" in manifest:
            return _open_parted(path, manifest, memory, check_source, window)
        return _open_single(path, manifest, memory, check_source)


def _open_parted(path: Path, manifest: dict, memory, check_source: bool, window: int | None) -> PartedTable:
    try:
        names = [p["name"] for p in manifest["parts"]]
        part_rows = [_int(path, p["rows"], "part's row count") for p in manifest["parts"]]
        rows = _int(path, manifest["rows"], "row count")
    except (KeyError, TypeError, ValueError) as e:
        _fail(path, f"manifest lacks {e}")
    if sum(part_rows) != rows or not names:
        _fail(path, f"its parts hold {sum(part_rows):,} rows, the manifest {rows:,}")
    expected = [PART_NAME.format(k) for k in range(1, len(names) + 1)]
    if names != expected:  # (the parts are written 1..N: a part left out, or listed twice, is an edit)
        _fail(path, f"its manifest lists the parts {', '.join(names)}, not {expected[0]} … {expected[-1]} in order")
    beyond = part_path(path, len(names) + 1)
    if is_store(beyond):  # (finish_parted removes parts past the last: one there is a part the manifest leaves out)
        _fail(path, f"part {beyond.name} lies beside the {len(names)} parts its manifest lists")
    paths = [path / n for n in names]
    for p in paths:
        if not is_store(p):
            _fail(path, f"part {p.name} is missing")
    part_manifests = [_manifest(p) for p in paths]
    recorded = ["checksum" in entry for entry in manifest["parts"]]
    if any(recorded) and not all(recorded):  # (a store written before parts' checksums were recorded has none)
        _fail(path, "its manifest records some parts' checksums and not others")
    for p, entry, part_manifest in zip(paths, manifest["parts"], part_manifests):
        if "checksum" in entry and part_manifest.get("checksum") != entry["checksum"]:  # (a store written before
            # parts' checksums were recorded opens as it did)
            _fail(path, f"part {p.name} is not the part this store was made of (its manifest differs from the one "
                        "recorded: another store's part in its place?)")
    if window is not None:
        if window < 1:
            raise GqueryError(f"window must be at least 1 part, got {window}")
        table = PartedTable(rows, paths, part_rows, str(path), {}, None, window, pinned=memory is not None)
        table.largest = _PartedBounds(table)
        return table
    tables = []
    for p, n, part_manifest in zip(paths, part_rows, part_manifests):
        if (part_manifest.get("schema") or {}).get("types") != (manifest.get("schema") or {}).get("types"):  # (why a
            # column is left out may differ by part: one part's values past int64, another's stored without it)
            _fail(path, f"part {p.name} has another schema than the store")
        t = _open_single(p, part_manifest, memory, check_source)
        if t.rows != n:
            _fail(path, f"part {p.name} holds {t.rows:,} rows, the manifest {n:,}")
        tables.append(t)
    table = PartedTable(rows, paths, part_rows, str(path), {}, tables, 0, pinned=memory is not None)
    table.largest = _PartedBounds(table)
    return table


class _PartedBounds(dict):
    """The largest |value| of a column over every part, from each part's zone maps when asked for."""

    def __init__(self, table: PartedTable):
        super().__init__()
        self._table = table

    def __missing__(self, name: str) -> int:
        parts = self._table.tables if self._table.tables is not None else \
            [_open_single(p, _manifest(p), None, False) for p in self._table.paths]
        self[name] = max((t.largest[name] for t in parts), default=0)
        return self[name]


def _changed(src: dict) -> bool:
    """Whether a source file differs in size or time from when the store was written."""
    st = Path(src["path"]).stat()
    return st.st_size != src["bytes"] or st.st_mtime_ns != src["mtime_ns"]


def check_store(path: Path | str) -> int:
    """Read a store whole (every part of a parted one), checking every buffer against its checksums and
    everything derived from them; keeps nothing. Returns its rows."""
    path = Path(path)
    table = open_store(path, window=1) if is_parted(path) else None
    for p in (table.paths if table is not None else [path]):
        t = open_store(p)
        for col in t.columns.values():
            for encoding in col.stored:
                col.get(encoding)
            col.validity()
            if col.dictionary is not None:
                col.dictionary.strings
    return table.rows if table is not None else open_store(path).rows


def store_parts(path: Path | str) -> list[tuple[Path, int]]:
    """Each part's folder and rows, from the manifests alone (a single store is its own one part):
    what a distributed query hands out, checked before any part is read."""
    path = Path(path)
    manifest = _manifest(path)
    if "parts" in manifest:
        table = _open_parted(path, manifest, None, False, window=1)
        return list(zip(table.paths, table.part_rows))
    return [(path, _int(path, manifest.get("rows"), "row count"))]


def unchanged_sources(path: Path | str) -> tuple[Path, ...]:
    """The files a store was built from when every one is still there as it was written (then DuckDB
    can check an answer over the store against them), else ()."""
    sources = _manifest(Path(path)).get("source", [])
    if not sources or any(not Path(s["path"]).is_file() or _changed(s) for s in sources):
        return ()
    return tuple(Path(s["path"]) for s in sources)


# --- sources -------------------------------------------------------------------------------------------------
def source_files(path: Path | str) -> list[Path]:
    """The files a store was built from that still exist (none where its manifest cannot be read as a store's)."""
    try:
        manifest = _manifest(Path(path))
    except StoreError:
        return []
    return [Path(s["path"]) for s in manifest.get("source", []) if Path(s["path"]).exists()]


def refuse_replacing(path: Path | str, source) -> None:
    """StoreError where `path` holds a store of another table whose files are gone: none of the files it was built
    from is one of `source`'s, and it names none (its parquet was not kept) or one no longer there, so replacing it
    would lose a table no file holds. A store of any of these files (stale, damaged, of another order, of a folder
    that gained a part), or of files still there to build it again, is rebuilt; a store whose manifest cannot be
    read holds nothing to lose."""
    path = Path(path)
    if not is_store(path):
        return
    try:
        recorded = {Path(s["path"]).resolve() for s in _manifest(path).get("source", [])}
    except (StoreError, KeyError, TypeError, ValueError):
        return
    if recorded & {Path(f).resolve() for f in source.files} or recorded and all(f.exists() for f in recorded):
        return
    named = f"built from {sorted(map(str, recorded))[0]}{' and others' * (len(recorded) > 1)}, no longer there" \
        if recorded else "whose files were not kept"
    raise StoreError(f"{path}: a store of another table ({named}); not replacing it with {source}'s: remove it, "
                     "or give gquery encode --force")


def ensure_store(source, echo=print, sort_by: str | None = None, path: Path | str | None = None) -> Path:
    """The store of a parquet/.tbl source at `path` (default beside it): kept when whole, fresh and of
    the asked order, else (re)built from it. A source of several files becomes a parted store, a part
    a file, so no step holds more than one file's rows; parts already written (an interrupted build)
    are kept."""
    path = Path(path) if path is not None else store_path_for(source)
    if is_store(path):
        try:
            require_built_from(path, source)
            check_store(path)
            if _manifest(path).get("sorted_by") == sort_by:
                return path
            echo(f"{path}: ordered by {_manifest(path).get('sorted_by') or 'its source'}; rebuilding it ordered by "
                 f"{sort_by or 'its source'}")
        except StoreError as e:
            refuse_replacing(path, source)
            echo(f"{e.what}; rebuilding it from {source}")
    if len(source.files) > 1:
        return write_parted(source, path, echo=echo, sort_by=sort_by)
    return write_store(source, path, source, echo=echo, sort_by=sort_by)


def write_parted(source, path: Path, echo=print, sort_by: str | None = None, columns=None, key: str | None = KEY) -> Path:
    """A parted store of a multi-file source, one part a file, each part encoded, verified and written
    atomically before the next is read; parts already whole and fresh are kept (each part is
    ordered by `sort_by` within itself: zone maps prune as well in every part)."""
    from gquery.sources import LineitemSource

    path = Path(path)
    if path.exists() and is_store(path) and not is_parted(path):
        old = path.parent / f".{path.name}.old-{os.getpid()}"  # a single store of the same source
        os.replace(path, old)
        shutil.rmtree(old, ignore_errors=True)
    (path / "manifest.json").unlink(missing_ok=True)
    path.mkdir(parents=True, exist_ok=True)
    parts = len(source.files)
    todo, kept_rows = [], 0
    for k, f in enumerate(source.files, start=1):
        done = part_rows(path, k, f, echo=echo)
        if done is None or _manifest(part_path(path, k)).get("sorted_by") != sort_by:
            todo.append((k, f))
        else:
            kept_rows += done
    if len(todo) < parts:  # (as generate_parts says it: a stopped encode goes on where it stopped)
        echo(f"{parts - len(todo)} of {parts} parts already encoded ({kept_rows:,} rows); resuming")
    workers = min(len(todo), (os.cpu_count() or 1) // PART_THREADS)
    if workers > 1:  # parts at once, a process each (encoding holds the GIL between NumPy's loops)
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            jobs = [pool.submit(_write_part_job, str(path), k, parts, str(f), source.format, sort_by, columns, key)
                    for k, f in todo]
            for job in jobs:
                echo(job.result())
    else:
        rows = kept_rows
        for k, f in todo:
            rows += write_part(path, k, parts, LineitemSource(f, source.format, (f,)), rows_before=rows, echo=echo,
                               sort_by=sort_by, columns=columns, key=key)
    return finish_parted(path, parts, echo=echo)


PART_THREADS = 2  # host threads each part's process uses when several parts are encoded at once


def _write_part_job(path: str, k: int, parts: int, file: str, fmt: str, sort_by, columns, key) -> str:
    """One part in a process of its own (write_parted): its progress line, returned."""
    from gquery.sources import LineitemSource

    os.environ["GQUERY_HOST_THREADS"] = str(PART_THREADS)
    lines: list[str] = []
    write_part(path, k, parts, LineitemSource(Path(file), fmt, (Path(file),)), echo=lines.append, sort_by=sort_by,
               columns=columns, rows_before=None, key=key)
    return "; ".join(lines)


def table_name(path: Path | str) -> str:
    """The name SQL calls a store's table by: its data's (sources.table_name of the files it was built
    from, recorded in its manifest whether or not they are still there); a store built from arrays or
    an Arrow table is `lineitem`. A parted store's parts came from one folder: its name and a file's."""
    from gquery.sources import DEFAULT_TABLE
    from gquery.sources import table_name as name_of

    path = Path(path)
    first = store_parts(path)[0][0] if is_parted(path) else path
    manifest = _manifest(first)
    if not is_parted(path) and isinstance(manifest.get("table"), str) and manifest["table"]:
        return manifest["table"]  # (recorded as its source named it; a part's is its file's, not the table's)
    recorded = [Path(s["path"]) for s in manifest.get("source", []) if s.get("path")]
    if not recorded:
        return DEFAULT_TABLE
    if is_parted(path) or len(recorded) > 1:
        return name_of([recorded[0].parent, *recorded])
    return name_of(recorded)


def as_source(path: Path | str):
    """A store folder as the LineitemSource of the files it was built from (DuckDB reads those);
    the source's path is the store, so the engine opens the store itself. Files only when every
    one is still there: DuckDB over some of the parts would answer for other rows."""
    from gquery.sources import LineitemSource

    manifest = _manifest(Path(path))
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
