"""Column encodings: host encode (vectorized NumPy), CPU decode, physical and logical bytes.

    plain    the value array as loaded: int32 keys, int64 hundredths
    packed   frame of reference + bit-packing per frame of FRAME_ROWS rows, the width chosen per
             frame (0 for a constant frame, up to 64), after dividing out a factor every value
             shares (TPC-H quantities are whole units: hundredths / 100)
    sliced   a column's offset from its minimum cut in two: its top slice, one byte a row naming
             which of 256 equal buckets spanning its values it falls in, and its remainder within
             that bucket apart (BitWeaving / ByteSlice). The frame loop may read a predicate column
             by its top byte: a bucket over which the predicate's atoms on the column have one
             truth (prune.decided_buckets) decides its rows by the byte, and only the other rows
             (for `key < Z`, Z's own bucket: ~1/256 of uniform keys whatever their width) read
             their low part (gpu/fusedplan.py)
    indexed  the sliced column's buckets as lists: bucket b's rows (row ids, ascending) with their
             low parts beside them, bucket after bucket, so the rows of a range of buckets are one
             stretch of the lists. A narrow range reads that stretch (~1/256 of the rows a bucket)
             and the selected rows' other columns, instead of a top byte every row

Exactness by construction: offsets from a reference are taken in uint64 modular arithmetic, so a
frame spanning the whole int64 range still decodes (reference + offset, wrapping) to its values.
The GPU decodes the same layouts inside the scan kernel (gpu/cuda/tile.cuh); tests check both
against these decoders.

Packed layout: frame f holds FRAME_ROWS slots (the last frame is padded with its first value) as
a little-endian bit stream of `width` bits a slot in uint32 words: slot i at bit i * width, so a
frame is exactly 32 * width words and every frame starts 16-byte aligned. `meta[f]` is two int64
words: the reference, and (word offset << 8) | width. The word array ends with PAD_WORDS spare
words so that a decoder may always read the two words after a value's first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gquery.host import host_threads, parallel_ranges

FRAME_ROWS = 1024  # a multiple of 32 (whole words a frame) and of the 4-row vectors kernels load
TOP_BITS = 8  # the sliced key's top slice: one byte a row
PAD_WORDS = 4  # spare words after the last frame: a 3-word read past a value stays in bounds
ENCODINGS = ("plain", "packed", "sliced", "indexed")
INT64_MIN = -(2**63)
NO_ROWS = -1  # sliced z_top that no top byte is below or equal to (selects nothing)


def bit_width(x: np.ndarray) -> np.ndarray:
    """Bits needed for each uint64 value (0 for 0), exactly: a binary search on shifts."""
    rest = np.array(x, dtype=np.uint64, copy=True, ndmin=1)
    w = np.zeros(rest.shape, dtype=np.int64)
    for shift in (32, 16, 8, 4, 2, 1):
        big = rest >= (np.uint64(1) << np.uint64(shift))
        w += big * shift
        rest = np.where(big, rest >> np.uint64(shift), rest)
    return w + (rest > 0)


def common_factor(values: np.ndarray) -> int:
    """The largest factor every value shares (1 when none, or when INT64_MIN rules out abs)."""
    if values.size == 0:
        return 1
    v = values.astype(np.int64, copy=False)
    if int(v.min()) == INT64_MIN:
        return 1
    g = int(np.gcd.reduce(np.abs(v)))
    return g if g > 1 else 1


# --- plain -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plain:
    values: np.ndarray  # int32 keys or int64 hundredths, as the loader gives them

    name = "plain"

    @property
    def rows(self) -> int:
        return len(self.values)

    def decode(self) -> np.ndarray:
        return self.values

    def buffers(self) -> dict[str, np.ndarray]:
        return {"values": self.values}

    @property
    def nbytes(self) -> int:
        return self.values.nbytes

    def describe(self) -> str:
        return f"plain {self.values.dtype}"


# --- packed ----------------------------------------------------------------------------------
def _pack_frames(offsets: np.ndarray, width: int) -> np.ndarray:
    """(frames, FRAME_ROWS) uint64 offsets of `width` bits → (frames, 32 * width) uint32 words.
    Slot i sits at bit i * width; with 32 slots a unit of `width` words, the word and shift of
    each of a unit's 32 slots are constants, so packing is 32 vectorized steps."""
    frames = offsets.shape[0]
    if width == 0:
        return np.zeros((frames, 0), dtype=np.uint32)
    units = offsets.reshape(frames * FRAME_ROWS // 32, 32)
    out = np.zeros((units.shape[0], width), dtype=np.uint64)
    for j in range(32):
        bit = j * width
        u = units[:, j]
        for word in range(bit >> 5, ((bit + width - 1) >> 5) + 1):
            lo = word * 32 - bit  # where this word starts, relative to the value's first bit
            piece = (u >> np.uint64(lo)) if lo >= 0 else (u << np.uint64(-lo))
            out[:, word] |= piece & np.uint64(0xFFFFFFFF)
    return out.astype(np.uint32).reshape(frames, 32 * width)


def _unpack_frames(words: np.ndarray, width: int, frames: int) -> np.ndarray:
    """The inverse of _pack_frames: (frames, 32 * width) words → (frames, FRAME_ROWS) uint64."""
    if width == 0:
        return np.zeros((frames, FRAME_ROWS), dtype=np.uint64)
    units = words.reshape(frames * FRAME_ROWS // 32, width).astype(np.uint64)
    out = np.zeros((units.shape[0], 32), dtype=np.uint64)
    mask = np.uint64((1 << width) - 1) if width < 64 else np.uint64(2**64 - 1)
    for j in range(32):
        bit = j * width
        acc = np.zeros(units.shape[0], dtype=np.uint64)
        for word in range(bit >> 5, ((bit + width - 1) >> 5) + 1):
            lo = word * 32 - bit
            if lo >= 64:
                continue
            acc |= (units[:, word] << np.uint64(lo)) if lo >= 0 else (units[:, word] >> np.uint64(-lo))
        out[:, j] = acc & mask
    return out.reshape(frames, FRAME_ROWS)


@dataclass(frozen=True)
class Packed:
    rows: int
    dtype: np.dtype  # the logical values' type (int32 keys, int64 hundredths)
    factor: int  # every value is factor x (reference + offset)
    meta: np.ndarray  # (frames, 2) int64: reference, (word offset << 8) | width
    words: np.ndarray  # uint32, every frame's words then PAD_WORDS spare
    zmax: np.ndarray | None = None  # each frame's largest value (the zone map's top; its bottom is the reference)

    name = "packed"

    @property
    def frames(self) -> int:
        return len(self.meta)

    @property
    def widths(self) -> np.ndarray:
        return (self.meta[:, 1] & 0xFF).astype(np.int64)

    @property
    def word_offsets(self) -> np.ndarray:
        return self.meta[:, 1] >> 8

    @property
    def max_width(self) -> int:
        return int(self.widths.max()) if self.frames else 0

    def buffers(self) -> dict[str, np.ndarray]:
        return {"meta": self.meta, "words": self.words}

    @property
    def nbytes(self) -> int:
        return self.meta.nbytes + self.words.nbytes

    def describe(self) -> str:
        w = self.widths
        mean = float(w.mean()) if len(w) else 0.0
        factor = f", common factor {self.factor}" if self.factor != 1 else ""
        return (f"packed: {self.frames:,} frames of {FRAME_ROWS}, widths {int(w.min()) if len(w) else 0}"
                f"–{self.max_width} bits (mean {mean:.1f}){factor}")

    def zone_min(self) -> np.ndarray:
        """Each frame's smallest value (factor x reference: a value of the frame, so no overflow)."""
        return self.meta[:, 0] * np.int64(self.factor)

    def zone_max(self) -> np.ndarray:
        """Each frame's largest value: stored, or else the most its width allows (clipped to int64)."""
        if self.zmax is not None:
            return self.zmax
        top = [min((int(r) + (1 << int(w)) - 1) * self.factor, 2**63 - 1) for r, w in zip(self.meta[:, 0], self.widths)]
        return np.array(top, dtype=np.int64)

    def frame_words(self, first_frame: int, end_frame: int) -> tuple[int, int]:
        """[start, stop) of the words of frames first_frame .. end_frame - 1."""
        return frame_words(self.meta, first_frame, end_frame)

    def decode(self) -> np.ndarray:
        out = np.empty(self.frames * FRAME_ROWS, dtype=np.int64)
        frames_out = out.reshape(self.frames, FRAME_ROWS)
        widths, offsets = self.widths, self.word_offsets
        refs = self.meta[:, 0].view(np.uint64)

        def decode_range(first: int, end: int) -> None:
            for width in np.unique(widths[first:end]):
                idx = first + np.flatnonzero(widths[first:end] == width)
                a = int(offsets[idx[0]])
                n = 32 * int(width) * len(idx)
                if width and int(offsets[idx[-1]]) + 32 * int(width) - a == n:  # contiguous: one slice
                    words = self.words[a:a + n]
                else:
                    words = self.words[(offsets[idx][:, None] + np.arange(32 * int(width))).reshape(-1)]
                frames_out[idx] = (_unpack_frames(words, int(width), len(idx)) + refs[idx][:, None]).view(np.int64)

        parallel_ranges(self.frames, decode_range)  # offsets wrap in uint64, as encoded
        values = out[:self.rows]
        if self.factor != 1:
            values = values * np.int64(self.factor)
        return values.astype(self.dtype, copy=False)

    def value_at(self, row: int) -> int:
        """One value by random access, as the kernels read it (tests compare the two)."""
        f, slot = divmod(row, FRAME_ROWS)
        ref, packed = int(self.meta[f, 0]), int(self.meta[f, 1])
        width, offset = packed & 0xFF, packed >> 8
        bit = offset * 32 + slot * width
        first = bit >> 5
        window = sum(int(self.words[first + k]) << (32 * k) for k in range(3))
        u = (window >> (bit & 31)) & ((1 << width) - 1)
        v = (ref + u + 2**63) % 2**64 - 2**63
        return v * self.factor


def frame_words(meta: np.ndarray, first_frame: int, end_frame: int) -> tuple[int, int]:
    """[start, stop) of the words of frames first_frame .. end_frame - 1 of a packed column, from its
    frame metadata alone (the planner sizes chunks before any words are read)."""
    if first_frame >= end_frame:
        return 0, 0
    last = int(meta[end_frame - 1, 1])  # two frames' words read, not every frame's (once a chunk)
    return int(meta[first_frame, 1]) >> 8, (last >> 8) + 32 * (last & 0xFF)


def packed_bytes(meta: np.ndarray) -> int:
    """A packed column's bytes (metadata and words), from its frame metadata alone."""
    return meta.nbytes + 4 * (frame_words(meta, 0, len(meta))[1] + PAD_WORDS)


def pack(values: np.ndarray, factor: int | None = None) -> Packed:
    """Frame of reference + bit-packing per frame, after dividing out the common factor."""
    values = np.ascontiguousarray(values)
    dtype = values.dtype
    rows = len(values)
    factor = common_factor(values) if factor is None else factor
    v = values.astype(np.int64)
    if factor != 1:
        v = v // np.int64(factor)
    frames = math.ceil(rows / FRAME_ROWS)
    padded = np.empty(frames * FRAME_ROWS, dtype=np.int64)
    padded[:rows] = v
    if frames * FRAME_ROWS > rows:
        padded[rows:] = v[(frames - 1) * FRAME_ROWS]  # the last frame's own value: no wider
    f = padded.reshape(frames, FRAME_ROWS)
    refs = f.min(axis=1)
    offsets = f.view(np.uint64) - refs.view(np.uint64)[:, None]  # uint64: wraps exactly
    widths = bit_width(offsets.max(axis=1)) if frames else np.zeros(0, np.int64)
    word_offsets = np.concatenate([[0], np.cumsum(32 * widths)]).astype(np.int64)
    words = np.zeros(int(word_offsets[-1]) + PAD_WORDS, dtype=np.uint32)

    def pack_range(first: int, end: int) -> None:
        for width in np.unique(widths[first:end]):
            idx = first + np.flatnonzero(widths[first:end] == width)
            if not width:
                continue
            packed = _pack_frames(offsets[idx], int(width)).reshape(-1)
            a, b = int(word_offsets[idx[0]]), int(word_offsets[idx[-1] + 1])
            if b - a == packed.size:  # the frames of this width are contiguous: one slice
                words[a:b] = packed
            else:
                words[(word_offsets[idx][:, None] + np.arange(32 * int(width))).reshape(-1)] = packed

    parallel_ranges(frames, pack_range)
    meta = np.empty((frames, 2), dtype=np.int64)
    meta[:, 0] = refs
    meta[:, 1] = (word_offsets[:-1] << 8) | widths
    zmax = f.max(axis=1) * np.int64(factor)  # padding repeats a value of the frame: no wider
    return Packed(rows, dtype, factor, meta, words, zmax)


# --- sliced -----------------------------------------------------------------------------------
LOW_DTYPES = ((0, None), (8, np.uint8), (16, np.uint16), (32, np.uint32), (64, np.uint64))


class Buckets:
    """A key kept in 256 equal buckets of its span: offsets from the column's minimum (`reference`) in
    256 equal buckets of `bucket` keys, and the rows a bucket holds (`histogram`). Two buffers: one
    a row (`by_row`: the sliced key's top bytes, or the indexed key's row ids) and the low parts."""

    def buffers(self) -> dict[str, np.ndarray]:
        out = {self.by_row: getattr(self, self.by_row)}
        if self.low is not None:
            out["low"] = self.low
        return out

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.buffers().values())

    @property
    def low_itemsize(self) -> int:
        return 0 if self.low is None else self.low.itemsize

    @property
    def low_bits(self) -> int:
        return (self.bucket - 1).bit_length()

    def thresholds(self, z: int) -> tuple[int, int]:
        """(z_top, z_low) such that key < z ⇔ top < z_top, or top == z_top and low < z_low."""
        zu = z - self.reference
        if zu <= 0:
            return NO_ROWS, 0
        z_top, z_low = divmod(zu, self.bucket)
        if z_top >= 1 << TOP_BITS:
            return 1 << TOP_BITS, 0  # every top byte is below: all rows pass
        return z_top, z_low

    def estimate(self, z: int) -> tuple[int, int]:
        """(rows decided to pass by the top byte, rows left undecided) for key < z: exact counts
        from the histogram, no data read."""
        z_top, _ = self.thresholds(z)
        if z_top == NO_ROWS:
            return 0, 0
        if z_top >= 1 << TOP_BITS:
            return self.rows, 0
        return int(self.histogram[:z_top].sum()), int(self.histogram[z_top])


@dataclass(frozen=True)
class Sliced(Buckets):
    rows: int
    dtype: np.dtype
    reference: int  # the column's minimum: every key is reference + offset
    bucket: int  # keys a top value covers: offset = top * bucket + low, 0 <= low < bucket
    top: np.ndarray  # uint8 a row, padded to whole frames
    low: np.ndarray | None  # the remainder in the narrowest unsigned type; None when bucket == 1
    histogram: np.ndarray  # rows per top byte value (256 int64): the planner's statistics

    name = "sliced"
    by_row = "top"

    def describe(self) -> str:
        return (f"sliced: top {TOP_BITS} bits a row (uint8, buckets of {self.bucket:,} keys), low {self.low_bits} bits "
                f"({self.low_itemsize} B a row, read only where the top byte ties Z's), reference {self.reference:,}")

    def decode(self) -> np.ndarray:
        u = self.top[:self.rows].astype(np.uint64) * np.uint64(self.bucket)
        if self.low is not None:
            u += self.low[:self.rows].astype(np.uint64)
        return (u + np.uint64(self.reference % 2**64)).view(np.int64).astype(self.dtype)


def slice_geometry(span: int) -> tuple[int, int, np.dtype | None]:
    """For offsets 0..span from the reference: (keys a top value covers, the low part's bits, its narrowest
    unsigned type, None where a bucket is one key). The largest offset's top value is span // bucket <= 255.
    The store reads its lists and the planner weighs them with the geometry they were built with."""
    bucket = span // (1 << TOP_BITS) + 1
    low_bits = (bucket - 1).bit_length()
    return bucket, low_bits, next(d for bits, d in LOW_DTYPES if bits >= low_bits)


def slice_key(values: np.ndarray) -> Sliced:
    values = np.ascontiguousarray(values)
    rows = len(values)
    v = values.astype(np.int64)
    reference = int(v.min()) if rows else 0
    u = v.view(np.uint64) - np.uint64(reference % 2**64)
    span = int(u.max()) if rows else 0
    bucket, low_bits, dtype = slice_geometry(span)
    frames = max(1, math.ceil(rows / FRAME_ROWS))
    top = np.zeros(frames * FRAME_ROWS, dtype=np.uint8)
    low = None
    if bucket == 1:
        top[:rows] = u.astype(np.uint8)
    else:
        if bucket & (bucket - 1) == 0:  # a power of two: shift and mask
            top[:rows] = (u >> np.uint64(low_bits)).astype(np.uint8)
            low = (u & np.uint64(bucket - 1)).astype(dtype)
        else:
            q, r = np.divmod(u, np.uint64(bucket))
            top[:rows] = q.astype(np.uint8)
            low = r.astype(dtype)
    histogram = np.bincount(top[:rows], minlength=1 << TOP_BITS).astype(np.int64)
    return Sliced(rows, values.dtype, reference, bucket, top, low, histogram)


# --- indexed ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Indexed(Buckets):
    rows: int
    dtype: np.dtype
    reference: int  # as Sliced: key = reference + top * bucket + low
    bucket: int
    ids: np.ndarray  # row ids, bucket after bucket, ascending within one: uint32 (uint64 past 2^32 rows)
    low: np.ndarray | None  # each listed row's low part, in the lists' order; None when bucket == 1
    histogram: np.ndarray  # rows a bucket: bucket b's entries are starts[b] .. starts[b + 1] - 1

    name = "indexed"
    by_row = "ids"

    @property
    def starts(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.histogram)]).astype(np.int64)

    def describe(self) -> str:
        return (f"indexed: the rows of each of 256 buckets of {self.bucket:,} keys listed together, row ids "
                f"({self.ids.itemsize} B) and low {self.low_bits} bits ({self.low_itemsize} B) a row; Z's bucket "
                f"and those below it are a prefix of the lists, reference {self.reference:,}")

    def prefix(self, z: int) -> tuple[int, int]:
        """(entries that pass whatever their low bits: the buckets below Z's, entries to read: those
        and Z's own bucket) for key < z."""
        z_top, _ = self.thresholds(z)
        if z_top == NO_ROWS:
            return 0, 0
        starts = self.starts
        if z_top >= 1 << TOP_BITS:
            return self.rows, self.rows
        return int(starts[z_top]), int(starts[z_top + 1])

    def decode(self) -> np.ndarray:
        """Each listed row's key put back at its row; raises unless the ids are every row once."""
        out = np.zeros(self.rows, dtype=np.uint64)
        starts = self.starts
        if len(self.ids) != self.rows or int(starts[-1]) != self.rows:
            raise ValueError(f"the lists hold {len(self.ids):,} entries, the histogram {int(starts[-1]):,}, "
                             f"for {self.rows:,} rows")
        if self.rows and int(self.ids.max()) >= self.rows:
            raise ValueError("a listed row id is past the last row")
        seen = np.zeros(self.rows, dtype=bool)
        seen[self.ids] = True
        if not seen.all():
            raise ValueError("the lists name some row twice and leave another out")

        def put(first: int, end: int) -> None:  # buckets first .. end - 1: disjoint rows
            for b in range(first, end):
                a, e = int(starts[b]), int(starts[b + 1])
                if a == e:
                    continue
                v = np.full(e - a, np.uint64(b) * np.uint64(self.bucket), dtype=np.uint64)
                if self.low is not None:
                    v += self.low[a:e].astype(np.uint64)
                out[self.ids[a:e]] = v

        parallel_ranges(1 << TOP_BITS, put, min_items=1)
        return (out + np.uint64(self.reference % 2**64)).view(np.int64).astype(self.dtype)


