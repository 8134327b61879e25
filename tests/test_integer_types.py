"""Integer arithmetic typed as DuckDB types it: every signed and unsigned width beside another, beside an integer
literal (which takes the other side's type where its value fits that type) and beside a DECIMAL; and a value past
its type, which DuckDB raises for, exact in the answer's rows and one line from its Arrow table."""

import datetime
import itertools
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gquery
from gquery.errors import GqueryError
from gquery.schema import read_schema
from gquery.sql import OutOfClass, parse

WIDTHS = {"i8": pa.int8(), "i16": pa.int16(), "i32": pa.int32(), "i64": pa.int64(),
          "u8": pa.uint8(), "u16": pa.uint16(), "u32": pa.uint32()}
LITERALS = ["1", "-1", "(2)", "-(-3)", "127", "128", "-128", "-129", "255", "256", "32767", "32768", "65535", "65536",
            "2147483647", "2147483648", "-2147483648", "4294967295", "4294967296", "9223372036854775808"]


def items() -> list[str]:
    pairs = [f"max({a} {op} {b})" for a, b in itertools.product(WIDTHS, repeat=2) for op in "+-*"]
    literals = [f"max({c} + {k})" for c in WIDTHS for k in LITERALS] + [f"min({k} * {c})" for c in WIDTHS for k in LITERALS]
    others = ["max(1 + 1 + i8)", "max(i8 + 1 * 1)", "max(CAST(1 AS TINYINT) + 1)", "max(u8 + i8 * 1)", "max((i8 + 1) * 2)",
              "max(-u8)", "max(-(i16 + 1))", "sum(u8)", "sum(u32 * u32)", "avg(u16)", "min(u32)", "count(u8)",
              "max(u16 * CAST(i8 AS DECIMAL(18,4)))", "max(u32 * CAST(i8 AS DECIMAL(18,4)))", "max(u8 + 1.5)",
              "max(d + u32)", "max(d * u8)", "max(d + 1)", "max(d + i8)", "max(day + u8)", "max(day - u16)",
              "max(i8 + (u8 + 1))", "sum(u16 * 3 - i8)", "max(CAST(u8 AS UINTEGER) + 1)", "max(CAST(i8 AS UTINYINT))",
              "max(u16::USMALLINT * 2)", "max(CAST(i16 AS UINTEGER) - u8)", "sum(CAST(u32 AS DECIMAL(12,2)) * u8)",
              # a unary plus is the function +(x) to DuckDB: named so, and its literal no literal (not narrowed)
              "max(i8 + +1)", "max(i8 + (+1))", "sum(+i16)", "max(-(+i8))", "max(i8 + -(+1))", "max(+1.50 * d)",
              "sum(+ +u8)", "+max(i8)", "min(+(i8 + 1))", "max(i8 - -1)", "max(-(-1) + i8)", "max(i16 * +-2)",
              # a cast's type printed as DuckDB prints it: a SQL keyword type by its name, any other as written
              "max(CAST(i8 AS int8))", "min(i16::Int4)", "max(CAST(i8 AS numeric))", "max(CAST(i8 AS DECIMAL (10, 2)))",
              "max(CAST(i8 AS LONG))", "sum(CAST(u8 AS SIGNED))", "max(CAST(i8 AS INT128))", "max(i8::HugeInt)",
              "max(CAST(i8 AS dec(9,1)))", "max(CAST(u8 AS uint16))", "max(CAST(i8 AS int))", "min(i8::BigInt)"]
    return pairs + literals + others


def chunks(xs: list[str], n: int = 25):
    return [xs[k:k + n] for k in range(0, len(xs), n)]


def table(rows: dict) -> pa.Table:
    columns = {n: pa.array(rows[n], t) for n, t in WIDTHS.items()}
    columns["d"] = pa.array(rows["d"], pa.decimal128(15, 2))
    columns["day"] = pa.array(rows["day"], pa.date32())
    return pa.table(columns)


