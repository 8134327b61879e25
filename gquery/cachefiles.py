"""Files of gquery's caches on disk (compiled kernels, parsed texts): each written whole or not at all, as
another process may be reading the same key, and a folder that cannot be written said once, on stderr (a
cache that cannot be written costs work again in each process, never an answer). Each file begins with a digest
of what follows: a byte damaged on disk makes the file a miss (made again), never another kernel or query (a
parsed text's constant changed by one byte still unpickles, and would be answered)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
from pathlib import Path

_unwritable: set = set()
DIGEST_BYTES = 16


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=DIGEST_BYTES).digest()


def read_whole(path: Path) -> bytes | None:
    """What write_whole wrote at `path`, or None where there is no such file, it cannot be read, or its digest
    is not its contents' (a damaged file, or one an older gquery wrote without a digest)."""
    try:
        data = path.read_bytes()
    except (OSError, ValueError):  # (ValueError: a name with a NUL is no file's)
        return None
    body = data[DIGEST_BYTES:]
    return body if len(data) > DIGEST_BYTES and data[:DIGEST_BYTES] == _digest(body) else None


def write_whole(path: Path, data: bytes, without: str) -> None:
    """Write `data` at `path` through a file of this process and thread renamed into place; where the folder
    cannot be written, say once what `without` it costs (for example "kernels compile again in each process")."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(_digest(data) + data)
        os.replace(tmp, path)
    except OSError as e:
        try:
            tmp.unlink(missing_ok=True)  # (a disk that filled leaves no part of a file)
        except OSError:
            pass
        if path.parent not in _unwritable:
            _unwritable.add(path.parent)
            why = "a file, not a folder" if path.parent.exists() and not path.parent.is_dir() else e.strerror or e
            print(f"gquery: the {_kind(path)} cache {path.parent} cannot be written ({why}): {without}", file=sys.stderr)


def _kind(path: Path) -> str:
    return {".cubin": "kernel", ".query": "query"}.get(path.suffix, "file")


@contextlib.contextmanager
def held(folder: Path):
    """An exclusive lock on a cache folder while the block runs, among processes and threads (flock on the folder
    itself: no file of its own in it): processes that find the cache's store of a file missing or stale build it one
    at a time, each after the other finds it built (six at once built it together, and each said the others'
    half-written store was damaged). Where the folder cannot be made or opened, the block runs unlocked: its own
    writes then say why they fail."""
    import fcntl

    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        with _held_here:
            fcntl.flock(fd, fcntl.LOCK_EX)  # (released when the descriptor closes)
            yield
    finally:
        os.close(fd)


_held_here = threading.RLock()  # (flock is a process's: threads of one process take turns here)
