"""Where a new constant's host time goes, step by step, on a GPU host.

The query's sibling text is asked first (its shape compiled, its columns read, what it left reading in the
background settled); then N new texts of the shape (gquery.bench.queries.new_texts, those that are queries, as
the benchmark asks them), each a public call timed from the text to the rows in hand, then the text itself
repeated. For each call: its wall clock, the host time beyond the GPU's events, Answer.host_ms (parse, plan, queue,
gpu, finalize), its chunks, and the garbage collections that ran inside it. Then the median of each planner and
runner step over those calls, each wrapped with a host clock (no profiler: a profiler's cost a call is larger than
the steps it times):

    python scripts/new_text_steps.py clustered:l_suppkey mission 3000 [N]
    python scripts/new_text_steps.py as-generated q6 - [N]

The store is the benchmark's for the design at SF 10 (built where missing under $GQUERY_DATA_DIR).
"""

import collections
import gc
import statistics
import sys
import time

import gquery
from gquery import answer, api
from gquery.answer import settle
from gquery.bench.queries import DESIGNS, NEEDED, _parses, bench_source, design_store, new_texts, sibling, text_of
from gquery.gpu import fused, fusedplan, kernels

STEPS = {  # module or class → its functions timed, in the order a new constant's call meets them
    fusedplan: ["plan_fused", "_classified", "kernel_spec", "_lowered", "_kept_choice", "_keep_choice", "_table_plans",
                "_chunks", "_kept_cut", "_cut", "_picked", "_sliced_scans", "_index_option"],
    fusedplan._Shaped: ["of"], fusedplan.FusedPlan: ["choose"],
    answer: ["compile_plan", "_read_in_background", "_compile_in_background", "gpu_finish", "fused_partial",
             "finalize"],
    fused: ["_launched"], kernels: ["cubin"],
    fused.FusedRunner: ["run", "_launch", "_prepare", "_device_metas"], api: ["_on_gpu"],
}
took: dict = collections.defaultdict(list)  # step → seconds, a call each


def timed(owner, name: str) -> None:
    """Replace owner.name with the same function timed into `took` (a classmethod stays one)."""
    raw = owner.__dict__[name]
    fn = raw.__func__ if isinstance(raw, classmethod) else raw
    label = f"{getattr(owner, '__name__', owner)}.{name}".removeprefix("gquery.")

    def run(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            took[label].append(time.perf_counter() - t0)

    setattr(owner, name, classmethod(run) if isinstance(raw, classmethod) else run)


collected: list = []  # (generation, ms) of the collections inside the call being timed


def on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        on_gc.started = time.perf_counter()
    else:
        collected.append((info["generation"], round((time.perf_counter() - on_gc.started) * 1e3, 3)))


def call(table, text: str) -> tuple[float, object, list]:
    collected.clear()
    t0 = time.perf_counter()
    a = table.sql(text, backend="gpu", mode="pinned", check=False)
    a.rows
    return (time.perf_counter() - t0) * 1e3, a, list(collected)


def show(label: str, calls: list) -> None:
    print(label)
    for ms, a, gcs in calls:
        phases = " ".join(f"{k} {v:.3f}" for k, v in a.host_ms.items())
        print(f"  wall {ms:.3f} beyond the GPU {ms - a.profile.total_ms:.3f} | {phases} | chunks "
              f"{sum(len(t.chunks) for t in a.plan.tables)} | gc {gcs or 'none'}")
    print(f"  median beyond the GPU {statistics.median(ms - a.profile.total_ms for ms, a, _ in calls):.3f} ms")
    for step, seconds in sorted(took.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {step:<34} {len(seconds):>3} calls, median {statistics.median(seconds) * 1e6:8.1f} us, "
              f"max {max(seconds) * 1e6:8.1f} us")
    took.clear()


def main() -> None:
    design, name, z = sys.argv[1], sys.argv[2], None if sys.argv[3] == "-" else int(sys.argv[3])
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 12
    if design not in DESIGNS:
        sys.exit(f"design must be one of {', '.join(DESIGNS)}, got {design!r}")
    path = design_store(bench_source(10, None, print), 10, design, None, NEEDED, print)
    for owner, names in STEPS.items():
        for step in names:
            timed(owner, step)
    gc.callbacks.append(on_gc)
    table = gquery.open(path)
    text = text_of(name, z)
    call(table, sibling(text))
    settle()
    took.clear()
    news = []
    for new in new_texts(text, n, lambda t: _parses(table, t)):  # the benchmark's: texts that are queries
        news.append(call(table, new))
        settle()  # what its plan left reading in the background, off the next text's clock (as the benchmark does)
    show(f"{n} new texts of {design} {name}{'' if z is None else f' Z = {z}'}", news)
    show("the text repeated", [call(table, text) for _ in range(15)])


if __name__ == "__main__":
    main()
