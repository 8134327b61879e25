"""The CUDA device: is there one, and what is it. PyCUDA runs on the device's primary context
(pycuda.autoprimaryctx), so CuPy or PyTorch in the same process share it."""

from __future__ import annotations

import atexit
import queue
import threading
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from functools import lru_cache

from gquery.errors import GqueryError


class GpuUnavailable(GqueryError):
    """No usable GPU; the message says which piece is missing."""


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    total_bytes: int
    free_bytes: int
    l2_bytes: int
    max_threads_per_sm: int

    @property
    def arch(self) -> str:
        return "sm_%d%d" % self.compute_capability

    def to_dict(self) -> dict:
        return asdict(self) | {"arch": self.arch}


@lru_cache(maxsize=1)
def _probe() -> tuple[DeviceInfo | None, str | None]:
    """Is there a GPU: the driver's answer, without making a context (that takes a few hundred
    milliseconds, which a GPU's own thread spends while a first query reads its columns)."""
    try:
        import pycuda.driver as cuda
    except ImportError as e:
        return None, f"pycuda is not installed ({e}); install it with pip install 'gquery[gpu]'"
    try:
        cuda.init()
    except Exception as e:  # pycuda raises its own error types, or OSError for a missing libcuda
        return None, f"no CUDA driver: {e}"
    if cuda.Device.count() == 0:
        return None, "the CUDA driver sees no device"
    return _info(cuda.Device(0)), None


def _info(dev, free: int = 0, total: int | None = None) -> DeviceInfo:
    import pycuda.driver as cuda

    a = cuda.device_attribute
    return DeviceInfo(
        name=dev.name(),
        compute_capability=dev.compute_capability(),
        sm_count=dev.get_attribute(a.MULTIPROCESSOR_COUNT),
        total_bytes=dev.total_memory() if total is None else total,
        free_bytes=free,
        l2_bytes=dev.get_attribute(a.L2_CACHE_SIZE),
        max_threads_per_sm=dev.get_attribute(a.MAX_THREADS_PER_MULTIPROCESSOR),
    )


def current_info() -> DeviceInfo:
    """The device of the context current on this thread, with its free memory now."""
    import pycuda.driver as cuda

    free, total = cuda.mem_get_info()
    return _info(cuda.Context.get_device(), free, total)


def probe() -> tuple[DeviceInfo | None, str | None]:
    """(info, None) where a GPU is usable, else (None, the reason). No context is made."""
    return _probe()


def device_count() -> int:
    """GPUs the driver sees (0 without a usable GPU)."""
    if probe()[0] is None:
        return 0
    import pycuda.driver as cuda

    return cuda.Device.count()


def require() -> DeviceInfo:
    """A usable GPU with a context current on this thread: device 0's primary context where none is
    (pycuda.autoprimaryctx on the first thread that asks, which shares it with CuPy)."""
    info, reason = probe()
    if info is None:
        raise GpuUnavailable(f"no usable GPU: {reason}")
    import pycuda.driver as cuda

    if cuda.Context.get_current() is None:
        try:
            import pycuda.autoprimaryctx  # noqa: F401  (makes device 0's primary context current)
        except Exception as e:
            raise GpuUnavailable(f"no usable GPU: cannot open a context on device 0: {e}") from None
        if cuda.Context.get_current() is None:  # imported before, on another thread
            cuda.Device(0).retain_primary_context().push()
    return info


class JobThread:
    """A daemon thread that runs jobs in order and answers with futures. Not a ThreadPoolExecutor:
    those stop taking jobs before atexit handlers run, and an engine must be closed at exit on the
    thread whose context made its streams, events and modules."""

    def __init__(self, name: str):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, args = job
            del job  # held no longer than its run: what it holds is the caller's, to free there
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as e:  # handed to the caller, as a pool's future would
                    future.set_exception(e)
            del future, fn, args

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        self._jobs.put((future, fn, args))
        return future

    def shutdown(self) -> None:
        self._jobs.put(None)
        self._thread.join()


class DeviceThread(JobThread):
    """The one thread that drives GPU `ordinal`: every job runs there with the device's primary
    context pushed for it (and popped after, so none is left current at exit), so whichever thread
    asks, every PyCUDA object of the device (engines, modules, streams, events, allocations,
    registrations) is made, used and freed on this one thread. Jobs run one at a time, in order:
    queries from several threads take turns on the GPU."""

    def __init__(self, ordinal: int):
        super().__init__(f"gquery-gpu{ordinal}")
        self.ordinal = ordinal
        self._context = None
        super().submit(self._retain)  # the first job: not waited for (making a context takes a while)

    def _retain(self) -> None:
        import pycuda.driver as cuda

        self._context = cuda.Device(self.ordinal).retain_primary_context()

    def _in_context(self, fn, *args):
        self._context.push()
        try:
            return fn(*args)
        finally:
            self._context.pop()

    def submit(self, fn, *args) -> Future:
        """fn(*args) on this device's thread; run at once when already on it (a job that asks the
        device for more work must not wait for itself)."""
        if self.on_thread():
            done: Future = Future()
            try:
                done.set_result(fn(*args))
            except BaseException as e:
                done.set_exception(e)
            return done
        return super().submit(self._in_context, fn, *args)

    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def call(self, fn, *args):
        """fn(*args) on this device's thread, waited for; inline when already on it."""
        if self.on_thread():
            return fn(*args)
        return self.submit(fn, *args).result()


_threads: dict[int, DeviceThread] = {}
_threads_lock = threading.Lock()


def device_thread(ordinal: int = 0) -> DeviceThread:
    """The thread of GPU `ordinal`, started on first use (raises GpuUnavailable without a GPU)."""
    if probe()[0] is None:
        raise GpuUnavailable(f"no usable GPU: {probe()[1]}")
    with _threads_lock:
        if ordinal not in _threads:
            if not _threads:
                atexit.register(_stop_threads)  # after PyCUDA's own handler: runs before it
            _threads[ordinal] = DeviceThread(ordinal)
        return _threads[ordinal]


def _stop_threads() -> None:
    with _threads_lock:
        threads = list(_threads.values())
        _threads.clear()
    for t in threads:
        t.shutdown()
