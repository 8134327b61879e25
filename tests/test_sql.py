"""SQL text → Query: trees of the class, DuckDB's types, values and names, and one-line refusals."""

import datetime
import random
import re

import duckdb
import pyarrow.parquet as pq
import pytest

from gquery.errors import GqueryError, deep_expressions
from gquery.query import (BIGINT, BOOLEAN, DATE, INTEGER, VARCHAR, Aggregate, And, Arith, Cast, Column, Compare,
                          InList, Literal, Negate, Not, Or, Output, decimal, to_python)
from gquery.schema import Schema, read_schema
from gquery.sql import FALSE, NAMED, OutOfClass, SqlSyntaxError, UnknownName, constant, named_sql, parse

DEC = decimal(15, 2)
QTY, PRICE, DISC, TAX = (Column(n, DEC) for n in ("l_quantity", "l_extendedprice", "l_discount", "l_tax"))
SUPP, SHIP = Column("l_suppkey", BIGINT), Column("l_shipdate", DATE)
FLAG, STATUS = Column("l_returnflag", VARCHAR), Column("l_linestatus", VARCHAR)


def days(text: str) -> int:
    return (datetime.date.fromisoformat(text) - datetime.date(1970, 1, 1)).days


@pytest.fixture(scope="module")
def schema(sf001) -> Schema:
    return read_schema(pq.read_schema(sf001.files[0]))


@pytest.fixture(scope="module")
def duck(sf001):
    con = duckdb.connect()
    con.execute(f"CREATE VIEW lineitem AS SELECT * FROM read_parquet({[str(f) for f in sf001.files]!r})")
    yield con
    con.close()


# --- trees ----------------------------------------------------------------------------------------------
def test_mission(schema):
    q = parse(named_sql("mission", 30), schema)
    product = Arith("*", QTY, PRICE, decimal(18, 4))
    assert q.outputs == (Output("sum((l_quantity * l_extendedprice))", Aggregate("sum", product, decimal(38, 4))),)
    assert q.where == Compare("<", SUPP, Literal(30, INTEGER))
    assert (q.group_by, q.order_by, q.limit, q.table) == ((), (), None, "lineitem")
    assert q.sql == "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < 30"


def test_named_queries_need_their_parameters():
    assert set(NAMED) == {"mission", "q1", "q6"}
    with pytest.raises(GqueryError, match="needs Z"):
        named_sql("mission")
    with pytest.raises(GqueryError, match="no named query"):
        named_sql("q2")
    assert "interval '90' day" in named_sql("q1") and "between 0.06 - 0.01 and 0.06 + 0.01" in named_sql("q6")


def test_q1(schema):
    q = parse(named_sql("q1"), schema)
    assert q.where == Compare("<=", SHIP, Literal(days("1998-09-02"), DATE))
    assert any("midnight" in n for n in q.notes)
    assert q.group_by == (FLAG, STATUS) and q.order_by == ((0, False), (1, False))
    assert [o.name for o in q.outputs] == ["l_returnflag", "l_linestatus", "sum_qty", "sum_base_price", "sum_disc_price",
                                           "sum_charge", "avg_qty", "avg_price", "avg_disc", "count_order"]
    one_minus = Arith("-", Literal(1, INTEGER), DISC, decimal(16, 2))
    charge = Arith("*", Arith("*", PRICE, one_minus, decimal(18, 4)),
                   Arith("+", Literal(1, INTEGER), TAX, decimal(16, 2)), decimal(18, 6))
    assert q.outputs[5].expr == Aggregate("sum", charge, decimal(38, 6))
    assert q.outputs[8].expr.type.name == "DOUBLE" and q.outputs[9].expr == Aggregate("count", None, BIGINT)
    assert len(q.aggregates) == 8 and q.value_columns()[:2] == ("l_returnflag", "l_linestatus")


def test_q6(schema):
    q = parse(named_sql("q6"), schema)
    assert q.outputs == (Output("revenue", Aggregate("sum", Arith("*", PRICE, DISC, decimal(18, 4)), decimal(38, 4))),)
    assert q.where == And((Compare(">=", SHIP, Literal(days("1994-01-01"), DATE)),
                           Compare("<", SHIP, Literal(days("1995-01-01"), DATE)),
                           Compare(">=", DISC, Literal(5, decimal(4, 2))), Compare("<=", DISC, Literal(7, decimal(4, 2))),
                           Compare("<", QTY, Literal(24, INTEGER))))


@pytest.mark.parametrize("where, tree", [
    ("l_quantity BETWEEN 1 AND 2.5", And((Compare(">=", QTY, Literal(1, INTEGER)), Compare("<=", QTY, Literal(25, decimal(2, 1)))))),
    ("l_quantity NOT BETWEEN 1 AND 2", Not(And((Compare(">=", QTY, Literal(1, INTEGER)), Compare("<=", QTY, Literal(2, INTEGER)))))),
    ("l_returnflag IN ('A', 'R')", InList(FLAG, (Literal("A", VARCHAR), Literal("R", VARCHAR)))),
    ("l_suppkey NOT IN (1, 2.5, 1)", InList(SUPP, (Literal(1, INTEGER), Literal(25, decimal(2, 1))), negated=True)),
    ("NOT (l_tax < 0.02 OR l_suppkey = 7)", Not(Or((Compare("<", TAX, Literal(2, decimal(3, 2))), Compare("=", SUPP, Literal(7, INTEGER)))))),
    ("NOT NOT l_tax < 0.02", Compare("<", TAX, Literal(2, decimal(3, 2)))),
    ("0.02 > l_tax", Compare("<", TAX, Literal(2, decimal(3, 2)))),
    ("'N' <= l_linestatus", Compare(">=", STATUS, Literal("N", VARCHAR))),
    ("l_returnflag < l_linestatus", Compare("<", FLAG, STATUS)),  # two string columns: as strings
    # IN with a value that is not a constant: x = that value, OR'd with the constants' IN
    ("l_returnflag IN (l_linestatus, 'A')", Or((InList(FLAG, (Literal("A", VARCHAR),)), Compare("=", FLAG, STATUS)))),
    ("'A' NOT IN (l_returnflag, l_linestatus)",
     Not(Or((Compare("=", FLAG, Literal("A", VARCHAR)), Compare("=", STATUS, Literal("A", VARCHAR)))))),
    ("l_shipdate < '1995-1-2'", Compare("<", SHIP, Literal(days("1995-01-02"), DATE))),
    ("l_shipdate >= DATE '1994-01-31' + INTERVAL 1 MONTH", Compare(">=", SHIP, Literal(days("1994-02-28"), DATE))),
    ("l_shipdate < TIMESTAMP '1995-01-02 10:00:00'", Compare("<", SHIP, Literal(days("1995-01-03"), DATE))),
    ("l_shipdate <= TIMESTAMP '1995-01-02 10:00:00'", Compare("<=", SHIP, Literal(days("1995-01-02"), DATE))),
    # a date is never a timestamp past midnight: FALSE where the date holds a value, unknown where it is NULL
    ("l_shipdate = TIMESTAMP '1995-01-02 10:00:00' OR l_tax < 0",
     Or((Not(Compare("=", SHIP, SHIP)), Compare("<", TAX, Literal(0, INTEGER))))),
    ("l_shipdate <> TIMESTAMP '1995-01-02 10:00:00'", Compare("=", SHIP, SHIP)),
    ("l_shipdate IN (TIMESTAMP '1995-01-02 10:00:00')", Not(Compare("=", SHIP, SHIP))),
    ("l_shipdate IN ('1995-01-01', TIMESTAMP '1995-01-02 00:00:00')",
     InList(SHIP, (Literal(days("1995-01-01"), DATE), Literal(days("1995-01-02"), DATE)))),
    ("l_shipdate + 1 < DATE '1995-01-01' + 3", Compare("<", Arith("+", SHIP, Literal(1, INTEGER), DATE), Literal(days("1995-01-04"), DATE))),
    ("l_quantity::DECIMAL(18,3) > -l_tax", Compare(">", Cast(QTY, decimal(18, 3)), Negate(TAX, DEC))),
    ("CAST(l_suppkey AS INTEGER) < 2147483647", Compare("<", Cast(SUPP, INTEGER), Literal(2**31 - 1, INTEGER))),
    ("l_quantity * (0.06 - 0.01) > 1", Compare(">", Arith("*", QTY, Literal(5, decimal(4, 2)), decimal(18, 4)), Literal(1, INTEGER))),
    ("TRUE AND l_tax > 0", Compare(">", TAX, Literal(0, INTEGER))),
    ("1 = 2 OR 'a' < 'b'", None),
    ("l_quantity IN (1, 2) AND 1 > 2", Literal(False, BOOLEAN)),
])
def test_predicates(schema, where, tree):
    q = parse(f"SELECT count(*) FROM lineitem WHERE {where}", schema)
    assert q.where == tree


