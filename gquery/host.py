"""The host's parallelism: how many threads host copies, checksums and encodings use, and one way to
split work among them (NumPy, zlib and file reads drop the GIL, so threads reach the memory
system's rate rather than one core's)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

MAX_HOST_THREADS = 16  # host copies stop scaling near here (measured on a 16-core GPU host)


def host_threads() -> int:
    """Threads for host copies into pinned memory: staging, pinning, the bandwidth test, encoding
    ($GQUERY_HOST_THREADS where set: a process that shares the host with others of its kind)."""
    given = os.environ.get("GQUERY_HOST_THREADS", "")
    return int(given) if given.isdigit() and int(given) > 0 else min(MAX_HOST_THREADS, os.cpu_count() or 1)


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
