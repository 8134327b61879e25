"""An answer where people use it: rows as DuckDB's fetchall() gives them, a pyarrow.Table typed as
DuckDB's .arrow() types the same SQL's answer, JSON text, pandas and polars where installed; and the
errors a user can act on importable from gquery itself."""

import datetime
import json
import math
import random
import re
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gquery
from gquery.bench import querygen
from gquery.sql import named_sql


@pytest.fixture(scope="module")
def opened(sf001):
    t = gquery.open(sf001.files[0])
    con = duckdb.connect()
    con.execute(f"CREATE VIEW lineitem AS SELECT * FROM read_parquet('{sf001.files[0]}')")
    yield t, con
    t.close()


def duck_arrow(con, text: str) -> pa.Table:
    """DuckDB's own Arrow answer (its .arrow() gives a reader in 2.0, a table before)."""
    out = con.sql(text).arrow()
    return out.read_all() if isinstance(out, pa.RecordBatchReader) else out


def same_arrow(ours: pa.Table, theirs: pa.Table, ordered: bool) -> bool:
    """Equal schemas (names and types) and equal columns; a double one unit in the last place apart is
    DuckDB's AVG rounded its own way (gquery.result.compare), every other value equal."""
    if ours.schema != theirs.schema or ours.num_rows != theirs.num_rows:
        return False
    mine, other = ours.to_pylist(), theirs.to_pylist()
    if not ordered:
        key = lambda r: json.dumps(r, default=str, sort_keys=True)  # noqa: E731
        mine, other = sorted(mine, key=key), sorted(other, key=key)
    for a, b in zip(mine, other):
        for k in a:
            x, y = a[k], b[k]
            if x != y and not (isinstance(x, float) and math.nextafter(x, y) == y):
                return False
    return True


@pytest.mark.parametrize("text", [named_sql("q1"), named_sql("q6"), named_sql("mission", 30), named_sql("mission", -1),
                                  "SELECT l_shipdate, MIN(l_commitdate), COUNT(*), SUM(l_suppkey) FROM lineitem "
                                  "WHERE l_shipdate < DATE '1992-02-01' GROUP BY 1 ORDER BY 1",
                                  "SELECT SUM(l_suppkey * 2147483648), MAX(l_linenumber), SUM(l_suppkey) FROM lineitem"])
def test_arrow_is_duckdbs_arrow(opened, text):
    t, con = opened
    a = t.sql(text, backend="cpu", check=False)
    assert same_arrow(a.arrow(), duck_arrow(con, text), ordered=True), (a.arrow().schema, duck_arrow(con, text).schema)
    assert a.fetchall() == a.rows and a.fetchall() is not a.rows


def test_arrow_of_random_queries_of_the_class(opened):
    """querygen's random SQL through the API (its edges among it: wide groups, long IN lists, deep and long
    expressions, IS NULL), typed and valued as DuckDB's own Arrow answer."""
    t, con = opened
    rng = random.Random(25)
    for _ in range(40):
        text = querygen.query(rng)
        a = t.sql(text, backend="cpu", check=False)
        assert same_arrow(a.arrow(), duck_arrow(con, text), ordered=bool(a.query.order_by)), text


def test_dates_past_pythons_years_become_date32_exactly(tmp_path):
    """DuckDB's client gives such dates as text; Arrow holds them as day counts, DuckDB's .arrow() too."""
    days = [-2**20, -719_163, 0, 2_932_897, 2**22]
    path = tmp_path / "dates.parquet"
    pq.write_table(pa.table({"d": pa.array(days, pa.date32()), "k": pa.array(range(len(days)), pa.int64())}), path)
    t = gquery.open(path)
    text = "SELECT d, COUNT(*), MIN(d) FROM dates GROUP BY d ORDER BY d"  # dates.parquet is the table dates
    a = t.sql(text, backend="cpu", check=False)
    assert any(isinstance(r[0], str) for r in a.rows)  # the client's text for a year past 9999
    theirs = duck_arrow(duckdb.connect(), f"SELECT d, COUNT(*), MIN(d) FROM read_parquet('{path}') GROUP BY d ORDER BY d")
    assert a.arrow().equals(theirs)  # date32 past Python's years: compared as Arrow, not as Python dates
    assert a.arrow().column(0).cast(pa.int32()).to_pylist() == sorted(days)
    t.close()