def test_select_forms(schema):
    q = parse("SELECT x.l_returnflag AS rf, COUNT(*) c, max(-x.l_tax) FROM lineitem AS x "
              "WHERE rf <> 'A' GROUP BY rf ORDER BY c DESC, 1 LIMIT 2;", schema)
    assert [o.name for o in q.outputs] == ["rf", "c", "max((-(x.l_tax)))"]
    assert q.group_by == (FLAG,) and q.where == Compare("<>", FLAG, Literal("A", VARCHAR))
    assert q.order_by == ((1, True), (0, False)) and q.limit == 2 and not q.sql.endswith(";")
    by_expression = parse("SELECT l_linestatus, sum(l_tax) FROM lineitem GROUP BY 1 ORDER BY sum(l_tax), l_linestatus",
                          schema)
    assert by_expression.group_by == (STATUS,) and by_expression.order_by == ((1, False), (0, False))
    everything = parse("SELECT l_returnflag, l_linestatus, count(*) FROM lineitem GROUP BY ALL", schema)
    assert everything.group_by == (FLAG, STATUS)
    unselected = parse("SELECT sum(l_tax) FROM lineitem GROUP BY l_shipmode, lineitem.l_returnflag", schema)
    assert [c.name for c in unselected.group_by] == ["l_shipmode", "l_returnflag"]
    assert parse("SELECT min(l_shipdate), count(l_tax) FROM lineitem", schema).aggregates == (
        Aggregate("min", SHIP, DATE), Aggregate("count", TAX, BIGINT))


# --- constants as DuckDB types and computes them -----------------------------------------------------------
CONSTANTS = [
    "0.06", "001.50", "1.", ".5", "0.0", "00.000", "-0.0", "007", "-007", "1_000", "1_000.5", "-(1.50)", "- -1.50",
    "2147483647", "2147483648", "-2147483648", "-2147483649", "9223372036854775807", "-9223372036854775808",
    "9223372036854775808", "170141183460469231731687303715884105727", "99999999999999999999999999999999999999",
    "1234567890123456789.5", "0.06 - 0.01", "0.06 + 0.01", "0.06 * 0.01", "2 * 1.5", "1.5 + 2", "-(1 + 2)",
    "CAST(1.5 AS DECIMAL(10,3))", "CAST(7 AS BIGINT) * 3", "12::DECIMAL(4,1)", "CAST(-3 AS SMALLINT)",
    "9999999999999999.9 * 10", "DATE '1994-01-01'", "CAST('1994-1-2' AS DATE)", "DATE '1994-01-01' + 31",
    "5 + DATE '1994-01-01'", "DATE '1994-03-01' - 1", "DATE '1994-03-01' - DATE '1993-03-01'",
    "DATE '1998-12-01' - INTERVAL '90' DAY", "DATE '1994-01-01' + INTERVAL '1' YEAR", "DATE '1994-01-31' + INTERVAL 1 MONTH",
    "DATE '1996-02-29' + INTERVAL 1 YEAR", "DATE '2000-03-31' - INTERVAL 1 MONTH", "DATE '1994-01-31' + INTERVAL 13 MONTH",
    "DATE '1994-01-31' - INTERVAL 25 MONTH", "DATE '1994-01-01' + INTERVAL 2 WEEK", "DATE '1994-01-01' + INTERVAL 1 QUARTER",
    "DATE '1994-01-01' + INTERVAL 36 HOUR", "DATE '1994-01-01' - INTERVAL 90 MINUTE", "INTERVAL 3 DAY + DATE '1994-01-01'",
    "DATE '1994-01-31' + INTERVAL 1 MONTH + INTERVAL 1 DAY", "DATE '1994-01-31' + (INTERVAL 1 MONTH + INTERVAL 1 DAY)",
    "DATE '1994-01-31' + INTERVAL '1 month 2 days'", "DATE '1994-01-01' + INTERVAL (1 + 2) DAY",
    "TIMESTAMP '1995-01-01 10:30:00' + INTERVAL '-1' DAY", "CAST('1995-01-01 10:30:00.25' AS TIMESTAMP)",
    "CAST(DATE '1994-05-06' AS TIMESTAMP)", "DATE '1995-01-01 12:00:00'", "CAST('1995-01-01 23:59:59.999999' AS DATE)",
    "CAST('1969-12-31T06:30' AS DATE)",  # (a time of day after a date: DuckDB's date is its day)
    # INTERVAL n SECOND's seconds are DuckDB's double (to_seconds), a string's seconds and the other units exact
    "DATE '1994-01-01' + (INTERVAL (1000000000000 + 1) SECOND - INTERVAL (1000000000000) SECOND)",
    "DATE '1994-01-01' + (INTERVAL '1000000000 seconds' - INTERVAL '999999999' SECOND)",
    "DATE '1994-01-01' + (INTERVAL 153722867279 MINUTE - INTERVAL 153722867278 MINUTE)",
    "DATE '1994-01-01' + (INTERVAL 2147483647 DAY - INTERVAL 2147483646 DAY)",
    "DATE '1994-01-01' + (INTERVAL 178956970 YEAR - INTERVAL 178956970 YEAR)",
]


@pytest.mark.parametrize("text", CONSTANTS)
def test_constants_are_duckdbs(text):
    """Each folded constant has DuckDB's type and value (typeof and the value it returns)."""
    literal = constant(text)
    [(duck_type, duck_value)] = duckdb.sql(f"SELECT typeof({text}), {text}").fetchall()
    assert str(literal.type) == duck_type
    ours = to_python(literal.value, literal.type)
    assert ours == duck_value and type(ours) is type(duck_value) and str(ours) == str(duck_value)


