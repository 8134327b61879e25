from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gquery import sources, tpch
from gquery.columns import LineitemColumns, encode, load_lineitem, read_lineitem_arrow
from gquery.errors import GqueryError


def test_parquet_and_tbl_give_identical_columns(sf001, sf001_tbl):
    a, b = load_lineitem(sf001), load_lineitem(sf001_tbl)
    assert a.rows == b.rows > 50_000
    for x, y in zip(a.arrays(), b.arrays()):
        assert x.dtype == y.dtype and np.array_equal(x, y)


def test_encodings(sf001):
    cols = load_lineitem(sf001)
    assert (cols.suppkey.dtype, cols.quantity.dtype, cols.extendedprice.dtype) == (np.int32, np.int64, np.int64)
    assert all(a.flags.c_contiguous for a in cols.arrays())
    assert cols.bytes_per_row == 20 and cols.nbytes == 20 * cols.rows
    table = read_lineitem_arrow(sf001)
    # exact hundredths: the first rows against Python's Decimal arithmetic
    for name, col in (("l_quantity", cols.quantity), ("l_extendedprice", cols.extendedprice)):
        expected = [int(d * 100) for d in table.column(name)[:1000].to_pylist()]
        assert col[:1000].tolist() == expected
    assert cols.suppkey[:1000].tolist() == table.column("l_suppkey")[:1000].to_pylist()


def write(tmp_path, name, **columns) -> sources.LineitemSource:
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.table(columns), path)
    return tpch.find_lineitem(path)


def dec(values, scale=2):
    return pa.array([None if v is None else Decimal(v) for v in values], pa.decimal128(15, scale))


GOOD = dict(l_suppkey=pa.array([1, 2], pa.int64()), l_quantity=dec(["1.00", "2.50"]),
            l_extendedprice=dec(["10.25", "3.00"]))


@pytest.mark.parametrize("change,message", [
    (dict(l_suppkey=None), "missing column l_suppkey"),
    (dict(l_quantity=dec(["1.000", "2.500"], scale=3)), "scale 3, expected 2"),
    (dict(l_quantity=dec(["1.00", None])), "l_quantity has 1 nulls"),
    (dict(l_suppkey=pa.array([1, 2**40], pa.int64())), "l_suppkey has values outside int32"),
    (dict(l_quantity=pa.array([1.0, 2.5])), "l_quantity is double, expected decimal"),
    (dict(l_suppkey=pa.array(["a", "b"])), "l_suppkey is string, expected an integer"),
])
def test_bad_columns_name_file_and_column(tmp_path, change, message):
    cols = {k: v for k, v in (GOOD | change).items() if v is not None}
    source = write(tmp_path, "bad", **cols)
    with pytest.raises(GqueryError, match=message) as e:
        load_lineitem(source)
    assert "bad.parquet" in str(e.value)


def test_wide_decimal_beyond_int64_is_refused(tmp_path):
    big = pa.array([Decimal("1.00"), Decimal("99999999999999999999999.99")], pa.decimal128(38, 2))
    source = write(tmp_path, "wide", **(GOOD | dict(l_quantity=big)))
    with pytest.raises(GqueryError, match="outside int64 hundredths"):
        load_lineitem(source)


def test_tbl_errors(tmp_path):
    bad = tmp_path / "lineitem.tbl"
    bad.write_text("1|2|3|4|abc|5.00|0|0|N|O|1996-01-01|1996-01-01|1996-01-01|x|y|z|\n")
    with pytest.raises(GqueryError, match="lineitem.tbl"):
        load_lineitem(tpch.find_lineitem(bad))
    empty_field = tmp_path / "nulls.tbl"
    empty_field.write_text("1|2||4|1.00|5.00|0|0|N|O|1996-01-01|1996-01-01|1996-01-01|x|y|z|\n")
    with pytest.raises(GqueryError, match="l_suppkey has 1 nulls"):
        load_lineitem(tpch.find_lineitem(empty_field))


def test_parquet_parts_concatenate(tmp_path):
    folder = tmp_path / "lineitem"
    folder.mkdir()
    for k, keys in enumerate(([1, 2], [3])):
        n = len(keys)
        pq.write_table(pa.table(dict(l_suppkey=pa.array(keys, pa.int64()), l_quantity=dec(["1.00"] * n),
                                     l_extendedprice=dec(["2.00"] * n))), folder / f"lineitem.{k + 1}.parquet")
    cols = load_lineitem(tpch.find_lineitem(folder))
    assert cols.suppkey.tolist() == [1, 2, 3] and cols.quantity.tolist() == [100] * 3


def test_from_values_checks():
    c = LineitemColumns.from_values([1, 2], [3, 4], [5, 6])
    assert c.rows == 2 and c.suppkey.dtype == np.int32
    assert LineitemColumns.from_values([1], [2**63 - 1], [-(2**63)]).quantity.tolist() == [2**63 - 1]
    with pytest.raises(GqueryError, match="outside int32"):
        LineitemColumns.from_values([2**31], [1], [1])
    with pytest.raises(GqueryError, match="differ in length"):
        LineitemColumns(np.zeros(2, np.int32), np.zeros(1, np.int64), np.zeros(1, np.int64))
    with pytest.raises(GqueryError, match="contiguous"):
        LineitemColumns(np.zeros(4, np.int32)[::2], np.zeros(2, np.int64), np.zeros(2, np.int64))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-(10**15) + 1, 10**15 - 1), min_size=1, max_size=300), st.integers(0, 5))
def test_decimal_encoding_is_exact(hundredths, offset):
    """Any decimal(15,2) encodes to its exact hundredths, in sliced chunks too."""
    arr = pa.array([Decimal(h).scaleb(-2) for h in hundredths], pa.decimal128(15, 2))
    sliced = arr.slice(min(offset, len(arr) - 1))
    table = pa.table(dict(l_suppkey=pa.array([1] * len(sliced), pa.int64()), l_quantity=sliced,
                          l_extendedprice=sliced))
    cols = encode(table)
    assert cols.quantity.tolist() == hundredths[min(offset, len(arr) - 1):]