def test_json_text_and_the_object_it_writes(opened):
    t, _ = opened
    a = t.sql("SELECT l_returnflag, SUM(l_quantity), MIN(l_shipdate), AVG(l_tax) FROM lineitem GROUP BY 1 ORDER BY 1",
              backend="cpu", check=False)
    text = a.to_json()
    assert isinstance(text, str) and json.loads(text) == json.loads(json.dumps(a.to_dict()))
    row = json.loads(text)["rows"][0]
    assert isinstance(row[1], str) and "." in row[1] and row[2] == a.rows[0][2].isoformat()
    assert datetime.date.fromisoformat(row[2]) == a.rows[0][2] and isinstance(row[3], float)


def test_backend_duckdb_answers_any_type_it_answers_with_its_own_arrow(tmp_path):
    """backend="duckdb" is DuckDB alone: a type the engines do not hold (UBIGINT, a LIST, an INTERVAL) is answered
    by DuckDB's name (it was refused), and a.arrow() is DuckDB's own Arrow table (a date past 9999 raised)."""
    path = tmp_path / "o.parquet"
    pq.write_table(pa.table({"u": pa.array([1, 2**64 - 1], pa.uint64()), "i": pa.array([1, 2], pa.int8()),
                             "d": pa.array([datetime.date(9999, 12, 31), None], pa.date32())}), path)
    t = gquery.open(path)
    text = "SELECT MAX(u), LIST(i), INTERVAL 1 DAY AS iv, MAX(d + 1) FROM o"
    a = t.sql(text, backend="duckdb")
    con = duckdb.connect()
    con.execute(f"CREATE VIEW o AS SELECT * FROM read_parquet('{path}')")
    assert a.rows == con.execute(text).fetchall() and a.rows[0][0] == 2**64 - 1 and a.rows[0][3] == "10000-01-01"
    assert [str(ty) for _, ty in a.result.columns] == ["UBIGINT", "TINYINT[]", "INTERVAL", "DATE"]
    assert a.arrow().equals(duck_arrow(con, text))
    assert json.loads(a.to_json())["types"] == ["UBIGINT", "TINYINT[]", "INTERVAL", "DATE"]
    t.close()


def test_json_holds_no_double_json_cannot_hold(tmp_path):
    """NaN and infinities (DuckDB's answer over a double column) are written as their names, quoted: JSON has no such
    number (json.dumps wrote NaN and Infinity, which strict parsers refuse)."""
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"f": pa.array([float("nan"), float("inf"), -float("inf"), 1.5])}), path)
    t = gquery.open(path)
    a = t.sql("SELECT MIN(f), MAX(f), MIN(f) FILTER (WHERE f < 0) FROM f", backend="duckdb")
    assert math.isnan(a.rows[0][1]) and a.rows[0][0] == -math.inf
    row = json.loads(a.to_json(), parse_constant=lambda c: pytest.fail(f"{c} is no JSON"))["rows"][0]
    assert row == ["-Infinity", "NaN", "-Infinity"]
    t.close()


def test_pandas_and_polars_where_installed_else_one_line(opened):
    t, _ = opened
    a = t.sql(named_sql("q6"), backend="cpu", check=False)
    for method, module in (("df", "pandas"), ("pl", "polars")):
        try:
            __import__(module)
        except ImportError:
            with pytest.raises(gquery.GqueryError, match=f"needs {module}.*pip install {module}"):
                getattr(a, method)()
            continue
        frame = getattr(a, method)()
        assert list(frame.columns) == a.columns and len(frame) == len(a.rows)


