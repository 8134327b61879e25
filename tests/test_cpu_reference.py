"""The CPU reference against DuckDB on the same SQL over the same data: random queries of the class on
TPC-H SF 0.01 split into parts (querygen's, reaching the class's edges at modest rates: IS [NOT] NULL,
GROUP BY l_orderkey or l_partkey with its top groups by an aggregate, IN lists of up to 2,000 keys,
20..60 nested parentheses, 10..30 nested NOTs, an AND/OR of up to 300 comparisons, a sum of up to 100
terms), and hand-made tables at the edges of int64 where DuckDB overflows and plain Python integers
are the oracle."""

import datetime
from decimal import Decimal
from fractions import Fraction

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import with_nulls

from gquery.bench import querygen
from gquery.cpu import evaluate
from gquery.errors import deep_expressions
from gquery.query import And, Cast, Column, Compare, InList, Literal, Negate, Not, Or, Query, scale_of
from gquery.reference import DuckDBTable
from gquery.result import Partial, finalize, initial_state, same
from gquery.schema import engine_values, read_schema
from gquery.sql import named_sql, parse

COLUMNS = querygen.COLUMNS  # what querygen's queries read


def engine_part(table: pa.Table, schema) -> tuple[dict, dict, dict]:
    """One part as the engines hold it: int64 columns, this part's own dictionaries, and the validity of each
    column with NULLs."""
    columns, dictionaries, valid = {}, {}, {}
    for name in table.column_names:
        columns[name], dictionary, valid[name] = engine_values(table[name], schema.types[name])
        if dictionary is not None:
            dictionaries[name] = dictionary
    return columns, dictionaries, valid


@pytest.fixture(scope="module")
def tpch(sf001):
    """SF 0.01 as three parts whose dictionaries differ (early shipments have no status 'O'), one of
    them empty, with DuckDB over a table of the same data and over the parquet file itself."""
    table = pq.read_table(sf001.files[0], columns=COLUMNS)
    table = table.cast(pa.schema([f.with_type(pa.large_string()) if pa.types.is_string_view(f.type) else f
                                  for f in table.schema]))  # pyarrow filters no string_view
    schema = read_schema(table.schema)
    early = pc.less(table["l_shipdate"], pa.scalar(datetime.date(1995, 1, 1), pa.date32()))
    parts = [engine_part(t, schema) for t in (table.filter(early), table.filter(pc.invert(early)), table.slice(0, 0))]
    assert parts[0][1]["l_linestatus"] != parts[1][1]["l_linestatus"]
    duck_table = DuckDBTable(sf001, COLUMNS, threads=2)
    files = duckdb.connect()
    files.execute(f"CREATE VIEW lineitem AS SELECT * FROM read_parquet({[str(f) for f in sf001.files]!r})")
    yield schema, parts, duck_table, files
    duck_table.close()
    files.close()


def answer(query: Query, parts) -> Partial:
    """The merged partial of every part, each crossing JSON as it would cross Dask."""
    merged = Partial.empty(query)
    for columns, dictionaries, valid in parts:
        merged.merge(Partial.from_json(evaluate(query, columns, dictionaries, valid).to_json()))
    return merged


@deep_expressions  # as the API's entry points walk a query: deep trees past the interpreter's 1,000 frames
def check_against_duckdb(sql: str, tpch) -> None:
    schema, parts, duck_table, files = tpch
    query = parse(sql, schema)
    merged = answer(query, parts)
    ours = finalize(query, merged)
    if duck_table is not None:
        theirs = duck_table.run_sql(sql, repeat=1, warmup=1)
        assert theirs.unavailable is None, theirs.unavailable
        assert ours.names == theirs.columns and [str(t) for _, t in ours.columns] == theirs.types
        assert same(ours, theirs.rows, ordered=bool(query.order_by)), (sql, ours.rows[:3], theirs.rows[:3])
    theirs = files.execute(sql).fetchall()
    assert same(ours, theirs, ordered=bool(query.order_by)), (sql, ours.rows[:3], theirs[:3])


