"""The PEP 249 connection (gquery.connect): cursors, qmark parameters bound as exact literals, fetch*,
description, and PEP 249's exceptions carrying gquery's one-line messages."""

import datetime
from decimal import Decimal

import numpy as np
import pytest

import gquery
from gquery import dbapi
from gquery.sql import named_sql


@pytest.fixture()
def con(sf001):
    c = gquery.connect(sf001.files[0], backend="cpu")
    yield c
    c.close()


def test_module_globals_are_pep_249s():
    assert (dbapi.apilevel, dbapi.paramstyle) == ("2.0", "qmark") and dbapi.threadsafety in (1, 2, 3)
    for name in ("Error", "InterfaceError", "DatabaseError", "ProgrammingError", "NotSupportedError", "OperationalError"):
        assert issubclass(getattr(dbapi, name), dbapi.Error) and getattr(dbapi.Connection, name) is getattr(dbapi, name)
    assert issubclass(dbapi.Error, gquery.GqueryError) and issubclass(dbapi.Warning, Exception)


def test_type_objects_constructors_and_a_cursor_in_a_with(con):
    """PEP 249's type objects equal description's type codes of their kind (DuckDB's do too); its constructors make
    the values a parameter takes; a cursor closes at the end of a with; fetchmany of no number of rows is one line."""
    with con.cursor() as cur:
        cur.execute("SELECT l_returnflag, COUNT(*), SUM(l_quantity), MIN(l_shipdate), AVG(l_tax) FROM lineitem "
                    "WHERE l_shipdate < ? GROUP BY 1 ORDER BY 1", (dbapi.Date(1995, 1, 1),))
        codes = [d[1] for d in cur.description]
        assert codes == ["VARCHAR", "BIGINT", "DECIMAL(38,2)", "DATE", "DOUBLE"]
        assert codes == [dbapi.STRING, dbapi.NUMBER, dbapi.NUMBER, dbapi.DATETIME, dbapi.NUMBER]
        assert dbapi.STRING != "BIGINT" and dbapi.NUMBER != "VARCHAR" and dbapi.DATETIME != "DOUBLE"
        assert all(code != dbapi.ROWID and code != dbapi.BINARY for code in codes)
        for size in ("2", 2.5, True, -1):
            with pytest.raises(dbapi.ProgrammingError, match="fetchmany takes a number of rows"):
                cur.fetchmany(size)
    with pytest.raises(dbapi.InterfaceError, match="cursor is closed"):
        cur.fetchall()
    assert dbapi.DateFromTicks(0) == datetime.date.fromtimestamp(0)
    assert dbapi.TimestampFromTicks(86_400.5) == datetime.datetime.fromtimestamp(86_400).replace(microsecond=0)
    assert dbapi.TimeFromTicks(3_600) == datetime.datetime.fromtimestamp(3_600).time()
    assert dbapi.Binary(b"x") == b"x" and dbapi.Timestamp(2020, 1, 2) == datetime.datetime(2020, 1, 2)


def test_execute_with_parameters_is_the_same_query_written_out(con, sf001):
    cur = con.cursor()
    cur.execute("SELECT l_returnflag, COUNT(*), SUM(l_quantity) FROM lineitem WHERE l_shipdate < ? AND l_discount > ? "
                "AND l_shipmode <> ? GROUP BY 1 ORDER BY 1", (datetime.date(1995, 3, 1), Decimal("0.05"), "O'HARE"))
    t = gquery.open(sf001.files[0])
    want = t.sql("SELECT l_returnflag, COUNT(*), SUM(l_quantity) FROM lineitem WHERE l_shipdate < DATE '1995-03-01' "
                 "AND l_discount > 0.05 AND l_shipmode <> 'O''HARE' GROUP BY 1 ORDER BY 1", backend="cpu").rows
    t.close()
    assert cur.rowcount == len(want) and cur.fetchone() == want[0]
    assert cur.fetchmany(1) == want[1:2] and cur.fetchall() == want[2:] and cur.fetchone() is None
    assert [d[0] for d in cur.description] == ["l_returnflag", "count_star()", "sum(l_quantity)"]
    assert [d[1] for d in cur.description] == ["VARCHAR", "BIGINT", "DECIMAL(38,2)"] and cur.description[2][5] == 2
    assert cur.answer.check is None and cur.fetch_arrow_table().num_rows == len(want)