def index_key(key: Sliced) -> Indexed:
    """A sliced key's rows listed by bucket: a counting sort of the top bytes, stable (row ids
    ascending within a bucket), a piece of the rows a host thread, each piece's entries written
    at its own offsets within each bucket."""
    rows = key.rows
    id_dtype = np.uint32 if rows <= 2**32 else np.uint64
    ids = np.empty(rows, dtype=id_dtype)
    low = None if key.low is None else np.empty(rows, dtype=key.low.dtype)
    top = key.top[:rows]
    pieces = max(1, min(host_threads(), rows // (1 << 20)))
    bounds = [rows * k // pieces for k in range(pieces + 1)]
    counts = np.zeros((pieces, 1 << TOP_BITS), dtype=np.int64)

    def count(k: int) -> None:
        counts[k] = np.bincount(top[bounds[k]:bounds[k + 1]], minlength=1 << TOP_BITS)

    def place(k: int) -> None:
        a = bounds[k]
        order = np.argsort(top[a:bounds[k + 1]], kind="stable")  # radix sort of bytes: rows ascending
        local = np.concatenate([[0], np.cumsum(counts[k])])
        for b in np.flatnonzero(counts[k]):
            dest = int(offsets[k, b])
            mine = order[local[b]:local[b + 1]]
            ids[dest:dest + len(mine)] = mine + a
            if low is not None:
                low[dest:dest + len(mine)] = key.low[a:][mine]

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(pieces) as pool:
        list(pool.map(count, range(pieces)))
        histogram = counts.sum(axis=0)
        # piece k's bucket-b rows follow every earlier piece's in bucket b
        offsets = np.concatenate([[0], np.cumsum(histogram)])[:-1][None, :] + np.cumsum(counts, axis=0) - counts
        list(pool.map(place, range(pieces)))
    return Indexed(rows, key.dtype, key.reference, key.bucket, ids, low, histogram.astype(np.int64))


def frame_view(enc, first_frame: int, end_frame: int):
    """Frames first_frame .. end_frame - 1 of an encoding as an encoding of their own: one GPU's or
    one worker's share of a table. Row buffers are views (a mapped or registered parent stays so);
    packed metadata is copied with its word offsets rebased onto a view of the words; a sliced key's
    histogram is counted again over its share, so the planner's estimates stay exact counts. An
    indexed key's share is copied: ids ascend within a bucket, so the share is a range of each list."""
    a = first_frame * FRAME_ROWS
    b = min(end_frame * FRAME_ROWS, enc.rows)
    if not 0 <= a < b:
        raise ValueError(f"frames {first_frame}..{end_frame} hold no rows of {enc.rows:,}")
    if isinstance(enc, Plain):
        return Plain(enc.values[a:b])
    if isinstance(enc, Packed):
        w0, w1 = enc.frame_words(first_frame, end_frame)
        meta = enc.meta[first_frame:end_frame].copy()
        meta[:, 1] -= np.int64(w0) << 8
        # the spare words after the share are the next frame's or the column's padding: in bounds
        zmax = None if enc.zmax is None else enc.zmax[first_frame:end_frame]
        return Packed(b - a, enc.dtype, enc.factor, meta, enc.words[w0:w1 + PAD_WORDS], zmax)
    if isinstance(enc, Indexed):  # each bucket's rows of the share, rebased: a copy (not mapped)
        starts = enc.starts
        keep = [(int(starts[t]) + int(np.searchsorted(enc.ids[starts[t]:starts[t + 1]], a)),
                 int(starts[t]) + int(np.searchsorted(enc.ids[starts[t]:starts[t + 1]], b)))
                for t in range(1 << TOP_BITS)]
        ids = np.concatenate([enc.ids[s:e] for s, e in keep]) - enc.ids.dtype.type(a)
        low = None if enc.low is None else np.concatenate([enc.low[s:e] for s, e in keep])
        histogram = np.array([e - s for s, e in keep], dtype=np.int64)
        return Indexed(b - a, enc.dtype, enc.reference, enc.bucket, ids.astype(enc.ids.dtype), low, histogram)
    top = enc.top[a:end_frame * FRAME_ROWS]  # the parent's top is padded to whole frames
    low = None if enc.low is None else enc.low[a:b]
    histogram = np.bincount(top[:b - a], minlength=1 << TOP_BITS).astype(np.int64)
    return Sliced(b - a, enc.dtype, enc.reference, enc.bucket, top, low, histogram)


def frames_of(rows: int) -> int:
    return math.ceil(rows / FRAME_ROWS)


def split_frames(frames: int, shares: int) -> list[tuple[int, int]]:
    """[first, end) frame ranges of `shares` nearly equal contiguous shares (empty ones dropped)."""
    bounds = [frames * k // shares for k in range(shares + 1)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def encode_column(values: np.ndarray, encoding: str, factor: int | None = None):
    """`factor`: for packed, the common factor to divide out (None: the largest one shared)."""
    if encoding == "plain":
        return Plain(values)
    if encoding == "packed":
        return pack(values, factor)
    if encoding == "sliced":
        return slice_key(values)
    if encoding == "indexed":
        return index_key(slice_key(values))
    raise ValueError(f"unknown encoding {encoding!r}")