@pytest.fixture(scope="module")
def nulled(sf001):
    """SF 0.01 with NULLs: every column querygen reads NULL at about one row in seven (l_tax at every row of
    the early part, l_returnflag at none), as three parts (one empty), and DuckDB over the same Arrow table."""
    table = pq.read_table(sf001.files[0], columns=COLUMNS)
    table = table.cast(pa.schema([f.with_type(pa.large_string()) if pa.types.is_string_view(f.type) else f
                                  for f in table.schema]))
    early = pc.less(table["l_shipdate"], pa.scalar(datetime.date(1995, 1, 1), pa.date32()))  # before its NULLs
    table = with_nulls(table, [n for n in table.column_names if n != "l_returnflag"], 7)
    schema = read_schema(table.schema)
    parts = [engine_part(t, schema) for t in (table.filter(early), table.filter(pc.invert(early)), table.slice(0, 0))]
    con = duckdb.connect()
    con.register("lineitem", table)
    yield schema, parts, None, con
    con.close()


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False))
def test_random_queries_over_nulls_agree_with_duckdb(nulled, rng):
    """querygen's random SQL of the class over columns with NULLs: predicates of three truth values (IS [NOT]
    NULL among them, and NULL in a long IN list), aggregates over the rows where their argument is not NULL
    (none: NULL, COUNT 0), NULL a group key of its own (l_orderkey's and l_partkey's too, ordered last)."""
    check_against_duckdb(querygen.query(rng), nulled)


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False))
def test_random_queries_agree_with_duckdb(tpch, rng):
    """querygen's random SQL of the class, its edges among it (wide groups of some 15,000 orders or 2,000 parts,
    their top groups by an aggregate; long IN lists; deep and long expressions; IS NULL, false here)."""
    check_against_duckdb(querygen.query(rng), tpch)


NULL_ATOMS = ["l_quantity < {n}", "l_discount >= 0.0{d}", "l_returnflag = 'R'", "l_quantity = NULL", "NULL < l_discount",
              "l_quantity IS NULL", "l_tax IS NOT NULL", "l_quantity IN ({n}, NULL)", "l_quantity NOT IN ({n}, NULL)",
              "l_quantity BETWEEN NULL AND {n}", "l_quantity NOT BETWEEN NULL AND {n}", "l_quantity BETWEEN {n} AND NULL",
              "NULL", "NULL IS NULL", "NULL IS NOT NULL", "TRUE", "FALSE", "l_shipdate < NULL", "NULL IN (1, 2)",
              "l_returnflag IN ('A', NULL, 'N')"]


def null_predicate(rng, depth: int = 3) -> str:
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(NULL_ATOMS).format(n=rng.randint(1, 50), d=rng.randint(0, 9))
    kind = rng.choice(["AND", "OR", "NOT"])
    if kind == "NOT":
        return f"NOT ({null_predicate(rng, depth - 1)})"
    return f"({null_predicate(rng, depth - 1)}) {kind} ({null_predicate(rng, depth - 1)})"


@settings(max_examples=120, deadline=None)
@given(st.randoms(use_true_random=False))
def test_null_in_a_predicate_is_sqls_three_valued_logic(tpch, rng):
    """Comparisons with NULL, IS [NOT] NULL, NULL in IN lists and BETWEEN, under AND, OR and NOT: the rows
    DuckDB keeps (where the whole predicate is true), with and without groups."""
    where = null_predicate(rng)
    check_against_duckdb(f"SELECT count(*), sum(l_quantity) FROM lineitem WHERE {where}", tpch)
    check_against_duckdb(f"SELECT l_returnflag, count(*) FROM lineitem WHERE {where} GROUP BY 1 ORDER BY 1", tpch)


@settings(max_examples=120, deadline=None)
@given(st.randoms(use_true_random=False))
def test_three_valued_logic_over_columns_with_nulls(nulled, rng):
    """The same predicates over columns that hold NULLs: a comparison with a NULL value is unknown as one
    with NULL itself, IS NULL true there; grouped by a key that holds NULL too."""
    where = null_predicate(rng)
    check_against_duckdb(f"SELECT count(*), sum(l_quantity), count(l_tax) FROM lineitem WHERE {where}", nulled)
    check_against_duckdb(f"SELECT l_linestatus, count(*), min(l_shipdate) FROM lineitem WHERE {where} GROUP BY 1 "
                         f"ORDER BY 1", nulled)


