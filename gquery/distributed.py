"""Beyond one host: a query of the class over a store's parts as Dask tasks. Each worker answers its
parts with the same engines (the CPU reference, or the GPU's fused plan through gquery.api); the
client adds the exact partial aggregates and finalizes once, as in process.

    from gquery.distributed import run_distributed
    r = run_distributed("dbgen_data/sf100/lineitem.gq", "SELECT SUM(l_tax) FROM lineitem", scheduler="tcp://head:8786")
    r.result.rows, r.selected_rows, r.wall_ms, [(p.part, p.ms, p.worker) for p in r.parts]

A task is one part (a single store is one task). It gets the part's absolute path and the SQL text,
opens the part itself, parses the text against it and returns the part's exact partial aggregates as
JSON (integers as decimal strings), its selected rows and its time. So **workers share the
filesystem**: the store's path must name the same files on every worker (one host, or a shared or
replicated folder), and every worker needs gquery installed. The client adds the partials as Python
ints, so the answer equals the in-process one by construction.

    backend "cpu"   the CPU reference over the part (gquery.answer.cpu_partial)
    backend "gpu"   the GPU engine (gquery.api) on the worker's GPU: the part opened into mapped pinned
                    memory, queried, released; the engine lives as long as the worker process

hold=True: for repeated queries, each part is sent to the same worker every time (part k to the
k-th worker, round robin) and stays open there (in mapped pinned memory for gpu) until the session
ends or the part's manifest changes: a worker then answers from memory, as the in-process engine
does over a store it holds. Session.release() (and close()) lets them go.

scheduler None or "local": a cluster of worker processes on this host, made for the call. For gpu
it has one worker a GPU, each pinned to its GPU with CUDA_VISIBLE_DEVICES. Any other scheduler is
the address of a running one (`dask scheduler`). Its GPU workers are started one a GPU, as
`CUDA_VISIBLE_DEVICES=k dask worker ADDRESS --nthreads 1`. dask is imported only when a query
runs, so gquery imports without it.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import statistics
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gquery.errors import GqueryError, UsageError

BACKENDS = ("cpu", "gpu")
GPU_MODES = ("pinned", "registered", "pageable")  # resident keeps a table on a GPU; a task keeps none
CONNECT_TIMEOUT_S = 5
INSTALL = "pip install 'gquery[dist]'"


@dataclass
class PartRun:
    part: str  # the part's store folder
    rows: int
    selected_rows: int
    ms: float  # the task on its worker: open the part, query it, release it
    worker: str


@dataclass
class DistributedResult:
    sql: str
    query: object  # gquery.query.Query
    result: object  # gquery.result.Result: the rows, as DuckDB gives them
    selected_rows: int
    parts: list[PartRun]  # in the store's order, from the median run
    wall_ms: float
    scheduler: str
    local: bool
    workers: int
    backend: str
    rows: int = 0
    times_ms: list[float] = field(default_factory=list)
    connect_ms: float = 0.0
    partial: object = field(default=None, repr=False)  # gquery.result.Partial: the parts' exact partials added

    def to_dict(self) -> dict:
        from gquery.answer import json_value

        return {"sql": self.sql, "columns": self.result.names, "rows": [[json_value(v) for v in r] for r in self.result.rows],
                "selected_rows": self.selected_rows, "parts": [asdict(p) for p in self.parts], "wall_ms": self.wall_ms,
                "scheduler": self.scheduler, "local": self.local, "workers": self.workers, "backend": self.backend,
                "table_rows": self.rows, "times_ms": self.times_ms, "connect_ms": self.connect_ms}


def require_dask():
    try:
        import distributed
    except ImportError as e:
        raise GqueryError(f"the Dask path needs dask's distributed ({e}); install it with {INSTALL}") from None
    return distributed


def check(backend: str, mode: str, workers: int | None) -> None:
    """The options of a distributed run, before any store is read or any cluster started."""
    if backend not in BACKENDS:
        raise UsageError(f"a distributed backend is cpu or gpu, got {backend!r}")
    if backend == "gpu" and mode not in GPU_MODES:
        raise UsageError(f"mode {mode!r} does not run in a Dask task: a task opens its part, queries it once and "
                         f"releases it, so give {', '.join(GPU_MODES[:-1])} or {GPU_MODES[-1]}")
    if workers is not None and workers < 1:
        raise UsageError(f"workers must be at least 1, got {workers}")


def store_parts(store_path: Path | str) -> list[tuple[Path, int]]:
    """Each part's absolute folder and rows, from the manifests alone: the tasks, checked before any
    worker is asked for."""
    from gquery import store

    path = Path(store_path).resolve()
    if not store.is_store(path):
        what = "no such file or folder" if not path.exists() else "not a gquery store (no manifest.json)"
        raise GqueryError(f"{store_path}: {what}; build one with 'gquery encode --data <parquet or .tbl>'")
    return store.store_parts(path)


# --- on a worker ------------------------------------------------------------------------------
def part_task(path: str, text: str, backend: str = "cpu", mode: str = "pinned",
              hold: bool = False, table: str = "lineitem") -> tuple[dict, int, float, str]:
    """One part of SQL of the class over the store's table (`table`: its name), on a worker: (its exact
    partial aggregates as JSON, rows selected, milliseconds, the worker's address)."""
    t0 = time.perf_counter()
    if backend == "gpu":
        partial = _gpu_thread().submit(_gpu_part, path, text, mode, hold, table).result()
    else:
        partial = _cpu_part(path, text, hold, table)
    return partial.to_json(), partial.rows_selected, (time.perf_counter() - t0) * 1e3, _worker_address()


