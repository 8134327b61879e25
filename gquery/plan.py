"""Where a query's columns live while it runs (the modes), what the link costs, and the geometry of
the ladder's chunked pipelines (bench/ladder.py); a query of the class is planned by gpu/fusedplan.py.

    resident    columns copied to the GPU once and cached; a query is one kernel
    pinned      host columns page-locked and mapped; chunks copied on a copy stream under the kernels,
                and buffers read sparsely straight from host memory (zero-copy)
    registered  the table's own host arrays page-locked in place (no second copy), then as pinned
    pageable    host columns as loaded; host threads stage chunks into a ring of pinned buffers
                while the previous chunk's copy runs
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from gquery.encodings import FRAME_ROWS
from gquery.errors import GqueryError, UsageError
from gquery.host import host_threads

MODES = ("resident", "pinned", "registered", "pageable")
MAPPED_MODES = ("pinned", "registered")  # host memory the kernel can read in place
ZERO_COPY_READ_BYTES = 64  # link time a scattered zero-copy read costs, in bulk-copy bytes (a 32 B
# sector and its request; measured: 0.5% of SF10's rows read so took ~1.5x their bulk bytes' time)
BLOCK_THREADS = 256
VECTORS_PER_THREAD = 4  # 16-byte key loads each thread keeps in flight per loop step
ROWS_PER_VECTOR = 4  # one int4 of keys
BLOCKS_PER_SM = 8  # 8 x 256 threads fill an SM at <= 32 registers
# The row loop's grid: blocks an SM, in waves of what it holds (6 of the plain scan, 4 of the
# decoders'): the blocks loop over tiles, and with 4 waves or more the last one's tail is short.
# Measured on H100 at SF 10, resident plain: 8 an SM read at 0.70 (Z = 30) and 0.88 (Z = half) of a
# device copy, 24 at 0.84 and 0.91.
GRID_BLOCKS_PER_SM = 24
MIN_CHUNK_ROWS, MAX_CHUNK_ROWS = 1 << 20, 1 << 23  # 20 to 160 MB of columns
CHUNKS_PER_TABLE = 8  # enough for copies to hide kernels; 8M-row chunks copy at the full pinned rate (H200)
DEFAULT_STREAMS = 3
DEFAULT_STAGING_BUFFERS = 3
CHUNK_ALIGN_ROWS = FRAME_ROWS  # chunks start on a frame, 16-byte aligned in every buffer
DEVICE_HEADROOM = 0.9  # of free memory a plan may take


def blocks_for(rows: int, rows_per_block: int, cap: int | None = None) -> int:
    """Blocks that cover `rows` at `rows_per_block` each, at most `cap` (then blocks loop)."""
    blocks = max(1, math.ceil(rows / rows_per_block))
    return min(blocks, cap) if cap else blocks


@dataclass(frozen=True)
class Launch:
    grid: int
    block: int

    def __str__(self) -> str:
        return f"{self.grid} blocks x {self.block} threads"


@dataclass(frozen=True)
class Plan:
    mode: str
    rows: int
    bytes_per_row: int
    chunk_rows: int
    streams: int
    staging_buffers: int  # pinned host buffers in the ring (pageable mode only)
    staging_threads: int  # host threads copying into them (pageable mode only)
    sm_count: int
    block_threads: int = BLOCK_THREADS
    vectors_per_thread: int = VECTORS_PER_THREAD

    @property
    def n_chunks(self) -> int:
        return max(1, math.ceil(self.rows / self.chunk_rows))

    @property
    def bytes(self) -> int:
        return self.rows * self.bytes_per_row

    @property
    def device_bytes(self) -> int:
        """Column memory the plan holds on the GPU: the table, or one chunk per stream."""
        return self.chunk_rows * self.bytes_per_row * (1 if self.mode == "resident" else self.streams)

    def chunks(self):
        """(index, first row, end row) of each chunk; the last may be short."""
        for i in range(self.n_chunks):
            start = i * self.chunk_rows
            yield i, start, min(start + self.chunk_rows, self.rows)

    def launch(self, rows: int) -> Launch:
        """Grid for `rows` rows: enough blocks to fill the GPU, each looping over many tiles."""
        tile_rows = self.block_threads * self.vectors_per_thread * ROWS_PER_VECTOR
        return Launch(blocks_for(rows, tile_rows, self.sm_count * GRID_BLOCKS_PER_SM), self.block_threads)

    def to_dict(self) -> dict:
        return asdict(self) | {"n_chunks": self.n_chunks, "launch": str(self.launch(self.chunk_rows))}

    def describe(self) -> str:
        mb = lambda b: f"{b / 1e6:,.1f} MB"
        lines = [
            f"plan: {self.mode}",
            f"  rows        {self.rows:,} x {self.bytes_per_row} B = {mb(self.bytes)}",
            f"  chunks      {self.n_chunks} x {self.chunk_rows:,} rows ({mb(self.chunk_rows * self.bytes_per_row)})",
            f"  streams     {self.streams}",
            f"  launch      {self.launch(self.chunk_rows)} per chunk, {self.vectors_per_thread} x 4 rows a thread a step",
            f"  GPU memory  {mb(self.device_bytes)} for columns",
        ]
        if self.staging_buffers:
            lines.append(f"  staging     {self.staging_buffers} pinned buffers, {self.staging_threads} host threads")
        return "\n".join(lines)


def make_plan(mode: str, rows: int, bytes_per_row: int, sm_count: int, free_bytes: int | None = None,
              chunk_rows: int | None = None, streams: int | None = None,
              staging_threads: int | None = None) -> Plan:
    if mode not in MODES:
        raise UsageError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if rows < 0 or bytes_per_row <= 0 or sm_count <= 0:
        raise ValueError("rows >= 0, bytes_per_row > 0 and sm_count > 0")
    if chunk_rows is not None and chunk_rows <= 0:
        raise UsageError(f"chunk rows must be positive, got {chunk_rows}")
    if streams is not None and streams <= 0:
        raise UsageError(f"streams must be positive, got {streams}")
    if staging_threads is not None and staging_threads <= 0:
        raise UsageError(f"staging threads must be positive, got {staging_threads}")
    budget = None if free_bytes is None else int(free_bytes * DEVICE_HEADROOM)
    if mode == "resident":
        if budget is not None and rows * bytes_per_row > budget:
            raise GqueryError(
                f"the table ({rows * bytes_per_row / 1e9:.1f} GB) does not fit the GPU's free memory "
                f"({free_bytes / 1e9:.1f} GB); run it with --mode pinned or --mode pageable, which stream it")
        return Plan(mode, rows, bytes_per_row, max(rows, 1), 1, 0, 0, sm_count)
    streams = streams or DEFAULT_STREAMS
    if chunk_rows is None:
        chunk_rows = min(MAX_CHUNK_ROWS, max(MIN_CHUNK_ROWS, math.ceil(rows / CHUNKS_PER_TABLE)))
    chunk = math.ceil(chunk_rows / CHUNK_ALIGN_ROWS) * CHUNK_ALIGN_ROWS
    if budget is not None:  # a bounded set of device buffers, whatever the table's size
        chunk = min(chunk, budget // (streams * bytes_per_row) // CHUNK_ALIGN_ROWS * CHUNK_ALIGN_ROWS)
    chunk = max(CHUNK_ALIGN_ROWS, min(chunk, math.ceil(rows / CHUNK_ALIGN_ROWS) * CHUNK_ALIGN_ROWS))
    threads = staging_threads or host_threads()
    return Plan(mode, rows, bytes_per_row, chunk, streams,
                DEFAULT_STAGING_BUFFERS if mode == "pageable" else 0,
                threads if mode == "pageable" else 0, sm_count)
