"""The CuPy one-liner on the engine's resident columns, the baseline the fused kernel must beat:
    cp.sum(cp.where(s < Z, q * p, 0))
CuPy runs on the same primary context as PyCUDA, so it reads our device buffers in place."""

from __future__ import annotations

import statistics

import numpy as np

from gquery import timing
from gquery.gpu.memory import COLUMN_DTYPES, DeviceColumns
from gquery.mission import MissionQuery


def available() -> bool:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    return True


def one_liner(dev: DeviceColumns, rows: int, query: MissionQuery, repeat: int) -> tuple[float, int]:
    """(median ms by CUDA events, the int64 sum in ten-thousandths) of the one-liner."""
    import cupy as cp

    def view(alloc, dtype):
        nbytes = rows * np.dtype(dtype).itemsize
        return cp.ndarray((rows,), dtype, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(int(alloc), nbytes, dev), 0))

    s, q, p = (view(a, d) for a, d in zip(dev.allocations, COLUMN_DTYPES))
    z = query.z_int64

    def run():
        return cp.sum(cp.where(s < z, q * p, 0))

    start, end = cp.cuda.Event(), cp.cuda.Event()

    def timed() -> float:
        start.record()
        run()
        end.record()
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end)

    value = int(run())  # CuPy compiles its kernels here
    timing.warm_up(timed)  # timed as the engine's runs are (gquery.timing)
    return statistics.median(timing.timed_runs(timed, repeat)), value
