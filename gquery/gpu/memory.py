"""The one layer that owns GPU and page-locked memory and the copies between them.

Device columns of resident tables (the column cache), the per-stream chunk buffers of streamed
plans, pinned copies of host columns, the pinned staging ring and the result accumulator are
allocated here, reused across queries, and released by release() or at exit.

Encoded tables (gquery.table) keep their own device copies, mapped pinned copies and in-place
registrations in `table.cache`, allocated here: they live as long as the table, or until
release_table(table), so a benchmark over several scale factors holds one table at a time.
Mapped host memory is recorded with its device address, so a kernel can read any view of it.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import threading
import math
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from gquery.columns import LineitemColumns

COLUMN_DTYPES = (np.int32, np.int64, np.int64)  # suppkey, quantity, extendedprice: see columns
ROW_BYTES = sum(np.dtype(d).itemsize for d in COLUMN_DTYPES)
ACC_WORDS = 8  # the result accumulator: sums and counters (see scan.cu and select_sum.cu)
DEVICE_PAD_BYTES = 64  # past a resident buffer's end: a 4-row vector or a 3-word read stays inside
COPY_PIECE_BYTES = 8 << 20  # smaller shares cost more in hand-off than they gain (measured: 1 MiB halves the rate)


class HostCopier:
    """Host-to-host copies on several threads: NumPy drops the GIL while it copies, so the threads
    together reach the memory system's rate rather than one core's."""

    def __init__(self, threads: int):
        self.threads = max(1, threads)
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="gquery-stage")

    def copy(self, pairs) -> None:
        """Copy each (dst, src) pair of equal-length 1-D arrays; returns when all are done. Thread k
        copies the k-th slice of every pair: equal shares, one task per thread."""
        pairs = list(pairs)
        total = sum(src.nbytes for _, src in pairs)
        pieces = max(1, min(self.threads, math.ceil(total / COPY_PIECE_BYTES)))

        def share(k: int) -> None:
            for dst, src in pairs:
                a, b = len(src) * k // pieces, len(src) * (k + 1) // pieces
                np.copyto(dst[a:b], src[a:b])

        for _ in self._pool.map(share, range(pieces)):
            pass

    def close(self) -> None:
        self._pool.shutdown(wait=True)


class Registration:
    """cuMemHostRegister on an array's memory, mapped into the device's address space."""

    FLAGS = 0x01 | 0x02  # CU_MEMHOSTREGISTER_PORTABLE (every context) | DEVICEMAP (zero-copy)

    def __init__(self, a: np.ndarray):
        import ctypes

        self._lib = _libcuda()
        self._ptr = ctypes.c_void_p(a.ctypes.data)
        self._array = a  # keeps the memory alive while registered
        _check(self._lib.cuMemHostRegister_v2(self._ptr, ctypes.c_size_t(a.nbytes), self.FLAGS), "cuMemHostRegister")
        dev = ctypes.c_uint64(0)
        _check(self._lib.cuMemHostGetDevicePointer_v2(ctypes.byref(dev), self._ptr, 0), "cuMemHostGetDevicePointer")
        self.device_pointer = dev.value
        self._registered = True

    def unregister(self) -> None:
        if self._registered:
            self._registered = False
            _check(self._lib.cuMemHostUnregister(self._ptr), "cuMemHostUnregister")


@functools.lru_cache(maxsize=1)
def _libcuda():
    import ctypes

    return ctypes.CDLL("libcuda.so.1")


class PinnedHost:
    """Page-locked host memory (cuMemHostAlloc, portable: every GPU's context sees it page-locked and
    mapped), through the driver's C API rather than PyCUDA. Its free runs on whichever thread drops the
    last reference, with the allocating context pushed there for the call: PyCUDA frees page-locked
    memory only on the thread of the context that made it, and an array in a reference cycle collected
    on another thread leaked with a warning ("out-of-thread context could not be cleaned up"). The
    allocation holds a retain of its device's primary context, so the context outlives its memory.
    NumPy arrays view it (np.frombuffer over `buffer`); the last view's death frees it."""

    PORTABLE, DEVICEMAP = 0x01, 0x02  # CU_MEMHOSTALLOC_*

    def __init__(self, nbytes: int, mapped: bool):
        import ctypes

        lib = _libcuda()
        context, device = ctypes.c_void_p(), ctypes.c_int()
        _check(lib.cuCtxGetCurrent(ctypes.byref(context)), "cuCtxGetCurrent")
        if not context.value:
            from gquery.errors import GqueryError

            raise GqueryError("page-locked memory asked for on a thread with no GPU context current")
        _check(lib.cuCtxGetDevice(ctypes.byref(device)), "cuCtxGetDevice")
        primary = ctypes.c_void_p()
        _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(primary), device), "cuDevicePrimaryCtxRetain")
        ptr = ctypes.c_void_p()
        flags = self.PORTABLE | (self.DEVICEMAP if mapped else 0)
        code = lib.cuMemHostAlloc(ctypes.byref(ptr), ctypes.c_size_t(max(int(nbytes), 1)), flags)
        if code != 0:
            _release_primary(lib, device.value)
            _check(code, f"cuMemHostAlloc of {nbytes:,} bytes")
        self.address = ptr.value
        self.nbytes = int(nbytes)
        self.buffer = (ctypes.c_ubyte * max(self.nbytes, 1)).from_address(self.address)
        # the free belongs to the buffer the arrays view: it runs once no array (and no self) holds it
        weakref.finalize(self.buffer, _free_pinned, lib, self.address, primary.value, device.value)
        self.device_pointer = 0
        if mapped:
            dev = ctypes.c_uint64(0)
            _check(lib.cuMemHostGetDevicePointer_v2(ctypes.byref(dev), ptr, 0), "cuMemHostGetDevicePointer")
            self.device_pointer = dev.value

    def array(self, n: int, dtype) -> np.ndarray:
        return np.frombuffer(self.buffer, dtype=dtype, count=int(n))