def test_df_is_duckdbs_df(tmp_path):
    """a.df() is typed as DuckDB's .df() types the same answer, value for value: an integer column with a NULL as
    pandas' nullable integers (as doubles, 2^63 - 1 was 2^63 and 2^53 + 1 was 2^53), DECIMAL as doubles, dates as
    datetime64 (one past 9999 too: it raised), a repeated name's second column x_1."""
    pytest.importorskip("pandas", reason="a.df() needs pandas")
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({
        "k": pa.array([1, 1, 2], pa.int32()), "x": pa.array([2**63 - 1, 2**53 + 1, None], pa.int64()),
        "d": pa.array([datetime.date(9999, 12, 31), datetime.date(2000, 1, 1), None], pa.date32()),
        "s": pa.array(["a", None, "é"]), "q": pa.array([Decimal("1.25"), None, Decimal("-3.10")], pa.decimal128(15, 2)),
        "u": pa.array([1, None, 255], pa.uint8())}), path)
    t = gquery.open(path)
    con = duckdb.connect()
    con.execute(f"CREATE VIEW r AS SELECT * FROM read_parquet('{path}')")
    for text in ("SELECT k, MAX(x), MIN(x), MIN(d), MAX(d + 1), MIN(s), SUM(q), MAX(u), COUNT(*) AS n, COUNT(x) AS N "
                 "FROM r GROUP BY k ORDER BY k",
                 "SELECT SUM(x), MIN(d), MAX(s), AVG(q) FROM r WHERE k > 5", "SELECT k, COUNT(*) FROM r WHERE k > 5 GROUP BY k",
                 "SELECT SUM(x + 1) AS big FROM r WHERE x > 10"):
        ours, theirs = t.sql(text, backend="cpu", check=False).df(), con.execute(text).df()
        assert list(map(str, ours.dtypes)) == list(map(str, theirs.dtypes)), text
        assert list(ours.columns) == list(theirs.columns), text
        assert str(ours.to_dict("list")) == str(theirs.to_dict("list")), text
    assert t.sql("SELECT MAX(x) FROM r WHERE k = 1", backend="cpu").df().iloc[0, 0] == 2**63 - 1
    t.close()


def test_df_makes_a_decimals_double_as_duckdb_does(tmp_path):
    """DECIMAL and HUGEINT in a.df() are the doubles DuckDB's .df() gives: the unscaled integer's double over 10^scale's
    (-0.393112680162482537 is -0.3931126801624826 there, one ulp from the double nearest it), widths 4 to 38."""
    import random

    pytest.importorskip("pandas", reason="a.df() needs pandas")
    rng = random.Random(7)
    kinds = [(4, 2), (9, 4), (18, 18), (18, 6), (28, 10), (38, 20), (38, 38)]  # (those past 18 digits unscaled within int64)
    columns = {f"c{k}": pa.array([Decimal(rng.randrange(-10**min(w, 18) + 1, 10**min(w, 18))).scaleb(-s) for _ in range(400)],
                                 pa.decimal128(w, s)) for k, (w, s) in enumerate(kinds)}
    columns["c2"] = pa.array([Decimal("-0.393112680162482537"), *columns["c2"].to_pylist()[1:]], pa.decimal128(18, 18))
    columns["g"] = pa.array(range(400), pa.int64())
    path = tmp_path / "dec.parquet"
    pq.write_table(pa.table(columns), path)
    con = duckdb.connect()
    con.execute(f"CREATE VIEW dec AS SELECT * FROM read_parquet('{path}')")
    text = ("SELECT g, " + ", ".join(f"MIN(c{k}), SUM(c{k})" for k in range(len(kinds))) +
            ", SUM(CAST(g AS HUGEINT) * 170141183460469231731687303715884105) FROM dec GROUP BY g ORDER BY g")
    ours, theirs = gquery.open(path).sql(text, backend="cpu", check=False).df(), con.execute(text).df()
    assert list(map(str, ours.dtypes)) == list(map(str, theirs.dtypes))
    assert ours.to_dict("list") == theirs.to_dict("list")
    assert ours.iloc[0, 5] == -0.3931126801624826