@pytest.mark.parametrize("text, why", [
    ("2147483647 + 1", "overflows INTEGER"), ("1e5", "floating-point literal"), ("1.0 / 2", "division"),
    ("0.0000000000000000000000000000000000000001", "more than 38 digits"),
    ("170141183460469231731687303715884105728", "wider than HUGEINT"),
    ("-170141183460469231731687303715884105729", "wider than HUGEINT (-170141183460469231731687303715884105729)"), ("0.5 * 99999999999999999.9", "overflows DECIMAL(18,2)"), ("CAST(1.55 AS DECIMAL(3,1))", "CAST that rounds"),
    ("CAST(123.4 AS DECIMAL(3,1))", "overflows DECIMAL(3,1)"), ("DATE '1995-02-30'", "not a date"),
    ("DATE '1995.01.01'", "date string"), ("INTERVAL '1.5' DAY + DATE '1994-01-01'", "fractional"),
    ("DATE '9999-12-31' + INTERVAL 1 DAY", "outside the years"),
    # intervals past DuckDB's fields (32-bit months and days, 64-bit microseconds), though they cancel
    ("DATE '1994-01-01' + (INTERVAL 200000000 YEAR - INTERVAL 200000000 YEAR)", "an interval past DuckDB's"),
    ("DATE '1994-01-01' + (INTERVAL 2147483648 DAY - INTERVAL 2147483648 DAY)", "an interval past DuckDB's"),
    ("DATE '1994-01-01' + (INTERVAL 3000000000 HOUR - INTERVAL 3000000000 HOUR)", "an interval past DuckDB's"),
    ("DATE '1994-01-01' + INTERVAL '200000000 years -200000000 years'", "an interval past DuckDB's"),
    ("DATE '1994-01-01' + (INTERVAL 2000000000 DAY + INTERVAL 2000000000 DAY - INTERVAL 2000000000 DAY)", "an interval past"),
    ("DATE '1994-01-01' + (INTERVAL (9223372036855 + 0) SECOND - INTERVAL (9223372036855 + 0) SECOND)", "an interval past"),
    ("DATE '1994-01-01' + (INTERVAL 1000000000001 SECOND - INTERVAL 1000000000000 SECOND)", "as a double"),
    ("DATE '1994-01-01' - -(INTERVAL (-2147483648) DAY)", "an interval past DuckDB's"),
    ("DATE '1994-01-01' + (INTERVAL '1000000000001 seconds' - INTERVAL '1000000000000' SECOND)", "as a double"), ("DATE '1994-01-01' + INTERVAL 1 YEAR - 1", "TIMESTAMP"),
    ("DATE '1994-01-01' + 5::BIGINT", "INTEGER days only"), ("CAST(1 AS DOUBLE)", "CAST to DOUBLE"),
])
def test_constants_out_of_class(text, why):
    with pytest.raises(OutOfClass, match=re.escape(why)):
        constant(text)


@pytest.mark.parametrize("text, why", [
    ("DATE '\u0661\u0669\u0669\u0665-\u0660\u0661-\u0660\u0661'", "date string"),  # Arabic-Indic digits
    ("CAST('\uff11\uff19\uff19\uff15-01-01' AS DATE)", "date string"), ("CAST('\u00a01995-01-01' AS DATE)", "date string"),
    ("TIMESTAMP '1995-01-01 \u0661\u0662:00:00'", "timestamp string"), ("TIMESTAMP '1995-06-01 '", "timestamp string"),
    ("CAST('1995-06-01\t' AS TIMESTAMP)", "timestamp string"),  # (a date alone, then a space: DuckDB's error too)
    ("DATE '1994-12-01' + INTERVAL '\u0663' MONTH", "the interval"),
    ("DATE '1994-12-01' + INTERVAL '\u0663 months'", "the interval"), ("DATE '1994-12-01' + INTERVAL '3\u00a0months'", "the interval"),
])
def test_a_date_time_or_interval_string_of_other_digits_or_spaces_is_refused_as_duckdb_refuses_it(text, why):
    """DuckDB reads a date's, a time's and an interval's fields in ASCII digits between ASCII spaces: a string of
    another script's digits, or a no-break space, is its conversion error, refused in one line (Python's \\d and
    \\s took them, and answered)."""
    with pytest.raises(duckdb.Error):
        duckdb.sql(f"SELECT {text}").fetchall()
    with pytest.raises(OutOfClass, match=re.escape(why)):
        constant(text)


# --- names and types as DuckDB gives them ------------------------------------------------------------------------
SELECTS = [
    named_sql("mission", 30), named_sql("q1"), named_sql("q6"),
    "SELECT sum(l_quantity*l_extendedprice), count(*), COUNT(l_tax), Avg(l_tax), min(l_shipdate), MAX(-l_tax) FROM lineitem",
    "SELECT l_returnflag, sum(l_quantity + 1), sum(1 + l_quantity), sum(l_quantity - 0.06), sum(2*l_quantity), "
    "sum(-(l_quantity)), sum(l_quantity::DECIMAL(18,3)), sum(CAST(l_quantity AS DECIMAL(18,3))) FROM lineitem GROUP BY 1",
    "SELECT lineitem.l_returnflag, sum(lineitem.l_quantity) FROM lineitem GROUP BY lineitem.l_returnflag",
    "SELECT x.l_returnflag, sum(x.l_quantity), count() FROM lineitem x GROUP BY 1",
    "SELECT sum(l_quantity * (0.06 - 0.01)), sum(l_suppkey + (2 * 3)), count(1), sum(((l_quantity))) FROM lineitem",
    "SELECT L_RETURNFLAG, SUM(L_QUANTITY), sum(\"l_tax\") FROM lineitem GROUP BY L_RETURNFLAG",
    "SELECT sum(l_quantity) AS \"Foo\", sum(l_tax) AS bar, max(l_tax) Baz FROM lineitem",
    "SELECT sum(l_suppkey::INTEGER), sum(CAST(l_suppkey AS BIGINT)), sum(l_quantity::DECIMAL(15,2)), sum(l_suppkey::DECIMAL(10)) FROM lineitem",
    "SELECT sum(001.50 * l_quantity), sum(l_quantity * 1.0), sum(l_quantity * .5), sum(l_quantity*1.), sum(l_quantity * 1_000) FROM lineitem",
    "SELECT sum(l_quantity * -1), sum(l_quantity * -(1)), sum(-l_quantity * 2), sum(- - l_quantity), sum(l_quantity * -(1+2)) FROM lineitem",
    "SELECT sum(l_quantity * -1.5), sum(l_quantity * - -1.50), sum(l_quantity * 007), sum(l_quantity * -(-1)) FROM lineitem",
    "SELECT sum(l_quantity * 2147483648), sum(l_quantity * 9223372036854775808), sum(l_suppkey * 2147483648) FROM lineitem WHERE l_suppkey < 0",
    "SELECT min(l_shipdate + 1), max(l_shipdate - 1), count(l_returnflag), min(l_linenumber), avg(l_linenumber) FROM lineitem",
    "SELECT sum(l_quantity * (DATE '1994-01-02' - DATE '1994-01-01')), min(l_receiptdate - l_shipdate), avg(l_suppkey) FROM lineitem",
    "SELECT avg(l_quantity*l_tax), min(l_quantity*l_tax*l_tax), sum(l_extendedprice*l_quantity*l_tax), max(l_quantity * 0.5 * l_tax) FROM lineitem",
    "SELECT l_shipdate, l_suppkey, count(*), avg(l_quantity::DECIMAL(4,2)) FROM lineitem WHERE l_shipdate < DATE '1992-03-01' GROUP BY 1, 2",
    "SELECT sum(l_quantity) AS s, l_returnflag AS rf FROM lineitem GROUP BY rf ORDER BY S DESC",
    "SELECT sum(CAST(l_tax AS DECIMAL(38,10)) * l_quantity), avg(CAST(l_suppkey AS SMALLINT)), avg(l_suppkey::TINYINT) FROM lineitem WHERE l_suppkey < 100",
]


