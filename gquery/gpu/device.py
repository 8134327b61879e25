"""The CUDA device: is there one, and what is it. PyCUDA runs on the device's primary context
(pycuda.autoprimaryctx), so CuPy or PyTorch in the same process share it."""

from __future__ import annotations

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
    try:
        import pycuda.autoprimaryctx  # noqa: F401  (makes device 0's primary context current)
    except Exception as e:
        return None, f"cannot open a context on device 0: {e}"
    return current_info(), None


def current_info() -> DeviceInfo:
    """The device of the context current on this thread."""
    import pycuda.driver as cuda

    dev = cuda.Context.get_device()
    a = cuda.device_attribute
    free, total = cuda.mem_get_info()
    return DeviceInfo(
        name=dev.name(),
        compute_capability=dev.compute_capability(),
        sm_count=dev.get_attribute(a.MULTIPROCESSOR_COUNT),
        total_bytes=total,
        free_bytes=free,
        l2_bytes=dev.get_attribute(a.L2_CACHE_SIZE),
        max_threads_per_sm=dev.get_attribute(a.MAX_THREADS_PER_MULTIPROCESSOR),
    )


def probe() -> tuple[DeviceInfo | None, str | None]:
    """(info, None) where a GPU is usable, else (None, the reason)."""
    return _probe()


def device_count() -> int:
    """GPUs the driver sees (0 without a usable GPU)."""
    if probe()[0] is None:
        return 0
    import pycuda.driver as cuda

    return cuda.Device.count()


def require() -> DeviceInfo:
    info, reason = probe()
    if info is None:
        raise GpuUnavailable(f"no usable GPU: {reason}")
    return info