@pytest.fixture(scope="module")
def empty(tmp_path_factory):
    """A file of every width and no rows: DuckDB types each text without computing a value that could overflow."""
    path = tmp_path_factory.mktemp("ints") / "lineitem.parquet"
    pq.write_table(table({n: [] for n in [*WIDTHS, "d", "day"]}), path)
    con = duckdb.connect()
    con.execute(f"CREATE VIEW lineitem AS SELECT * FROM read_parquet('{path}')")
    yield read_schema(pq.read_schema(path)), con
    con.close()


@pytest.mark.parametrize("select", chunks(items()), ids=lambda c: c[0])
def test_integer_arithmetic_is_typed_as_duckdb_types_it(empty, select):
    schema, con = empty
    text = f"SELECT {', '.join(select)} FROM lineitem"
    q = parse(text, schema)
    description = con.execute(text).description
    assert [(o.name, str(o.expr.type)) for o in q.outputs] == [(d[0], str(d[1])) for d in description]


@pytest.mark.parametrize("text", ["SELECT max(day + u32) FROM lineitem", "SELECT max(day + i64) FROM lineitem"])
def test_a_date_plus_an_integer_past_integer_is_refused_as_duckdb_refuses_it(empty, text):
    schema, con = empty
    with pytest.raises(duckdb.BinderException):
        con.execute(text)
    with pytest.raises(OutOfClass, match="DuckDB adds INTEGER days only"):
        parse(text, schema)


@pytest.fixture(scope="module")
def edges(tmp_path_factory):
    """Each width at its limits (and 0), NULL among them."""
    rows = {"i8": [-128, 127, 0, None], "i16": [-2**15, 2**15 - 1, 0, 1], "i32": [-2**31, 2**31 - 1, 0, 1],
            "i64": [-2**63, 2**63 - 1, 0, 1], "u8": [0, 255, 7, None], "u16": [0, 2**16 - 1, 7, 1],
            "u32": [0, 2**32 - 1, 7, 1], "d": [-1, 1, 0, None], "day": [0, 1, 2, 3]}
    folder = tmp_path_factory.mktemp("edges")
    pq.write_table(table(rows), folder / "edges.parquet")
    return folder / "edges.parquet"


def duck_arrow(path, text: str) -> pa.Table:
    con = duckdb.connect()
    try:
        out = con.sql(text.replace("FROM edges", f"FROM read_parquet('{path}')")).arrow()
        return out.read_all() if hasattr(out, "read_all") else out  # a reader in DuckDB 2.0, a table before
    finally:
        con.close()


ANSWERED = ["SELECT max(u8), min(u16), max(u32), sum(u32), count(u8) FROM edges",
            "SELECT u8, count(*), max(u32 + 1), min(i8 + 0) FROM edges WHERE u16 < 60000 GROUP BY u8 ORDER BY u8",
            "SELECT max(u8 - 7), min(i16 - (-1)), max(i32 * 1) FROM edges WHERE u8 >= 7 AND u8 < 255",
            "SELECT max(u16 * CAST(i8 AS DECIMAL(18,4))), max(i8 + u8), min(u32 - i8) FROM edges WHERE i8 = 0"]


@pytest.mark.parametrize("text", ANSWERED)
def test_integer_answers_are_duckdbs_arrow_tables(edges, text):
    """The CPU reference's answer over the file: DuckDB's Arrow table, its types by width and sign."""
    got = gquery.open(edges).sql(text, backend="cpu", check=False).arrow()
    want = duck_arrow(edges, text)
    assert got.schema.types == want.schema.types and got.to_pylist() == want.to_pylist()


@pytest.mark.parametrize("text,column,past", [
    ("SELECT max(i8 + 1) FROM edges", "max((i8 + 1))", "128 is past TINYINT"),
    ("SELECT min(u8 - 1) FROM edges", "min((u8 - 1))", "-1 is past UTINYINT"),
    ("SELECT max(u32 * 2) FROM edges", "max((u32 * 2))", "8589934590 is past UINTEGER"),
    ("SELECT max(i64 + 1) FROM edges", "max((i64 + 1))", "9223372036854775808 is past BIGINT"),
    ("SELECT max(d * i32 * i32) FROM edges", "max(((d * i32) * i32))", "4611686014132420609.00 is past DECIMAL(18,2)")])
