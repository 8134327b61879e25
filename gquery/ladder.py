"""The course's optimization ladder and its modern continuation: the steps as data, their 2012
figures, and the table and findings made from a run (gquery/bench/ladder.py runs them).

The 2012 figures are the course's, on a GeForce 9500 GT (32 cores) with a Core i5-750, SF 1, Z = 30.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from decimal import Context


COURSE_DEVICE = "GeForce 9500 GT (2012)"
COURSE_CPU_MS = 5.782  # the course's CPU-only reference on a Core i5-750
CAPPED = ("-maxrregcount=32",)
EXACT = Context(prec=80)  # a DECIMAL(38,4) answer scaled to ten-thousandths without rounding


@dataclass(frozen=True)
class Step:
    name: str
    removes: str  # the one inefficiency this step removes
    kernel: str  # entry point in ladder.cu, "select_sum" (the engine's kernel before codegen), or "fused" (the engine)
    rows_per_thread: int  # 1 or 2 rows a thread; 0: a grid that fills the GPU once and loops
    output: str  # rows: a product per row | partials: one per block | gpu_total: reduced on the GPU | exact: 128-bit total
    host: str  # pageable or pinned host columns
    streams: int = 1  # >1: chunks on that many streams, copies overlapping kernels
    options: tuple[str, ...] = ()  # extra nvcc options
    scan: str | None = None  # kernel "fused": the engine's scan the step runs (frames, or index: the key's bucket lists)
    course_step: str | None = None
    course_ms: tuple[float | None, float | None, float | None] | None = None  # total, memcpy, kernel + CPU sum


STEPS = (
    Step("simpleselect", "(the baseline) the GPU selects and multiplies; the CPU sums every row",
         "select_multiply", 1, "rows", "pageable", course_step="simpleselect", course_ms=(59.45, 46.335, 13.115)),
    Step("interleaved_tree", "a product per row crossing PCIe and summed on the CPU: blocks reduce in shared memory",
         "reduce_interleaved", 1, "partials", "pageable", course_step="selectandsum", course_ms=(60.126, 24.080, 36.046)),
    Step("sequential_addressing", "the modulo, divergent warps and bank conflicts of interleaved addressing",
         "reduce_sequential", 1, "partials", "pageable", course_step="sequential addressing", course_ms=(40.892, 24.128, 16.764)),
    Step("unrolled_last_warp", "__syncthreads and the bounds test in the last six steps",
         "reduce_unrolled_warp", 1, "partials", "pageable", course_step="unrolled last warp", course_ms=(35.71, None, 12.939)),
    Step("two_loads_per_thread", "half the threads idling in the first step: each adds two rows while loading",
         "reduce_two_loads", 2, "partials", "pageable", course_step="two loads per thread", course_ms=(30.808, None, 8.181)),
    Step("second_reduce_kernel", "the CPU summing block partials: a second kernel sums them on the GPU",
         "reduce_two_loads", 2, "gpu_total", "pageable", course_step="second reduce kernel", course_ms=(31.091, None, 9.116)),
    Step("capped_registers", "low occupancy from register use: registers capped at 32 (the CPU sums partials again)",
         "reduce_two_loads", 2, "partials", "pageable", options=CAPPED, course_step="occupancy", course_ms=(28.609, None, 5.993)),
    Step("pinned_memory", "the driver's staging of pageable memory: host columns page-locked",
         "reduce_two_loads", 2, "partials", "pinned", options=CAPPED, course_step="pinned memory", course_ms=(26.486, None, None)),
    Step("streams", "copies and kernels in sequence: chunks on 4 streams overlap them",
         "reduce_two_loads", 2, "partials", "pinned", 4, CAPPED, course_step="streams (proposed, not measured)"),
    Step("warp_shuffle", "shared-memory steps and barriers inside warps: register shuffles",
         "reduce_warp_shuffle", 2, "partials", "pinned", 4),
    Step("templated_block", "a run-time block size: compile-time size, fully unrolled, static shared memory",
         "reduce_templated", 2, "partials", "pinned", 4),
    Step("grid_stride", "one tree per two rows' block: a GPU-filling grid where each thread sums many rows first",
         "reduce_grid_stride", 0, "partials", "pinned", 4),
    Step("vector_loads", "4- and 8-byte loads: 16-byte loads, more bytes in flight per thread",
         "reduce_vector_loads", 0, "partials", "pinned", 4),
    Step("fused_engine", "factor loads for rows that fail the predicate, int64 partials: the engine's kernel "
         "(predicate-first loads, exact 128-bit sum, one atomic result)",
         "select_sum", 0, "exact", "pinned", 4),
    Step("packed_columns", "20 bytes a row crossing PCIe, and factors shipped for rows that fail the predicate: "
         "frame-of-reference bit-packed columns decoded in a kernel generated for the query, the selected rows' "
         "factors read in place when the zone maps say they are few", "fused", 0, "exact", "pinned", 3, scan="frames"),
    Step("bucket_lists", "a key crossing PCIe for every row: the rows of Z's bucket and those below it are a "
         "stretch of the key's bucket lists (row ids and low bits), read in order with the selected rows' factors "
         "in place", "fused", 0, "exact", "pinned", 3, scan="index"),
)


@dataclass
class LadderRow:
    step: Step
    value: int | None  # the exact sum in ten-thousandths
    match: bool | None
    total_ms: float
    h2d_ms: float
    d2h_ms: float
    kernel_ms: float
    cpu_sum_ms: float
    copy_ms: float  # time any copy ran (H2D and D2H overlap on streams, so not their sum)
    registers: int
    occupancy: float
    totals_ms: list[float] = field(default_factory=list)
    skipped: str | None = None  # why the step could not run exactly on these columns

    @property
    def memcpy_ms(self) -> float:
        return self.copy_ms

    @property
    def kernel_cpu_ms(self) -> float:
        return self.kernel_ms + self.cpu_sum_ms

    @classmethod
    def from_dict(cls, d: dict) -> "LadderRow":
        """A recorded row (to_dict's output) back as an object."""
        fields = {k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k != "step"}
        kept = {k: v for k, v in d["step"].items() if k in Step.__dataclass_fields__}  # a report's retired fields dropped
        step = dict(kept, options=tuple(d["step"]["options"]),
                    course_ms=tuple(d["step"]["course_ms"]) if d["step"]["course_ms"] else None)
        value = fields.pop("value")
        return cls(Step(**step), None if value is None else int(value), **fields)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["step"] = asdict(self.step)
        d["value"] = None if self.value is None else str(self.value)
        return d | {"memcpy_ms": self.memcpy_ms, "kernel_cpu_ms": self.kernel_cpu_ms}


def findings(rows: list[LadderRow], duckdb_ms: float | None, numpy_ms: float | None) -> list[str]:
    """What the run says, in sentences computed from its numbers."""
    ran = [r for r in rows if r.skipped is None]
    if not ran:
        return ["No step ran."]
    first, best = ran[0], min(ran, key=lambda r: r.total_ms)
    course = [r for r in ran if r.step.course_ms and r.step.course_ms[0]]
    out = [f"Fastest step: {best.step.name}, {best.total_ms:.2f} ms end to end, "
           f"{first.total_ms / best.total_ms:.1f}x faster than simpleselect ({first.total_ms:.2f} ms)."]
    if course:
        c_first, c_last = course[0].step.course_ms[0], course[-1].step.course_ms[0]
        n_first, n_last = course[0].total_ms, course[-1].total_ms
        out.append(f"Over the course's measured steps, 2012 went from {c_first:.1f} to {c_last:.1f} ms "
                   f"({c_first / c_last:.2f}x); this GPU from {n_first:.2f} to {n_last:.2f} ms ({n_first / n_last:.2f}x).")
        c_rank = [r.step.name for r in sorted(course, key=lambda r: r.step.course_ms[0])]
        n_rank = [r.step.name for r in sorted(course, key=lambda r: r.total_ms)]
        out.append("Ranking of those steps, fastest first: 2012 " + " > ".join(c_rank[:4]) + " …; today "
                   + " > ".join(n_rank[:4]) + " ….")
        for era, total in (("2012", lambda r: r.step.course_ms[0]), ("today", lambda r: r.total_ms)):
            gains = [(total(a) / total(b), b.step.name) for a, b in zip(course, course[1:]) if total(b) > 0]
            if gains:
                gain, name = max(gains)
                out.append(f"Largest single-step gain {era}: {name}, {gain:.2f}x.")
    share = [r.memcpy_ms / r.total_ms for r in ran if r.total_ms > 0]
    out.append(f"Transfer share of each step's total: {min(share):.0%} to {max(share):.0%} "
               f"(median {sorted(share)[len(share) // 2]:.0%}): the main cost is still data transfer.")
    k_first, k_best = first.kernel_cpu_ms, min(r.kernel_cpu_ms for r in ran)
    out.append(f"Kernel + CPU sum fell from {k_first:.3f} ms to {k_best:.3f} ms ({k_first / max(k_best, 1e-9):.0f}x); "
               f"the copies moved {min(r.memcpy_ms for r in ran):.2f}–{max(r.memcpy_ms for r in ran):.2f} ms.")
    pageable_kernels = [r for r in ran if r.step.host == "pageable" and r.step.output != "rows"]
    if len(pageable_kernels) > 1:
        totals = [r.total_ms for r in pageable_kernels]
        out.append(f"The kernel steps measured with pageable copies ({pageable_kernels[0].step.name} to "
                   f"{pageable_kernels[-1].step.name}) total {min(totals):.2f}–{max(totals):.2f} ms while their "
                   f"kernel + CPU time is at most {max(r.kernel_cpu_ms for r in pageable_kernels):.3f} ms: "
                   "their order is set by the pageable copy's run-to-run spread, not by the kernels.")
    if duckdb_ms:
        out.append(f"DuckDB on this host's CPU: {duckdb_ms:.2f} ms; the fastest step takes "
                   f"{best.total_ms / duckdb_ms:.2f}x DuckDB's time. In 2012 the CPU reference took "
                   f"{COURSE_CPU_MS} ms and the fastest step {min(r.step.course_ms[0] for r in course):.1f} ms."
                   if course else f"DuckDB on this host's CPU: {duckdb_ms:.2f} ms.")
    if numpy_ms:
        out.append(f"Plain NumPy on the same columns: {numpy_ms:.2f} ms.")
    return out


HEADERS = ["step", "course step", "total ms", "memcpy ms", "kernel + CPU ms", "regs", "occupancy",
           "2012 total", "2012 memcpy", "2012 kernel + CPU", "check"]


def _ms(v) -> str:
    return "" if v is None else f"{v:.3f}"


def table_rows(rows: list[LadderRow]) -> list[list[str]]:
    out = []
    for r in rows:
        c = r.step.course_ms or (None, None, None)
        check = r.skipped and f"skipped: {r.skipped}" or {True: "MATCH", False: "MISMATCH", None: ""}[r.match]
        out.append([r.step.name, r.step.course_step or "(modern)",
                    "" if r.skipped else _ms(r.total_ms), "" if r.skipped else _ms(r.memcpy_ms),
                    "" if r.skipped else _ms(r.kernel_cpu_ms), str(r.registers), f"{r.occupancy:.0%}",
                    *(f"{v:g}" if v is not None else "" for v in c), check])
    return out


def markdown(rows: list[LadderRow], meta: dict, notes: list[str], images: list[str]) -> str:
    from gquery.reports import md_table

    refs = [f"- DuckDB {meta.get('duckdb_version', '')}, {meta.get('duckdb_threads')} threads: "
            f"{_ms(meta.get('duckdb_ms'))} ms (median); NumPy: {_ms(meta.get('numpy_ms'))} ms; "
            f"2012 CPU reference: {COURSE_CPU_MS} ms."]
    lines = [
        f"# The optimization ladder on {meta['device']}",
        "",
        f"`{meta['command']}` · commit `{meta['commit']}` · {meta['date']} · SF {meta['sf']:g}, Z = {meta['z']}, "
        f"{meta['rows']:,} rows · medians of at least {meta['repeat']} runs and 0.1 s of runs, after 25 ms of warm-up runs · every step checked against DuckDB.",
        "",
        f"Result: {meta['result']} (DuckDB). Limits measured in the same run: H2D pinned "
        f"{meta['limits']['h2d_pinned_gbps']:.1f} GB/s, pageable {meta['limits']['h2d_pageable_gbps']:.1f} GB/s, "
        f"device copy {meta['limits']['d2d_gbps']:,.0f} GB/s (read+write).",
        "",
        md_table(HEADERS, table_rows(rows)),
        "",
        "CPU references on this host:",
        *refs,
        "",
        "What each step removes:",
        "",
        *[f"- **{r.step.name}**: {r.step.removes}." for r in rows],
        "",
        "## Findings (computed from the table)",
        "",
        *[f"- {n}" for n in notes],
        "",
        "memcpy = time during which an H2D or D2H copy ran; kernel + CPU = kernel busy time + the host's sum of what came back. "
        "Where streams overlap copies and kernels, the total is less than the sum of the two.",
        "",
        *[f"![{image_title(i)}]({i})" for i in images],
    ]
    return "\n".join(lines)


def image_title(path: str) -> str:
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