def _cpu_part(path: str, text: str, hold: bool, name: str = "lineitem"):
    from gquery import answer, sql
    from gquery.store import open_store

    table = _opened("cpu", path, hold, lambda: open_store(path, check_source=False))
    return answer.cpu_partial(sql.parse(text, table.schema, name), [table])


def _gpu_part(path: str, text: str, mode: str, hold: bool, name: str = "lineitem"):
    from gquery import api
    from gquery.gpu.device import require

    require()  # no GPU here: one line saying why
    table = _opened("gpu", path, hold, lambda: api.open(path, pinned=True, one_shot=not hold, name=name, part=True))
    try:
        return table.sql(text, backend="gpu", mode=mode, check=False, warmup=False).partial
    finally:
        if not hold:
            api.close(table)


_held: dict[tuple[str, str], tuple[int, object]] = {}  # (backend, part) → (its manifest's mtime, the open part)


def _opened(backend: str, path: str, hold: bool, open_part):
    """The part, opened now or (hold) kept from an earlier task while its manifest is unchanged."""
    key = (backend, path)
    stamp = (Path(path) / "manifest.json").stat().st_mtime_ns if hold else 0
    if key in _held and (not hold or _held[key][0] != stamp):
        _close_held(key)  # rebuilt since, or no longer held
    if key in _held:
        return _held[key][1]
    table = open_part()
    if hold:
        _held[key] = (stamp, table)
    return table


def _close_held(key) -> None:
    _, table = _held.pop(key)
    if key[0] == "gpu":
        from gquery import api

        api.close(table)


def release_held() -> int:
    """Let go of every part this worker holds (run on each worker by Session.release); how many."""
    keys = list(_held)
    gpu = [k for k in keys if k[0] == "gpu"]
    for k in keys:
        if k[0] == "cpu":
            _close_held(k)
    if gpu:  # on the thread whose context page-locked them
        _gpu_thread().submit(lambda: [_close_held(k) for k in gpu]).result()
    return len(keys)


_gpu_pool: ThreadPoolExecutor | None = None
_gpu_pool_lock = threading.Lock()


def _gpu_thread() -> ThreadPoolExecutor:
    """The one thread of a worker process that runs the GPU engine (gquery.api.engine(), made
    once): pycuda makes the device's context current only on the thread that first opens it, and
    a worker runs tasks on any of its threads."""
    global _gpu_pool
    with _gpu_pool_lock:
        if _gpu_pool is None:
            _gpu_pool = ThreadPoolExecutor(1, thread_name_prefix="gquery-gpu")
            _gpu_pool.submit(_open_gpu).result()
        return _gpu_pool


def _open_gpu() -> None:
    """Open the GPU on this thread. pycuda's exit handler pops the context on the thread that exits
    (the main one, where it is not current); this handler, registered after it, runs first and
    makes it current there, so a worker exits without a traceback."""
    from gquery.gpu.device import probe

    if probe()[0] is not None:
        atexit.register(_context_current_at_exit)


def _context_current_at_exit() -> None:
    try:
        import pycuda.driver as cuda

        if cuda.Context.get_current() is None:
            cuda.Device(0).retain_primary_context().push()
    except Exception:  # exiting: nothing left to tell
        pass


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return "in-process"


