"""The query, its SQL, and exact integer arithmetic shared by every engine.

    SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < Z

Both factors are hundredths, so the sum is in ten-thousandths: DuckDB types it DECIMAL(38,4).
SQL's SUM over no rows is NULL; every engine here returns None for it. Factors are any int64, so a
product may need 127 bits: exact_product_sum multiplies in 32-bit halves and never rounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from gquery.columns import LineitemColumns

RESULT_SCALE = 4
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class Query:
    z: int

    def __post_init__(self):
        if isinstance(self.z, bool) or not isinstance(self.z, int):
            raise TypeError(f"Z must be an integer, got {self.z!r}")

    def sql(self, table: str = "lineitem", widened: bool = False) -> str:
        """The query; `widened` casts both factors to DECIMAL(38,2), so that a SQL engine multiplies in
        128 bits (DuckDB multiplies two DECIMAL(<=18) in 64 bits and fails on overflow)."""
        q, p = ("CAST(l_quantity AS DECIMAL(38,2))", "CAST(l_extendedprice AS DECIMAL(38,2))") if widened \
            else ("l_quantity", "l_extendedprice")
        return f"SELECT SUM({q} * {p}) FROM {table} WHERE l_suppkey < {self.z}"

    @property
    def z_int64(self) -> int:
        """Z clamped into int64 for kernels: keys are int32, so the predicate is unchanged."""
        return min(max(self.z, INT64_MIN), INT64_MAX)

    def __str__(self) -> str:
        return self.sql()


def exact_sum_int64(values: np.ndarray, bound: int | None = None) -> int:
    """The exact sum of int64 values as a Python int. One plain sum where no partial sum can
    overflow (length x largest magnitude < 2^63; `bound` may give that magnitude); otherwise the high
    and low 32-bit halves are summed apart, each fitting an int64 for pieces of up to 2^30 values."""
    values = np.asarray(values, dtype=np.int64)
    if len(values) == 0:
        return 0
    if bound is None:
        bound = max(abs(int(values.min())), abs(int(values.max())))
    if bound * len(values) < 2**63:
        return int(values.sum())
    total = 0
    step = 1 << 30
    for start in range(0, len(values), step):
        piece = values[start:start + step]
        high = int(np.sum(piece >> 32, dtype=np.int64))
        low = int(np.sum(piece & 0xFFFFFFFF, dtype=np.int64))
        total += (high << 32) + low
    return total


PIECE_ROWS = 1 << 24  # rows per piece of exact_product_sum: bounds its temporaries to a few hundred MB
LOW32 = 0xFFFFFFFF


def exact_product_sum(a: np.ndarray, b: np.ndarray) -> int:
    """The exact sum of a[i] * b[i] over int64 factors, as a Python int. Where every product fits an
    int64 (|a| x |b| < 2^63) one multiply suffices; otherwise each factor splits into a signed high
    and an unsigned low 32-bit half, a = ah * 2^32 + al, and the four partial products each fit 64
    bits: ah*bh and ah*bl, al*bh below 2^63 in magnitude, al*bl below 2^64 as uint64."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if len(a) != len(b):
        raise ValueError("factors differ in length")
    if len(a) == 0:
        return 0
    bound_a = max(abs(int(a.min())), abs(int(a.max())))
    bound_b = max(abs(int(b.min())), abs(int(b.max())))
    if bound_a * bound_b < 2**63:
        return exact_sum_int64(a * b, bound_a * bound_b)
    total = 0
    for start in range(0, len(a), PIECE_ROWS):
        x, y = a[start:start + PIECE_ROWS], b[start:start + PIECE_ROWS]
        xh, yh = x >> 32, y >> 32
        xl, yl = (x & LOW32).astype(np.uint64), (y & LOW32).astype(np.uint64)
        high = exact_sum_int64(xh * yh)
        middle = exact_sum_int64(xh * yl.astype(np.int64)) + exact_sum_int64(xl.astype(np.int64) * yh)
        low = xl * yl  # < 2^64: summed as its two 32-bit halves, each below 2^32
        low_sum = (exact_sum_int64((low >> np.uint64(32)).astype(np.int64)) << 32) + \
            exact_sum_int64((low & np.uint64(LOW32)).astype(np.int64))
        total += (high << 64) + (middle << 32) + low_sum
    return total


def to_decimal(scaled_total: int, selected_rows: int) -> Decimal | None:
    """An exact result in ten-thousandths as SQL gives it: NULL (None) when no row was selected."""
    if selected_rows == 0:
        return None
    return Decimal(f"{scaled_total}E-{RESULT_SCALE}")  # exact at any size: scaleb would round to 28 digits


def numpy_select_sum_exact(columns: LineitemColumns, query: Query) -> tuple[int, int]:
    """The CPU reference in NumPy on the loaded columns (a mask, a product, an exact sum):
    (total in ten-thousandths, selected rows)."""
    mask = columns.suppkey < query.z_int64
    return exact_product_sum(columns.quantity[mask], columns.extendedprice[mask]), int(np.count_nonzero(mask))


def numpy_select_sum(columns: LineitemColumns, query: Query) -> Decimal | None:
    return to_decimal(*numpy_select_sum_exact(columns, query))


def scaled_int(value: Decimal | None) -> int:
    """An exact result back in ten-thousandths as an int (0 for NULL), with no rounding at any length."""
    if value is None:
        return 0
    sign, digits, exponent = value.as_tuple()
    n = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    shift = exponent + RESULT_SCALE
    return n * 10**shift if shift >= 0 else n // 10**(-shift)
