"""PNG plots of recorded timings (matplotlib, no display needed):
(a) the ladder as stacked bars, (b) a stream timeline, (c) each mode's bandwidth against the limits."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gquery.profile import Interval, Profile  # noqa: E402

COLORS = {"staging": "#9467bd", "h2d": "#1f77b4", "kernel": "#2ca02c", "d2h": "#ff7f0e", "cpu": "#d62728"}


def _save(fig, path: Path | str) -> None:
    """Write next to the target, then rename: no half-written PNG."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, dpi=120, bbox_inches="tight", format="png")
    plt.close(fig)
    tmp.replace(path)


def draw_timeline(ax, intervals: list[Interval], title: str) -> None:
    """(b) One row per lane (host staging, each stream) with its stage intervals."""
    lanes = sorted({i.lane for i in intervals}, key=lambda lane: (lane != "host", lane))
    for y, lane in enumerate(lanes):
        for stage in COLORS:
            spans = [(i.start_ms, i.ms) for i in intervals if i.lane == lane and i.stage == stage]
            if spans:
                ax.broken_barh(spans, (y - 0.35, 0.7), facecolors=COLORS[stage], edgecolor="white", linewidth=0.3)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.invert_yaxis()
    ax.set_xlabel("ms from the run's start")
    ax.set_title(title)
    present = [s for s in COLORS if any(i.stage == s for i in intervals)]
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=COLORS[s]) for s in present], labels=present,
              loc="upper right", fontsize=8)


def draw_bandwidth(ax, profiles: list[Profile], limits: dict) -> None:
    """(c) Each mode's end-to-end rate (column bytes over total time) against the measured limits."""
    names = [p.mode for p in profiles]
    rates = [p.effective_gbps for p in profiles]
    ax.bar(names, rates, color="#1f77b4")
    for x, r in enumerate(rates):
        ax.text(x, r, f"{r:,.0f}", ha="center", va="bottom", fontsize=8)
    for key, label, style in (("h2d_pinned_gbps", "H2D pinned", "--"), ("h2d_pageable_gbps", "H2D pageable", ":"),
                              ("d2d_gbps", "device copy (r+w)", "-.")):
        if limits.get(key):
            ax.axhline(limits[key], linestyle=style, color="gray", linewidth=1)
            ax.text(len(names) - 0.5, limits[key], f" {label} {limits[key]:,.0f}", va="bottom", ha="right", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("GB/s (log)")
    ax.set_title("end-to-end rate by mode")


def plot_run(profiles: list[Profile], limits: dict, path: Path | str) -> None:
    """(b) and (c) for one `gquery run`: the timeline of its first streamed mode, and all modes' rates."""
    streamed = next((p for p in profiles if p.mode != "resident"), profiles[0])
    fig, (a, b) = plt.subplots(1, 2, figsize=(14, 4.5), gridspec_kw={"width_ratios": [2, 1]})
    draw_timeline(a, streamed.intervals, f"{streamed.mode}: {streamed.total_ms:.2f} ms, {streamed.rows:,} rows")
    draw_bandwidth(b, profiles, limits or {})
    _save(fig, path)


def plot_ladder(rows, path: Path | str, device: str = "") -> None:
    """(a) Each step's time as transfer, kernel and CPU sum, today beside the 2012 totals."""
    ran = [r for r in rows if r.skipped is None]
    names = [r.step.name for r in ran]
    fig, (a, b) = plt.subplots(1, 2, figsize=(15, 5), gridspec_kw={"width_ratios": [3, 2]})
    bottom = [0.0] * len(ran)
    for label, values, color in (("transfer (H2D + D2H)", [r.memcpy_ms for r in ran], COLORS["h2d"]),
                                 ("kernel", [r.kernel_ms for r in ran], COLORS["kernel"]),
                                 ("CPU sum", [r.cpu_sum_ms for r in ran], COLORS["cpu"])):
        a.bar(names, values, bottom=bottom, label=label, color=color)
        bottom = [x + y for x, y in zip(bottom, values)]
    a.set_ylabel("ms (stages summed; streams overlap them, so the total can be less)")
    a.set_title(f"the ladder today{': ' + device if device else ''}")
    a.tick_params(axis="x", rotation=60)
    a.legend(fontsize=8)
    course = [r for r in ran if r.step.course_ms and r.step.course_ms[0]]
    b.bar([r.step.name for r in course], [r.step.course_ms[0] for r in course], color="#7f7f7f", label="2012 total")
    b.bar([r.step.name for r in course], [r.total_ms for r in course], color="#1f77b4", label="today total")
    b.set_ylabel("ms")
    b.set_title("2012 (GeForce 9500 GT) and today, course steps")
    b.tick_params(axis="x", rotation=60)
    b.legend(fontsize=8)
    _save(fig, path)
