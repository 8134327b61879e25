"""DuckDB as the reference for SQL of the class: a loaded table of some columns, and the files read in place."""

import pytest

from gquery import answer
from gquery.columns import load_lineitem
from gquery.errors import GqueryError
from gquery.reference import DuckDBTable, duckdb_over_files
from gquery.sql import named_sql, parse
from gquery.table import Table

Q6_COLUMNS = ["l_shipdate", "l_discount", "l_quantity", "l_extendedprice"]


@pytest.fixture(scope="module")
def q6_table(sf001):
    table = DuckDBTable(sf001, Q6_COLUMNS, order_by="l_shipdate", threads=2)
    yield table
    table.close()


def test_answers_names_types_and_timings(q6_table):
    answer = q6_table.run_sql(named_sql("q6"), repeat=3, warmup=2)
    assert answer.columns == ["revenue"] and answer.types == ["DECIMAL(38,4)"] and answer.unavailable is None
    assert len(answer.rows) == 1 and answer.rows[0][0].as_tuple().exponent == -4
    assert len(answer.times_ms) == 3 and answer.first_query_ms > 0 and answer.median_ms > 0
    assert q6_table.load_s > 0 and q6_table.columns == Q6_COLUMNS
    with pytest.raises(ValueError):
        q6_table.run_sql(named_sql("q6"), repeat=0)


def test_agrees_with_the_mission_reference(sf001):
    table = DuckDBTable(sf001, ["l_suppkey", "l_quantity", "l_extendedprice"])
    columns = Table.from_columns(load_lineitem(sf001))
    try:
        for z in (-1, 30, 2**40):
            text = named_sql("mission", z)
            reference = answer.cpu_answer(parse(text, answer.schema_of(columns)), columns).rows[0][0]
            assert table.run_sql(text, repeat=1).rows == [(reference,)]
    finally:
        table.close()


def test_overflow_is_a_reason_not_an_error(q6_table):
    answer = q6_table.run_sql("SELECT sum(l_quantity * 2147483647 * 2147483647 * 4) FROM lineitem", repeat=1)
    assert answer.rows == [] and answer.unavailable.startswith("Out of Range Error")
    with pytest.raises(GqueryError, match="DuckDB failed"):
        q6_table.run_sql("SELECT sum(l_tax) FROM lineitem", repeat=1)  # a column it did not load


def test_bad_columns_are_one_line_errors(sf001):
    with pytest.raises(GqueryError, match="l_nothing"):
        DuckDBTable(sf001, ["l_nothing"])
    with pytest.raises(GqueryError, match='cannot load "l_tax; DROP TABLE x"'):  # (a name is quoted, never SQL: any
        DuckDBTable(sf001, ["l_tax; DROP TABLE x"])  # name a file holds is loaded, é or a keyword)
    with pytest.raises(GqueryError, match="is not a column name"):
        DuckDBTable(sf001, ["l_tax"], order_by="l_tax DESC")


def test_tbl_files_and_files_in_place_agree(sf001, sf001_tbl, q6_table):
    want = q6_table.run_sql(named_sql("q6"), repeat=1).rows
    tbl = DuckDBTable(sf001_tbl, Q6_COLUMNS)
    try:
        assert tbl.run_sql(named_sql("q6"), repeat=1).rows == want
    finally:
        tbl.close()
    rows, ms = duckdb_over_files(sf001, named_sql("q6"))
    assert rows == want and ms > 0
    with pytest.raises(GqueryError, match="DuckDB failed"):
        duckdb_over_files(sf001, "SELECT nothing FROM lineitem")
