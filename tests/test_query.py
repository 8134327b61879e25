from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gquery import answer, sql
from gquery.columns import LineitemColumns, load_lineitem
from gquery import exact as Q
from gquery.errors import GqueryError
from gquery.exact import exact_product_sum, exact_sum_int64
from gquery.reference import DuckDBTable
from gquery.table import Table

MISSION_COLUMNS = ["l_suppkey", "l_quantity", "l_extendedprice"]


def cpu_mission(cols: LineitemColumns, z: int) -> Decimal | None:
    """The mission's SQL at Z through the CPU reference over the columns: its one value (None over no rows)."""
    table = Table.from_columns(cols)
    return answer.cpu_answer(sql.parse(sql.named_sql("mission", z), answer.schema_of(table)), table).rows[0][0]


def duckdb_mission(ref: DuckDBTable, z: int) -> Decimal | None:
    return ref.run_sql(sql.named_sql("mission", z), repeat=1).rows[0][0]


@pytest.fixture(scope="module")
def loaded(sf001):
    return load_lineitem(sf001)


@pytest.fixture(scope="module")
def duck(sf001):
    ref = DuckDBTable(sf001, MISSION_COLUMNS)
    yield ref
    ref.close()


def z_grid(cols: LineitemColumns) -> list[int]:
    lo, hi = int(cols.suppkey.min()), int(cols.suppkey.max())
    return [lo - 1, 1, 30, int(np.median(cols.suppkey)), hi, hi + 1, 2**40]


def test_numpy_columns_agree_with_duckdb(loaded, duck):
    for z in z_grid(loaded):
        value = duckdb_mission(duck, z)
        assert cpu_mission(loaded, z) == value, f"Z = {z}"
        assert value is None or value.as_tuple().exponent == -4


def test_tbl_through_duckdb_agrees(sf001_tbl, loaded):
    ref = DuckDBTable(sf001_tbl, MISSION_COLUMNS)
    try:
        for z in (30, int(loaded.suppkey.max())):
            assert duckdb_mission(ref, z) == cpu_mission(loaded, z)
    finally:
        ref.close()


def test_empty_selection_is_null(loaded, duck):
    assert duckdb_mission(duck, -5) is None
    assert cpu_mission(loaded, -5) is None


def test_query_sql_and_clamp():
    from gquery.bench.ladder import z_int64

    assert sql.named_sql("mission", 30) == "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < 30"
    assert z_int64(2**70) == 2**63 - 1 and z_int64(-(2**70)) == -(2**63)
    with pytest.raises(GqueryError, match="Z must be an integer"):
        sql.named_sql("mission", 1.5)
    with pytest.raises(GqueryError, match="Z must be an integer"):
        sql.named_sql("mission", True)


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


def test_cpu_mission_beyond_int64_products():
    q = [3_000_000_000, 2**63 - 1, -(2**63), 5]  # hundredths: 30,000,000.00 and the int64 extremes
    p = [3_000_000_000, 2**63 - 1, 2**63 - 1, 7]
    cols = LineitemColumns.from_values([1, 2, 3, 40], q, p)
    assert cpu_mission(cols, 40) == Decimal(sum(x * y for x, y in zip(q[:3], p[:3]))).scaleb(-4)
    assert cpu_mission(cols, 1) is None


def test_an_integer_column_becomes_pythons_ints_whatever_it_was_given_as():
    """query.python_column of an integer type: an int64 array's values, a list taken from one (kept as it is), a
    list with NULL or NumPy scalars in it (made one by one): Python ints and None, as DuckDB's client gives."""
    import numpy as np

    from gquery.query import BIGINT, python_column

    for given, want in ((np.array([7, -2**63]), [7, -2**63]), ([1, 2**63 - 1], [1, 2**63 - 1]), ([1, None], [1, None]),
                        ([np.int64(4), 5], [4, 5]), ([], [])):
        got = python_column(given, BIGINT)
        assert got == want and all(v is None or type(v) is int for v in got) and got is not given


def test_a_date_column_becomes_each_days_client_value_made_once(monkeypatch):
    """query.python_column of DATE: each day as to_python makes it (a datetime.date, DuckDB's text past Python's
    years, 'infinity' as 9999-12-31, NULL as None), from an int64 array or a list; a day asked again is the same
    object (made once); past DAYS_KEPT days the kept ones are let go and made again, equal."""
    import numpy as np

    from gquery import query
    from gquery.query import DATE, python_column, to_python

    days = [0, -1, 10_956, 2_932_896, 2_932_897, -719_163, -719_164, 2**31 - 1, -(2**31 - 1), None]
    assert python_column(days, DATE) == [to_python(d, DATE) for d in days]
    assert python_column(np.array([8_035, 9_000]), DATE) == [to_python(8_035, DATE), to_python(9_000, DATE)]
    assert python_column([8_035], DATE)[0] is python_column(np.array([8_035]), DATE)[0]
    monkeypatch.setattr(query, "DAYS_KEPT", 4)
    many = python_column(list(range(100)), DATE)
    assert many == [to_python(d, DATE) for d in range(100)] and len(query._DAY_VALUES) <= 4
