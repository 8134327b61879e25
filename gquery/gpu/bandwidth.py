"""The limits a query runs against, measured on this machine like the CUDA samples' bandwidthTest:
host-to-device and device-to-host copies from pinned and from pageable memory, and device-to-device
copies (counted as bytes read plus bytes written)."""

from __future__ import annotations

import statistics

import numpy as np

from gquery.gpu.memory import GpuMemory
from gquery.host import host_threads
from gquery.timing import median_host_ms

DEFAULT_BYTES = 256 << 20


def _median_ms(cuda, action, repeat: int) -> float:
    start, end = cuda.Event(), cuda.Event()
    action()  # warm-up: first-touch and driver staging buffers stay out of the numbers
    times = []
    for _ in range(repeat):
        start.record()
        action()
        end.record()
        end.synchronize()
        times.append(end.time_since(start))
    return statistics.median(times)


def measure(memory: GpuMemory, nbytes: int = DEFAULT_BYTES, repeat: int = 5, staging_threads: int | None = None) -> dict:
    """GB/s (1e9 bytes a second) of each kind of copy; medians of `repeat` timed copies."""
    import pycuda.driver as cuda

    n = nbytes // 8
    pinned = memory.pinned_empty(n, np.int64)
    pageable = np.empty(n, dtype=np.int64)
    pinned[:] = pageable[:] = np.arange(n, dtype=np.int64)  # touched, not zeros
    dev_a, dev_b = memory.device_empty(nbytes), memory.device_empty(nbytes)
    rate = lambda bytes_, ms: bytes_ / ms / 1e6
    limits = {
        "bytes": nbytes,
        "h2d_pinned_gbps": rate(nbytes, _median_ms(cuda, lambda: cuda.memcpy_htod(dev_a, pinned), repeat)),
        "h2d_pageable_gbps": rate(nbytes, _median_ms(cuda, lambda: cuda.memcpy_htod(dev_a, pageable), repeat)),
        "d2h_pinned_gbps": rate(nbytes, _median_ms(cuda, lambda: cuda.memcpy_dtoh(pinned, dev_a), repeat)),
        "d2h_pageable_gbps": rate(nbytes, _median_ms(cuda, lambda: cuda.memcpy_dtoh(pageable, dev_a), repeat)),
        "d2d_gbps": rate(2 * nbytes, _median_ms(cuda, lambda: cuda.memcpy_dtod(dev_b, dev_a, nbytes), repeat)),
    }
    threads = staging_threads or host_threads()
    copier = memory.copier(threads)
    limits["host_staging_gbps"] = rate(nbytes, median_host_ms(lambda: copier.copy([(pinned, pageable)]), repeat))
    limits["host_staging_threads"] = threads
    dev_a.free(), dev_b.free()
    return limits