@pytest.mark.parametrize("sql", SELECTS)
def test_names_and_types_are_duckdbs(schema, duck, sql):
    q = parse(sql, schema)
    description = duck.execute(sql).description
    assert [o.name for o in q.outputs] == [d[0] for d in description]
    assert [str(o.expr.type) for o in q.outputs] == [str(d[1]) for d in description]


def test_a_name_duckdb_quotes_is_quoted_in_an_expressions_name(tmp_path):
    """DuckDB prints a column inside an expression's name quoted where it is a keyword of any case or not a plain
    identifier (max("day"), max("a b")); a select item that is the column alone keeps its name as it is."""
    import pyarrow as pa

    names = ["day", "YEAR", "Select", "a b", "1x", "é", 'x"y', "_x", "x1", "Foo", "count", "sum", "date", "interval",
             "left", "at", "order", "value"]
    path = tmp_path / "names.parquet"
    pq.write_table(pa.table({n: pa.array([], pa.int32()) for n in names}), path)
    con = duckdb.connect()
    con.execute(f"CREATE VIEW lineitem AS SELECT * FROM read_parquet('{path}')")
    columns = ['"' + n.replace('"', '""') + '"' for n in names]
    text = (f"SELECT {columns[0]}, {', '.join(f'max({c} + 1)' for c in columns)}, count(lineitem.{columns[2]}) "
            f"FROM lineitem GROUP BY {columns[0]}")
    q = parse(text, read_schema(pq.read_schema(path)))
    assert [o.name for o in q.outputs] == [d[0] for d in con.execute(text).description]


def test_the_keywords_are_the_installed_duckdbs():
    """Its keywords, and those its parser refuses as a bare select item's name, as a table's alias, or as a column's
    name unquoted."""
    from gquery.keywords import BARE_LABEL_REFUSED, COLUMN_REFUSED, KEYWORDS, TABLE_ALIAS_REFUSED

    con = duckdb.connect()
    assert KEYWORDS == {w for (w,) in con.execute("SELECT keyword_name FROM duckdb_keywords()").fetchall()}
    con.execute("CREATE TABLE t AS SELECT 1 AS k")

    def refused(text: str) -> bool:
        try:
            con.execute(text)
        except duckdb.ParserException:
            return True
        except duckdb.Error:  # (UNION and the like: a query of another kind, not a name)
            return False
        return False

    assert {w for w in KEYWORDS if refused(f"SELECT sum(k) {w} FROM t")} == BARE_LABEL_REFUSED
    assert {w for w in KEYWORDS if refused(f"SELECT sum(k) FROM t {w}")} == TABLE_ALIAS_REFUSED
    for w in KEYWORDS:  # a table's name, unquoted, as its alias
        con.execute(f'CREATE TABLE "{w}" AS SELECT 1 AS k')
    assert {w for w in KEYWORDS if refused(f"SELECT sum(k) FROM {w}")} == TABLE_ALIAS_REFUSED
    assert not any(refused(f"SELECT sum(k) AS {w} FROM t") for w in KEYWORDS)
    assert {w for w in KEYWORDS if refused(f"SELECT sum({w}) FROM t")} == COLUMN_REFUSED


# --- refusals: one line, naming the construct ------------------------------------------------------------
REFUSALS = [
    ("SELECT count(*) FROM lineitem WHERE NOT (l_suppkey > 1) = TRUE", "a predicate as a value, compared or tested"),
    ("SELECT sum((l_suppkey IN (1, 2)) + 1) FROM lineitem", "a predicate as a value, compared or tested"),
    ("SELECT sum(2147483647 + 1) FROM lineitem", "overflows INTEGER, its type \\(DuckDB raises an out-of-range error where"),
    ("SELECT count(*) FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey", "a join"),
    ("SELECT count(*) FROM lineitem, orders", "a join"),
    ("SELECT count(*) FROM lineitem WHERE l_suppkey IN (SELECT 1)", "a subquery"),
    ("SELECT count(*) FROM (SELECT * FROM lineitem)", "a subquery"),
    ("SELECT count(*) FROM lineitem WHERE l_tax = (SELECT max(l_tax) FROM lineitem)", "a subquery"),
    ("SELECT count(*) FROM lineitem WHERE EXISTS (SELECT 1)", "EXISTS"),
    ("SELECT upper(l_returnflag), count(*) FROM lineitem GROUP BY 1", "the function UPPER"),
    ("SELECT sum(abs(l_tax)) FROM lineitem", "the function ABS"),
    ("SELECT sum(l_tax / 2) FROM lineitem", "division"),
    ("SELECT sum(l_suppkey % 2) FROM lineitem", "the operator %"),
    ("SELECT count(*) FROM lineitem WHERE l_shipmode LIKE 'A%'", "LIKE"),
    ("SELECT count(DISTINCT l_tax) FROM lineitem", "DISTINCT"),
    ("SELECT DISTINCT count(*) FROM lineitem", "DISTINCT"),
    ("SELECT count(*) FROM lineitem GROUP BY l_tax HAVING count(*) > 1", "HAVING"),
    ("SELECT sum(l_tax) OVER () FROM lineitem", "a window function"),
    ("SELECT * FROM lineitem", "SELECT \\*"),
    ("SELECT lineitem.*, count(*) FROM lineitem", "SELECT \\*"),
    ("SELECT l_tax, count(*) FROM lineitem GROUP BY l_returnflag", "a column outside GROUP BY \\(l_tax\\)"),
    ("SELECT l_tax + 1, count(*) FROM lineitem GROUP BY l_tax", "an expression outside an aggregate"),
    ("SELECT count(*) FROM tpch.lineitem", "a table of another schema"),
    ("SELECT count(*) FROM read_parquet('x.parquet')", "table function"),
    ("SELECT l_quantity FROM lineitem", "a query without an aggregate"),
    ("SELECT l_returnflag FROM lineitem GROUP BY l_returnflag", "a query without an aggregate"),
    ("SELECT sum(l_tax) + sum(l_quantity) FROM lineitem", "arithmetic over aggregates"),
    ("SELECT sum(max(l_tax)) FROM lineitem", "a nested aggregate"),
    ("SELECT count(*) FROM lineitem WHERE sum(l_tax) > 1", "an aggregate in WHERE"),
    ("SELECT count(*) FROM lineitem GROUP BY l_returnflag, l_linestatus, l_shipmode", "GROUP BY more than 2 columns"),
    ("SELECT count(*) FROM lineitem GROUP BY l_tax + 1", "GROUP BY an expression"),
    ("SELECT count(*) FROM lineitem GROUP BY ROLLUP (l_tax)", "GROUP BY ROLLUP"),
    ("SELECT sum(l_tax * 1e5) FROM lineitem", "a floating-point literal"),
    ("SELECT sum(l_tax::DECIMAL(15,1)) FROM lineitem", "a CAST that rounds"),
    ("SELECT sum(l_tax::DOUBLE) FROM lineitem", "a CAST to DOUBLE"),
    ("SELECT sum(l_tax::VARCHAR) FROM lineitem", "a CAST to"),
    ("SELECT count(*) FROM lineitem WHERE l_shipdate + INTERVAL 1 DAY < DATE '1995-01-01'", "an INTERVAL added to a column"),
    ("SELECT count(*) FROM lineitem WHERE l_returnflag < l_suppkey", "comparing VARCHAR with BIGINT"),
    ("SELECT count(*) FROM lineitem WHERE l_returnflag = 1", "comparing VARCHAR with INTEGER"),
    ("SELECT count(*) FROM lineitem WHERE l_quantity < '5'", "comparing DECIMAL\\(15,2\\) with VARCHAR"),
    ("SELECT count(*) FROM lineitem WHERE l_shipdate < 5", "comparing DATE with INTEGER"),
    ("SELECT count(*) FROM lineitem WHERE (l_tax > 0) IS TRUE", "an IS test"),
    ("SELECT count(*) FROM lineitem WHERE l_tax + NULL < 1", "NULL"),
    ("SELECT sum(NULL) FROM lineitem", "NULL"),
    ("SELECT count(*) FROM lineitem WHERE l_tax", "a predicate that is not a comparison"),
    ("SELECT count(*) FROM lineitem WHERE CASE WHEN l_tax > 0 THEN true END", "a CASE expression"),
    ("SELECT count(*) FROM lineitem WHERE l_shipmode || 'x' = 'AIRx'", "the operator \\|\\|"),
    ("SELECT sum(l_tax) FILTER (WHERE l_tax > 0) FROM lineitem", "an aggregate FILTER"),
    ("SELECT stddev(l_tax) FROM lineitem", "the aggregate STDDEV"),
    ("SELECT sum(l_returnflag) FROM lineitem", "SUM of a VARCHAR"),
    ("SELECT avg(l_shipdate) FROM lineitem", "AVG of a DATE"),
    ("SELECT max(-l_returnflag) FROM lineitem", "negating a VARCHAR"),  # MIN and MAX of a string column as it is
    ("SELECT avg(l_returnflag) FROM lineitem", "AVG of a VARCHAR"),
    ("SELECT count(*) FROM lineitem ORDER BY l_tax", "ORDER BY something not in the SELECT list"),
    ("SELECT count(*) FROM lineitem ORDER BY 2", "ORDER BY position 2"),
    ("SELECT count(*) FROM lineitem LIMIT 5 OFFSET 2", "OFFSET"),
    ("SELECT count(*) FROM lineitem LIMIT -1", "a negative LIMIT"),
    ("WITH t AS (SELECT 1) SELECT count(*) FROM lineitem", "a WITH clause"),
    ("SELECT count(*) FROM lineitem UNION SELECT 1", "UNION"),
    ("SELECT count(*) FROM lineitem; SELECT 1", "more than one statement"),
    ("INSERT INTO lineitem VALUES (1)", "an INSERT statement"),
    ("SELECT count(*), 1 FROM lineitem", "a constant in the SELECT list"),
    ("SELECT count(*) FROM lineitem WHERE l_tax < ?", "a parameter"),
    ("SELECT count(*) FROM lineitem USING SAMPLE 10%", "a sample"),
    ("SELECT count(*) FROM lineitem WHERE l_tax IN ()", "an empty IN list"),
    ("SELECT count(*) FROM lineitem WHERE l_suppkey < 2147483647 + 1", "overflows INTEGER"),
    ("SELECT count(*) FROM lineitem WHERE l_shipdate < DATE '1994-01-01' + INTERVAL 1 CENTURY", "interval"),
]