def test_df_of_an_infinite_date_is_one_line_as_duckdbs_raises(tmp_path):
    """DuckDB's infinite dates have no datetime64[us]: its .df() raises a conversion error, a.df() one GqueryError line
    (not pyarrow's), while the rows give them as DuckDB's client does."""
    pytest.importorskip("pandas", reason="a.df() needs pandas")
    days = pa.array([2**31 - 1, -(2**31 - 1), 0], pa.int32()).view(pa.date32())
    path = tmp_path / "inf.parquet"
    pq.write_table(pa.table({"d": days}), path)
    con = duckdb.connect()
    con.execute(f"CREATE VIEW inf AS SELECT * FROM read_parquet('{path}')")
    text = "SELECT MIN(d), MAX(d) FROM inf"
    a = gquery.open(path).sql(text, backend="cpu")
    assert a.rows == con.execute(text).fetchall()
    with pytest.raises(duckdb.ConversionException):
        con.execute(text).df()
    with pytest.raises(gquery.GqueryError, match=r"column min\(d\): a DATE past what pandas' datetime64\[us\] holds") as e:
        a.df()
    assert "\n" not in str(e.value)


def test_the_errors_a_user_acts_on_come_from_gquery(opened):
    t, _ = opened
    assert issubclass(gquery.UsageError, gquery.GqueryError) and issubclass(gquery.OutOfClass, gquery.GqueryError)
    with pytest.raises(gquery.UnknownName, match="unknown column l_nope"):
        t.sql("SELECT SUM(l_nope) FROM lineitem", backend="cpu")
    with pytest.raises(gquery.OutOfClass, match="a join"):
        t.sql("SELECT COUNT(*) FROM lineitem, lineitem l2", backend="cpu")
    with pytest.raises(AttributeError):
        gquery.NoSuchThing  # noqa: B018


def test_the_api_takes_every_backend_the_cli_takes(opened, sf001):
    """backend="duckdb": DuckDB alone over the table's files, any SQL it answers, typed as its cursor types it."""
    t, con = opened
    for text in (named_sql("q1"), "SELECT l_shipmode, COUNT(*) FROM lineitem WHERE l_comment LIKE '%fluffily%' "
                                  "GROUP BY 1 ORDER BY 1"):
        a = t.sql(text, backend="duckdb")
        assert a.backend == "duckdb" and a.rows == con.execute(text).fetchall() and len(a.times_ms) == 1
        assert a.arrow().schema == duck_arrow(con, text).schema
    assert t.sql(named_sql("q6"), backend="duckdb").rows == t.sql(named_sql("q6"), backend="cpu").rows
    with pytest.raises(gquery.UsageError, match="backend duckdb reads the table's files"):
        gquery.open(pq.read_table(sf001.files[0])).sql("SELECT COUNT(*) FROM lineitem", backend="duckdb")
    with pytest.raises(gquery.GqueryError, match="DuckDB failed"):
        t.sql("SELECT COUNT(*) FROM lineitem WHERE l_nope = 1", backend="duckdb")


