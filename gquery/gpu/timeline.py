"""CUDA events and host clock readings on one time axis: what every profile's stage intervals come from."""

from __future__ import annotations

import time

from gquery.profile import Interval


class Timeline:
    """CUDA events and host clock readings on one time axis, from the run's start. Tables queued
    together share one axis (`within`): their intervals line up on one profile."""

    def __init__(self, cuda, stream, within: "Timeline | None" = None, pool: list | None = None):
        self._cuda = cuda
        self._gpu: list[tuple[str, str, int, object, object]] = []
        self._host: list[Interval] = []
        self._pool = pool if pool is not None else []  # events of finished runs, recorded again
        self.recorded: list = []
        self.start = within.start if within else self.event(stream)
        self.t0 = within.t0 if within else time.perf_counter()

    def event(self, stream):
        e = self._pool.pop() if self._pool else self._cuda.Event()
        e.record(stream)
        self.recorded.append(e)
        return e

    def gpu(self, stage: str, lane: str, chunk: int, begin, end) -> None:
        self._gpu.append((stage, lane, chunk, begin, end))

    def host(self, stage: str, chunk: int, t_begin: float, t_end: float) -> None:
        self._host.append(Interval(stage, "host", chunk, (t_begin - self.t0) * 1e3, (t_end - self.t0) * 1e3))

    def intervals(self) -> list[Interval]:
        """Call after the last event completed."""
        out = [Interval(stage, lane, chunk, b.time_since(self.start), e.time_since(self.start))
               for stage, lane, chunk, b, e in self._gpu]
        return sorted(out + self._host, key=lambda i: i.start_ms)