@pytest.mark.parametrize("where, kept", [
    ("l_tax IS NULL", "l_tax IS NULL"), ("l_tax IS NOT NULL", "NOT l_tax IS NULL"), ("NULL IS NULL", None),
    ("NULL", "FALSE"), ("l_tax + l_quantity IS NULL", "(l_tax IS NULL OR l_quantity IS NULL)"), ("2 * 3 IS NULL", "FALSE"),
    ("l_tax = NULL", "FALSE"), ("NOT (l_tax = NULL)", "FALSE"), ("l_tax < 0.05 OR l_tax = NULL", "l_tax < 0.05"),
    ("NOT (l_tax < 0.05 AND NULL)", "NOT l_tax < 0.05"), ("l_quantity IN (1, NULL)", "l_quantity IN (1)"),
    ("l_quantity NOT IN (1, NULL)", "FALSE"), ("l_quantity NOT BETWEEN NULL AND 5", "NOT l_quantity <= 5"),
    ("l_tax IS NOT NULL AND l_quantity < 3", "(NOT l_tax IS NULL AND l_quantity < 3)"),
])
def test_null_in_where_keeps_the_rows_where_it_is_true(schema, where, kept):
    """SQL's three values: a comparison with NULL is unknown, NOT unknown is unknown, WHERE keeps TRUE only,
    and says so. An expression IS NULL where a column it reads does: an OR of each column's IS NULL (true or
    false, never unknown), FALSE where it reads none."""
    query = parse(f"SELECT count(*) FROM lineitem WHERE {where}", schema)
    shown = None if query.where is None else "FALSE" if query.where == FALSE else str(query.where)
    assert shown == kept, shown
    if "NULL" in where and "IS" not in where:
        assert any("NULL in WHERE" in n for n in query.notes)


@pytest.mark.parametrize("sql, message", REFUSALS)
def test_refusals_name_the_construct(schema, sql, message):
    with pytest.raises(OutOfClass, match=message) as caught:
        parse(sql, schema)
    assert "\n" not in str(caught.value)


