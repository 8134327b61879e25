"""Where a run's time went: stage intervals from CUDA events and host clocks, their totals, how
much of one stage hid under another, and each rate as a fraction of the measured limits."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

STAGES = ("staging", "h2d", "kernel", "d2h")


@dataclass(frozen=True)
class Interval:
    stage: str  # one of STAGES
    lane: str  # "host" or "stream <k>"
    chunk: int
    start_ms: float  # from the run's start
    end_ms: float

    @property
    def ms(self) -> float:
        return self.end_ms - self.start_ms


def union(intervals) -> list[tuple[float, float]]:
    """Merged (start, end) spans covered by any interval."""
    spans = sorted((i.start_ms, i.end_ms) for i in intervals)
    merged: list[list[float]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def busy_ms(intervals) -> float:
    return sum(b - a for a, b in union(intervals))


def overlap_ms(intervals, under) -> float:
    """How long `intervals` ran while some interval of `under` ran too."""
    covered = union(under)
    total = 0.0
    for a, b in union(intervals):
        for c, d in covered:
            total += max(0.0, min(b, d) - max(a, c))
    return total


@dataclass
class Profile:
    mode: str
    rows: int
    column_bytes: int  # the three columns, what the query reads
    h2d_bytes: int  # what crossed PCIe for this query (0 when resident)
    total_ms: float  # start of the run to the result on the host, by CUDA events
    intervals: list[Interval] = field(default_factory=list)
    setup_ms: float = 0.0  # once per table: upload (resident) or page-locking (pinned)
    kernel_bytes: int | None = None  # what the kernel read: keys, and factors only where a key passed
    encoding: str = "plain"
    zero_copy_bytes: int = 0  # read in place from mapped host memory: the kernel's read counts x 32 B sectors
    physical_bytes: int | None = None  # the encoded buffers the plan used (column_bytes is the logical size)
    counters: dict = field(default_factory=dict)  # the kernel's: selected rows, factor vectors, low reads
    host_path: str = ""  # how host memory reached the GPU: pinned copy, registered in place, staged
    per_gpu: list = field(default_factory=list)  # several tables or GPUs: each GPU's rows, busy time, memory peak

    def later(self, read) -> "Profile":
        """The intervals made by `read()` when first asked for (a fused run's, from its CUDA events: a call that
        never looks at them does not wait for them to be read). `read` answers alike however often it is called."""
        self.__dict__["_read"] = read
        return self

    @property
    def pcie_bytes(self) -> int:
        """Bytes that crossed PCIe for this query: bulk copies and zero-copy reads."""
        return self.h2d_bytes + self.zero_copy_bytes

    @property
    def pcie_bytes_per_row(self) -> float:
        return self.pcie_bytes / self.rows if self.rows else 0.0

    def stage(self, name: str) -> list[Interval]:
        return [i for i in self.intervals if i.stage == name]

    def stage_ms(self, name: str) -> float:
        """Wall time during which the stage was running (overlapping chunks counted once)."""
        return busy_ms(self.stage(name))

    @property
    def effective_gbps(self) -> float:
        return self.column_bytes / self.total_ms / 1e6 if self.total_ms > 0 else 0.0

    @property
    def h2d_gbps(self) -> float | None:
        ms = self.stage_ms("h2d")
        if not self.h2d_bytes:
            return None
        return self.h2d_bytes / ms / 1e6 if ms > 0 else None

    @property
    def kernel_gbps(self) -> float | None:
        """Bytes the kernel read over kernel time: its memory rate, comparable to a device copy."""
        ms = self.stage_ms("kernel")
        read = self.column_bytes if self.kernel_bytes is None else self.kernel_bytes
        return read / ms / 1e6 if ms > 0 else None

    def hidden(self, stage: str, under: tuple[str, ...] = ("staging", "h2d")) -> float | None:
        """Fraction of `stage`'s time that ran while any stage of `under` ran (1.0: fully hidden).
        By default, under the transfer path: host staging or the H2D copy."""
        ms = self.stage_ms(stage)
        covering = [i for name in under for i in self.stage(name)]
        if ms <= 0 or not covering:
            return None
        return overlap_ms(self.stage(stage), covering) / ms

    def summary(self, limits: dict | None = None) -> dict:
        s = {
            "mode": self.mode, "rows": self.rows, "column_bytes": self.column_bytes,
            "h2d_bytes": self.h2d_bytes, "kernel_bytes": self.kernel_bytes, "total_ms": self.total_ms,
            "encoding": self.encoding, "physical_bytes": self.physical_bytes, "zero_copy_bytes": self.zero_copy_bytes,
            "pcie_bytes": self.pcie_bytes, "pcie_bytes_per_row": self.pcie_bytes_per_row, "counters": self.counters,
            "host_path": self.host_path, "per_gpu": self.per_gpu,
            "setup_ms": self.setup_ms,
            **{f"{name}_ms": self.stage_ms(name) for name in STAGES},
            "effective_gbps": self.effective_gbps, "h2d_gbps": self.h2d_gbps,
            "kernel_gbps": self.kernel_gbps,
            "kernel_hidden": self.hidden("kernel"), "staging_hidden": self.hidden("staging", under=("h2d",)),
        }
        if limits:
            s["fraction_of_limits"] = fractions(s, limits)
        return s

    def to_dict(self, limits: dict | None = None) -> dict:
        return self.summary(limits) | {"intervals": [asdict(i) for i in self.intervals]}

    @classmethod
    def from_dict(cls, d: dict) -> "Profile":
        """A recorded profile (to_dict's output) back as an object, e.g. to plot it again."""
        return cls(d["mode"], d["rows"], d["column_bytes"], d["h2d_bytes"], d["total_ms"],
                   [Interval(**i) for i in d.get("intervals", [])], d.get("setup_ms", 0.0), d.get("kernel_bytes"),
                   d.get("encoding", "plain"), d.get("zero_copy_bytes", 0), d.get("physical_bytes"),
                   d.get("counters", {}), d.get("host_path", ""), d.get("per_gpu", []))


def _intervals(profile: Profile) -> list[Interval]:
    read = profile.__dict__.get("_read")
    if read is not None:
        profile.__dict__["_intervals"] = read()
        profile.__dict__.pop("_read", None)
    return profile.__dict__["_intervals"]


def _set_intervals(profile: Profile, intervals: list[Interval]) -> None:
    profile.__dict__["_intervals"] = intervals
    profile.__dict__.pop("_read", None)


Profile.intervals = property(_intervals, _set_intervals)  # the dataclass's field, read when first asked for (later)


def fractions(summary: dict, limits: dict) -> dict:
    """Each measured rate over the limit it runs against."""
    def frac(value, limit):
        return value / limit if value and limit else None

    return {
        "h2d_of_pinned_h2d": frac(summary.get("h2d_gbps"), limits.get("h2d_pinned_gbps")),
        "end_to_end_of_pinned_h2d": frac(summary.get("effective_gbps"), limits.get("h2d_pinned_gbps"))
        if summary.get("h2d_bytes") else None,  # a resident query ships nothing
        "kernel_of_d2d": frac(summary.get("kernel_gbps"), limits.get("d2d_gbps")),
        "end_to_end_of_host_staging": frac(summary.get("effective_gbps"), limits.get("host_staging_gbps"))
        if summary.get("staging_ms") else None,
    }
