"""Exact integer arithmetic over NumPy arrays: sums and sums of products as Python integers, never
rounded, whatever the values (a product of two int64 may need 127 bits)."""

from __future__ import annotations

import numpy as np

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


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