@pytest.mark.parametrize("sql", [
    named_sql("mission", 30), named_sql("mission", -1), named_sql("mission", 2**40), named_sql("q1"), named_sql("q6"),
    "SELECT l_shipmode, avg(l_quantity * l_extendedprice * l_tax), min(l_shipdate), count(l_tax) FROM lineitem "
    "WHERE l_shipmode IN ('AIR', 'MAIL', 'NONE') OR l_returnflag > 'N' GROUP BY 1 ORDER BY 2 DESC, 1",
    "SELECT l_linestatus, l_returnflag, count(*) FROM lineitem WHERE l_linestatus >= 'G' AND l_returnflag < 'O' GROUP BY ALL",
    "SELECT sum(l_quantity), avg(l_quantity), min(l_tax) FROM lineitem WHERE FALSE",
    "SELECT l_returnflag, sum(l_quantity) FROM lineitem WHERE l_quantity < 0 GROUP BY 1",
    "SELECT count(*) FROM lineitem", "SELECT count(*) FROM lineitem LIMIT 0",
    # MIN and MAX of strings: each part's least or greatest code, as its own dictionary's string, across JSON
    "SELECT l_linestatus, min(l_shipmode), max(l_returnflag), max(l_linestatus) FROM lineitem GROUP BY 1 ORDER BY 1",
    "SELECT min(l_linestatus), max(l_shipmode) AS m FROM lineitem WHERE l_returnflag <> 'R'",
    # DuckDB pushes NOT down before it plans AVG: NOT BETWEEN proves l_discount non-NULL over parquet too
    "SELECT l_returnflag, avg(l_discount), count(*), count(*) FROM lineitem WHERE l_discount NOT BETWEEN 0 AND 0.05 "
    "GROUP BY l_returnflag ORDER BY 1",
    "SELECT l_returnflag, avg(l_discount), count(*) FROM lineitem WHERE NOT (l_discount < 0.06 AND l_quantity < 100) "
    "GROUP BY 1 ORDER BY 1",
    "SELECT l_returnflag, avg(l_discount), count(*) FROM lineitem WHERE NOT (NOT l_discount > 0.05) GROUP BY 1 ORDER BY 1",
])
def test_fixed_queries_agree_with_duckdb(tpch, sql):
    check_against_duckdb(sql, tpch)


@pytest.mark.parametrize("sql", [
    "SELECT l_shipmode, avg(l_discount), count(*) FROM lineitem GROUP BY l_shipmode",
    "SELECT l_quantity, avg(l_extendedprice), avg(l_tax) FROM lineitem GROUP BY l_quantity",
])
def test_avg_over_a_table_and_over_files(tpch, sql):
    """DuckDB computes these AVGs one way over a table (SUM/COUNT, its statistics proving the columns
    non-NULL) and another over parquet read in place; ours is one value, the exact mean rounded once,
    within one unit in the last place of either."""
    schema, parts, duck_table, files = tpch
    query = parse(sql, schema)
    merged = answer(query, parts)
    ours = finalize(query, merged)
    i = query.aggregates.index(query.outputs[1].expr)
    scale = 10 ** scale_of(query.aggregates[i].arg.type)
    assert sorted(row[1] for row in ours.rows) == \
        sorted(float(Fraction(s[i][0], s[i][1] * scale)) for s in merged.groups.values())
    assert same(ours, duck_table.run_sql(sql, repeat=1).rows, ordered=False)
    assert same(ours, files.execute(sql).fetchall(), ordered=False)


# --- an independent oracle: the same query on plain Python integers, row by row ---------------------------
def python_partial(query: Query, parts) -> Partial:
    partial = Partial.empty(query)
    for columns, dictionaries, _ in parts:  # no NULLs in these parts
        names = list(columns)
        for i in range(len(next(iter(columns.values()), []))):
            row = {n: int(columns[n][i]) for n in names}
            strings = {n: dictionaries[n][row[n]] for n in dictionaries}
            if query.where is not None and not holds(query.where, row, strings):
                continue
            partial.rows_selected += 1
            key = tuple(strings[c.name] if c.name in strings else row[c.name] for c in query.group_by)
            partial.add(key, [[1] if a.func == "count" else [value(a.arg, row), 1] for a in query.aggregates])
    if not query.group_by and () not in partial.groups:
        partial.add((), [initial_state(f) for f in partial.funcs])
    return partial


def value(e, row) -> int:
    if isinstance(e, Column):
        return row[e.name]
    if isinstance(e, Literal):
        return int(e.value)
    if isinstance(e, Negate):
        return -value(e.arg, row)
    if isinstance(e, Cast):
        return value(e.arg, row) * 10 ** (scale_of(e.type) - scale_of(e.arg.type))
    s = scale_of(e.type)
    a, b = value(e.left, row), value(e.right, row)
    if e.op == "*":
        return a * b
    a, b = a * 10 ** (s - scale_of(e.left.type)), b * 10 ** (s - scale_of(e.right.type))
    return a + b if e.op == "+" else a - b


