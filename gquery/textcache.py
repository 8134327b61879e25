"""Texts parsed in an earlier process, kept on disk as their bound Query: a fresh process asking a text this
machine has parsed before answers without importing sqlglot (about 0.2 s of a first answer's 0.4-0.6, on the
critical path while the GPU's context is made beside it), as a compiled kernel is found on disk (gpu.kernels).

A file is keyed by the text, the table's name and schema, and what a parse depends on beyond them: gquery's
modules, sqlglot and DuckDB as installed (their files' sizes and times) and Python's version; so a changed
parser or a changed table is another key. A file is read as gquery's query nodes alone (nothing else is
unpickled), and it must hold its digest (cachefiles), the digest of the key and text it is named for, and that text:
a damaged, foreign or renamed file is a miss, parsed and written again. Only a process's first KEPT_A_PROCESS texts
are written, as it exits (a loop over generated texts leaves a bounded trace, and no call waits for a write), and the
folder is cut to its newest half once it holds FILES_KEPT."""

from __future__ import annotations

import atexit
import functools
import hashlib
import io
import json
import os
import pickle
import sys
import threading
from pathlib import Path

from gquery import query as _query
from gquery.cachefiles import read_whole, write_whole

KEPT_A_PROCESS = 64  # texts a process writes: its first ones, those a fresh process would wait for sqlglot to parse
LONGEST_TEXT = 4096  # characters of a text kept at most: a tree pickles recursively, so none deeper than ~2,000 levels
FILES_KEPT = 4096  # files the folder holds before its older half is removed
_ALLOWED = {("builtins", "frozenset"), ("builtins", "set"), ("decimal", "Decimal"), ("datetime", "date"),
            ("datetime", "datetime"), ("datetime", "timedelta")}

_lock = threading.Lock()
_written = 0  # texts this process has kept
_pending: list = []  # (text, table key, Query) kept and not yet written


def cache_dir() -> Path:
    """$GQUERY_QUERY_CACHE, else $XDG_CACHE_HOME/gquery/queries, else ~/.cache/gquery/queries."""
    if os.environ.get("GQUERY_QUERY_CACHE"):
        return Path(os.environ["GQUERY_QUERY_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gquery" / "queries"


def table_key(name: str, schema) -> str | None:
    """What of a table a parse reads: its name and its schema (each column's name and type, and those left out),
    with what the parser's code is (_code); None where that cannot be known: nothing is then kept or read."""
    code = _code()
    return None if code is None else json.dumps([name, schema.to_json(), code])  # (json: a NUL in a name is one key)


def load(text: str, table: str, key: str | None):
    """The Query of a text parsed before over a table of this key, or None."""
    if key is None:
        return None
    stamp = _stamp(text, key)
    data = read_whole(cache_dir() / _name(stamp))
    if data is None or data[:len(stamp)] != stamp:  # (a file of another key under this one's name: a miss, not its query)
        return None
    try:
        found = _Nodes(io.BytesIO(data[len(stamp):])).load()
    except Exception:  # noqa: BLE001 (a damaged file, or one of another pickle: a miss, written again)
        return None
    if not isinstance(found, _query.Query) or found.sql != text or found.table != table:
        return None
    return found


def keep(text: str, key: str | None, query) -> None:
    """Keep a text's Query to be written as the process exits (write_kept), where this process has kept fewer than
    KEPT_A_PROCESS: a write on the text's own call (its pickle, a file made and renamed) cost a new text 0.2-0.5 ms on
    the H200 host, against a floor of 2."""
    global _written
    if key is None or len(text) > LONGEST_TEXT:
        return
    with _lock:
        if _written >= KEPT_A_PROCESS:
            return
        _written += 1
        _pending.append((text, key, query))
        if len(_pending) == 1:
            atexit.register(write_kept)


def write_kept() -> None:
    """Write the texts kept so far, each whole or not at all (another process may be reading it); a folder that cannot
    be written costs parses, not answers: said once. At exit, and where a caller wants them written now."""
    with _lock:
        pending = list(_pending)
        _pending.clear()
    if not pending:
        return
    folder = cache_dir()
    try:
        _cut(folder)
    except OSError:  # (no folder yet, or one that cannot be read: write_whole says which)
        pass
    for text, key, query in pending:
        try:
            data = pickle.dumps(query, protocol=pickle.HIGHEST_PROTOCOL)
        except RecursionError:  # a tree deeper than the interpreter's limit lets it pickle: parsed in each process
            continue
        stamp = _stamp(text, key)
        write_whole(folder / _name(stamp), stamp + data, "each process parses its texts again")


def _stamp(text: str, key: str) -> bytes:
    """The digest of a text and its table's key: a file's name, and its first bytes (a file renamed, copied or swapped
    into another key's name holds another key's digest: read as another table's query, its binding was another's)."""
    return hashlib.sha256(f"{key}\0{text}".encode("utf-8", "surrogatepass")).digest()


def _name(stamp: bytes) -> str:
    return stamp.hex() + ".query"


def _cut(folder: Path) -> None:
    """Remove the older half of the folder's files where it holds FILES_KEPT (a process's first write looks)."""
    files = [e for e in os.scandir(folder) if e.name.endswith(".query")]
    if len(files) < FILES_KEPT:
        return
    files.sort(key=lambda e: e.stat().st_mtime_ns)
    for e in files[:len(files) // 2]:
        try:
            os.unlink(e.path)
        except OSError:  # another process removed it first
            pass


class _Nodes(pickle.Unpickler):
    """Unpickles gquery.query's classes and a few of the standard library's values, nothing else."""

    def find_class(self, module, name):
        if module == _query.__name__ and isinstance(getattr(_query, name, None), type):
            return getattr(_query, name)
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not a query's node")


@functools.cache
def _code() -> str | None:
    """What a parse depends on besides the text and table: gquery's modules, sqlglot's and DuckDB's (a release
    rewrites them all), and Python's version, each file by its size and modification time (found without
    importing sqlglot or DuckDB: their imports are what a hit saves). None where a package's files cannot be
    found (imported without a spec): then no text is kept or read."""
    import importlib.util

    files = sorted(Path(__file__).parent.glob("*.py"))
    stamp = [sys.version]
    for package in ("sqlglot", "duckdb"):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            return None
        stamp.append(f"{package} at {spec.origin if spec is not None else 'none'}")  # (its absence is in the key too)
        files += sorted(Path(spec.origin).parent.glob("*.py")) if spec is not None and spec.origin else []
    for f in files:
        try:
            s = f.stat()
        except OSError:
            continue
        stamp.append(f"{f}\0{s.st_size}\0{s.st_mtime_ns}")
    return hashlib.sha256("\0".join(stamp).encode("utf-8", "surrogatepass")).hexdigest()
