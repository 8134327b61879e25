"""Where a first answer's time goes: imports, open, and the first query, every thread sampled.

A sampling thread reads every other thread's stack each millisecond (cProfile cannot: on Python 3.12
one profiler runs at a time, and the query's GPU work runs on the GPU's own thread). It prints the wall
time of each stage and, per thread, the functions on the most samples (cumulative) and at the top of
the most samples (self). Run it twice: the first run fills the kernel cache and the page cache, as a
user's earlier runs would. --spans also times the main steps on whichever thread runs them; wrapping
them imports the engine's modules before the clock starts, so the first-query figure then leaves out
those imports (about 0.4 s on a host that compiles them from source); without --spans it includes
them, as the benchmark's figure does.

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
         "gquery.sql:parse", "gquery.store:StoreFiles.read", "gquery.store:StoreFiles.zones",
         "gquery.store:StoreFiles.packed", "gquery.store:StoreFiles.key_encoding", "gquery.store:open_store",
         "gquery.gpu.memory:GpuMemory.pin_in_place", "gquery.gpu.fusedplan:plan_fused", "gquery.plan:plan_query",
         "gquery.plan:_choose_key", "gquery.answer:gpu_answer", "gquery.mission:measure",
         "gquery.gpu.executor:Engine.run_many", "gquery.gpu.fused:FusedRunner.run", "gquery.gpu.kernels:module",
         "gquery.gpu.kernels:cubin", "gquery.gpu.executor:Engine.prepare", "gquery.gpu.executor:Engine.__init__",
         "gquery.answer:cpu_answer", "gquery.table:Column.get"]
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
    import importlib

    for target in SPANS:
        module_name, qual = target.split(":")
        try:
            module = importlib.import_module(module_name)
            owner, *rest = qual.split(".")
            holder = module
            if rest:
                holder, attr = getattr(module, owner), rest[0]
            else:
                attr = owner
            original = getattr(holder, attr)
        except (ImportError, AttributeError):
            print(f"(no span: {target} not found)")
            continue
        setattr(holder, attr, _wrap(original, qual))


store, sql = sys.argv[1], sys.argv[2]
top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 25
sampler = threading.Thread(target=_sample, name="sampler", daemon=True)
sampler.start()
t0 = time.perf_counter()
import gquery  # noqa: E402
import gquery.api  # noqa: E402

t_import = time.perf_counter()
if "--spans" in sys.argv:  # after the import is timed: installing them imports what the query would later
    _install_spans()
    t_import_spans = time.perf_counter()
    t0 += t_import_spans - t_import
    t_import = t_import_spans
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
