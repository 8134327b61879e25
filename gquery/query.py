"""The query, its SQL, and exact integer arithmetic shared by every engine.

    SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < Z

Both factors are hundredths, so the sum is in ten-thousandths: DuckDB types it DECIMAL(38,4).
SQL's SUM over no rows is NULL; every engine here returns None for it.
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

    def sql(self, table: str = "lineitem") -> str:
        return f"SELECT SUM(l_quantity * l_extendedprice) FROM {table} WHERE l_suppkey < {self.z}"

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


def to_decimal(scaled_total: int, selected_rows: int) -> Decimal | None:
    """An exact result in ten-thousandths as SQL gives it: NULL (None) when no row was selected."""
    if selected_rows == 0:
        return None
    return Decimal(scaled_total).scaleb(-RESULT_SCALE)


def numpy_select_sum(columns: LineitemColumns, query: Query) -> Decimal | None:
    """The CPU reference in NumPy on the loaded columns (a mask, a product, an exact sum)."""
    mask = columns.suppkey < query.z_int64
    products = columns.quantity[mask] * columns.extendedprice[mask]  # < 2^62 each: see columns
    return to_decimal(exact_sum_int64(products), int(np.count_nonzero(mask)))