def test_a_prepared_statement_binds_exact_parameters_and_says_what_is_wrong_in_one_line():
    import pyarrow as pa

    import gquery
    from gquery.parameters import ParameterError

    data = pa.table({"a": pa.array(range(1000), pa.int64()),
                     "d": pa.array([Decimal(i).scaleb(-2) for i in range(1000)], pa.decimal128(12, 2))})
    t = gquery.open(data, name="t")
    p = t.prepare("SELECT SUM(a), COUNT(*), MAX(d) FROM t WHERE a < ? AND d >= ?", backend="cpu")
    for z, low in ((10, Decimal("0")), (500, Decimal("2.50")), (-1, Decimal("0"))):
        assert p.run(z, low).rows == t.sql(f"SELECT SUM(a), COUNT(*), MAX(d) FROM t WHERE a < {z} AND d >= {low}",
                                           backend="cpu").rows
    assert p.run(10, Decimal(0), check=False).check is None  # this run's options over the statement's
    assert repr(p) == "Prepared('SELECT SUM(a), COUNT(*), MAX(d) FROM t WHERE a < ? AND d >= ?')"
    for bad, says in (((), "more ? than the 0"), ((1, 2, 3), "3 parameter(s) given for 2"), ((1.5, 1), "a float parameter")):
        with pytest.raises(ParameterError, match=re.escape(says)) as e:
            p.run(*bad)
        assert "\n" not in str(e.value)
    with pytest.raises(gquery.GqueryError, match="syntax error"):
        t.prepare("SELEC a FROM t WHERE a < ?")
    for clause, where in (("GROUP BY ? ORDER BY 1", "GROUP BY"), ("GROUP BY 1 ORDER BY ?", "ORDER BY"),
                          ("GROUP BY a, ? ORDER BY 1", "GROUP BY")):  # DuckDB refuses these (1 bound as a literal
        with pytest.raises(gquery.GqueryError, match=f"a parameter in {where}") as e:  # would be read as a position)
            t.prepare(f"SELECT a, COUNT(*) FROM t {clause}").run(1)
        assert "\n" not in str(e.value)
    assert t.prepare("SELECT a, COUNT(*) FROM t GROUP BY 1 ORDER BY 1 LIMIT ?").run(2).rows == [(0, 1), (1, 1)]
    for text in ("SELECT SUM(a) AS ? FROM t", "SELECT SUM(a) ? FROM t", "SELECT COUNT(*) FROM t AS ?", "SELECT COUNT(*) FROM t ?",
                 "SELECT MAX(CAST(a AS DECIMAL(?, 2))) FROM t", "SELECT MAX(a) FROM t WHERE a IS NOT ?",
                 "SELECT COUNT(*) FROM t WHERE a < 1 + INTERVAL ? DAY"):  # where DuckDB's grammar takes no parameter
        with pytest.raises(gquery.GqueryError, match='syntax error at or near "\\?"') as e:
            t.prepare(text)
        assert "\n" not in str(e.value)
    t.close()
    with pytest.raises(gquery.GqueryError, match="closed"):
        p.run(1, Decimal(0))


def test_a_parameter_is_bound_by_its_value_and_tested_as_duckdb_tests_it():
    """An int subclass (an IntEnum's member, one with a __str__ of its own) is bound by its value, not its text; `? IS
    NULL` tests the parameter, as DuckDB does (`x IS ?` it refuses); a string DuckDB cannot encode, and numbered
    parameters ($1, ?1), are one line each."""
    import enum

    import duckdb

    from gquery.parameters import ParameterError

    class Spelled(int):
        def __str__(self) -> str:
            return "12"

    class Key(int, enum.Enum):
        FIVE = 5

    data = pa.table({"k": pa.array([1, 2, 3, None, 5, 6], pa.int64())})
    t, con = gquery.open(data, name="t"), duckdb.connect()
    con.register("t", data)
    for text, value in (("SELECT COUNT(*) FROM t WHERE k < ?", Spelled(2)), ("SELECT COUNT(*) FROM t WHERE k < ?", Key.FIVE),
                        ("SELECT COUNT(*) FROM t WHERE ? IS NULL", None), ("SELECT COUNT(*) FROM t WHERE ? IS NULL", 1),
                        ("SELECT SUM(k) FROM t WHERE ? IS NOT NULL AND k > 2", 7)):
        assert t.prepare(text).run(value, backend="cpu").rows == con.execute(text, [value]).fetchall()
    for text, value, says in (("SELECT COUNT(*) FROM t WHERE k > ?1", 1, "a numbered parameter (?1) is not taken"),
                              ("SELECT COUNT(*) FROM t WHERE k > $1", 1, "a numbered parameter ($1) is not taken"),
                              ("SELECT COUNT(*) FROM t WHERE k > ? AND k < :lim", 1, "a named parameter (:lim) is not taken"),
                              ("SELECT COUNT(*) FROM t WHERE CAST(k AS VARCHAR) = ?", "\ud800", "not UTF-8")):
        with pytest.raises(ParameterError, match=re.escape(says)) as e:
            t.prepare(text).run(value, backend="cpu")
        assert "\n" not in str(e.value)