def test_one_text_executed_with_other_parameters_is_parsed_once(con, sf001):
    """A connection keeps each parametrized text's prepared statement: executes with other parameters bind
    into it, and answer as the text written out does."""
    text = "SELECT l_linestatus, COUNT(*), MAX(l_extendedprice) FROM lineitem WHERE l_suppkey < ? GROUP BY 1 ORDER BY 1"
    t = gquery.open(sf001.files[0])
    for z in (10, 300, -1):
        got = con.cursor().execute(text, [z]).fetchall()
        assert got == t.sql(text.replace("?", str(z)), backend="cpu").rows
    t.close()
    assert list(con._statements) == [text]
    con.cursor().execute("SELECT COUNT(*) FROM lineitem")  # no parameters: asked as it is
    assert list(con._statements) == [text]


def test_a_question_mark_in_a_string_or_a_name_is_not_a_parameter():
    assert dbapi.bind("SELECT COUNT(*) FROM lineitem WHERE l_comment = '?''?' AND \"a?\" < ? -- why?\n", (3,)) == \
        "SELECT COUNT(*) FROM lineitem WHERE l_comment = '?''?' AND \"a?\" < 3 -- why?\n"
    assert dbapi.bind("SELECT ? , ?", [True, None]) == "SELECT TRUE , NULL"
    assert dbapi.literal(Decimal("-1E+2")) == "(-100)" and dbapi.literal(datetime.datetime(1995, 1, 2, 3, 4, 5)) == \
        "TIMESTAMP '1995-01-02 03:04:05'"


def test_a_negative_parameter_after_a_minus_is_a_number_not_a_comment(con, sf001):
    """x-? with -5 bound as x--5 began a comment (--5 ...) and asked another query, or none: a negative
    parameter is bound in parentheses, and the answer is DuckDB's for the same parameters."""
    import duckdb

    text = "SELECT COUNT(*), SUM(l_suppkey-?) FROM lineitem WHERE l_suppkey-? > ?"
    assert dbapi.bind(text, (-5, -5, 90)) == "SELECT COUNT(*), SUM(l_suppkey-(-5)) FROM lineitem WHERE l_suppkey-(-5) > 90"
    cur = con.cursor()
    cur.execute(text, (-5, Decimal("-2.5"), 90))
    duck = duckdb.connect()
    duck.execute(f"CREATE VIEW lineitem AS SELECT * FROM read_parquet('{sf001.files[0]}')")
    assert cur.fetchall() == duck.execute(text, [-5, Decimal("-2.5"), 90]).fetchall()


def test_iterating_a_cursor_and_the_mission(con):
    rows = list(con.execute(named_sql("mission", 30)))
    [(value,)] = rows
    assert isinstance(value, Decimal) and con.execute("SELECT SUM(l_quantity * l_extendedprice) FROM lineitem "
                                                      "WHERE l_suppkey < ?", [30]).fetchall() == rows


@pytest.mark.parametrize("sql, params, error, message", [
    ("SELECT COUNT(*) FROM lineitem WHERE l_suppkey < ?", (), dbapi.ProgrammingError, "more ? than the 0 parameter"),
    ("SELECT COUNT(*) FROM lineitem", (1,), dbapi.ProgrammingError, "1 parameter(s) given for 0 ?"),
    ("SELECT COUNT(*) FROM lineitem WHERE l_tax < ?", (0.5,), dbapi.ProgrammingError, "a float parameter (0.5)"),
    ("SELECT COUNT(*) FROM lineitem WHERE l_tax < ?", ({1},), dbapi.ProgrammingError, "type set has no SQL literal"),
    ("SELECT COUNT(*) FROM lineitem WHERE l_tax < ?", (np.bool_(True),), dbapi.ProgrammingError,
     "type numpy.bool has no SQL literal (pass a Python int, Decimal, str, date, datetime, bool or None)"),
    ("SELECT COUNT(*) FROM lineitem WHERE l_tax < ?", 5, dbapi.ProgrammingError, "must be a sequence"),
    ("SELECT SUM(l_nope) FROM lineitem", None, dbapi.ProgrammingError, "unknown column l_nope"),
    ("SELECT COUNT(*) FROM orders", None, dbapi.ProgrammingError, "unknown table orders"),
    ("SELECT l_tax FROM lineitem", None, dbapi.ProgrammingError, "a query without an aggregate"),
])
def test_errors_are_pep_249s_in_one_line(con, sql, params, error, message):
    with pytest.raises(error) as caught:
        con.cursor().execute(sql, params)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_closed_things_and_what_a_reader_does_not_do(sf001, tmp_path):
    c = gquery.connect(sf001.files[0], backend="cpu")
    cur = c.cursor()
    with pytest.raises(dbapi.ProgrammingError, match="no query has been executed"):
        cur.fetchall()
    with pytest.raises(dbapi.NotSupportedError):
        cur.executemany("SELECT COUNT(*) FROM lineitem", [()])
    with pytest.raises(dbapi.NotSupportedError):
        c.rollback()
    c.commit()
    cur.close()
    with pytest.raises(dbapi.InterfaceError, match="cursor is closed"):
        cur.execute("SELECT COUNT(*) FROM lineitem")
    with c:
        pass
    with pytest.raises(dbapi.InterfaceError, match="connection is closed"):
        c.cursor()
    with pytest.raises(dbapi.InterfaceError, match="connection is closed"):  # (closed first, as commit says)
        c.rollback()
    with pytest.raises(dbapi.OperationalError, match="no such file"):
        gquery.connect(tmp_path / "nope.parquet")
    other = gquery.connect(sf001.files[0], backend="cpu").cursor()  # an error that names "closed" is no closed cursor
    with pytest.raises(dbapi.ProgrammingError, match="unknown column closed"):
        other.execute("SELECT SUM(closed) FROM lineitem")
    other.connection.table.close()  # the table closed under an open connection: its InterfaceError
    with pytest.raises(dbapi.InterfaceError, match="this table is closed"):
        other.execute("SELECT COUNT(*) FROM lineitem")


