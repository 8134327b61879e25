"""Probe: how fast can Python threads copy pageable host memory into page-locked buffers?
Compares np.copyto and ctypes.memmove (which drops the GIL for certain) across thread counts and
piece sizes, alone and while the GPU copies from another pinned buffer. Prints GB/s medians."""

import ctypes
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pycuda.autoprimaryctx  # noqa: F401
import pycuda.driver as cuda

N = 1200 << 20  # bytes, like SF10's three columns
src = np.ones(N // 8, dtype=np.int64)
dst = cuda.pagelocked_empty(N // 8, np.int64)
dst[:] = 0


def copy_np(d, s):
    np.copyto(d, s)


def copy_memmove(d, s):
    ctypes.memmove(d.ctypes.data, s.ctypes.data, s.nbytes)


def run(fn, threads, piece_bytes, pool):
    step = piece_bytes // 8
    jobs = [(dst[a:a + step], src[a:a + step]) for a in range(0, len(src), step)]
    t0 = time.perf_counter()
    list(pool.map(lambda j: fn(*j), jobs))
    return N / (time.perf_counter() - t0) / 1e9


for name, fn in (("np.copyto", copy_np), ("memmove", copy_memmove)):
    for threads in (1, 4, 8, 16):
        with ThreadPoolExecutor(threads) as pool:
            for piece in (1 << 20, 4 << 20, 16 << 20):
                rates = [run(fn, threads, piece, pool) for _ in range(5)]
                print(f"{name:10s} threads {threads:2d} piece {piece >> 20:2d} MiB: {statistics.median(rates):6.1f} GB/s")
                sys.stdout.flush()