def test_a_value_past_its_type_is_exact_in_rows_and_one_line_from_arrow(edges, text, column, past):
    """DuckDB raises an out-of-range error for these; the engines' answer is exact (beyond DuckDB's range, as
    README says), and its Arrow table, which cannot hold the value in DuckDB's type, says so in one line."""
    with pytest.raises(duckdb.OutOfRangeException):
        duck_arrow(edges, text)
    a = gquery.open(edges).sql(text, backend="cpu", check=False)
    assert a.rows[0][0] == int(past.split()[0]) if "DECIMAL" not in past else str(a.rows[0][0]) == past.split()[0]
    with pytest.raises(GqueryError) as e:
        a.arrow()
    assert str(e.value).startswith(f"column {column}: {past}, the type DuckDB gives it") and "\n" not in str(e.value)


def test_a_date_plus_an_unsigned_integer_is_a_date(edges):
    text = "SELECT max(day + u8), min(day - u16) FROM edges WHERE u8 < 255"
    got = gquery.open(edges).sql(text, backend="cpu", check=False).arrow()
    assert got == duck_arrow(edges, text)
    assert got.to_pylist() == [{'max(("day" + u8))': datetime.date(1970, 1, 10), 'min(("day" - u16))': datetime.date(1969, 12, 27)}]


PREPARED = [("SELECT max(i8 + ?), max(i8 + 1), sum(? * i16), min(? + u8) FROM edges WHERE u8 < ?", [1, -5, 7, 255]),
            ("SELECT max(i8 * ?), count(*), sum(i16 - (?)) FROM edges WHERE i8 > ?", [Decimal("1.50"), 3, -100]),
            ("SELECT u8, max(u16 + ?) FROM edges WHERE u8 IN (?, ?) GROUP BY u8 ORDER BY u8", [1, 7, 255]),
            ("SELECT max(i8 * ?), sum(d + ?), min(d * ?), max(u8 - ?), max(d * ?) FROM edges WHERE i32 > ?",
             [Decimal("100"), Decimal("0.5"), Decimal("0.05"), Decimal("1E+2"), -2**31, -2**31]),
            ("SELECT sum(d - ?), max(d * ?), min(u16 * ?), sum(i8 + (?)) FROM edges",
             [Decimal("-0.000"), Decimal("12345678901234567890.5"), 2**31, Decimal("-7E+1")]),
            ("SELECT max(i8 + +?), sum(i16 * -(+?)), min(u8 - (+?)), max(+(-?) * i8) FROM edges", [1, 2, -3, 4]),
            ("SELECT max(-?), sum(i8 * -?), min(-(?) + d), max(i16 - -(-?)) FROM edges",
             [Decimal("100"), Decimal("0.5"), Decimal("-0.05"), Decimal("1E+3")]),
            ("SELECT max(-?), min(i8 * -(?)), max(-(-?)), max(-?), min(-?) FROM edges",  # a minus widens where it must
             [-2**31, -2**31, -2**31, -2**63, 2**31 - 1]),
            # a `$` of the text's own (a comment's, last in the text; a quoted name's) leaves its parameters typed
            ("SELECT max(i8 + ?) AS \"m$\", count(*) FROM edges WHERE u8 < ? /* $x$ */ -- in $", [1, 255]),
            ("SELECT max(i8 + ?), sum(u16 * ?) FROM edges -- $", [1, 2])]


