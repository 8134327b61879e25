"""How a run is timed: warm up for a time, then time at least `repeat` runs and at least a tenth
of a second of them, and take the median (as triton's do_bench and nvbench do). A count alone is
too little for a query of 0.1 ms: five of them are half a millisecond of work, too short for the
GPU's clocks to leave an idle state, and their median then measures the ramp, not the query."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")

WARMUP_MS = 25.0  # untimed runs first: module load, first touch, clocks
MIN_TIMED_MS = 100.0  # timed runs go on until they have taken this long, `repeat` or more of them
MAX_RUNS = 1000  # a bound for runs of microseconds


def _until(run: Callable[[], T], runs: int, min_ms: float) -> list[T]:
    out, t0 = [], time.perf_counter()
    while len(out) < runs or ((time.perf_counter() - t0) * 1e3 < min_ms and len(out) < MAX_RUNS):
        out.append(run())
    return out


def warm_up(run: Callable[[], T], min_ms: float = WARMUP_MS) -> list[T]:
    """One run at least, and more until `min_ms` have passed; their results, the first first."""
    return _until(run, 1, min_ms)


def timed_runs(run: Callable[[], T], repeat: int, min_ms: float = MIN_TIMED_MS) -> list[T]:
    """`repeat` runs at least, and more until `min_ms` have passed (min_ms=0: exactly `repeat`)."""
    return _until(run, repeat, min_ms)


def median_host_ms(action: Callable[[], object], repeat: int) -> float:
    """The median host-clock milliseconds of `repeat` calls of action, after one untimed call."""
    import statistics  # (a benchmark's: not imported by every query's module)

    action()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        action()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)
