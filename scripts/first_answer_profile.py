"""Where a first answer's time goes: imports, open, and the first query, every thread sampled.

A sampling thread reads every other thread's stack each millisecond (cProfile cannot: on Python 3.12
one profiler runs at a time, and the query's GPU work runs on the GPU's own thread). It prints the wall
time of each stage and, per thread, the functions on the most samples (cumulative) and at the top of
the most samples (self). Run it twice: the first run fills the kernel cache and the page cache, as a
user's earlier runs would. --spans also times the main steps on whichever thread runs them, each function
wrapped as its module is first imported (a finder ahead of the import system's): nothing is imported before
the clock starts, so the figures are the benchmark's, with the steps' spans beside them.

    python scripts/first_answer_profile.py STORE "SQL" [--top N] [--spans]
"""

import collections
import sys
import threading
import time

INTERVAL_S = 0.001
cumulative: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
own: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
stop = threading.Event()


def _where(code) -> str:
    return f"{code.co_filename.rsplit('/', 2)[-1]}:{code.co_firstlineno}({code.co_name})"


def _sample() -> None:
    me = threading.get_ident()
    while not stop.wait(INTERVAL_S):
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            name = names.get(ident, str(ident))
            seen = set()
            own[name][_where(frame.f_code)] += 1
            while frame is not None:
                where = _where(frame.f_code)
                if where not in seen:
                    seen.add(where)
                    cumulative[name][where] += 1
                frame = frame.f_back


# Spans: wall time of these functions on whichever thread calls them (outermost call only).
SPANS = ["gquery.gpu.device:_probe", "gquery.gpu.device:DeviceThread._retain", "gquery.api:_engine_here",
         "gquery.api:TableHandle._answer", "gquery.sql:parse_shaped", "gquery.table:read_ahead",
         "gquery.table:Column.get", "gquery.table:Column.zone_order", "gquery.store:StoreFiles.read",
         "gquery.store:StoreFiles.zones", "gquery.store:open_store", "gquery.gpu.memory:GpuMemory.pin_in_place",
         "gquery.answer:gpu_plan", "gquery.gpu.fusedplan:plan_fused", "gquery.answer:gpu_runs",
         "gquery.gpu.fused:FusedRunner.run", "gquery.gpu.kernels:module", "gquery.gpu.kernels:cubin",
         "gquery.answer:cpu_answer"]
spans: list[tuple[str, str, float, float]] = []
_depth = threading.local()


def _wrap(fn, label):
    import functools

    @functools.wraps(fn)
    def timed(*args, **kwargs):
        depth = getattr(_depth, label, 0)
        setattr(_depth, label, depth + 1)
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            setattr(_depth, label, depth)
            if depth == 0:
                spans.append((threading.current_thread().name, label, started, time.perf_counter()))
    return timed


def _install_spans() -> None:
    """Wrap each of SPANS as its module is first imported: a finder ahead of the others hands the module's
    loader a step after its code runs, before any other module can import a name from it."""
    import importlib.abc
    import importlib.machinery

    wanted: dict[str, list[str]] = {}
    for target in SPANS:
        module_name, qual = target.split(":")
        wanted.setdefault(module_name, []).append(qual)

    def wrap_in(module) -> None:
        for qual in wanted.pop(module.__name__, []):
            owner, _, attr = qual.rpartition(".")
            holder = getattr(module, owner, None) if owner else module
            if holder is None or attr not in vars(holder):
                print(f"(no span: {module.__name__}:{qual} not found)")
                continue
            setattr(holder, attr, _wrap(vars(holder)[attr], qual))

    class Spans(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in wanted:
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.loader is not None:
                run = spec.loader.exec_module

                def exec_module(module, run=run):
                    run(module)
                    wrap_in(module)
                spec.loader.exec_module = exec_module
            return spec

    for name in [n for n in wanted if n in sys.modules]:  # imported already (by this script's own imports)
        wrap_in(sys.modules[name])
    sys.meta_path.insert(0, Spans())


store, sql = sys.argv[1], sys.argv[2]
top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 25
sampler = threading.Thread(target=_sample, name="sampler", daemon=True)
sampler.start()
if "--spans" in sys.argv:
    _install_spans()
t0 = time.perf_counter()
import gquery  # noqa: E402  (as a user's script: gquery.open imports the engine's modules, beside the driver's start)

t_import = time.perf_counter()
table = gquery.open(store)
t_open = time.perf_counter()
answer = table.sql(sql, check=False, warmup=False)
t_query = time.perf_counter()
stop.set()
sampler.join()
print(f"import {t_import - t0:.3f} s  open {t_open - t_import:.3f} s  first query {(t_query - t_open) * 1e3:.0f} ms  "
      f"kernel {answer.plan.encoding if answer.plan else answer.backend}  answer {answer.rows}")
print("spans (start after import, ms; duration ms; thread; function):")
for thread, label, a, b in sorted(spans, key=lambda x: x[2]):
    print(f"{(a - t_import) * 1e3:8.1f} {(b - a) * 1e3:8.1f}  {thread:<22} {label}")
for name in cumulative:
    print(f"===== thread {name}: samples of about {INTERVAL_S * 1e3:.0f} ms, cumulative")
    for where, n in cumulative[name].most_common(top):
        print(f"{n:6d}  {where}")
    print(f"----- thread {name}: self")
    for where, n in own[name].most_common(top // 2):
        print(f"{n:6d}  {where}")
