from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gquery.columns import LineitemColumns, load_lineitem
from gquery.query import Query, exact_sum_int64, numpy_select_sum, to_decimal
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
        result = duck.run(Query(z), repeat=1)
        assert numpy_select_sum(loaded, Query(z)) == result.value, f"Z = {z}"
        assert result.value is None or result.value.as_tuple().exponent == -4


def test_tbl_through_duckdb_agrees(sf001_tbl, loaded):
    ref = DuckDBReference(sf001_tbl)
    try:
        for z in (30, int(loaded.suppkey.max())):
            assert ref.run(Query(z), repeat=1).value == numpy_select_sum(loaded, Query(z))
    finally:
        ref.close()


def test_duckdb_timing_fields(duck):
    r = duck.run(Query(30), repeat=3)
    assert len(r.times_ms) == 3 and r.median_ms > 0 and r.threads >= 1 and r.version
    with pytest.raises(ValueError):
        duck.run(Query(30), repeat=0)


def test_empty_selection_is_null(loaded, duck):
    assert duck.run(Query(-5), repeat=1).value is None
    assert numpy_select_sum(loaded, Query(-5)) is None


def test_query_sql_and_clamp():
    assert Query(30).sql() == "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < 30"
    assert Query(2**70).z_int64 == 2**63 - 1 and Query(-(2**70)).z_int64 == -(2**63)
    with pytest.raises(TypeError):
        Query(1.5)
    with pytest.raises(TypeError):
        Query(True)


def test_to_decimal():
    assert to_decimal(0, 0) is None
    assert to_decimal(0, 3) == Decimal("0.0000") and str(to_decimal(0, 3)) == "0.0000"
    assert str(to_decimal(123456, 1)) == "12.3456" and str(to_decimal(-5, 1)) == "-0.0005"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=200))
def test_exact_sum_int64_matches_python(values):
    assert exact_sum_int64(np.array(values, dtype=np.int64)) == sum(values)


def test_exact_sum_beyond_int64():
    big = np.full(1000, 2**62, dtype=np.int64)
    assert exact_sum_int64(big) == 1000 * 2**62
    assert exact_sum_int64(-big) == -1000 * 2**62
    assert exact_sum_int64(np.array([5, 7], np.int64), bound=7) == 12