def _free_pinned(lib, address: int, context: int, device: int) -> None:
    """cuMemFreeHost with the allocating device's primary context pushed on this thread, whichever it
    is, then the allocation's retain of that context let go."""
    import ctypes

    if lib.cuCtxPushCurrent_v2(ctypes.c_void_p(context)) == 0:
        lib.cuMemFreeHost(ctypes.c_void_p(address))
        lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
    _release_primary(lib, device)


def _release_primary(lib, device: int) -> None:
    release = getattr(lib, "cuDevicePrimaryCtxRelease_v2", None) or lib.cuDevicePrimaryCtxRelease
    release(device)


def _check(code: int, what: str) -> None:
    if code != 0:
        from gquery.errors import GqueryError

        raise GqueryError(f"{what} failed with CUDA error {code}")


@dataclass
class DeviceColumns:
    """The three columns in device memory, room for `capacity` rows."""

    allocations: tuple
    capacity: int

    def pointers(self) -> tuple[int, int, int]:
        return tuple(int(a) for a in self.allocations)


# Page-locked memory is allocated portable (every GPU's context sees it page-locked and mapped,
# at the same address under unified addressing), so one record serves every device's engine.
# An entry lives as long as the array that owns the memory (a weak reference): a later allocation
# at a freed address is never mistaken for mapped memory.
_MAPPED: dict[int, tuple[int, int, object]] = {}  # host start → (end, device start, weakref to owner)
_MAPPED_STARTS: list[int] = []  # _MAPPED's keys, sorted
_TAGS = itertools.count(1)
_GENERATIONS = itertools.count(1)
_generation = next(_GENERATIONS)


def generation() -> int:
    """The memory's generation, process-wide: a fresh value after each free of an address a queued run may hold
    (device memory freed, a scratch buffer regrown, device or host, a registration let go, a table's memory
    released, by any memory layer). A run prepared from the value read before it began is replayed only while the value is
    unchanged (gpu.fused). A new allocation or registration moves nothing a prepared run holds: no new value."""
    return _generation


def freed() -> None:
    """Say that memory a prepared run may hold was freed: every prepared run is prepared again."""
    global _generation
    _generation = next(_GENERATIONS)  # a fresh value from any thread: next() is atomic
