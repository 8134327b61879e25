"""The host's parallelism: how many threads host copies, checksums and encodings use, and one way to
split work among them (NumPy, zlib and file reads drop the GIL, so threads reach the memory
system's rate rather than one core's); and its heap, kept for a query's arrays (keep_heap)."""

from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from gquery.errors import UsageError

MAX_HOST_THREADS = 16  # host copies stop scaling near here (measured on a 16-core GPU host)
# glibc's malloc as its own dynamic thresholds leave it once a 32 MB block is freed: blocks below 32 MB from the
# heap, 64 MB of freed heap kept (mallopt's parameters, malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD, TRIM_THRESHOLD = 32 << 20, 64 << 20
_heap_kept = False
_heap_lock = threading.Lock()


def host_threads() -> int:
    """Threads for host copies into pinned memory: staging, pinning, the bandwidth test, encoding
    ($GQUERY_HOST_THREADS where set: a process that shares the host with others of its kind)."""
    given = os.environ.get("GQUERY_HOST_THREADS", "")
    return int(given) if given.isdigit() and int(given) > 0 else min(MAX_HOST_THREADS, os.cpu_count() or 1)


def keep_heap() -> None:
    """Set glibc's malloc as its dynamic thresholds reach once a 32 MB block is freed, from the start: a plan's
    NumPy arrays (a few of 0.5 MB a query at SF 10) were otherwise each mapped and faulted in afresh, some
    360 page faults a plan where 13 are left so. Once a process, from gquery.open; $GQUERY_KEEP_HEAP=0 leaves
    malloc as it is, as does any $MALLOC_*_ the process was started with; no glibc (macOS, musl): nothing."""
    global _heap_kept
    given = os.environ.get("GQUERY_KEEP_HEAP", "1").strip()
    if given not in ("0", "1"):
        raise UsageError(f"GQUERY_KEEP_HEAP must be 0 or 1, got {given!r}")
    with _heap_lock:
        if _heap_kept:
            return
        _heap_kept = True
        if given == "0" or any(k.startswith("MALLOC_") and k.endswith("_") for k in os.environ):
            return
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):  # not glibc's malloc
            return
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)


def parallel_ranges(n: int, work, min_items: int = 1024) -> None:
    """work(first, end) over [0, n) split among host threads."""
    pieces = max(1, min(host_threads(), n // min_items))
    bounds = [n * k // pieces for k in range(pieces + 1)]
    if pieces == 1:
        work(0, n)
        return
    with ThreadPoolExecutor(pieces) as pool:
        for _ in pool.map(lambda k: work(bounds[k], bounds[k + 1]), range(pieces)):
            pass


def parallel_map(fn, items, most: int | None = None) -> list:
    """fn over items on host threads (at most `most` of them where given), results in order."""
    items = list(items)
    with ThreadPoolExecutor(max(1, min(host_threads(), len(items), most or len(items)))) as pool:
        return list(pool.map(fn, items))