def holds(p, row, strings) -> bool:
    if isinstance(p, And):
        return all(holds(a, row, strings) for a in p.args)
    if isinstance(p, Or):
        return any(holds(a, row, strings) for a in p.args)
    if isinstance(p, Not):
        return not holds(p.arg, row, strings)
    if isinstance(p, Literal):
        return p.value
    if isinstance(p, InList):
        return any(holds(Compare("=", p.arg, v), row, strings) for v in p.values) != p.negated
    if p.left.type.name == "VARCHAR":
        a, b = strings[p.left.name], p.right.value
    else:
        s = max(scale_of(p.left.type), scale_of(p.right.type))
        a = value(p.left, row) * 10 ** (s - scale_of(p.left.type))
        b = value(p.right, row) * 10 ** (s - scale_of(p.right.type))
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "=": a == b, "<>": a != b}[p.op]


# --- hand-made tables at the edges of int64 ----------------------------------------------------------------------
BIG = 2**63 - 1
EDGE_TABLES = {
    "empty": [],
    "one row": [("A", BIG, BIG, -BIG, BIG, 0)],
    "all equal": [("B", -BIG, -BIG, -BIG, -BIG, 3)] * 5,
    "extremes": [("A", BIG, BIG, BIG, 1, -1), ("B", -BIG - 1, -BIG, BIG, -1, 1), ("A", 0, 1, -1, 0, 2),
                 ("C", BIG // 3, BIG // 7, -(BIG // 5), BIG // 11, 7), ("B", -5, 12345, -67890, 10**18, -2)] * 3,
}
EDGE_QUERIES = [
    "SELECT sum(a * b * c), sum(a * b), count(*), min(a * b * c), max(-k) FROM t",
    "SELECT g, sum(k * k), max(k * k * k), min(a * b), sum(a + b + c) FROM t GROUP BY g ORDER BY g",
    "SELECT g, count(*), sum(c * c) FROM t WHERE a * b > 85070591730234615847396907784232501249 GROUP BY g",
    "SELECT sum(-k), min(-a), max(a - c), count(k), sum(k), sum(a) FROM t WHERE k > -9223372036854775808 AND k <> 0",
    "SELECT g, sum(k), sum(a), sum(b), count(*) FROM t GROUP BY g",
    "SELECT n, sum(a * 10000000000), avg(a), avg(k) FROM t WHERE a * c <= -1 OR c * 2 > 9223372036854775807 GROUP BY n",
    "SELECT sum(a::DECIMAL(38,5) * b), max(k::HUGEINT * 3) FROM t WHERE a IN (92233720368547758.07, 0, -0.01)",
    # scaled by 10^19 and past (no int64 holds the power), zeros among them: computed on Python integers
    "SELECT sum((k * 0)::DECIMAL(38,20)), sum(n * 0 + 0.0000000000000000001), max(n::DECIMAL(38,30)), count(*) FROM t "
    "WHERE k * 0 = 0.0000000000000000001 OR n >= -5",
]


def edge_table(rows) -> pa.Table:
    columns = list(zip(*rows)) if rows else [[]] * 6
    money = pa.decimal128(38, 2)
    return pa.table({"g": pa.array(columns[0], pa.string()), "k": pa.array(columns[1], pa.int64()),
                     "a": pa.array([Decimal(v).scaleb(-2) for v in columns[2]], money),
                     "b": pa.array([Decimal(v).scaleb(-2) for v in columns[3]], money),
                     "c": pa.array([Decimal(v).scaleb(-2) for v in columns[4]], money),
                     "n": pa.array(columns[5], pa.int64())})


def file_and_parts(tmp_path, table: pa.Table, split: int):
    """(schema, the table as two parts split at row `split`, DuckDB with a view t over it as a parquet file)."""
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    schema = read_schema(table.schema)
    con = duckdb.connect()
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{path}')")
    return schema, [engine_part(table.slice(0, split), schema), engine_part(table.slice(split), schema)], con


@pytest.mark.parametrize("name", list(EDGE_TABLES))
def test_edges_of_int64_are_exact(tmp_path, name):
    """Every query equals plain Python integers row by row, and DuckDB wherever it answers (where it
    does not, its DECIMAL(38) or int64 arithmetic overflowed)."""
    table = edge_table(EDGE_TABLES[name])
    schema, parts, con = file_and_parts(tmp_path, table, 1)
    for sql in EDGE_QUERIES:
        query = parse(sql.replace("FROM t", "FROM lineitem"), schema)
        ours = finalize(query, answer(query, parts))
        assert same(ours, finalize(query, python_partial(query, parts)).rows, ordered=True), sql
        try:
            theirs = con.execute(sql).fetchall()
        except (duckdb.OutOfRangeException, duckdb.ConversionException):
            continue
        assert same(ours, theirs, ordered=bool(query.order_by)), (sql, ours.rows, theirs)


def test_evaluate_checks_its_columns():
    schema = read_schema(pa.schema([("k", pa.int64()), ("g", pa.string())]))
    query = parse("SELECT g, sum(k) FROM lineitem GROUP BY g", schema)
    with pytest.raises(ValueError, match="missing"):
        evaluate(query, {"k": [1, 2]}, {})
    with pytest.raises(ValueError, match="dictionaries missing for the VARCHAR columns g"):
        evaluate(query, {"k": [1, 2], "g": [0, 0]}, {})
    with pytest.raises(ValueError, match="one length"):
        evaluate(query, {"k": [1, 2], "g": [0]}, {"g": ("a",)})
    count = parse("SELECT count(*) FROM lineitem", schema)
    assert evaluate(count, {"k": [5, 6, 7]}, {}).groups == {(): [[3]]}
    assert evaluate(query, {"k": [], "g": []}, {"g": ()}).groups == {}


def test_dates_past_pythons_years_are_duckdbs_text_and_sort_as_dates(tmp_path):
    """date32 holds years before 1 and after 9999, which Python's datetime.date does not: DuckDB's client
    gives them as text ('0902-02-05 (BC)', '10000-01-01'). A MIN over such a column raised OverflowError
    (a traceback from `gquery run`), and ORDER BY over them compared a date with a str; now each is
    DuckDB's value, and rows are ordered by the dates themselves."""
    days = [-2**20, -719_163, -719_162, 0, 2_932_896, 2_932_897, 2**22, 2**31 - 1, -(2**31 - 1)]
    table = pa.table({"d": pa.array(days, pa.date32()), "k": pa.array(range(len(days)), pa.int64())})
    schema, parts, con = file_and_parts(tmp_path, table, 4)
    for sql in ("SELECT MIN(d), MAX(d), COUNT(*) FROM t", "SELECT d, COUNT(*) FROM t GROUP BY d ORDER BY d",
                "SELECT d, SUM(k) FROM t GROUP BY d ORDER BY d DESC LIMIT 4", "SELECT k, MIN(d) FROM t GROUP BY k ORDER BY 2, 1",
                "SELECT MAX(d + 1000000), MIN(d - 1) FROM t WHERE d < DATE '1970-01-01' AND d > DATE '0001-01-01'"):
        query = parse(sql.replace("FROM t", "FROM lineitem"), schema)
        ours = finalize(query, answer(query, parts))
        theirs = con.execute(sql).fetchall()
        assert same(ours, theirs, ordered=bool(query.order_by)), (sql, ours.rows, theirs)
    assert {type(v) for row in con.execute("SELECT d FROM t").fetchall() for v in row} == {str, datetime.date}


def test_a_long_chain_is_bound_and_evaluated_in_one_pass_over_its_nodes(monkeypatch):
    """A SUM of 3,000 terms: the binder asks each node once whether it is an INTERVAL, and the CPU reference finds
    each node's exact range once (both asked again at every level of the chain: a SUM of 4,000 terms took 53 s), and
    the answer is the sum. The code generator's ranges share query.bounds' memo alike."""
    import gquery
    from gquery import query as query_module
    from gquery import sql

    n = 3000
    asked = {"interval": 0, "bounds": 0}
    interval_of, bounds = sql._Binder._interval_of, query_module.bounds

    def counted_interval(self, node):
        asked["interval"] += 1
        return interval_of(self, node)

    def counted_bounds(*args):
        asked["bounds"] += 1
        return bounds(*args)

    monkeypatch.setattr(sql._Binder, "_interval_of", counted_interval)
    monkeypatch.setattr(query_module, "bounds", counted_bounds)
    monkeypatch.setattr(__import__("gquery.cpu").cpu, "bounds", counted_bounds)
    t = gquery.open(pa.table({"g": pa.array([1, 2, None], pa.int32()), "d": pa.array([0, 1, 2], pa.date32())}), name="t")
    text = "SELECT SUM(" + " + ".join(["g"] * n) + ") FROM t WHERE d < DATE '1970-01-01' + INTERVAL '2' DAY"
    assert t.sql(text, backend="cpu", check=False).rows == [(3 * n,)]
    assert asked["interval"] <= 4 * n and 0 < asked["bounds"] <= 10 * n, asked