def test_a_date_parameter_is_bound_by_its_value_and_a_deep_statement_prepared_is_one_line():
    """A date or datetime subclass is bound by its value, not by its own isoformat(); a timestamp with nanoseconds
    (pandas') is refused, no TIMESTAMP holds them; a statement nested deeper than Python's default recursion is
    prepared as sql() parses it, and one past gquery's depth is one line; an option sql() does not take is said at
    prepare, not at the first run."""
    import duckdb

    from gquery.parameters import ParameterError, literal

    class Shown(datetime.date):
        def isoformat(self) -> str:
            return "2020-01-01"

    class ShownAt(datetime.datetime):
        def isoformat(self, sep="T", timespec="auto") -> str:
            return "2020-01-01 00:00:00"

    data = pa.table({"k": pa.array([1, 2, 3], pa.int64()),
                     "day": pa.array([datetime.date(1994, 1, 1), datetime.date(1996, 1, 1), datetime.date(2000, 1, 1)])})
    t, con = gquery.open(data, name="t"), duckdb.connect()
    con.register("t", data)
    text = "SELECT COUNT(*), SUM(k) FROM t WHERE day <= ?"
    assert t.prepare(text).run(Shown(1995, 1, 1), backend="cpu").rows == con.execute(text, [Shown(1995, 1, 1)]).fetchall() \
        == [(1, 1)]
    assert literal(ShownAt(1995, 1, 1, 6, 30)) == "TIMESTAMP '1995-01-01 06:30:00'"

    class Nanos(datetime.datetime):
        nanosecond = 5

    with pytest.raises(ParameterError, match="nanoseconds") as e:
        literal(Nanos(2020, 1, 1))
    assert "\n" not in str(e.value)
    nested = "SELECT SUM(" + "(" * 41 + "k + ?" + ")" * 41 + ") FROM t"
    assert t.prepare(nested).run(1, backend="cpu").rows == [(9,)]
    with pytest.raises(gquery.GqueryError, match="deeper than gquery walks them") as e:
        t.prepare("SELECT SUM(" + "(" * 3000 + "k + ?" + ")" * 3000 + ") FROM t")
    assert "\n" not in str(e.value)
    with pytest.raises(gquery.GqueryError, match=r"unknown option\(s\) foo") as e:
        t.prepare("SELECT SUM(k) FROM t WHERE k < ?", foo=1)


@pytest.mark.parametrize("call, says", [
    (lambda g, t: t.sql("SELECT SUM(a) FROM t", mode=None), "mode must be one of"),
    (lambda g, t: t.sql("SELECT SUM(a) FROM t", backend="cpu", check="no"), "check must be True or False"),
    (lambda g, t: t.sql("SELECT SUM(a) FROM t", backend="cpu", warmup=None), "warmup must be True or False"),
    (lambda g, t: t.sql("SELECT SUM(a) FROM t", backend="cpu", gpus="x"), "must be a positive integer or all"),
    (lambda g, t: t.sql("SELECT SUM(a) FROM t", backend="cpu", repeat=2.5), "repeat must be at least 1"),
    (lambda g, t: t.sql(b"SELECT 1"), "SQL must be text"),
    (lambda g, t: g.open(5), "a table is opened from a path"),
    (lambda g, t: g.open(pa.table({"a": [1]}), pinned="x"), "pinned must be True, False or None"),
    (lambda g, t: g.connect(5), "a table is opened from a path"),
    (lambda g, t: t.query("3"), "Z must be an integer"),
])
def test_an_api_argument_of_the_wrong_type_is_one_line(call, says):
    t = gquery.open(pa.table({"a": pa.array([1, 2, 3], pa.int64())}), name="t")
    with pytest.raises(gquery.GqueryError, match=re.escape(says)) as e:
        call(gquery, t)
    assert "\n" not in str(e.value)
