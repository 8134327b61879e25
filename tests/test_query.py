from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gquery.columns import LineitemColumns, load_lineitem
from gquery import exact as Q
from gquery.exact import exact_product_sum, exact_sum_int64
from gquery.mission import MissionQuery, numpy_select_sum, to_decimal
from gquery.reference import DuckDBReference


@pytest.fixture(scope="module")
def loaded(sf001):
    return load_lineitem(sf001)


@pytest.fixture(scope="module")
def duck(sf001):
    ref = DuckDBReference(sf001)
    yield ref
    ref.close()


def z_grid(cols: LineitemColumns) -> list[int]:
    lo, hi = int(cols.suppkey.min()), int(cols.suppkey.max())
    return [lo - 1, 1, 30, int(np.median(cols.suppkey)), hi, hi + 1, 2**40]


def test_numpy_columns_agree_with_duckdb(loaded, duck):
    for z in z_grid(loaded):
        result = duck.run(MissionQuery(z), repeat=1)
        assert numpy_select_sum(loaded, MissionQuery(z)) == result.value, f"Z = {z}"
        assert result.value is None or result.value.as_tuple().exponent == -4


def test_tbl_through_duckdb_agrees(sf001_tbl, loaded):
    ref = DuckDBReference(sf001_tbl)
    try:
        for z in (30, int(loaded.suppkey.max())):
            assert ref.run(MissionQuery(z), repeat=1).value == numpy_select_sum(loaded, MissionQuery(z))
    finally:
        ref.close()


def test_duckdb_timing_fields(duck):
    r = duck.run(MissionQuery(30), repeat=3)
    assert len(r.times_ms) == 3 and r.median_ms > 0 and r.threads >= 1 and r.version
    with pytest.raises(ValueError):
        duck.run(MissionQuery(30), repeat=0)


def test_empty_selection_is_null(loaded, duck):
    assert duck.run(MissionQuery(-5), repeat=1).value is None
    assert numpy_select_sum(loaded, MissionQuery(-5)) is None


def test_query_sql_and_clamp():
    assert MissionQuery(30).sql() == "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < 30"
    assert MissionQuery(2**70).z_int64 == 2**63 - 1 and MissionQuery(-(2**70)).z_int64 == -(2**63)
    with pytest.raises(TypeError):
        MissionQuery(1.5)
    with pytest.raises(TypeError):
        MissionQuery(True)


def test_to_decimal():
    assert to_decimal(0, 0) is None
    assert to_decimal(0, 3) == Decimal("0.0000") and str(to_decimal(0, 3)) == "0.0000"
    assert str(to_decimal(123456, 1)) == "12.3456" and str(to_decimal(-5, 1)) == "-0.0005"
    huge = 100_000 * (2**63 - 1) ** 2  # 43 digits: no rounding to the default 28
    assert str(to_decimal(huge, 1)) == f"{str(huge)[:-4]}.{str(huge)[-4:]}"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=200))
def test_exact_sum_int64_matches_python(values):
    assert exact_sum_int64(np.array(values, dtype=np.int64)) == sum(values)


def test_exact_sum_beyond_int64():
    big = np.full(1000, 2**62, dtype=np.int64)
    assert exact_sum_int64(big) == 1000 * 2**62
    assert exact_sum_int64(-big) == -1000 * 2**62
    assert exact_sum_int64(np.array([5, 7], np.int64), bound=7) == 12


INT64 = st.integers(-(2**63), 2**63 - 1)
EXTREMES = st.sampled_from([-(2**63), -(2**63) + 1, 2**63 - 1, 2**63 - 2, -(2**32), 2**32 - 1, 2**31, -1, 0, 1])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(INT64, EXTREMES), st.one_of(INT64, EXTREMES)), max_size=100))
def test_exact_product_sum_matches_python(pairs):
    a = np.array([x for x, _ in pairs], dtype=np.int64)
    b = np.array([y for _, y in pairs], dtype=np.int64)
    assert exact_product_sum(a, b) == sum(x * y for x, y in pairs)


def test_exact_product_sum_at_the_extremes_and_across_pieces(monkeypatch):
    monkeypatch.setattr(Q, "PIECE_ROWS", 7)
    for v in (2**63 - 1, -(2**63)):
        for w in (2**63 - 1, -(2**63)):
            n = 3 * 7 + 3  # a partial last piece
            a, b = np.full(n, v, np.int64), np.full(n, w, np.int64)
            assert exact_product_sum(a, b) == n * v * w
    small = np.arange(-50, 50, dtype=np.int64)
    assert exact_product_sum(small, small) == sum(x * x for x in range(-50, 50))
    assert exact_product_sum(np.array([], np.int64), np.array([], np.int64)) == 0


def test_numpy_select_sum_beyond_int64_products():
    q = [3_000_000_000, 2**63 - 1, -(2**63), 5]  # hundredths: 30,000,000.00 and the int64 extremes
    p = [3_000_000_000, 2**63 - 1, 2**63 - 1, 7]
    cols = LineitemColumns.from_values([1, 2, 3, 40], q, p)
    assert numpy_select_sum(cols, MissionQuery(40)) == Decimal(sum(x * y for x, y in zip(q[:3], p[:3]))).scaleb(-4)
    assert numpy_select_sum(cols, MissionQuery(1)) is None


def test_scaled_int_is_exact_at_any_length():
    from gquery.mission import scaled_int

    for v in (0, 1, -1, 10**40 + 7, -(10**45) - 3, 2**127):
        assert scaled_int(to_decimal(v, 1)) == v
    assert scaled_int(None) == 0