_REGISTERED: dict[int, list] = {}  # owner's address → [Registration, tables holding it]: one a process
_REGISTER_LOCK = threading.Lock()


def _forget(start: int) -> None:
    if _MAPPED.pop(start, None) is not None:
        _MAPPED_STARTS.remove(start)


class GpuMemory:
    def __init__(self):
        import pycuda.driver as cuda

        self._cuda = cuda
        self.tag = next(_TAGS)  # marks this layer's allocations in table caches
        self._rings: dict[tuple[int, int], list[DeviceColumns]] = {}
        self._pinned: dict[int, tuple[LineitemColumns, LineitemColumns]] = {}
        self._accumulator = None
        self._scratch: dict[str, object] = {}
        self._copiers: dict[int, HostCopier] = {}
        self._tables = weakref.WeakValueDictionary()  # tables this layer cached memory into (hold)
        self._context = cuda.Context.get_current()  # page-locking from another thread makes it current there

    def hold(self, table) -> None:
        """Note a table this layer put memory into (table.cache): release() frees it there too, on
        this layer's thread, so nothing of this context is left for the interpreter's exit."""
        self._tables[id(table)] = table

    # --- allocation -------------------------------------------------------------------------
    def device_empty(self, nbytes: int):
        return self._cuda.mem_alloc(max(int(nbytes), 1))

    def pinned_empty(self, n: int, dtype) -> np.ndarray:
        """Page-locked host memory (PinnedHost: freed from any thread)."""
        return PinnedHost(int(n) * np.dtype(dtype).itemsize, mapped=False).array(n, dtype)

    def mapped_empty(self, n: int, dtype) -> np.ndarray:
        """Page-locked host memory that kernels of every GPU can also read in place (zero-copy)."""
        host = PinnedHost(int(max(n, 1)) * np.dtype(dtype).itemsize, mapped=True)
        a = host.array(max(n, 1), dtype)
        self._record_mapped(a, host.device_pointer)
        return a[:n]

    @staticmethod
    def owner(a: np.ndarray) -> np.ndarray:
        """The array that owns a view's memory: what registration page-locks."""
        while isinstance(a.base, np.ndarray):
            a = a.base
        return a

    def register(self, a: np.ndarray) -> "Registration":
        """Page-lock the memory an array owns where it lies (cuMemHostRegister), mapped for
        zero-copy; the handle unregisters it. No copy: the user's own array is what the GPU then
        copies from. Views of it are found through mapped_pointer. (Through the driver API
        directly: PyCUDA's register_host_memory fails under NumPy 2 setting the array's base.)"""
        if a.base is not None:
            raise ValueError("register the array that owns its memory (GpuMemory.owner)")
        with _REGISTER_LOCK:  # GPUs whose shares view one array register it once, and count
            held = _REGISTERED.get(a.ctypes.data)
            if held is not None:
                held[1] += 1
                return held[0]
            handle = Registration(a)
            _REGISTERED[a.ctypes.data] = [handle, 1]
            self._record_mapped(a, handle.device_pointer)
            return handle

    def pin_in_place(self, table, arrays) -> None:
        """Page-lock a table's host arrays where they lie (a store's buffers as they are read), mapped
        for zero-copy reads; they stay so until release_table(table) or release(). Whichever thread read
        them: this layer's context is made current there for the registration (a thread that waited for
        the GPU's own thread here, holding a column's lock, could wait for a job that waits for that lock)."""
        self.in_context(self._pin_in_place, table, arrays)

    def in_context(self, fn, *args):
        """fn(*args) with this layer's context current on the calling thread: pushed for the call where another
        context, or none, is current here."""
        current = self._cuda.Context.get_current()
        foreign = self._context is not None and (current is None or current.handle != self._context.handle)
        if foreign:
            self._context.push()
        try:
            return fn(*args)
        finally:
            if foreign:
                self._cuda.Context.pop()

    def _pin_in_place(self, table, arrays) -> None:
        self.hold(table)
        for a in arrays:
            owner = self.owner(a)
            k = ("registered", owner.ctypes.data)
            if owner.nbytes and k not in table.cache:
                table.cache[k] = (self.register(owner), owner)

    def unregister(self, handle, a: np.ndarray) -> None:
        try:
            self._unregister(handle, a)
        finally:
            freed()

    def _unregister(self, handle, a: np.ndarray) -> None:
        with _REGISTER_LOCK:
            held = _REGISTERED.get(a.ctypes.data)
            if held is not None and held[0] is handle:
                held[1] -= 1
                if held[1]:
                    return
                del _REGISTERED[a.ctypes.data]
            _forget(a.ctypes.data)
            handle.unregister()

    def _record_mapped(self, a: np.ndarray, device_ptr: int) -> None:
        start = a.ctypes.data
        if start not in _MAPPED:
            bisect.insort(_MAPPED_STARTS, start)
        _MAPPED[start] = (start + a.nbytes, int(device_ptr), weakref.ref(a))

    def _find(self, addr: int) -> tuple[int, int, int] | None:
        """(start, end, device start) of the live mapped allocation holding addr, by bisection
        (a parted store records hundreds of buffers; kernels' arguments look them up per chunk)."""
        while True:
            k = bisect.bisect_right(_MAPPED_STARTS, addr) - 1
            if k < 0:
                return None
            start = _MAPPED_STARTS[k]
            end, dev, ref = _MAPPED[start]
            if ref() is not None:
                return (start, end, dev) if start <= addr < end or addr == start == end else None
            _forget(start)  # freed: an allocation below it may hold addr

    def mapped_pointer(self, view: np.ndarray) -> int:
        """The device address of a view of mapped host memory (0 for an empty view: never read)."""
        if view.nbytes == 0:
            return 0
        addr = view.ctypes.data  # (a ctypes object made a read: once)
        found = self._find(addr)
        if found is None:
            raise ValueError("this array is not mapped host memory")
        return found[2] + (addr - found[0])

    def is_mapped(self, view: np.ndarray) -> bool:
        found = self._find(view.ctypes.data)
        return found is not None and found[0] != found[1]

    def upload(self, a: np.ndarray):
        """A device copy of a host buffer, padded so vector and 3-word reads stay in bounds."""
        dev = self.device_empty(a.nbytes + DEVICE_PAD_BYTES)
        if a.nbytes:
            self._cuda.memcpy_htod(dev, np.ascontiguousarray(a))
        return dev

    def release_table(self, table, mine_only: bool = False) -> None:
        """Free what a table holds: device copies, pinned copies, registrations; for a parted table,
        what each part and each GPU's share holds. `mine_only`: only what this layer allocated (its
        tag is in the cache key), on the thread whose context made it: PyCUDA frees an allocation only
        there. The many-GPU engine calls this on each device's thread, then releases the rest."""
        try:
            self._release_table(table, mine_only)
        finally:
            freed()

    def _release_table(self, table, mine_only: bool = False) -> None:
        for part in getattr(table, "tables", None) or []:
            self.release_table(part, mine_only)
        for key, value in list(table.cache.items()):
            kind = key[0]
            if kind in ("device", "pinned") and mine_only and key[1] != self.tag:
                continue
            if kind == "shares":
                for share in value:
                    for t in share.tables:
                        if t is not table:
                            self.release_table(t, mine_only)
                if mine_only:
                    continue
            elif kind == "device":
                value[0].free()
            elif kind == "registered":
                if mine_only:
                    continue
                handle, arr = value
                self.unregister(handle, arr)
            elif kind == "pinned":
                _forget(self.owner(value).ctypes.data)
            del table.cache[key]

    def device_columns(self, rows: int) -> DeviceColumns:
        return DeviceColumns(tuple(self.device_empty(rows * np.dtype(d).itemsize) for d in COLUMN_DTYPES), rows)

    def copier(self, threads: int) -> HostCopier:
        if threads not in self._copiers:
            self._copiers[threads] = HostCopier(threads)
        return self._copiers[threads]

    # --- caches -------------------------------------------------------------------------------
    def chunk_ring(self, streams: int, chunk_rows: int) -> list[DeviceColumns]:
        """One chunk's device columns per stream: a streamed table's whole GPU footprint."""
        key = (streams, chunk_rows)
        if key not in self._rings:
            self._rings[key] = [self.device_columns(chunk_rows) for _ in range(streams)]
        return self._rings[key]

    def pinned_columns(self, columns: LineitemColumns, copier: HostCopier) -> LineitemColumns:
        """A page-locked copy of host columns (the pinned mode's setup, done once per table)."""
        key = id(columns)
        if key not in self._pinned:
            pinned = [self.pinned_empty(len(a), a.dtype) for a in columns.arrays()]
            copier.copy(zip(pinned, columns.arrays()))
            self._pinned[key] = (columns, LineitemColumns(*pinned, source=columns.source))
        return self._pinned[key][1]

    def accumulator(self, tables: int = 1):
        """(device words, pinned host words) of ACC_WORDS words a table: the kernels' sums and
        counters, one row for each table of a batch. Kept and grown across calls."""
        if self._accumulator is None or len(self._accumulator[1]) < tables * ACC_WORDS:
            if self._accumulator is not None:
                self._accumulator[0].free()
                freed()
            self._accumulator = (self.device_empty(8 * ACC_WORDS * tables), self.pinned_empty(ACC_WORDS * tables, np.uint64))
        d, h = self._accumulator
        return d, h[:tables * ACC_WORDS]

    def scratch_device(self, name: str, nbytes: int, headroom: float = 1.0):
        """A named device buffer of at least nbytes, kept and grown across calls: where it grows, to `headroom`
        times nbytes (a later request that much larger finds it big enough)."""
        buf = self._scratch.get(name)
        if buf is None or buf[1] < nbytes:
            if buf is not None:
                buf[0].free()
                freed()
            size = int(nbytes * headroom)
            buf = self._scratch[name] = (self.device_empty(size), size)
        return buf[0]

    def scratch_mapped(self, name: str, n: int, dtype) -> np.ndarray:
        """A named page-locked host array of n elements that kernels read in place, kept across calls."""
        key = f"{name}:mapped:{np.dtype(dtype).str}"
        arr = self._scratch.get(key)
        if arr is None or len(arr) < n:
            grown = arr is not None
            arr = self._scratch[key] = self.mapped_empty(max(n, 1), dtype)
            if grown:
                freed()  # the old array goes with its last view: a run prepared on its address prepares again
        return arr[:n]

    def scratch_host(self, name: str, n: int, dtype, pinned: bool, headroom: float = 1.0) -> np.ndarray:
        """A named host array of n elements, page-locked or not, kept across calls (grown as scratch_device's)."""
        key = f"{name}:{'pinned' if pinned else 'pageable'}:{np.dtype(dtype).str}"
        arr = self._scratch.get(key)
        if arr is None or len(arr) < n:
            grown, size = arr is not None, int(n * headroom)
            arr = self._scratch[key] = self.pinned_empty(size, dtype) if pinned else np.empty(size, dtype)
            if grown:
                freed()  # as scratch_mapped's
        return arr[:n]

    # --- copies ---------------------------------------------------------------------------
    def htod_async(self, dst_ptr: int, src: np.ndarray, stream) -> None:
        if src.nbytes:
            self._cuda.memcpy_htod_async(dst_ptr, src, stream)

    def dtoh_async(self, dst: np.ndarray, src_ptr: int, stream) -> None:
        self._cuda.memcpy_dtoh_async(dst, src_ptr, stream)

    def zero_async(self, ptr: int, nbytes: int, stream) -> None:
        self._cuda.memset_d8_async(ptr, 0, nbytes, stream)

    def release(self) -> None:
        """Free everything this layer holds, in its tables' caches too; the caches start empty again."""
        try:
            self._release()
        finally:
            freed()

    def _release(self) -> None:
        for table in list(self._tables.values()):
            self.release_table(table, mine_only=True)
        self._tables.clear()
        for ring in self._rings.values():
            for dev in ring:
                for a in dev.allocations:
                    a.free()
        if self._accumulator is not None:
            self._accumulator[0].free()
        for v in self._scratch.values():
            if isinstance(v, tuple):
                v[0].free()
        for c in self._copiers.values():
            c.close()
        self._rings.clear(), self._pinned.clear(), self._scratch.clear()
        self._copiers.clear()
        self._accumulator = None
