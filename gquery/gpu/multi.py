"""Several GPUs: a parted table's parts, or one table's frames, divided among the devices. Each device
is driven by an engine of its own on a thread of its own (its primary context current there), over its
own PCIe link; answer.gpu_answer_multi runs each share's fused plan there and adds the exact partials.

    share       one device's work: a list of tables (parts, or frame views of a part or a table)
    MultiEngine the devices' workers, their shares of a table, and the links' combined copy rate

Page-locked memory is portable (gpu.memory): a store opened once is read in place by every GPU.
Device copies of a share (resident mode) live in its view's cache: spread over the GPUs' memories.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gquery.encodings import frames_of, split_frames
from gquery.gpu.executor import Engine, close_last
from gquery.table import PartedTable, Table


class DeviceWorker:
    """One GPU's engine, made and run on the GPU's own thread (gpu.device.device_thread): what the
    engine allocates belongs to that thread and is freed there too (release_table)."""

    def __init__(self, ordinal: int):
        from gquery.gpu.device import device_thread

        self.ordinal = ordinal
        self._thread = device_thread(ordinal)
        self.engine: Engine = self.submit(Engine).result()

    def submit(self, fn, *args):
        return self._thread.submit(fn, *args)

    def close(self) -> None:
        def stop():
            engine, self.engine = self.engine, None
            close_last(engine)  # on the thread of its context

        if self.engine is not None:
            self.submit(stop).result()


class SharedMemory:
    """The memory layer as the many-GPU engine's callers see it: allocations on the calling thread
    (page-locked memory is portable: every GPU reads it), and release_table that frees each
    device's share of a table on that device's own thread, then the rest here."""

    def __init__(self, workers: list[DeviceWorker]):
        self._workers = workers
        self._here = workers[0].engine.memory

    def __getattr__(self, name):
        return getattr(self._here, name)

    def release_table(self, table) -> None:
        """Each device's own allocations on its thread, then the rest (page-locked memory, registrations, and
        what another engine of GPU 0 made) on GPU 0's thread: PyCUDA frees GPU 0's objects only there."""
        for w in self._workers:
            w.submit(w.engine.memory.release_table, table, True).result()
        self._workers[0].submit(self._here.release_table, table).result()


@dataclass
class Share:
    device: int  # index into MultiEngine.workers
    tables: list = field(default_factory=list)  # Tables: parts, or frame views of a part or a table
    rows: int = 0


class MultiEngine:
    """`gpus` devices' workers, and their shares of a Table or a PartedTable."""

    def __init__(self, gpus=1):
        from gquery.gpu.device import device_count, require, resolve_gpus

        require()
        n = resolve_gpus(gpus, device_count())
        self.workers = [DeviceWorker(k) for k in range(n)]
        self.device = self.workers[0].engine.device
        self.memory = SharedMemory(self.workers)

    @property
    def gpus(self) -> int:
        return len(self.workers)

    def close(self) -> None:
        for w in self.workers:
            w.close()

    # --- dividing the work -----------------------------------------------------------------
    def shares(self, table) -> list[Share]:
        """Nearly equal row shares, one a GPU, of a table held in memory (kept in its cache). Frames are the
        unit: a part is cut only where a share's boundary falls inside it."""
        n = self.gpus
        key = ("shares", n)
        if key not in table.cache:
            tables = table.tables if isinstance(table, PartedTable) else [table]
            table.cache[key] = _frame_shares(tables, n)
        return table.cache[key]


def _frame_shares(tables: list[Table], n: int) -> list[Share]:
    """Divide the frames of consecutive tables into n contiguous shares of nearly equal frames;
    a table wholly inside one share is used as it is, a cut one through frame views."""
    counts = [frames_of(t.rows) for t in tables]
    shares = [Share(k) for k in range(n)]
    starts = [0]
    for c in counts:
        starts.append(starts[-1] + c)
    for k, (g0, g1) in enumerate(split_frames(starts[-1], n)):
        for t, c, s in zip(tables, counts, starts):
            a, b = max(g0, s) - s, min(g1, s + c) - s
            if a >= b:
                continue
            piece = t if (a, b) == (0, c) else t.view(a, b)
            shares[k].tables.append(piece)
            shares[k].rows += piece.rows
    return [s for s in shares if s.tables]


__all__ = ["MultiEngine", "Share", "DeviceWorker"]
