"""The GPU engine of this thread: its device, its memory layer, its streams and CUDA events, and where a
table's buffers are for a plan (a mapped copy, the table's own memory registered in place, or a device
copy). Runners of kernels hang on it (`extensions`: gpu/fused.py's runs every query of the class; the
ladder keeps its own) and are closed with it."""

from __future__ import annotations

import numpy as np

from gquery.errors import GqueryError
from gquery.gpu import kernels
from gquery.gpu.device import current_info, require
from gquery.gpu.memory import GpuMemory
from gquery.host import host_threads
from gquery.table import Table


class Engine:
    """The GPU engine on the device of the context current on this thread (device 0's primary
    context unless a caller such as gpu.multi made another current). Scratch memory is reused
    across queries; what belongs to a table (device copies, pinned copies, registrations) lives in
    table.cache, device and pinned copies keyed by the memory layer (and so the thread) that made them."""

    def __init__(self):
        import pycuda.driver as cuda

        require()
        self.device = current_info()
        self._cuda = cuda
        self.memory = GpuMemory()
        self._streams: list = []
        self._events: list = []  # CUDA events for reuse: creating ~250 a query costs the host ~1 ms
        self.extensions: dict = {}  # runners of other kernels on this engine (gpu/fused.py), closed with it

    def streams(self, n: int) -> list:
        while len(self._streams) < n:
            self._streams.append(self._cuda.Stream())
        return self._streams[:n]

    # --- where each buffer is ------------------------------------------------------------------
    def _host_buffer(self, table: Table, key: tuple, array: np.ndarray, mode: str) -> np.ndarray:
        """The host array a plan reads: pinned mode a mapped copy (unless the table is mapped
        already), registered mode the table's own array locked in place, pageable as it is."""
        if mode == "pageable" or mode == "resident":
            return array
        if self.memory.is_mapped(array):  # already page-locked and mapped (a store opened so): in place
            return array.reshape(-1)
        if mode == "pinned":
            k = ("pinned", self.memory.tag, *key)
            if k not in table.cache:
                copy = self.memory.mapped_empty(array.size, array.dtype)
                self.memory.copier(host_threads()).copy([(copy, array.reshape(-1))])
                table.cache[k] = copy
            return table.cache[k]
        owner = self.memory.owner(array)
        k = ("registered", owner.ctypes.data)
        if k not in table.cache and owner.nbytes:
            if owner.base is not None:
                raise GqueryError("cannot register this table's memory in place (it is not a NumPy allocation); "
                                  "use --mode pinned")
            table.cache[k] = (self.memory.register(owner), owner)
        return array.reshape(-1)

    def _resident(self, table: Table, key: tuple, array: np.ndarray):
        k = ("device", self.memory.tag, *key)
        if k not in table.cache:
            table.cache[k] = (self.memory.upload(array), array.nbytes)
        return table.cache[k][0]

    def close(self) -> None:
        for ext in self.extensions.values():
            ext.close()
        self.extensions.clear()
        self.memory.release()
        self._streams.clear()
        self._events.clear()


class _Closable:
    """A value kept in Engine.extensions that needs nothing done to close."""

    def __init__(self, value):
        self.value = value

    def close(self) -> None:
        self.value = None


def close_last(engine: Engine) -> None:
    """Close the last engine of this thread, then collect what it left and forget this thread's
    modules: everything of its context is freed here, on its own thread, not at the interpreter's
    exit (where PyCUDA can only warn of it)."""
    import gc

    engine.close()
    gc.collect()
    kernels.drop_modules()