# texts sqlglot's parser takes and DuckDB's refuses (its parser, binder or a conversion): refused as DuckDB refuses them
DUCKDB_REFUSES = [
    ("SELECT count(*) FROM lineitem WHERE l_suppkey BETWEEN SYMMETRIC 20 AND 10", "SYMMETRIC"),
    ("SELECT count(*) FROM lineitem WHERE l_suppkey BETWEEN 1 2", "BETWEEN without its AND"),
    ("SELECT count(*) FROM lineitem WHERE l_suppkey BETWEEN 1 OR l_suppkey > 2 AND l_tax > 0", "syntax error"),
    ("SELECT max(l_suppkey FROM lineitem", "never closed"),
    ("SELECT max(l_suppkey)) FROM lineitem", "syntax error"),
    ("SELECT l_suppkey DESC, count(*) FROM lineitem GROUP BY l_suppkey", '"DESC": a keyword'),
    ("SELECT max(l_suppkey) NULL FROM lineitem", '"NULL": a keyword'),
    ("SELECT max(l_suppkey) day FROM lineitem", '"day": a keyword'),
    ("SELECT max(l_suppkey) FROM lineitem ALL WHERE l_suppkey > 0", '"ALL": a keyword'),
    ("SELECT max(l_suppkey) FROM lineitem AS left", '"left": a keyword'),
    ("SELECT count(*) FROM lineitem WHERE l_suppkey IN (1, , 2)", "a list item is missing"),
    ("SELECT , sum(l_suppkey) FROM lineitem", "a list item is missing"),
    ("SELECT sum(l_suppkey),, count(*) FROM lineitem", "a list item is missing"),
    ("SELECT l_suppkey, count(*) FROM lineitem GROUP BY , l_suppkey", "a list item is missing"),
    ("SELECT l_suppkey, count(*) FROM lineitem GROUP BY l_suppkey ORDER BY , l_suppkey", "a list item is missing"),
    ("SELECT sum(CAST(l_suppkey AS DECIMAL(, 2))) FROM lineitem", "a list item is missing"),
    ("SELECT count(*) FROM lineitem WHERE l_tax BETWEEN 0 AND . 5", "a point apart from its digits"),
    ("SELECT max() FROM lineitem", re.escape("MAX() without an argument")),
    ("SELECT sum(CAST(l_suppkey AS DECIMAL(x))) FROM lineitem", "width and scale are integers"),
    ("SELECT sum(CAST(l_suppkey AS DECIMAL(1.5, 0))) FROM lineitem", "width and scale are integers"),
    ("SELECT max(l_suppkey) FROM lineitem LIMIT 9223372036854775808", "LIMIT past BIGINT"),
]
# and texts both answer, though they look alike to those
DUCKDB_TAKES = [
    "SELECT sum(l_suppkey), FROM lineitem", "SELECT count(*) FROM lineitem WHERE l_suppkey IN (1, 2,)",
    "SELECT l_suppkey, count(*) FROM lineitem WHERE l_suppkey < 3 GROUP BY l_suppkey, ORDER BY l_suppkey,",
    "SELECT sum(l_suppkey) AS desc, max(l_tax) AS day, min(l_tax) x FROM lineitem",
    "SELECT sum(l_suppkey) FROM lineitem AS t WHERE t.l_tax < .05", "SELECT sum(l_suppkey) \"desc\" FROM lineitem",
    "SELECT count(*) FROM lineitem WHERE l_suppkey NOT BETWEEN (1) AND 2 OR l_suppkey BETWEEN 1 + 1 AND (30) AND l_tax > 0",
    "SELECT count(*) FROM lineitem WHERE l_suppkey BETWEEN ASYMMETRIC 10 AND 20",
    "SELECT sum(CAST(l_suppkey AS DECIMAL(18,))), max(CAST(l_suppkey AS UInt32)), sum(l_suppkey::uint8) FROM lineitem "
    "WHERE l_suppkey < 200",
    "SELECT max(l_suppkey) FROM lineitem LIMIT 9223372036854775807",
    # a quoted type is no keyword: named as written without its quotes, its arguments listed (numeric(4, 2))
    'SELECT sum(CAST(l_suppkey AS "INTEGER")), max(l_suppkey::"int8"), min(CAST(l_suppkey AS "numeric"(18,2))), '
    'sum(CAST(l_suppkey AS "DECIMAL")), max(l_suppkey::"bigint") FROM lineitem',
]


@pytest.mark.parametrize("sql, message", DUCKDB_REFUSES)
def test_a_text_duckdbs_parser_refuses_is_refused_in_one_line(schema, duck, sql, message):
    with pytest.raises(duckdb.Error):
        duck.execute(sql)
    with pytest.raises(OutOfClass, match=message) as caught:
        parse(sql, schema)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("sql", DUCKDB_TAKES)
def test_a_text_duckdb_takes_is_answered_named_and_typed_as_duckdb_answers_it(schema, duck, sql):
    q = parse(sql, schema)
    description = duck.execute(sql).description
    assert [(o.name, str(o.expr.type)) for o in q.outputs] == [(d[0], str(d[1])) for d in description]


@pytest.mark.parametrize("sql, message", [
    ("SELECT count(*) FROM lineitem WHERE l_foo < 1", "unknown column l_foo; the table has l_orderkey, "),
    ("SELECT count(*) FROM lineitem WHERE l_foo IS NULL OR l_foo = NULL", "unknown column l_foo"),
    ("SELECT count(*) FROM lineitem WHERE x.l_tax < 1", "unknown table x in x.l_tax"),
    ("SELECT count(*) FROM orders", "unknown table orders: the data is the table lineitem"),
])
def test_unknown_names_are_the_users_to_fix_not_outside_the_class(schema, sql, message):
    """A typo is not a query for DuckDB: UnknownName is no OutOfClass, so `--backend auto` says it at once."""
    with pytest.raises(UnknownName, match=re.escape(message)) as caught:
        parse(sql, schema)
    assert not isinstance(caught.value, OutOfClass) and "\n" not in str(caught.value)


def test_unheld_column_says_why():
    held = Schema({"l_tax": DEC}, {"l_comment": "it has more than 65,536 distinct strings"})
    with pytest.raises(OutOfClass) as caught:
        parse("SELECT count(*) FROM lineitem WHERE l_comment = 'x'", held)
    assert str(caught.value) == "column l_comment is not held by the engines: it has more than 65,536 distinct strings"


@pytest.mark.parametrize("text", ["", ";", "SELEC count(*) FROM lineitem", "SELECT count(* FROM lineitem",
                                  "SELECT count(*) FROM lineitem WHERE l_tax < 0x10", "SELECT 'unterminated"])
def test_syntax_errors_are_one_line(schema, text):
    with pytest.raises(SqlSyntaxError) as caught:
        parse(text, schema)
    message = str(caught.value)
    assert "\n" not in message and "\x1b" not in message and message


TEMPLATES = [  # (a prepared text, a drawer of each parameter)
    ("SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < ?", ["int"]),
    ("SELECT l_returnflag, SUM(l_quantity - ?), COUNT(*) FROM lineitem WHERE l_discount BETWEEN ? AND ? "
     "AND l_returnflag <> ? GROUP BY 1 ORDER BY 2 DESC LIMIT ?", ["decimal", "decimal", "decimal", "str", "count"]),
    ("SELECT MIN(l_shipdate), MAX(l_shipdate + ?) FROM lineitem WHERE l_shipdate >= ? "
     "AND l_shipdate < ? + INTERVAL 1 YEAR OR l_quantity = -?", ["small", "date", "date", "decimal"]),
    ("SELECT SUM(-? * l_tax), AVG(l_quantity) FROM lineitem WHERE l_suppkey IN (?, ?, ?) AND NOT l_tax > ?",
     ["decimal", "int", "int", "int", "decimal"]),
    ("SELECT SUM(l_extendedprice * (1 - l_discount)) FROM lineitem WHERE l_shipmode IN (?, ?) AND l_quantity-? < 24",
     ["str", "str", "int"]),
    ("SELECT COUNT(*) FROM lineitem WHERE l_suppkey*?-? > ? AND l_comment <> '?'", ["int", "int", "int"]),
    # numbers typed by their digits as written (001.50, .05) after and between parameters
    ("SELECT SUM(l_quantity * 001.50 + ?), SUM(? - 0.0500) FROM lineitem WHERE l_tax < .05 AND l_discount > ?",
     ["decimal", "decimal", "decimal"]),
]


def draw(rng, kind):
    from decimal import Decimal

    return {"int": lambda: rng.randint(-10**6, 10**6), "small": lambda: rng.randint(-40, 40),
            "count": lambda: rng.randint(0, 20),
            "decimal": lambda: Decimal(rng.randint(-10**5, 10**5)).scaleb(-rng.randint(0, 4)),
            "str": lambda: rng.choice(["A", "R", "AIR", "O'Brien", "", "?", "--"]),
            "date": lambda: datetime.date(rng.randint(1992, 1998), rng.randint(1, 12), rng.randint(1, 28))}[kind]()


