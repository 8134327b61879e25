"""The CUDA device: is there one, and what is it. PyCUDA runs on the device's primary context
(pycuda.autoprimaryctx), so CuPy or PyTorch in the same process share it."""

from __future__ import annotations

import atexit
import queue
import threading
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from functools import lru_cache

from gquery.errors import GqueryError, UsageError
from gquery.gpu.warm import warming


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
    warming.wait(warming.started)  # a warm-up's cuInit, waited for without the GIL: PyCUDA's then returns at once
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


def parse_gpus(gpus: str | int | None):
    """--gpus: a positive count or "all" (checked against the host's GPUs where one is usable)."""
    if gpus is None or gpus == "all":
        return "all"
    try:
        n = int(gpus)
    except (TypeError, ValueError):
        raise UsageError(f"--gpus must be a positive integer or all, got {gpus!r}") from None
    if n < 1:
        raise UsageError(f"--gpus must be a positive integer, got {n}")
    return n


def resolve_gpus(gpus, available: int) -> int:
    """--gpus N or all (parsed by parse_gpus), against the devices the driver sees."""
    n = parse_gpus(gpus)
    n = available if n == "all" else n
    if n > available:
        raise UsageError(f"--gpus {n}: this host has {available} GPU{'s' * (available != 1)}")
    return n


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
    thread whose context made its streams, events and modules. A job its asker waits for (call) may
    run on the asker's thread where this one is idle (here_if_idle): jobs still run one at a time and
    in order, and two thread wakes are saved (0.1 ms of a query's wall clock on the H100 host)."""

    def __init__(self, name: str):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._running = threading.Lock()  # held while a job runs: on this thread, or on its asker's (call)
        self._queued = 0  # jobs put and not yet run to their end
        self._counting = threading.Lock()
        self._asker = None  # the thread running a job in this one's stead (call's here_if_idle)
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, args = job
            del job  # held no longer than its run: what it holds is the caller's, to free there
            with self._running:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(fn(*args))
                    except BaseException as e:  # handed to the caller, as a pool's future would
                        future.set_exception(e)
                with self._counting:
                    self._queued -= 1
            del future, fn, args

    def _put(self, job) -> None:
        with self._counting:
            self._queued += 1
        self._jobs.put(job)

    def _job(self, fn, *args):
        """How a job runs, on whichever thread runs it (DeviceThread: its context pushed)."""
        return fn(*args)

    def _usable_here(self) -> bool:
        """Whether a job may run on its asker's thread at all (DeviceThread: once its context is made)."""
        return True

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        self._put((future, self._job, (fn, *args)))
        return future

    def on_thread(self) -> bool:
        """Whether the calling thread runs this one's jobs now: its own thread, or an asker running one in
        its stead (call's here_if_idle)."""
        here = threading.current_thread()
        return here is self._thread or here is self._asker

    def call(self, fn, *args, here_if_idle: bool = False):
        """fn(*args) run as a job, waited for; inline when already on this thread. here_if_idle: on the
        calling thread instead where no job runs or waits to run (none asked before this call is still to
        run; one asked meanwhile waits for it, as behind a job here)."""
        if self.on_thread():
            return fn(*args)
        if here_if_idle and self._usable_here() and self._running.acquire(blocking=False):
            try:
                if self._queued == 0:
                    self._asker = threading.current_thread()
                    try:
                        return self._job(fn, *args)
                    finally:
                        self._asker = None
            finally:
                self._running.release()
        waited = _Waited()
        self._put((waited, self._job, (fn, *args)))
        return waited.result()

    def shutdown(self) -> None:
        self._jobs.put(None)
        self._thread.join()


class DeviceThread(JobThread):
    """The one thread that drives GPU `ordinal`: every job runs there with the device's primary
    context pushed for it (and popped after, so none is left current at exit), so whichever thread
    asks, the device's engines and modules are made and freed on this one thread, and every PyCUDA
    object of the device is used with its context current. Jobs run one at a time, in order: queries
    from several threads take turns on the GPU. A query's run may run on its asker's thread in this
    one's stead where this is idle (call's here_if_idle), only where it loads no module
    (kernels.module: PyCUDA unloads one only on the thread that loaded it); what it makes belongs to
    the context, which is current wherever it is freed."""

    def __init__(self, ordinal: int):
        self.ordinal = ordinal
        self._context = None
        self._unusable: str | None = None
        super().__init__(f"gquery-gpu{ordinal}")
        self._put((Future(), self._retain, ()))  # the first job, run as it is: not waited for (a context takes a while)

    def _retain(self) -> None:
        info, reason = probe()  # a thread started unchecked (gquery.open's) learns here whether there is a GPU
        if info is None:
            self._unusable = reason
            return
        import pycuda.driver as cuda

        if self.ordinal == 0:
            warming.wait(warming.made)  # without the GIL; PyCUDA's retain of a made context is then quick
        self._context = cuda.Device(self.ordinal).retain_primary_context()
        if self.ordinal == 0:
            warming.let_go()

    def _job(self, fn, *args):
        if self._context is None:
            raise GpuUnavailable(f"no usable GPU: {self._unusable or 'its context could not be made'}")
        self._context.push()
        try:
            return fn(*args)
        finally:
            self._context.pop()

    def _usable_here(self) -> bool:
        return self._context is not None

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
        return super().submit(fn, *args)


class _Waited:
    """The answer of a job its caller waits for (DeviceThread.call): a lock the job's thread releases once the answer
    is set, where a Future wakes its caller through a condition (the hand-back of every query's GPU job)."""

    __slots__ = ("_set", "_value", "_error")

    def __init__(self):
        self._set = threading.Lock()
        self._set.acquire()
        self._value = self._error = None

    def set_running_or_notify_cancel(self) -> bool:
        return True

    def set_result(self, value) -> None:
        self._value = value
        self._set.release()

    def set_exception(self, error: BaseException) -> None:
        self._error = error
        self._set.release()

    def result(self):
        self._set.acquire()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._value


_threads: dict[int, DeviceThread] = {}
_threads_lock = threading.Lock()


def device_thread(ordinal: int = 0, checked: bool = True) -> DeviceThread:
    """The thread of GPU `ordinal`, started on first use (raises GpuUnavailable without a GPU).
    checked=False: started without waiting for the driver's answer; without a GPU its jobs raise
    GpuUnavailable instead (gquery.open queues the engine's making there before any query's job)."""
    if checked and probe()[0] is None:
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