def test_a_failed_execute_leaves_no_result_and_an_unknown_option_is_said_at_connect(con, sf001):
    """PEP 249: after an execute that raised, the cursor has no result set (the last one's rows were still read);
    a connection's unknown query option is a ProgrammingError at connect (it was Python's TypeError at the first
    execute)."""
    cur = con.cursor()
    cur.execute("SELECT COUNT(*) FROM lineitem")
    with pytest.raises(dbapi.ProgrammingError, match="unknown column"):
        cur.execute("SELECT COUNT(*) FROM lineitem WHERE nope < 1")
    assert (cur.description, cur.rowcount) == (None, -1)
    with pytest.raises(dbapi.ProgrammingError, match="no query has been executed"):
        cur.fetchall()
    with pytest.raises(dbapi.ProgrammingError, match="unknown option.s. bogus: a query takes backend, mode") as caught:
        gquery.connect(sf001.files[0], bogus=1)
    assert "\n" not in str(caught.value)
    with pytest.raises(dbapi.ProgrammingError, match="backend must be one of auto, gpu, cpu, duckdb, got 'zzz'"):
        gquery.connect(sf001.files[0], backend="zzz")  # (said at the first execute, before)
    with pytest.raises(dbapi.ProgrammingError, match="mode must be one of"):
        gquery.connect(sf001.files[0], mode="warp")


@pytest.mark.parametrize("sql, params, bound", [
    ("SELECT COUNT(*) FROM lineitem WHERE /* -- */ l_suppkey < ?\n AND l_suppkey > ?", (5, -10),
     "SELECT COUNT(*) FROM lineitem WHERE /* -- */ l_suppkey < 5\n AND l_suppkey > (-10)"),
    ("SELECT COUNT(*) FROM lineitem /* ? /* ? */ ? */ WHERE l_suppkey < ?", (5,),
     "SELECT COUNT(*) FROM lineitem /* ? /* ? */ ? */ WHERE l_suppkey < 5"),
    ("SELECT COUNT(*) FROM lineitem WHERE l_returnflag <> $$a?$$ AND l_returnflag <> $t$?$t$ AND l_suppkey < ?", (5,),
     "SELECT COUNT(*) FROM lineitem WHERE l_returnflag <> $$a?$$ AND l_returnflag <> $t$?$t$ AND l_suppkey < 5"),
    ("SELECT COUNT(*) FROM lineitem WHERE l_returnflag <> E'it\\'s?' AND l_returnflag <> 'a''?' -- ?\n AND l_suppkey < ?",
     (5,), "SELECT COUNT(*) FROM lineitem WHERE l_returnflag <> E'it\\'s?' AND l_returnflag <> 'a''?' -- ?\n AND l_suppkey < 5"),
])
def test_a_question_mark_in_a_comment_or_a_string_is_no_parameter(con, sf001, sql, params, bound):
    """Block comments (nested, a -- within), dollar-quoted strings and E'' strings with a backslash escape are passed
    over as DuckDB's lexer passes them: a ? there is text, not a parameter (a -- in a block comment hid the next ?,
    and a Python TypeError followed)."""
    import duckdb

    from gquery.parameters import bind

    assert bind(sql, params) == bound
    want = duckdb.connect().execute(sql.replace("FROM lineitem", f"FROM read_parquet('{sf001.files[0]}')"), params).fetchall()
    if "E'" in sql:  # (an E'' string is outside the class: one line, DuckDB's under auto; a dollar-quoted one is in it)
        with pytest.raises(dbapi.ProgrammingError, match="outside the selection"):
            con.cursor().execute(sql, params)
        return
    assert con.cursor().execute(sql, params).fetchall() == want
