"""The driver's start and GPU 0's primary context, begun early on a thread of their own. Nothing here imports
more than the standard library, so gquery.open can begin them before it imports the engine's modules."""

from __future__ import annotations

import atexit
import threading


class _WarmUp:
    """The driver's start (cuInit, ~0.1 s) and device 0's primary context (~0.1 s), begun by
    gquery.open on a thread of its own through the driver's C API with ctypes, which lets go of the
    GIL: they overlap the SQL's parsing and the columns' reads instead of holding up the interpreter
    (PyCUDA holds the GIL through both). PyCUDA then finds the driver started and the context made, and
    retains it in microseconds; this retain is let go once PyCUDA holds its own."""

    def __init__(self):
        self.started = threading.Event()  # cuInit has returned (or failed)
        self.made = threading.Event()  # the context is made (or could not be)
        self._lock = threading.Lock()
        self._held = None  # (libcuda, device) while this holds a retain of the primary context
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gquery-gpu-warm-up", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        try:
            import ctypes

            lib = ctypes.CDLL("libcuda.so.1")
            if lib.cuInit(0) != 0:
                return
            self.started.set()
            device, context = ctypes.c_int(), ctypes.c_void_p()
            if lib.cuDeviceGet(ctypes.byref(device), 0) == 0 and \
                    lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0:
                with self._lock:
                    self._held = (lib, device)
        except (OSError, AttributeError):  # no driver: the probe says so in its own words
            pass
        finally:
            self.started.set()
            self.made.set()

    def wait(self, event: threading.Event) -> None:
        """Wait for a step of a warm-up begun (the wait lets go of the GIL); at once where none was."""
        with self._lock:
            begun = self._thread is not None
        if begun:
            event.wait()

    def let_go(self) -> None:
        """Release this warm-up's retain of the context (PyCUDA holds its own by now, or none is wanted)."""
        with self._lock:
            held, self._held = self._held, None
        if held is not None:
            lib, device = held
            release = getattr(lib, "cuDevicePrimaryCtxRelease_v2", None) or lib.cuDevicePrimaryCtxRelease
            release(device)


warming = _WarmUp()
atexit.register(warming.let_go)


def warm_up() -> None:
    """Begin starting the driver and making device 0's context now, without holding the GIL, while the
    caller goes on (gquery.open does, so a first query finds them made)."""
    warming.start()


def no_pycuda() -> bool:
    """No pycuda, so no GPU: known at once, without starting the driver."""
    import importlib.util

    return importlib.util.find_spec("pycuda") is None
