"""Options checked before any work: no data is generated and no engine runs for a command that
cannot run as asked. GPU-only options with no GPU to use them are refused (--backend gpu) or
ignored with one note saying why (--backend auto or duckdb), never silently."""

from __future__ import annotations

from gquery.errors import GqueryError, UsageError
from gquery.gpu.device import parse_gpus, resolve_gpus  # noqa: F401 (parse_gpus: the CLI's word for --gpus)

GPU_BACKENDS = ("auto", "gpu")  # the backends that answer on a GPU where one is usable


def check_positive(**flags: int | None) -> None:
    """Each given count is at least 1; keyword names are the flags with '_' for '-'."""
    for name, value in flags.items():
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive integer, got {value}")


MAX_REPEAT = 100_000  # timed runs a call asks at most: more is a typo, not a measurement (it would run for days)


def check_repeat(repeat: int) -> None:
    """Timed runs: at least one and at most MAX_REPEAT (the CLI, the API and the benchmarks ask it alike)."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise UsageError(f"repeat must be at least 1, got {repeat!r}")
    if repeat > MAX_REPEAT:
        raise UsageError(f"repeat must be at most {MAX_REPEAT:,}, got {repeat:,}")


def run_gpus(gpus, backend: str, chunk_rows: int | None, echo) -> int:
    """`gquery run`'s --gpus, before any work: the GPUs to divide the frames among (1 where the
    answer is not the GPU's: --backend cpu or duckdb, or no GPU, saying so)."""
    check_positive(chunk_rows=chunk_rows)
    n = parse_gpus(gpus)
    if n == 1:
        return 1
    from gquery.gpu.device import device_count, probe

    if backend in ("cpu", "duckdb") or probe()[0] is None:
        if backend == "gpu":
            raise GqueryError(f"no usable GPU: {probe()[1]}")
        echo(f"ignored --gpus: {'--backend ' + backend + ' runs no GPU' if backend in ('cpu', 'duckdb') else probe()[1]}")
        return 1
    return resolve_gpus(n, device_count())


def require_gpu(command: str) -> None:
    """GPU-only commands (bench, ladder) fail in one line before any import of pycuda or any work."""
    from gquery.gpu.device import probe

    info, reason = probe()
    if info is None:
        raise GqueryError(f"gquery {command} needs a GPU: {reason}")