@pytest.mark.parametrize("text,parameters", PREPARED)
def test_a_prepared_statements_parameters_are_typed_and_named_as_duckdb_types_them(edges, text, parameters):
    """DuckDB types an integer parameter by its value alone (a TINYINT plus the parameter 1 is an INTEGER, where the
    literal 1 makes a TINYINT; -2^31 is an INTEGER, where the literal is a BIGINT), a Decimal by its digits and
    exponent (Decimal('100') a DECIMAL(3,0), where the literal 100 is an INTEGER; Decimal('0.5') a DECIMAL(1,1), the
    literal 0.5 a DECIMAL(2,1)), and names it $k in a column's name: a prepared statement's run, and the DB-API's
    execute with parameters, answer as con.execute(text, parameters) does."""
    con = duckdb.connect()
    try:
        theirs = con.sql(text.replace("FROM edges", f"FROM read_parquet('{edges}')"), params=parameters)
        names, types, want = theirs.columns, [str(t) for t in theirs.types], theirs.to_arrow_table()
    finally:
        con.close()
    t = gquery.open(edges)
    got = t.prepare(text).run(*parameters, backend="cpu", check=False)
    assert got.columns == names and got.arrow() == want
    assert [str(t).replace(" ", "") for _, t in got.result.columns] == types  # (HUGEINT's Arrow is DECIMAL(38,0)'s)
    cursor = gquery.connect(edges, backend="cpu", check=False).cursor()
    cursor.execute(text, parameters)
    assert [d[0] for d in cursor.description] == names
    assert [str(d[1]) for d in cursor.description] == [str(t) for _, t in got.result.columns]
    assert cursor.fetchall() == [tuple(row.values()) for row in want.to_pylist()]


def test_backend_duckdb_asks_a_prepared_statement_with_its_parameters(edges):
    """backend duckdb asks DuckDB the prepared text with its parameters, as DuckDB's own prepared statement: the
    parameter 5 beside a TINYINT of 127 is an INTEGER there (the literal 5 would be a TINYINT, and DuckDB would
    raise an overflow), and a Decimal is typed by its digits."""
    statement = gquery.open(edges).prepare("SELECT max(i8 + ?), sum(d * ?) FROM edges WHERE u8 <= ?")
    a = statement.run(5, Decimal("0.5"), 255, backend="duckdb")
    assert a.backend == "duckdb" and a.rows == [(132, Decimal("0.000"))]
    assert [(n, str(t)) for n, t in a.result.columns] == [("max((i8 + $1))", "INTEGER"), ("sum((d * $2))", "DECIMAL(38,3)")]
    assert a.sql == "SELECT max(i8 + 5), sum(d * 0.5) FROM edges WHERE u8 <= 255"
    assert a.result.columns == statement.run(5, Decimal("0.5"), 255, backend="cpu", check=False).result.columns
    beyond = "SELECT count(*), max(i8 + ?) FROM edges WHERE CAST(u8 AS VARCHAR) LIKE ?"  # outside the class: DuckDB's
    con = duckdb.connect()
    try:
        theirs = con.execute(beyond.replace("FROM edges", f"FROM read_parquet('{edges}')"), [None, "2%"]).fetchall()
    finally:
        con.close()
    assert gquery.open(edges).prepare(beyond).run(None, "2%", backend="duckdb").rows == theirs == [(1, None)]


def test_an_integer_parameter_duckdb_types_ubigint_is_refused_in_one_line(edges):
    """From 2^63 to 2^64 - 1 DuckDB types an int parameter UBIGINT, which gquery does not hold (typed HUGEINT, its
    products were wider than DuckDB's and its overflows answered): one line, but for backend duckdb, which asks DuckDB."""
    from gquery.parameters import ParameterError

    statement = gquery.open(edges).prepare("SELECT max(d * ?), count(*) FROM edges WHERE i64 < ?")
    for value in (2**63, 2**64 - 1):
        with pytest.raises(ParameterError, match="is DuckDB's UBIGINT") as e:
            statement.run(value, 0, backend="cpu")
        assert "\n" not in str(e.value)
    con = duckdb.connect()
    try:
        theirs = [con.execute(statement.text.replace("FROM edges", f"FROM read_parquet('{edges}')"), [1, z]).fetchall()
                  for z in (2**63, 2**63 - 1)]
    finally:
        con.close()
    assert statement.run(1, 2**63, backend="duckdb").rows == theirs[0] == [(Decimal("1.00"), 4)]
    assert statement.run(1, 2**63 - 1, backend="cpu").rows == theirs[1] == [(Decimal("0.00"), 3)]