# --- on the client ------------------------------------------------------------------------------
def gpu_ids() -> list[str]:
    """This host's GPUs as CUDA_VISIBLE_DEVICES names them: the visible ones where it is set, else
    0 .. n-1 as the driver (or nvidia-smi -L) counts them. No CUDA context is made."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [v.strip() for v in visible.split(",") if v.strip()]
    try:
        import pycuda.driver as cuda

        cuda.init()
        return [str(k) for k in range(cuda.Device.count())]
    except Exception:  # no pycuda, or no driver: ask nvidia-smi
        smi = shutil.which("nvidia-smi")
        if smi is None:
            return []
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True).stdout
        return [str(k) for k in range(sum(line.startswith("GPU ") for line in listed.splitlines()))]


def _local_cluster(distributed, backend: str, workers: int | None):
    """A scheduler and `workers` worker processes on this host (one a GPU for gpu, each seeing only
    its own), each with one thread: a task is a whole part, and NumPy or the GPU is its parallelism."""
    if backend == "gpu":
        gpus = gpu_ids()
        if not gpus:
            raise GqueryError("the gpu backend needs a GPU on this host: the driver and nvidia-smi see none")
        if workers is not None and workers > len(gpus):
            raise UsageError(f"{workers} workers asked for, but this host has {len(gpus)} GPU(s): one worker a GPU")
        envs = [{"CUDA_VISIBLE_DEVICES": g} for g in gpus[:workers or len(gpus)]]
    else:
        envs = [{}] * (workers or os.cpu_count() or 1)
    # memory_limit 0: a task holds one part and nothing after it; the nanny's default limit (a share of
    # host memory a thread) would pause or kill a worker on a large single store. A failed task's
    # traceback is not logged: the client raises its one line.
    spec = {k: {"cls": distributed.Nanny, "options": {"nthreads": 1, "env": env, "host": "127.0.0.1", "memory_limit": 0,
                                                       "dashboard": False, "silence_logs": logging.CRITICAL}}
            for k, env in enumerate(envs)}
    scheduler = {"cls": distributed.Scheduler,
                 "options": {"host": "127.0.0.1", "port": 0, "dashboard": False, "dashboard_address": ":0"}}
    return distributed.SpecCluster(workers=spec, scheduler=scheduler, silence_logs=logging.ERROR, name="gquery")


def _one_line(e: BaseException, named: bool = True) -> str:
    text = str(e).strip().splitlines()
    if not text:
        return type(e).__name__
    return f"{type(e).__name__}: {text[0]}" if named else text[0]


def _address(scheduler: str) -> str:
    """A scheduler's address, checked before a client is made (a client made on a malformed one
    hangs in its finalizer)."""
    from distributed.comm import resolve_address

    try:
        return resolve_address(scheduler)
    except ValueError as e:
        raise UsageError(f"{scheduler!r} is not a Dask scheduler address (tcp://HOST:PORT or local): {e}") from None
    except OSError as e:
        raise GqueryError(f"cannot reach the Dask scheduler at {scheduler}: {_one_line(e, named=False)}") from None


class Session:
    """A Dask client, on a local cluster made for it (scheduler None or "local") or on a running
    scheduler; queries through it reuse its workers (and their GPU engines). close() ends both."""

    def __init__(self, scheduler: str | None = None, backend: str = "cpu", workers: int | None = None,
                 timeout: float = CONNECT_TIMEOUT_S):
        check(backend, "pinned", workers)
        distributed = require_dask()
        self.backend, self.cluster, self.client, self.holding = backend, None, None, False
        local = scheduler in (None, "local")
        t0 = time.perf_counter()
        try:
            if local:
                self.cluster = _local_cluster(distributed, backend, workers)
            address = self.cluster.scheduler_address if local else _address(scheduler)
            try:
                self.client = distributed.Client(address, timeout=timeout, set_as_default=False)
            except (OSError, TimeoutError) as e:
                raise GqueryError(f"cannot reach the Dask scheduler at {address}: {_one_line(e, named=False)}") from None
            try:
                self.client.wait_for_workers(workers or 1, timeout=timeout)
            except TimeoutError:
                raise GqueryError(f"the Dask scheduler at {address} has {len(self.client.nthreads())} worker(s) "
                                  f"after {timeout:g} s; {workers or 1} asked for") from None
        except BaseException:
            self.close()
            raise
        self.connect_ms = (time.perf_counter() - t0) * 1e3
        self.scheduler, self.local = address, local

    @property
    def workers(self) -> int:
        return len(self.client.nthreads())

    def run(self, store_path: Path | str, text: str, mode: str = "pinned", repeat: int = 1,
                hold: bool = False) -> "DistributedResult":
        """SQL of the class over the store's parts: each worker parses the text against its part, answers
        it with its backend (the CPU reference, or the GPU's fused kernel) and returns exact partial
        aggregates; the client adds them and gives the rows once, as DuckDB would."""
        from gquery import sql, store
        from gquery.result import Partial, finalize

        check(self.backend, mode, None)
        parts = store_parts(store_path)
        name = store.table_name(store_path)
        query = sql.parse(text, store.open_store(parts[0][0], check_source=False).schema, name)  # refused here first
        self.holding |= hold
        runs = [self._run_once(parts, part_task, hold, text=text, backend=self.backend, mode=mode, table=name)
                for _ in range(max(1, repeat))]
        partials = []
        for payloads, _, _, _ in runs:
            total = Partial.empty(query)
            for p in payloads:
                total.merge(Partial.from_json(p))
            partials.append(total)
        if any(p.groups != partials[0].groups for p in partials[1:]):
            raise GqueryError("repeated runs gave different answers")  # cannot happen: each is exact
        median = sorted(range(len(runs)), key=lambda k: runs[k][2])[len(runs) // 2]
        _, selected, wall, part_runs = runs[median]
        return DistributedResult(text, query, finalize(query, partials[median]), selected, part_runs, wall,
                                 self.scheduler, self.local, self.workers, self.backend, sum(n for _, n in parts),
                                 [r[2] for r in runs], self.connect_ms, partials[median])

    def _run_once(self, parts, task, hold: bool, **options):
        """One run of `task` a part: (each part's payload, rows selected, wall ms, each part's run)."""
        t0 = time.perf_counter()
        paths = [str(p) for p, _ in parts]
        if hold:  # part k on the k-th worker, every time: it answers from the part it holds
            workers = sorted(self.client.nthreads())
            futures = [self.client.submit(task, p, **options, hold=True, pure=False, workers=[workers[k % len(workers)]],
                                          allow_other_workers=False)
                       for k, p in enumerate(paths)]
        else:
            futures = self.client.map(task, paths, **options, pure=False)
        runs, payloads, selected = [], [], 0
        try:
            for (path, rows), f in zip(parts, futures):
                try:
                    payload, part_selected, ms, worker = f.result()
                except GqueryError:
                    raise  # one line already, naming the part's store where the store is at fault
                except Exception as e:
                    raise GqueryError(f"a Dask worker failed on {path}: {_one_line(e)}") from None
                payloads.append(payload)
                selected += part_selected
                runs.append(PartRun(str(path), rows, part_selected, ms, worker))
        except BaseException:
            self.client.cancel(futures)
            raise
        return payloads, selected, (time.perf_counter() - t0) * 1e3, runs

    def release(self) -> int:
        """Every worker lets go of the parts it holds (hold=True runs); how many parts were let go."""
        if self.client is None or not self.holding:
            return 0
        self.holding = False
        return sum(self.client.run(release_held).values())

    def close(self) -> None:
        if self.client is not None:
            try:
                self.release()
            finally:
                self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_distributed(store_path: Path | str, text: str, scheduler: str | None = None, backend: str = "cpu",
                        workers: int | None = None, mode: str = "pinned", repeat: int = 1,
                        timeout: float = CONNECT_TIMEOUT_S) -> DistributedResult:
    """SQL of the class over a store, a Dask task a part (see Session.run)."""
    with _session(store_path, scheduler, backend, workers, mode, timeout) as session:
        return session.run(store_path, text, mode, repeat)


def _session(store_path, scheduler, backend: str, workers, mode: str, timeout: float) -> Session:
    """A session for one run over a store, checked first (options, then the manifests); a local CPU
    cluster gets one worker a part, up to one a core."""
    check(backend, mode, workers)
    parts = store_parts(store_path)
    if workers is None and backend == "cpu" and scheduler in (None, "local"):
        workers = max(1, min(len(parts), os.cpu_count() or 1))
    return Session(scheduler, backend, workers, timeout)


def in_process(store_path: Path | str, text: str, backend: str = "cpu", mode: str = "pinned"):
    """The same query in this process, the baseline the Dask path is measured against: its exact
    partial. cpu: the CPU reference over the store, its parts read from disk on threads. gpu (the hook
    a GPU host times): the same per-part GPU path as a task, over every part in turn on this process's
    GPU, through gquery.api."""
    from gquery import answer, sql, store
    from gquery.result import Partial

    parts = store_parts(store_path)  # the same one-line error as the Dask path for what is not a store
    if backend == "gpu":  # on this thread, as any caller of gquery.api
        name = store.table_name(store_path)
        first = _gpu_part(str(parts[0][0]), text, mode, False, name)
        total = Partial(first.funcs, rows_selected=0).merge(first)
        for p, _ in parts[1:]:
            total.merge(_gpu_part(str(p), text, mode, False, name))
        return total
    table = store.open_store(store_path, check_source=False, window=1)
    return answer.cpu_partial(sql.parse(text, answer.schema_of(table), store.table_name(store_path)),
                              answer.parts_of(table))


def _in_process_runs(store_path, text: str, backend: str, mode: str, repeat: int, hold: bool):
    """(the exact partial, times in ms of `repeat` runs after a warm-up) in this process. hold: the
    whole store opened once (pinned, for gpu) and queried as the engine queries a store it holds."""
    table = None
    if hold:
        store_parts(store_path)  # the same one-line error as the Dask path for what is not a store
        if backend == "gpu":
            from gquery import api

            table = api.open(store_path, pinned=True, part=True)  # every group: its partial is compared with Dask's
            run = lambda: table.sql(text, backend="gpu", mode=mode, check=False, warmup=False).partial  # noqa: E731
        else:
            from gquery import answer, sql, store

            table = store.open_store(store_path, check_source=False)
            query = sql.parse(text, answer.schema_of(table), store.table_name(store_path))
            run = lambda: answer.cpu_partial(query, answer.parts_of(table))  # noqa: E731
    else:
        run = lambda: in_process(store_path, text, backend, mode)  # noqa: E731
    times = []
    try:
        for k in range(repeat + 1):
            t0 = time.perf_counter()
            partial = run()
            if k:
                times.append((time.perf_counter() - t0) * 1e3)
    finally:
        if table is not None and backend == "gpu":
            table.close()
    return partial, times


def overhead(store_path: Path | str, text: str, scheduler: str | None = None, backend: str = "cpu",
             workers: int | None = None, mode: str = "pinned", repeat: int = 5, hold: bool = False) -> dict:
    """What Dask costs over the same query in-process (in_process): medians of `repeat` runs of each,
    after one warm-up of each (worker imports and GPU engines are not counted). A dict a report can
    embed. For gpu the in-process path uses one GPU: workers=1 compares like with like, more
    workers show what the other GPUs add. hold: both sides keep the store open between queries
    (in-process the whole store, through the engine; Dask each worker its parts)."""
    from gquery.result import finalize

    check(backend, mode, workers)
    parts = store_parts(store_path)
    local, local_ms = _in_process_runs(store_path, text, backend, mode, repeat, hold)
    if workers is None and backend == "cpu" and scheduler in (None, "local"):
        workers = max(1, min(len(parts), os.cpu_count() or 1))
    with Session(scheduler, backend, workers) as session:
        session.run(store_path, text, mode, hold=hold)  # warm-up (hold: the parts are opened here)
        dask = session.run(store_path, text, mode, repeat, hold=hold)
    if dask.partial.groups != local.groups:
        raise GqueryError(f"Dask gave {dask.result.rows} over {dask.selected_rows} rows, in-process "
                          f"{finalize(dask.query, local).rows} over {local.rows_selected}")
    in_ms = statistics.median(local_ms)
    return {"backend": backend, "mode": mode if backend == "gpu" else None, "hold": hold, "sql": text,
            "result": [[str(v) for v in row] for row in dask.result.rows],
            "parts": len(parts), "rows": dask.rows, "workers": dask.workers, "scheduler": dask.scheduler, "local": dask.local,
            "repeat": repeat, "in_process_ms": in_ms, "dask_ms": dask.wall_ms, "ratio": dask.wall_ms / in_ms,
            "in_process_times_ms": local_ms, "dask_times_ms": dask.times_ms,
            "task_ms": [p.ms for p in dask.parts], "connect_ms": dask.connect_ms}