@pytest.mark.parametrize("seed", range(70))
def test_a_prepared_template_binds_to_the_query_its_bound_text_parses_to(schema, duck, seed):
    """A prepared statement's text is parsed once with numbered placeholders, and each run's literals are
    put into that tree: the Query (or the one-line error) is the bound text's own, negative parameters
    after a minus included (bound as (-5), never --5, which would begin a comment); but each parameter is
    named $k and an integer one typed by its value, as DuckDB names and types a parameter (the literal beside
    an integer column takes its type): its outputs are named and typed as DuckDB's con.execute(text, params)."""
    import random

    from gquery import sql
    from gquery.parameters import ParameterError, bound_spans

    rng = random.Random(seed)
    text, kinds = TEMPLATES[seed % len(TEMPLATES)]
    template = sql.template(text)
    assert template is not None
    params = [draw(rng, k) for k in kinds]
    bound, spans = bound_spans(text, params)
    try:
        want = sql.parse(bound, schema)
    except GqueryError as e:
        with pytest.raises(type(e), match=re.escape(str(e))):
            sql.parse_template(template, bound, spans, schema)
        return
    got = sql.parse_template(template, bound, spans, schema)
    assert (str(got.where), got.group_by, got.order_by, got.limit) == (str(want.where), want.group_by, want.order_by,
                                                                       want.limit), bound
    assert [str(o.expr) for o in got.outputs] == [str(o.expr) for o in want.outputs], bound
    try:
        description = duck.execute(text, params).description
    except duckdb.Error:  # (DuckDB's own DECIMAL(18) products may overflow)
        return
    assert [(o.name, str(o.expr.type)) for o in got.outputs] == [(d[0], str(d[1])) for d in description], bound
    with pytest.raises(ParameterError, match=re.escape("a numbered parameter ($1) is not taken")):
        sql.template("SELECT COUNT(*) FROM lineitem WHERE l_suppkey < $1 AND l_suppkey > ?")
    assert sql.template("SELECT COUNT(*) AS \"n$\" FROM lineitem WHERE l_suppkey < ? -- $") is not None  # (its own `$`)


# --- a new text of a known shape -------------------------------------------------------------------------
def test_a_texts_shape_has_its_literals_written_as_question_marks():
    from gquery.sql import shape_of

    text = ("SELECT c1, 'it''s', \"col 2\" FROM t WHERE a < 1.5e3 AND b IN (1, 2, .5) -- 7\n"
            "AND d = DATE '1995-01-01' - INTERVAL 2 MONTH ORDER BY 1 LIMIT 3")
    shape, spans = shape_of(text)
    assert shape == ("SELECT c1, ?, \"col 2\" FROM t WHERE a < ? AND b IN (?, ?, ?) -- 7\n"
                     "AND d = ? - ? ORDER BY ? LIMIT ?")
    assert [text[a:a + n] for a, n in spans] == ["'it''s'", "1.5e3", "1", "2", ".5", "DATE '1995-01-01'",
                                                 "INTERVAL 2 MONTH", "1", "3"]
    assert shape_of("SELECT ? FROM t") is None and shape_of("SELECT $1 FROM t") is None


def test_a_shape_is_found_alike_with_names_passed_as_tokens_or_as_text():
    """shape_of passes names as text between literals (each literal's start is guarded against a name before it):
    the shape a token-by-token scan gives (names as tokens, each gap's whitespace runs made one space, or a newline
    where a run holds one), on texts of tricky pieces: names with digits, typed literals, quotes, comments."""
    from gquery.sql import _TOKENS, shape_of

    def by_tokens(text: str):
        parts, spans, at = [], [], 0
        for m in _TOKENS.finditer(text):
            gap = re.sub(r"\s+", lambda r: "\n" if "\n" in r.group() else " ", text[at:m.start()])
            parts += [gap, "?" if m.group("literal") is not None else m.group()]
            if m.group("literal") is not None:
                spans.append((m.start(), m.end() - m.start()))
            at = m.end()
        tail = re.sub(r"\s+", lambda r: "\n" if "\n" in r.group() else " ", text[at:])
        return ("".join(parts) + tail).strip(), spans

    pieces = ["a", "x1", "date", " date '1995-01-01'", "interval 2 month", "'it''s'", '"q ""n"', "-- c\n", "/* c\n */",
              "1.5e3", ".5", "5.", "e5", "_", "\n", "\t", "  ", ",", "(", ")", "+", "-", "<", "=", "x.5", "0", "\u00a0",
              "\r\n", "timestamp'2020-01-01 00:00:00'", "select", "lineitem", "'", '"', "--", "interval", " year", "'3'",
              "DATE '1995-01-01'", "Interval '3' Day", "TIMESTAMP'2020-01-01'", "\u0663", "X9", "/", "-1"]
    rng = random.Random(7)
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert shape_of(text) == by_tokens(text), repr(text)


def _sibling(text: str, rng: random.Random, after: int = 0) -> str:
    """The text with each literal (from `after` on) changed for another of its kind: a shape's next text."""
    from gquery.sql import shape_of

    shape, spans = shape_of(text)
    out, at = [], 0
    for start, length in spans:
        if start < after:
            continue
        lit = text[start:start + length]
        if lit.startswith("'"):
            new = rng.choice(["'A'", "'N'", "''", "'R'", "'1995-03-15'", "'x''y'", "'O'"])
        elif lit[:1].lower() in "dti":  # DATE '…', TIMESTAMP '…', INTERVAL …: another of the same words
            new = re.sub(r"\d", lambda m: str(rng.randrange(1, 9)), lit)
        else:
            new = re.sub(r"\d", lambda m: str(rng.randrange(10)), lit)
        out += [text[at:start], new]
        at = start + length
    return "".join(out) + text[at:]


def _clause_sibling(text: str, rng: random.Random) -> str:
    """The text with the literals of its WHERE and LIMIT alone changed (where its WHERE comes after every other
    literal but LIMIT's): the texts whose clauses a known shape binds again (sql._rebound)."""
    where = text.upper().find(" WHERE ")
    return _sibling(text, rng, where) if where >= 0 else text


def _term_sibling(text: str, rng: random.Random) -> str:
    """The text with one literal of its WHERE changed, the others kept: a known shape binds the AND term that
    literal lies in again, and finds the other terms bound before (sql._where_rebound)."""
    from gquery.sql import shape_of

    where = text.upper().find(" WHERE ")
    spans = [(start, length) for start, length in shape_of(text)[1] if where >= 0 and start > where]
    if not spans:
        return text
    start, length = rng.choice(spans)
    changed = _sibling(text[start:start + length], rng)
    return text[:start] + changed + text[start + length:]


def test_a_plain_literal_is_the_node_its_parse_is():
    from gquery.sql import _literal_node, _literal_tree

    for literal in ["0", "3001", "0.06", "007", "24.50", "''", "'A'", "'1995-03-15'", "'a b'"]:
        made, parsed = _literal_node(literal), _literal_tree(literal)
        assert made == parsed and made.meta == parsed.meta, literal
    assert _literal_node("DATE '1995-01-01'") == _literal_tree("DATE '1995-01-01'")