def test_a_decimal_parameter_duckdb_binds_as_a_double_is_refused_in_one_line(edges):
    """Past 38 digits DuckDB binds a Decimal parameter as a DOUBLE (Decimal('1E+38') too, whose digits bind() writes
    as a HUGEINT literal); gquery's constants are exact: refused, saying so, as a literal of 39 digits is."""
    con = duckdb.connect()
    try:
        assert con.execute("SELECT typeof(?)", [Decimal("1E+38")]).fetchall() == [("DOUBLE",)]
    finally:
        con.close()
    statement = gquery.open(edges).prepare("SELECT sum(d * ?) FROM edges")
    with pytest.raises(OutOfClass) as e:
        statement.run(Decimal("1E+38"), backend="cpu", check=False)
    assert "DuckDB binds as a DOUBLE" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(OutOfClass, match="DuckDB binds as a DOUBLE"):  # negated alike
        gquery.open(edges).prepare("SELECT max(-?) FROM edges").run(Decimal("1E+38"), backend="cpu", check=False)
    assert statement.run(Decimal("1E+37"), backend="cpu", check=False).result.columns[0][1].width == 38


def test_a_hugeint_past_38_digits_is_in_arrow_as_duckdb_gives_it(edges):
    """DuckDB's Arrow type for HUGEINT, decimal128(38, 0), holds its 128 bits: -2^127 (a MIN of -2^63 times the
    parameter 2^64) is DuckDB's answer, and gquery's Arrow table holds it alike."""
    text = "SELECT min(i64 * ?), max(i64 * ?) FROM edges"
    con = duckdb.connect()
    try:
        want = con.sql(text.replace("FROM edges", f"FROM read_parquet('{edges}')"), params=[2**64, 2**64]).to_arrow_table()
    finally:
        con.close()
    got = gquery.open(edges).prepare(text).run(2**64, 2**64, backend="cpu", check=False)
    assert got.rows == [(-2**127, (2**63 - 1) * 2**64)]
    ours = got.arrow()
    assert ours.schema.types == want.schema.types
    for k in range(2):  # (pyarrow cannot compare decimals past their precision: their 128-bit words)
        assert ours.column(k).chunk(0).buffers()[1].to_pybytes()[:16] == want.column(k).chunk(0).buffers()[1].to_pybytes()[:16]


def test_a_unary_plus_is_duckdbs_function_in_group_outputs_and_refused_as_a_group_key(edges):
    """`+x` is DuckDB's function +(x): a group column's output written so is named (+(x)), and GROUP BY +x groups by
    an expression, which DuckDB then refuses beside a bare x (gquery refuses any GROUP BY expression)."""
    text = "SELECT +i8, (u8), count(*) FROM edges WHERE i8 IS NOT NULL GROUP BY i8, u8 ORDER BY +i8"
    got = gquery.open(edges).sql(text, backend="cpu", check=False)
    want = duck_arrow(edges, text)
    assert got.columns == want.column_names == ["(+(i8))", "u8", "count_star()"] and got.arrow() == want
    with pytest.raises(OutOfClass, match="GROUP BY an expression"):
        gquery.open(edges).sql("SELECT i8, count(*) FROM edges GROUP BY +i8", backend="cpu", check=False)


@pytest.mark.parametrize("text, parameters, of", [
    ("SELECT min(+day) FROM edges", [], "DATE"), ("SELECT count(*) FROM edges WHERE day < +?", [datetime.date(1970, 1, 2)], "DATE"),
    ("SELECT count(*) FROM edges WHERE +?", [True], "BOOLEAN"), ("SELECT count(*) FROM edges WHERE +(i8 > 0)", [], "BOOLEAN")])
def test_a_unary_plus_of_no_number_is_refused_as_duckdb_refuses_it(edges, text, parameters, of):
    """DuckDB's +(x) takes numbers only (a binder error for a DATE, a string, a BOOLEAN): refused in one line."""
    con = duckdb.connect()
    try:
        with pytest.raises(duckdb.BinderException):
            con.execute(text.replace("FROM edges", f"FROM read_parquet('{edges}')"), parameters)
    finally:
        con.close()
    t = gquery.open(edges)
    with pytest.raises(OutOfClass, match=f"a unary plus of a {of}") as e:
        (t.prepare(text).run(*parameters, backend="cpu", check=False) if parameters else t.sql(text, backend="cpu", check=False))
    assert "\n" not in str(e.value)
