"""A table of named columns, each carrying its encodings: what the planner and the engine read.

A Table holds lineitem's three query columns. Each column keeps every encoding made of it so far
(a store opens with its stored encodings; others are derived on first use and kept with the
table, whose lifetime is theirs). An encoding set names one encoding per column:

    plain    key plain,  factors plain   (20 bytes a row: today's engine)
    packed   key packed, factors packed  (frame of reference + bit-packing, decoded in the scan)
    sliced   key sliced, factors packed  (the key's top byte decides; the rest is read on demand)
    indexed  key indexed, factors packed (the rows of Z's bucket and those below: a prefix of lists)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gquery.columns import LineitemColumns
from gquery.contract import QUERY_COLUMNS
from gquery.encodings import ENCODINGS, FRAME_ROWS, Indexed, Packed, Plain, Sliced, encode_column, frame_view, index_key

KEY, QUANTITY, PRICE = QUERY_COLUMNS
LOGICAL = {KEY: ("int32 key", 4), QUANTITY: ("decimal(_,2) as int64 hundredths", 8),
           PRICE: ("decimal(_,2) as int64 hundredths", 8)}
ENCODING_SETS = {
    "plain": {KEY: "plain", QUANTITY: "plain", PRICE: "plain"},
    "packed": {KEY: "packed", QUANTITY: "packed", PRICE: "packed"},
    "sliced": {KEY: "sliced", QUANTITY: "packed", PRICE: "packed"},
    "indexed": {KEY: "indexed", QUANTITY: "packed", PRICE: "packed"},
}
assert set(ENCODING_SETS) == set(ENCODINGS)


@dataclass
class Column:
    name: str
    encodings: dict = field(default_factory=dict)  # encoding name → Plain | Packed | Sliced | Indexed

    def get(self, encoding: str):
        if encoding == "indexed" and encoding not in self.encodings:  # the sliced key's buckets, listed
            self.encodings[encoding] = index_key(self.get("sliced"))
        if encoding not in self.encodings:
            # keys are compared, not multiplied: the scan decodes them without a common factor
            factor = 1 if self.name == KEY else None
            self.encodings[encoding] = encode_column(self.values(), encoding, factor)
        return self.encodings[encoding]

    def values(self) -> np.ndarray:
        """The logical values, decoded from whichever encoding is at hand (plain first)."""
        for name in ENCODINGS:
            if name in self.encodings:
                return self.encodings[name].decode()
        raise ValueError(f"column {self.name} has no encoding")

    @property
    def logical_bytes_per_row(self) -> int:
        return LOGICAL[self.name][1]


@dataclass
class Table:
    rows: int
    columns: dict[str, Column]
    source: str
    largest: dict[str, int]  # |value| bound of each factor column: decides 64- or 128-bit products
    pinned: bool = False  # host buffers are already page-locked and mapped (a store opened so)
    cache: dict = field(default_factory=dict, repr=False, compare=False)  # GPU-side copies: gpu/memory.py

    @classmethod
    def from_columns(cls, cols: LineitemColumns) -> "Table":
        columns = {KEY: Column(KEY, {"plain": Plain(cols.suppkey)}),
                   QUANTITY: Column(QUANTITY, {"plain": Plain(cols.quantity)}),
                   PRICE: Column(PRICE, {"plain": Plain(cols.extendedprice)})}
        return cls(cols.rows, columns, cols.source, {QUANTITY: _largest(cols.quantity), PRICE: _largest(cols.extendedprice)})

    def encoded(self, encoding: str) -> dict:
        """{column: its encoding} for an encoding set, derived where the table lacks it."""
        return {name: self.columns[name].get(enc) for name, enc in ENCODING_SETS[encoding].items()}

    def plain_columns(self) -> LineitemColumns:
        e = self.encoded("plain")
        return LineitemColumns(e[KEY].values, e[QUANTITY].values, e[PRICE].values, self.source)

    def logical_bytes(self) -> int:
        return self.rows * sum(c.logical_bytes_per_row for c in self.columns.values())

    def physical_bytes(self, encoding: str) -> int:
        return sum(e.nbytes for e in self.encoded(encoding).values())

    def wide_products(self) -> bool:
        return wide_products(self.largest)

    def view(self, first_frame: int, end_frame: int) -> "Table":
        """Frames first_frame .. end_frame - 1 as a table of their own (one GPU's share), sharing
        the row buffers. Its factor bounds stay the whole table's: every share multiplies alike."""
        columns = {name: Column(name, {e: frame_view(enc, first_frame, end_frame) for e, enc in col.encodings.items()})
                   for name, col in self.columns.items()}
        first = first_frame * FRAME_ROWS
        rows = min(end_frame * FRAME_ROWS, self.rows) - first
        return Table(rows, columns, f"{self.source} rows {first:,}..{first + rows:,}", self.largest, self.pinned)

    def describe(self, encoding: str) -> list[str]:
        e = self.encoded(encoding)
        return [f"{name:<16} {enc.describe()}; {enc.nbytes / max(self.rows, 1):.2f} B a row "
                f"(logical {self.columns[name].logical_bytes_per_row})" for name, enc in e.items()]


@dataclass
class PartedTable:
    """A table stored in parts (a parted store: gquery.store), each part a Table of its own, so
    no step holds more than a part's worth of anything but the parts themselves. Opened whole,
    `tables` holds every part in host memory (page-locked and mapped when opened for the GPU).
    Opened with a window, no part is held: readers bring parts from disk as a query reaches them,
    at most `window` parts a reader (store.PartReader): a store larger than host memory streams."""

    rows: int
    paths: list[Path]  # each part's store folder, in row order
    part_rows: list[int]
    source: str
    largest: dict[str, int]
    tables: list[Table] | None = None
    window: int = 0
    pinned: bool = False
    cache: dict = field(default_factory=dict, repr=False, compare=False)  # per-device shares: gpu/multi.py

    @property
    def parts(self) -> int:
        return len(self.paths)

    def wide_products(self) -> bool:
        return wide_products(self.largest)

    def logical_bytes(self) -> int:
        return self.rows * sum(LOGICAL[name][1] for name in QUERY_COLUMNS)

    def describe(self, encoding: str) -> list[str]:
        held = "held in host memory" if self.tables is not None else f"read from disk {self.window} at a time"
        head = [f"{self.parts} parts of {min(self.part_rows):,}..{max(self.part_rows):,} rows, {held}"]
        return head + (self.tables[0].describe(encoding) if self.tables else [])


def wide_products(largest: dict[str, int]) -> bool:
    """Whether some |q x p| may reach 2^63: then the scan multiplies in 128 bits."""
    return largest[QUANTITY] * largest[PRICE] >= 2**63


def _largest(values: np.ndarray) -> int:
    if values.size == 0:
        return 0
    return max(abs(int(values.min())), abs(int(values.max())))


__all__ = ["Table", "PartedTable", "wide_products", "Column", "ENCODING_SETS", "KEY", "QUANTITY", "PRICE", "Indexed", "Packed", "Plain", "Sliced"]