def test_a_typed_literal_is_the_node_its_parse_is():
    """An interval's or a date's tree made from its form's (sql._typed_node) equals its own parse, positions and
    all, for forms met first with another value and forms whose parse holds the quoted part otherwise."""
    from gquery.sql import _literal_node, _literal_tree

    rng = random.Random(5)
    literals = ["date '-1'", "date ' 1998'", "DATE '1998-1-1'", "timestamp '1998-12-01'", "interval '1' day"]
    for _ in range(300):
        literals.append(rng.choice([
            f"{rng.choice(['interval', 'INTERVAL'])}{rng.choice([' ', '  ', ''])}'{rng.choice(['0', '007', str(rng.randrange(10**6))])}'"
            f"{rng.choice([' ', '  '])}{rng.choice(['day', 'DAY', 'days', 'month', 'year', 'hour', 'second', 'week'])}",
            f"{rng.choice(['date', 'DATE'])}{rng.choice([' ', ''])}'{rng.randrange(1, 9999):04d}-{rng.randrange(13):02d}-"
            f"{rng.randrange(32):02d}'",
            f"timestamp '{rng.randrange(1900, 2100)}-0{rng.randrange(1, 9)}-1{rng.randrange(9)} {rng.randrange(24):02d}:"
            f"{rng.randrange(60):02d}:{rng.randrange(60):02d}{rng.choice(['', '.5', '.123456'])}'"]))
    for literal in literals:
        made, parsed = _literal_node(literal), _literal_tree(literal)
        assert made == parsed and made.sql() == parsed.sql(), literal
        assert [p.meta for p in made.walk()] == [p.meta for p in parsed.walk()], literal
        assert made is not _literal_node(literal), literal  # a node of its own each time: the caller places it


def _respaced(text: str, rng: random.Random) -> str:
    """The text with the whitespace between its tokens written otherwise (runs widened, spaces made tabs,
    some at either end): of the same shape, parsed to the same tree; strings, quoted names, comments kept."""
    from gquery.sql import _TOKENS

    def gap(g: str) -> str:
        return re.sub(r"[ \t]+", lambda m: rng.choice([" ", "  ", "\t", " \t "]), g)

    out, at = [rng.choice(["", " ", "\n  "])], 0
    for m in _TOKENS.finditer(text):
        out += [gap(text[at:m.start()]), m.group()]
        at = m.end()
    return "".join(out) + gap(text[at:]) + rng.choice(["", "\n", " \n\t"])


@deep_expressions  # querygen draws expressions nested past Python's default recursion limit
def test_a_new_text_of_a_known_shape_is_the_query_its_parse_is(schema):
    """parse_shaped against parse on random texts of the class, on siblings of each (its literals changed)
    and on the text spaced otherwise (one shape): the same Query, or the same error; the template serves
    most shapes."""
    from gquery.bench import querygen
    from gquery.sql import parse_shaped, shape_of

    shapes: dict = {}
    served = 0
    for k in range(250):
        rng = random.Random(f"shape {k}")
        text = querygen.query(rng)
        respaced = _respaced(text, rng)
        assert shape_of(respaced)[0] == shape_of(text)[0], (text, respaced)
        for t in (text, _sibling(text, rng), _clause_sibling(text, rng), _sibling(text, rng), _clause_sibling(text, rng),
                  _term_sibling(text, rng), _term_sibling(text, rng), respaced, text):
            try:
                want = parse(t, schema)
            except GqueryError as e:
                with pytest.raises(type(e), match=re.escape(str(e))):
                    parse_shaped(t, schema, "lineitem", shapes)
                continue
            got = parse_shaped(t, schema, "lineitem", shapes)
            assert got == want and got.notes == want.notes and got.sql == want.sql, t
        served += shapes.get(shape_of(text)[0]) is not None
    assert served > 200, served


def test_a_shape_serves_its_texts_as_their_own_parse_past_nested_comments_line_ends_and_folded_casts(tmp_path):
    """Texts of one shape through one table answer as a fresh table and DuckDB answer them: a literal inside a comment
    nested in another (shape_of's pattern did not nest them, so every later literal took the place before its own: a
    wrong sum, named after another text), a -- comment ended by a carriage return (a ParameterError), and a shape
    whose first text's cast never fits the table (each later text was refused for it: the first's casts were checked
    with its own)."""
    import pyarrow as pa

    import gquery

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": pa.array([1, 5, 10, 50, 100], pa.int32()), "s": ["a", "b", "x", "a\n", "c"]}), path)
    texts = ["SELECT /* /* */ 2 */ SUM(x * 2) FROM t", "SELECT /* /* */ 2 */ SUM(x * 3) FROM t",
             "SELECT /* /* */ 7 */ SUM(x * 2) FROM t", "SELECT COUNT(*) FROM t WHERE /* /* */ 10 */ x > 10",
             "SELECT COUNT(*) FROM t WHERE /* /* */ 10 */ x > 50",
             "SELECT COUNT(*) FROM t WHERE x > 0 -- c\r AND s <> 'a\n' AND x < 10",
             "SELECT COUNT(*) FROM t WHERE x > 1 -- c\r AND s <> 'a\n' AND x < 10",
             "SELECT SUM(CAST(x * 1000 AS SMALLINT)) FROM t", "SELECT SUM(CAST(x * 2 AS SMALLINT)) FROM t",
             "SELECT COUNT(*) FROM t WHERE NOT (CAST(x * 3 AS TINYINT) = 1 OR x IN (NULL, 2))",
             "SELECT COUNT(*) FROM t WHERE NOT (CAST(x * 1 AS TINYINT) = 1 OR x IN (NULL, 2))"]
    warm, con = gquery.open(path), duckdb.connect()
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{path}')")
    for text in texts:
        answers = []
        for table in (warm, gquery.open(path)):
            try:
                a = table.sql(text, backend="cpu", check=False)
                answers.append((a.rows, a.columns))
            except GqueryError as e:
                answers.append(type(e))
        try:
            asked = con.execute(text)
            theirs = (asked.fetchall(), [d[0] for d in asked.description])
        except duckdb.ConversionException:
            theirs = GqueryError
        assert answers[0] == answers[1] == theirs, text


@deep_expressions
def test_texts_of_one_shape_parsed_on_many_threads_at_once_are_each_their_own_query(schema):
    """A new text's literals stand in its shape's template while it binds, under the shape's lock: eight threads
    asking siblings of the same shapes at once through one table's shapes each get their own text's Query."""
    import threading
    from gquery.bench import querygen
    from gquery.sql import parse_shaped

    texts = []
    for k in range(12):
        rng = random.Random(f"threads {k}")
        text = querygen.query(rng)
        texts += [text] + [f(text, rng) for f in (_sibling, _clause_sibling, _term_sibling, _sibling, _clause_sibling)]
    wanted = {}
    for t in texts:
        try:
            wanted[t] = parse(t, schema)
        except GqueryError as e:
            wanted[t] = type(e)
    shapes: dict = {}
    for t in texts[::6]:  # each shape's first text parsed: the others are bound into its template
        try:
            parse_shaped(t, schema, "lineitem", shapes)
        except GqueryError:
            pass
    wrong, start = [], threading.Barrier(8)

    def ask(seed: int) -> None:
        order = random.Random(seed).sample(texts, len(texts))
        start.wait()
        for _ in range(5):
            for t in order:
                try:
                    got = parse_shaped(t, schema, "lineitem", shapes)
                except GqueryError as e:
                    got = type(e)
                want = wanted[t]
                if got != want or (not isinstance(want, type) and (got.notes, got.sql) != (want.notes, want.sql)):
                    wrong.append(t)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not wrong, wrong[:3]
