"""The execution plan: plain data that says how a query runs, printable before it runs.

    resident    columns copied to the GPU once and cached; a query is one kernel
    pinned      host columns page-locked and mapped; chunks copied and reduced on several streams,
                and buffers read sparsely straight from host memory (zero-copy)
    registered  the table's own host arrays page-locked in place (no second copy), then as pinned
    pageable    host columns as loaded; host threads stage chunks into a ring of pinned buffers
                while the previous chunk's copy runs
Two layers: `Plan` is the geometry (chunks, streams, launches: computed here and nowhere else);
`QueryPlan` is the query, the table's encodings, where each buffer lives, the kernel variant, its
steps and the reasons for each choice. `plan_query` is the planner.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from gquery.encodings import FRAME_ROWS
from gquery.errors import GqueryError, UsageError
from gquery.host import host_threads

MODES = ("resident", "pinned", "registered", "pageable")
MAPPED_MODES = ("pinned", "registered")  # host memory the kernel can read in place
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
# A table queued behind another (Engine.run_many: a parted table's parts) has its first copies hidden
# by the kernels before it: fewer, larger chunks, up to MAX_CHUNK_BYTES whatever the bytes a row,
# so the host's calls a chunk (~40 us) stay well under the GPU's time for it (4 GPUs share one host)
BATCH_CHUNKS_PER_TABLE, MAX_CHUNK_BYTES = 4, 160 << 20
DEFAULT_STREAMS = 3
DEFAULT_STAGING_BUFFERS = 3
CHUNK_ALIGN_ROWS = FRAME_ROWS  # chunks start on a frame, 16-byte aligned in every buffer
DEVICE_HEADROOM = 0.9  # of free memory a plan may take
TILE_SHARED_BYTES = 48 << 10  # dynamic shared memory a block may take without opting in: its frame tiles
FRAME_BLOCK_THREADS = 128  # the frame loop's blocks: 4 warps, so an SM's warps are bounded finely by tiles and registers


def frame_block(tile_words: int) -> tuple[int, int]:
    """(threads, dynamic shared bytes) of a frame-loop block whose warps each take a tile of
    `tile_words`: as many warps as tiles fit its shared memory, at least one, at most 4."""
    tile_bytes = 4 * tile_words
    warps = max(1, min(FRAME_BLOCK_THREADS // 32, TILE_SHARED_BYTES // max(tile_bytes, 1)))
    return 32 * warps, warps * tile_bytes


def blocks_for(rows: int, rows_per_block: int, cap: int | None = None) -> int:
    """Blocks that cover `rows` at `rows_per_block` each, at most `cap` (then blocks loop)."""
    blocks = max(1, math.ceil(rows / rows_per_block))
    return min(blocks, cap) if cap else blocks


@dataclass(frozen=True)
class Launch:
    grid: int
    block: int
    shared: int = 0  # dynamic shared memory a block (the frame loop's tiles)

    def __str__(self) -> str:
        tiles = f", {self.shared:,} B of frame tiles a block" if self.shared else ""
        return f"{self.grid} blocks x {self.block} threads{tiles}"


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

    def list_launch(self, entries: int) -> Launch:
        """Grid for the list loop (indexed key): a thread VECTORS_PER_THREAD entries a step."""
        return Launch(blocks_for(entries, self.block_threads * self.vectors_per_thread, self.sm_count * BLOCKS_PER_SM),
                      self.block_threads)

    def frame_launch(self, rows: int, tile_words: int, blocks_per_sm: int) -> Launch:
        """Grid for the frame loop: a warp a frame at a time, each warp a tile of `tile_words` in
        shared memory; one wave of the blocks an SM holds (`blocks_per_sm`, from the compiled
        kernel's registers and the tiles), each warp looping over many frames."""
        threads, shared = frame_block(tile_words)
        frames = math.ceil(rows / FRAME_ROWS)
        return Launch(blocks_for(frames, threads // 32, self.sm_count * max(1, blocks_per_sm)), threads, shared)

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
              staging_threads: int | None = None, batched: bool = False) -> Plan:
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
    if chunk_rows is None and batched:
        most = max(MAX_CHUNK_ROWS, MAX_CHUNK_BYTES // bytes_per_row)
        chunk_rows = min(most, max(MIN_CHUNK_ROWS, math.ceil(rows / BATCH_CHUNKS_PER_TABLE)))
    elif chunk_rows is None:
        chunk_rows = min(MAX_CHUNK_ROWS, max(MIN_CHUNK_ROWS, math.ceil(rows / CHUNKS_PER_TABLE)))
    chunk = math.ceil(chunk_rows / CHUNK_ALIGN_ROWS) * CHUNK_ALIGN_ROWS
    if budget is not None:  # a bounded set of device buffers, whatever the table's size
        chunk = min(chunk, budget // (streams * bytes_per_row) // CHUNK_ALIGN_ROWS * CHUNK_ALIGN_ROWS)
    chunk = max(CHUNK_ALIGN_ROWS, min(chunk, math.ceil(rows / CHUNK_ALIGN_ROWS) * CHUNK_ALIGN_ROWS))
    threads = staging_threads or host_threads()
    return Plan(mode, rows, bytes_per_row, chunk, streams,
                DEFAULT_STAGING_BUFFERS if mode == "pageable" else 0,
                threads if mode == "pageable" else 0, sm_count)


# --- the query plan ------------------------------------------------------------------------------
PLACEMENTS = ("resident", "stream", "zero_copy")
ZERO_COPY_READ_BYTES = 64  # link time a scattered zero-copy read costs, in bulk-copy bytes (a 32 B
# sector and its request; measured: 0.5% of SF10's rows read so took ~1.5x their bulk bytes' time)
ZERO_COPY_SECTOR = 32  # the smallest read a GPU load makes of host memory: the profile's unit
FACTOR_READS_PER_ROW = 4  # a selected row's factors: frame metadata and words, of two columns
ENCODING_CHOICES = ("auto", "plain", "packed", "sliced", "indexed")


@dataclass(frozen=True)
class Buffer:
    column: str
    name: str  # values (plain), words and meta (packed), top and low (sliced), ids and low (indexed)
    placement: str  # resident | stream | zero_copy
    nbytes: int


@dataclass(frozen=True)
class Kernel:
    """The scan's compile-time variant: one load primitive per column, 64- or 128-bit products."""

    key: str  # plain | packed | sliced | indexed
    factors: str  # plain | packed
    low_bytes: int  # sliced, indexed: bytes a low-bits value takes (0: the top byte holds the whole key)
    wide: bool
    tiles: bool = False  # the frame loop: a warp stages a frame's packed words in shared memory
    id_bytes: int = 0  # indexed: bytes a listed row id takes (4, or 8 past 2^32 rows)

    def defines(self) -> dict[str, int]:
        code = {"plain": 0, "packed": 1, "sliced": 2, "indexed": 3}
        return {"KEY_ENCODING": code[self.key], "FACTOR_ENCODING": code[self.factors],
                "LOW_BYTES": self.low_bytes, "WIDE_PRODUCT": int(self.wide), "TILES": int(self.tiles),
                "ID_BYTES": self.id_bytes}

    def __str__(self) -> str:
        low = f", low bits {self.low_bytes} B" if self.key in ("sliced", "indexed") else ""
        ids = f", row ids {self.id_bytes} B" if self.key == "indexed" else ""
        loop = ", a warp a frame in shared memory" if self.tiles else ""
        return f"key {self.key}{ids}{low}, factors {self.factors}, {'128' if self.wide else '64'}-bit products{loop}"


@dataclass(frozen=True)
class QueryPlan:
    z: int
    encoding: str
    geometry: Plan
    kernel: Kernel
    buffers: tuple[Buffer, ...]
    selected_estimate: tuple[int, int]  # (rows at least, rows at most) the predicate selects
    undecided_estimate: int  # sliced: rows whose top byte ties Z's
    reasons: tuple[str, ...]
    tile_words: int = 0  # the frame loop: shared-memory words a warp's tile takes (0: the vector loop)
    key_width: int = 0  # the frame loop, packed key: its widest frame, which sizes the tile's key regions
    entries: tuple[int, int] = (0, 0)  # indexed: (list entries that pass outright, entries read)

    @property
    def mode(self) -> str:
        return self.geometry.mode

    @property
    def rows(self) -> int:
        return self.geometry.rows

    def placement(self, column: str, name: str) -> str:
        return next(b.placement for b in self.buffers if b.column == column and b.name == name)

    def bytes_by_placement(self, placement: str) -> int:
        return sum(b.nbytes for b in self.buffers if b.placement == placement)

    def steps(self) -> list[tuple[str, str]]:
        streamed = [f"{b.column}.{b.name}" for b in self.buffers if b.placement == "stream"]
        zero_copy = [f"{b.column}.{b.name}" for b in self.buffers if b.placement == "zero_copy"]
        resident = [f"{b.column}.{b.name}" for b in self.buffers if b.placement == "resident"]
        g = self.geometry
        out = []
        if streamed:
            how = f"staged by {g.staging_threads} host threads into {g.staging_buffers} pinned buffers, then " \
                if g.staging_buffers else ""
            out.append(("transfer", f"{how}copied in {g.n_chunks} chunk(s) of {g.chunk_rows:,} rows on one copy "
                                    f"stream: {', '.join(streamed)} ({self.bytes_by_placement('stream') / 1e6:,.1f} MB)"))
        if resident:
            out.append(("resident", f"on the GPU before the query: {', '.join(resident)}"))
        if self.kernel.key == "indexed":
            passed, read = self.entries
            out.append(("decode-and-scan", f"list kernel ({self.kernel}), {g.list_launch(read)}: the first {read:,} "
                                           f"entries of the key's bucket lists, {passed:,} of them below Z's bucket "
                                           f"(pass outright), the rest in Z's bucket (their low bits decide)"))
        else:
            if self.kernel.tiles:
                warps = frame_block(self.tile_words)[0] // 32
                launch = f"blocks of {warps} warps, each warp a frame of {FRAME_ROWS} rows at a time in a {4 * self.tile_words:,} B tile"
            else:
                launch = f"{g.launch(g.chunk_rows)} a chunk"
            out.append(("decode-and-scan", f"scan kernel ({self.kernel}) on {g.streams} compute stream(s), {launch}"))
        if zero_copy:
            out.append(("gather", f"read in place from mapped host memory, only where needed: {', '.join(zero_copy)}"))
        out.append(("combine", "exact 128-bit block sums, atomically added on the GPU; one copy back"))
        return out

    def to_dict(self) -> dict:
        return {"z": self.z, "encoding": self.encoding, "mode": self.mode, "kernel": str(self.kernel),
                "buffers": [asdict(b) for b in self.buffers], "selected_estimate": list(self.selected_estimate),
                "undecided_estimate": self.undecided_estimate, "reasons": list(self.reasons), "tile_words": self.tile_words,
                "key_width": self.key_width, "entries": list(self.entries),
                "steps": [list(s) for s in self.steps()], "geometry": self.geometry.to_dict()}

    def describe(self) -> str:
        lo, hi = self.selected_estimate
        lines = [f"plan: {self.mode}, {self.encoding} encoding, Z = {self.z}",
                 f"  rows        {self.rows:,}; the predicate selects {lo:,} to {hi:,} (from statistics)"]
        lines += [f"  {i + 1}. {name:<16} {text}" for i, (name, text) in enumerate(self.steps())]
        lines += [f"  why: {r}" for r in self.reasons]
        return "\n".join(lines)


def _estimate(encoded: dict, key: str, z: int, rows: int) -> tuple[tuple[int, int], int, str]:
    """(rows selected at least, at most), undecided rows, and where the estimate came from."""
    k = encoded[key]
    if k.name in ("sliced", "indexed"):
        decided, undecided = k.estimate(z)
        return (decided, decided + undecided), undecided, f"the {k.name} key's histogram of buckets"
    if k.name == "packed" and k.frames:
        refs = k.meta[:, 0].astype(np.float64)
        spans = np.ldexp(1.0, k.widths) - 1
        frame_rows = np.full(k.frames, FRAME_ROWS)
        frame_rows[-1] = rows - FRAME_ROWS * (k.frames - 1)
        all_pass = int(frame_rows[refs + spans < z].sum())
        some = int(frame_rows[refs < z].sum())
        return (all_pass, some), 0, "each frame's reference and width"
    return (0, rows), 0, "no statistics for plain keys: every row may pass"


def plan_query(table, z: int, mode: str, sm_count: int, free_bytes: int | None = None, encoding: str = "auto",
               chunk_rows: int | None = None, streams: int | None = None,
               staging_threads: int | None = None, gather: bool = True, batched: bool = False,
               tiles: bool = True) -> QueryPlan:
    """Choose the encoding, where each buffer lives, and the scan's variant for one query.
    gather=False ships factors in bulk whatever the selectivity (the ladder's step before late
    materialization); batched: the table is queued with others (make_plan's larger chunks);
    tiles=False keeps packed factors in the vector loop, decoded value by value where they lie (the
    ladder's step before frame tiles)."""
    from gquery.table import ENCODING_SETS, KEY

    if mode not in MODES:
        raise UsageError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if encoding not in ENCODING_CHOICES:
        raise UsageError(f"encoding must be one of {', '.join(ENCODING_CHOICES)}, got {encoding!r}")
    if encoding == "indexed" and mode not in LIST_MODES:
        raise UsageError(list_mode_problem(mode))
    reasons = []
    if encoding == "auto":
        encoding, why = _choose_key(table, z, mode)
        reasons.append(why)
    encoded = table.encoded(encoding)
    rows = table.rows
    selected, undecided, source = _estimate(encoded, KEY, z, rows)
    reasons.append(f"selectivity {selected[0]:,}–{selected[1]:,} of {rows:,} rows, from {source}")
    buffers = []
    for column, enc in encoded.items():
        for name, array in enc.buffers().items():
            buffers.append([column, name, array.nbytes])
    factor_bulk = sum(n for c, _, n in buffers if c != KEY)
    low_bulk = sum(n for c, name, n in buffers if name == "low")
    placed = []
    for column, name, nbytes in buffers:
        if mode == "resident":
            where = "resident"
        elif mode not in MAPPED_MODES:
            where = "stream"
        elif encoding == "indexed":  # the lists' prefix read in order, factors gathered by row id
            where = "zero_copy"
        elif name == "low":
            cost = undecided * ZERO_COPY_READ_BYTES
            where = "zero_copy" if cost < low_bulk else "stream"
        elif column != KEY and ENCODING_SETS[encoding][column] == "packed" and gather:
            cost = selected[1] * FACTOR_READS_PER_ROW * ZERO_COPY_READ_BYTES
            where = "zero_copy" if cost < factor_bulk else "stream"
        else:
            where = "stream"
        placed.append(Buffer(column, name, where, nbytes))
    if encoding == "indexed":
        passed, read = encoded[KEY].prefix(z)
        reasons.append(f"the key's bucket lists: {read:,} entries read ({passed:,} pass outright), and the factors "
                       f"of at most {selected[1]:,} selected rows gathered by row id, "
                       f"{'from device memory' if mode == 'resident' else 'in place from host memory (zero-copy)'}")
    elif mode in MAPPED_MODES:
        if any(b.name == "low" for b in placed):
            where = placed[[b.name for b in placed].index("low")].placement
            reasons.append(f"low key bits {'read in place (zero-copy)' if where == 'zero_copy' else 'shipped'}: "
                           f"{undecided:,} undecided rows x {ZERO_COPY_READ_BYTES} B against {low_bulk / 1e6:,.1f} MB in bulk")
        factor_place = {b.placement for b in placed if b.column != KEY}
        if "zero_copy" in factor_place:
            reasons.append(f"factors read in place for selected rows: at most {selected[1]:,} rows x "
                           f"{FACTOR_READS_PER_ROW} reads x {ZERO_COPY_READ_BYTES} B < {factor_bulk / 1e6:,.1f} MB in bulk")
        elif encoding != "plain":
            reasons.append(f"factors shipped in bulk: up to {selected[1]:,} selected rows would cost more read in "
                           f"place than {factor_bulk / 1e6:,.1f} MB copied")
    elif mode == "pageable":
        reasons.append("pageable memory cannot be read in place: every buffer is staged and copied")
    wide = table.wide_products()
    if wide:
        reasons.append("128-bit products: the largest |quantity| x |price| reaches 2^63")
    key = encoded[KEY]
    low_bytes = key.low_itemsize if key.name in ("sliced", "indexed") else 0
    factors = ENCODING_SETS[encoding]["l_quantity"]
    tiles = (tiles and factors == "packed" and key.name != "indexed"
             and all(b.placement != "zero_copy" for b in placed if b.column != KEY))
    tile = frame_tile_words(encoded) if tiles else 0
    if tiles:
        reasons.append(f"packed factors in device memory: a warp stages each frame's words in shared memory "
                       f"({4 * tile:,} B) in one round trip and decodes them there")
    kernel = Kernel(key.name, factors, low_bytes, wide, tiles, key.ids.itemsize if key.name == "indexed" else 0)
    streamed = sum(b.nbytes for b in placed if b.placement == "stream")
    total = sum(b.nbytes for b in placed)
    per_row = math.ceil((total if mode == "resident" else max(streamed, 1)) / max(rows, 1))
    if key.name == "indexed":  # nothing streams: one launch over the lists' prefix, whatever the rows
        make_plan(mode, rows, max(per_row, 1), sm_count, free_bytes)  # the same checks (a resident table must fit)
        geometry = Plan(mode, rows, max(per_row, 1), max(rows, 1), 1, 0, 0, sm_count)
    else:
        geometry = make_plan(mode, rows, max(per_row, 1), sm_count, free_bytes, chunk_rows, streams, staging_threads,
                             batched)
    key_width = key.max_width if tiles and key.name == "packed" else 0
    entries = key.prefix(z) if key.name == "indexed" else (0, 0)
    return QueryPlan(z, encoding, geometry, kernel, tuple(placed), selected, undecided, tuple(reasons), tile, key_width,
                     entries)


LIST_MODES = ("resident", *MAPPED_MODES)  # where a kernel can gather a row's factors by its id


def list_mode_problem(mode: str) -> str:
    return (f"the indexed key gathers each selected row's factors where they lie, which {mode} memory does not "
            f"allow: use --mode {', '.join(LIST_MODES)}, or --encoding sliced")


def runnable(modes, encodings) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(encoding, mode) pairs a request runs, and those it cannot (the indexed key in pageable
    memory); UsageError when it can run none, before any work."""
    pairs = [(e, m) for e in encodings for m in modes]
    ok = [(e, m) for e, m in pairs if e != "indexed" or m in LIST_MODES]
    if not ok:
        raise UsageError(list_mode_problem(pairs[0][1]))
    return ok, [p for p in pairs if p not in ok]


def _read_bytes(encoded: dict, z: int, rows: int) -> int:
    """The bytes a query of this encoding set reads over the link (from device memory when resident),
    by the placement rules above: what the planner compares the sliced and indexed keys by."""
    from gquery.table import KEY

    key = encoded[KEY]
    passed, undecided = key.estimate(z)
    tied = undecided * key.thresholds(z)[1] / key.bucket  # Z's bucket's rows below Z, were its keys uniform
    factors = sum(e.nbytes for c, e in encoded.items() if c != KEY)
    gathered = (passed + tied) * FACTOR_READS_PER_ROW * ZERO_COPY_READ_BYTES
    if key.name == "indexed":  # passed entries' ids in order, Z's bucket's low bits in order, its passing ids apart
        return int(passed * key.ids.itemsize + undecided * key.low_itemsize + tied * ZERO_COPY_SECTOR + gathered)
    low = 0 if key.low is None else min(undecided * ZERO_COPY_READ_BYTES, key.low.nbytes)
    return int(key.top.nbytes + low + min(gathered, factors))


def _choose_key(table, z: int, mode: str) -> tuple[str, str]:
    """auto: the sliced key, or its bucket lists where the table holds them (a store does), the
    mode can gather factors by row id, and they read fewer bytes for this Z."""
    from gquery.table import KEY

    scan = ("sliced: the key's top byte decides nearly every row, so the key ships 1 byte a row and factors are "
            "read only for selected rows")
    if mode not in LIST_MODES or not table.columns[KEY].has("indexed"):
        return "sliced", scan
    cost = {name: _read_bytes(table.encoded(name), z, table.rows) for name in ("sliced", "indexed")}
    pick, other = ("indexed", "sliced") if cost["indexed"] < cost["sliced"] else ("sliced", "indexed")
    why = ("indexed: Z's bucket and those below it are a short prefix of the key's bucket lists"
           if pick == "indexed" else scan)
    return pick, f"{why}; about {cost[pick] / 1e6:,.1f} MB to read against {cost[other] / 1e6:,.1f} MB {other}"


def frame_tile_words(encoded: dict) -> int:
    """Shared-memory words a warp's frame tile takes (scan.cu): the key's region (a packed frame's
    words at the column's widest, or a sliced frame's top bytes), then each packed factor's, packed
    regions padded by 4 words for reads past the last slot."""
    from gquery.table import KEY, PRICE, QUANTITY

    key = encoded[KEY]
    region = FRAME_ROWS // 4 if key.name == "sliced" else 32 * key.max_width + 4
    return region + sum(32 * encoded[c].max_width + 4 for c in (QUANTITY, PRICE))
