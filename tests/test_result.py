"""Partials, the final answer, AVG as the correctly rounded exact mean, and comparing with DuckDB."""

import datetime
import math
import random
from decimal import Decimal
from fractions import Fraction

import duckdb
import pyarrow as pa
import pytest

from gquery.query import DOUBLE, SqlType, decimal, scale_of
from gquery.result import Partial, Result, compare, exact_mean, finalize, same, same_value
from gquery.schema import Schema
from gquery.sql import parse

# (DuckDB type, the largest unscaled value it holds)
AVG_TYPES = [("TINYINT", 127), ("SMALLINT", 2**15 - 1), ("INTEGER", 2**31 - 1), ("BIGINT", 2**63 - 1),
             ("HUGEINT", 2**127 - 1), ("DECIMAL(4,2)", 9999), ("DECIMAL(3,3)", 999), ("DECIMAL(9,4)", 10**9 - 1),
             ("DECIMAL(15,2)", 10**15 - 1), ("DECIMAL(18,4)", 10**18 - 1), ("DECIMAL(18,0)", 10**18 - 1),
             ("DECIMAL(38,0)", 10**38 - 1), ("DECIMAL(38,6)", 10**38 - 1), ("DECIMAL(38,20)", 10**38 - 1),
             ("DECIMAL(30,25)", 10**30 - 1), ("DECIMAL(38,37)", 10**38 - 1), ("DECIMAL(38,38)", 10**38 - 1)]
HUGE = 2**127 - 1  # a hugeint sum past it overflows in DuckDB
DECIMAL_SUM = 10**38 - 1  # and a DECIMAL sum past DECIMAL(38)


def sql_type(text: str) -> SqlType:
    if text.startswith("DECIMAL"):
        width, scale = map(int, text[8:-1].split(","))
        return decimal(width, scale)
    return SqlType(text)


def near_a_tie(rng: random.Random, rows: int, scale: int, limit: int) -> int:
    """A total whose average lies within a few 64-bit ulps of a double's rounding midpoint: where
    long double, double and exact division part ways."""
    top = min(limit * rows, HUGE).bit_length() - 1
    bits = rng.randint(max(20, top - 10), max(21, top))  # the long double rounds twice only past ~2^66
    mantissa = (rng.getrandbits(52) | (1 << 52)) * 2 + 1  # odd: a midpoint between two doubles
    midpoint = Fraction(mantissa) * Fraction(2) ** (bits - 54 - (rows * 10**scale).bit_length())
    return int(midpoint * rows * 10**scale) + rng.randint(-3, 3)


def avg_cases(rng: random.Random, limit: int, scale: int, most: int) -> list[tuple[int, int]]:
    """(total, rows) pairs with |total| <= most: random ones, extremes, ones near double midpoints."""
    cases = []
    for rows in (1, 1, 2, 3, 7, 10, 999):
        per_row = min(limit, most // rows)
        cases += [(rng.randint(-per_row, per_row) * rows, rows), (per_row * rows, rows), (-per_row * rows, rows)]
        cases += [(rng.randint(-per_row, per_row) + rng.randint(-per_row, per_row) * (rows - 1), rows) for _ in range(4)]
        cases += [(near_a_tie(rng, rows, scale, per_row) * rng.choice((1, -1)), rows) for _ in range(12)]
    return [(t, n) for t, n in cases if abs(t) <= min(limit, most // n) * n]


def rows_summing_to(total: int, rows: int) -> list[int]:
    quotient, remainder = divmod(total, rows)
    return [quotient + 1] * remainder + [quotient] * (rows - remainder)


def unscaled_text(value: int, scale: int) -> str:
    digits = str(abs(value)).rjust(scale + 1, "0")
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[:len(digits) - scale]}.{digits[len(digits) - scale:]}" if scale else f"{sign}{digits}"


@pytest.mark.parametrize("type_text, limit", AVG_TYPES)
def test_avg_is_the_exact_mean_and_duckdbs_within_one_ulp(type_text, limit):
    """Our AVG is the exact rational mean rounded once; DuckDB's (its native aggregate, and the
    SUM/COUNT its optimizer rewrites it to) is within one unit in the last place of it whatever its
    version, over totals chosen where the roundings part ways, and compare() counts where they differ."""
    t = sql_type(type_text)
    rng = random.Random(type_text)
    cases = avg_cases(rng, limit, scale_of(t), DECIMAL_SUM if t.is_decimal else HUGE)
    groups, values = [], []
    for g, (total, rows) in enumerate(cases):
        for v in rows_summing_to(total, rows):
            groups.append(g)
            values.append(unscaled_text(v, scale_of(t)))
    con = duckdb.connect()
    source = pa.table({"g": pa.array(groups, pa.int32()), "x": pa.array(values, pa.string())})
    con.register("source", source)
    con.execute(f"CREATE TABLE t AS SELECT g, CAST(x AS {type_text}) AS x FROM source")
    native = dict(con.execute("SELECT g, avg(x) FROM t GROUP BY g").fetchall())
    rewritten = {g: a for g, a, _ in con.execute("SELECT g, avg(x), sum(x) FROM t GROUP BY g").fetchall()}
    ours = Result([("g", SqlType("INTEGER")), ("avg", DOUBLE)],
                  [(g, exact_mean(total, rows, t)) for g, (total, rows) in enumerate(cases)])
    for g, (total, rows) in enumerate(cases):
        assert exact_mean(total, rows, t) == float(Fraction(total, rows * 10 ** scale_of(t))), (type_text, total, rows)
    for theirs in (native, rewritten):
        comparison = compare(ours, list(theirs.items()), ordered=False)
        assert comparison.equal, type_text
        differ = sum(exact_mean(total, rows, t) != theirs[g] for g, (total, rows) in enumerate(cases))
        assert comparison.last_place == differ
        assert (comparison.says("DuckDB") is None) == (differ == 0)


def test_exact_mean_rounds_once_half_to_even():
    assert exact_mean(2**53 + 1, 1, SqlType("BIGINT")) == 2.0**53  # a tie: to the even neighbour
    assert exact_mean(2**53 + 3, 1, SqlType("BIGINT")) == 2.0**53 + 4
    assert exact_mean(-(2**53 + 1), 1, SqlType("HUGEINT")) == -(2.0**53)
    assert exact_mean(5, 100, decimal(4, 2)) == 0.0005 and exact_mean(10, 200, SqlType("INTEGER")) == 0.05
    assert exact_mean(2**127 - 1, 1, SqlType("HUGEINT")) == 2.0**127
    for n in range(1, 200):
        assert exact_mean(1, n, SqlType("INTEGER")) == 1 / n
    with pytest.raises(ValueError):
        exact_mean(0, 0, SqlType("INTEGER"))


# --- partials -----------------------------------------------------------------------------------------------
SCHEMA = Schema({"l_returnflag": SqlType("VARCHAR"), "l_quantity": decimal(15, 2), "l_shipdate": SqlType("DATE"),
                 "l_suppkey": SqlType("BIGINT")}, {})


def partial(sql: str, groups: dict) -> tuple:
    q = parse(sql, SCHEMA)
    p = Partial.empty(q)
    for key, states in groups.items():
        p.add(key, states)
    return q, p


def test_partials_merge_in_any_order_and_cross_json():
    sql = "SELECT l_returnflag, l_suppkey, sum(l_quantity), avg(l_quantity), count(*), min(l_shipdate), max(l_suppkey) " \
          "FROM lineitem GROUP BY 1, 2"
    q, a = partial(sql, {("A", 7): [[5, 1], [5, 1], [1], [3, 1], [7, 1]]})
    _, b = partial(sql, {("A", 7): [[2**100, 2], [-3, 2], [2], [1, 2], [9, 2]], ("7", 7): [[1, 1], [1, 1], [1], [None, 0], [None, 0]]})
    _, c = partial(sql, {})
    ab = Partial.from_json(a.to_json()).merge(Partial.from_json(b.to_json())).merge(c)
    ba = Partial.from_json(b.to_json()).merge(a)
    assert ab.groups == ba.groups == {("A", 7): [[2**100 + 5, 3], [2, 3], [3], [1, 3], [9, 3]],
                                      ("7", 7): [[1, 1], [1, 1], [1], [None, 0], [None, 0]]}
    assert Partial.from_json(ab.to_json()) == ab and isinstance(ab.to_json()["groups"][0]["states"][0][0], str)
    _, other = partial("SELECT sum(l_quantity) FROM lineitem", {})
    with pytest.raises(ValueError):
        a.merge(other)


def test_empty_input_follows_sql():
    q, p = partial("SELECT sum(l_quantity), avg(l_quantity), count(*), min(l_shipdate), count(l_suppkey) FROM lineitem", {})
    result = finalize(q, p)
    assert result.rows == [(None, None, 0, None, 0)]
    assert result.columns == [("sum(l_quantity)", decimal(38, 2)), ("avg(l_quantity)", DOUBLE),
                              ("count_star()", SqlType("BIGINT")), ("min(l_shipdate)", SqlType("DATE")),
                              ("count(l_suppkey)", SqlType("BIGINT"))]
    grouped, nothing = partial("SELECT l_returnflag, sum(l_quantity) FROM lineitem GROUP BY 1", {})
    assert finalize(grouped, nothing).rows == []


def test_values_are_duckdbs_python_values():
    q, p = partial("SELECT l_shipdate, sum(l_quantity), max(l_suppkey), sum(l_suppkey), avg(l_quantity) FROM lineitem "
                   "GROUP BY 1", {(9131,): [[150, 2], [7, 2], [-9, 2], [150, 2]]})
    [row] = finalize(q, p).rows
    assert row == (datetime.date(1995, 1, 1), Decimal("1.50"), 7, -9, 0.75)
    assert str(row[1]) == "1.50" and type(row[3]) is int


def test_order_by_and_limit():
    sql = "SELECT l_returnflag, sum(l_quantity) AS s FROM lineitem GROUP BY 1 ORDER BY s DESC, l_returnflag LIMIT {}"
    groups = {("A",): [[5, 1]], ("B",): [[7, 1]], ("C",): [[5, 1]], ("D",): [[-1, 1]]}
    q, p = partial(sql.format(3), groups)
    assert finalize(q, p).rows == [("B", Decimal("0.07")), ("A", Decimal("0.05")), ("C", Decimal("0.05"))]
    q, p = partial(sql.format(0), groups)
    assert finalize(q, p).rows == []
    q, p = partial("SELECT l_returnflag, sum(l_quantity) AS s FROM lineitem GROUP BY 1 ORDER BY s", groups)
    assert [r[0] for r in finalize(q, p).rows] == ["D", "A", "C", "B"]  # stable: ties keep key order


def test_same_is_exact():
    ours = Result([("a", decimal(38, 2)), ("b", DOUBLE)], [(Decimal("1.50"), 0.1), (None, 2.0)])
    assert same(ours, [(None, 2.0), (Decimal("1.50"), 0.1)], ordered=False)
    assert not same(ours, [(None, 2.0), (Decimal("1.50"), 0.1)], ordered=True)
    assert not same(ours, [(Decimal("1.5"), 0.1), (None, 2.0)], ordered=True)  # same value, other digits
    assert not same(ours, [(Decimal("1.50"), 0.1 + 2**-52), (None, 2.0)], ordered=True)  # sixteen units apart
    assert not same(ours, [(Decimal("1.50"), 0.1)], ordered=False)
    assert not same_value(datetime.date(1995, 1, 1), datetime.datetime(1995, 1, 1))
    assert not same_value(1, True) and not same_value(1, 1.0) and same_value("A", "A")
    assert same(Result([("n", SqlType("BIGINT"))], [(1,), (1,), (2,)]), [(2,), (1,), (1,)], ordered=False)
    assert not same(Result([("n", SqlType("BIGINT"))], [(1,), (1,), (2,)]), [(2,), (2,), (1,)], ordered=False)


def test_compare_takes_a_double_one_unit_apart_and_says_so():
    ours = Result([("a", decimal(38, 2)), ("b", DOUBLE)], [(Decimal("1.50"), 0.1), (None, 2.0)])
    one_up = math.nextafter(0.1, 1.0)
    c = compare(ours, [(None, 2.0), (Decimal("1.50"), one_up)], ordered=False)
    assert c.equal and c.last_place == 1 and "1 double differs from DuckDB's" in c.says("DuckDB")
    assert compare(ours, ours.rows, ordered=True) == type(c)(True, 0) and compare(ours, ours.rows, True).says("x") is None
    assert not compare(ours, [(Decimal("1.50"), math.nextafter(one_up, 1.0)), (None, 2.0)], ordered=True).equal
    assert compare(ours, [(Decimal("1.50"), 0.1), (None, math.nextafter(2.0, 3.0))], ordered=False).last_place == 1
    assert not compare(Result([("n", SqlType("BIGINT"))], [(1,)]), [(2,)], ordered=True).equal  # integers are exact
    assert not compare(ours, [(Decimal("1.51"), 0.1), (None, 2.0)], ordered=True).equal


def test_unordered_rows_whose_doubles_differ_in_the_last_place_still_pair_up():
    """Rows compared as multisets pair by their exact values first: a double one unit lower on one side
    must not sort its row before another row whose double lies between (hypothesis found it: AVGs of
    dates' groups, 0.06 and 0.06000000000000001 straddling another group's 0.06)."""
    up = math.nextafter(0.06, 1.0)
    ours = Result([("a", SqlType("DOUBLE")), ("d", SqlType("BIGINT"))], [(0.06, 2), (up, 1)])
    assert compare(ours, [(up, 2), (up, 1)], ordered=False) == type(compare(ours, [], False))(True, 1)


def columnar(groups: dict, funcs: tuple, arrays: bool = False) -> "ColumnarPartial":
    """The groups as an engine reads them back: columns of keys and of each aggregate's state (`arrays`:
    int64 arrays where every value is an integer that fits, as the GPU's read-out gives them)."""
    import numpy as np

    from gquery.result import ColumnarPartial

    def column(values) -> list:
        fits = arrays and all(type(v) is int and -2**63 <= v < 2**63 for v in values)
        return np.array(values, dtype=np.int64) if fits else list(values)

    keys = [column(c) for c in zip(*groups)] if groups else []
    states = [[column(c) for c in zip(*(g[a] for g in groups.values()))] for a in range(len(funcs))]
    return ColumnarPartial(funcs, keys, states, len(groups), sum(g[0][-1] for g in groups.values()))


@pytest.mark.parametrize("every_key", [False, True], ids=["some-keys", "every-key"])
@pytest.mark.parametrize("arrays", [False, True], ids=["lists", "arrays"])
@pytest.mark.parametrize("seed", range(40))
def test_columns_of_groups_order_and_cut_as_the_groups_do(seed, arrays, every_key):
    """NumPy's order of a columnar partial (finalize's fast road) gives the rows the dict of groups gives:
    ties by the group key, descending and ascending, strings, sums past 64 bits, AVG's doubles, LIMIT,
    and a NULL (a state of no rows) sent to finalize's own loop. `every_key`: ORDER BY names every group
    column (no two groups tie, so the fast road adds no key of its own to break ties)."""
    rng = random.Random(seed)
    n = rng.choice([1, 2, 5, 40, 300])
    big = rng.random() < 0.3
    groups = {}
    while len(groups) < n:
        key = (rng.choice("ABCDEF"), rng.randint(-3, 3 if n < 100 else 60))
        rows = rng.randint(0 if rng.random() < 0.05 else 1, 4)
        total = rng.randint(-5, 5) * (2**70 if big and rng.random() < 0.5 else 1)
        low = rng.randint(-3, 3)
        groups[key] = [[total, rows], [total, rows], [rows], [low if rows else None, rows], [low if rows else None, rows]]
    order = rng.sample(["s", "a", "c", "mn", "mx", "l_returnflag", "l_suppkey"], rng.randint(0, 3))
    if every_key:  # both group columns and up to two aggregates, in any order
        order = ["l_returnflag", "l_suppkey", *rng.sample(["s", "a", "c", "mn", "mx"], rng.randint(0, 2))]
        rng.shuffle(order)
    text = ("SELECT l_returnflag, l_suppkey, sum(l_quantity) AS s, avg(l_quantity) AS a, count(*) AS c, "
            "min(l_suppkey) AS mn, max(l_suppkey) AS mx FROM lineitem GROUP BY 1, 2"
            + (" ORDER BY " + ", ".join(f"{o} {rng.choice(['ASC', 'DESC'])}" for o in order) if order else "")
            + (f" LIMIT {rng.randint(0, n + 2)}" if rng.random() < 0.6 else ""))
    q, p = partial(text, groups)
    want = finalize(q, p)
    got = finalize(q, columnar(groups, p.funcs, arrays))
    assert got.rows == want.rows and got.raw == want.raw, text
    assert [type(v) for r in got.raw for v in r] == [type(v) for r in want.raw for v in r]
    assert columnar(groups, p.funcs, arrays).groups == p.groups
    assert all(type(v) is int for states in columnar(groups, p.funcs, arrays).groups.values() for s in states
               for v in s if v is not None)


@pytest.mark.parametrize("arrays", [False, True], ids=["lists", "arrays"])
@pytest.mark.parametrize("seed", range(30))
def test_the_whole_tables_one_group_as_columns_gives_the_groups_row(seed, arrays):
    """Without GROUP BY, the one group read back as columns (finalize's road for it) gives the row the dict
    gives: sums past 64 bits, AVG, COUNT, MIN and MAX of no rows (NULL), ORDER BY and LIMIT (0: no row)."""
    rng = random.Random(seed)
    rows = rng.choice([0, 1, 7])
    total = rng.randint(-5, 5) * (2**70 if rng.random() < 0.3 else 1)
    low = rng.randint(-3, 3)
    groups = {(): [[total, rows], [total, rows], [rows], [low if rows else None, rows], [low if rows else None, rows]]}
    text = ("SELECT sum(l_quantity) AS s, avg(l_quantity) AS a, count(*) AS c, min(l_suppkey) AS mn, "
            "max(l_suppkey) AS mx FROM lineitem" + rng.choice(["", " ORDER BY 1", " ORDER BY c DESC"])
            + rng.choice(["", " LIMIT 0", " LIMIT 1", " LIMIT 5"]))
    q, p = partial(text, groups)
    want = finalize(q, p)
    got = finalize(q, columnar(groups, p.funcs, arrays))
    assert got.rows == want.rows and got.raw == want.raw and got.columns == want.columns, text
    assert [type(v) for r in got.raw for v in r] == [type(v) for r in want.raw for v in r]


@pytest.mark.parametrize("arrays", [False, True], ids=["lists", "arrays"])
@pytest.mark.parametrize("seed", range(30))
def test_columns_of_parts_add_by_key_as_the_groups_merge(seed, arrays):
    """Parts' columnar groups added by key with NumPy (a parted table's read-out) equal the dict merge:
    shared and lone keys, string keys, sums past 64 bits (added as Python integers), minima and maxima;
    a NULL state leaves the adding to merge()."""
    from gquery.result import ColumnarPartial

    rng = random.Random(seed)
    q = parse("SELECT l_returnflag, l_suppkey, sum(l_quantity), count(*), min(l_suppkey), max(l_suppkey), "
              "avg(l_quantity) FROM lineitem GROUP BY 1, 2", SCHEMA)
    funcs = Partial.empty(q).funcs
    wide = rng.random() < 0.3
    parts, want = [], Partial.empty(q)
    for _ in range(rng.randint(1, 5)):
        groups = {}
        for _ in range(rng.randint(1, 60)):
            rows = rng.randint(1, 9)
            total = rng.randint(-2**62, 2**62) * (2**8 if wide else 1) if rng.random() < 0.5 else rng.randint(-9, 9)
            low, high = sorted(rng.randint(-2**63, 2**63 - 1) for _ in range(2))
            groups[(rng.choice("ABC"), rng.randint(0, 12))] = [[total, rows], [rows], [low, rows], [high, rows],
                                                               [total, rows]]
        parts.append(columnar(groups, funcs, arrays))
        want.merge(Partial(funcs, dict(groups), sum(g[1][0] for g in groups.values())))
    got = ColumnarPartial.combine(parts)
    assert got.groups == want.groups and got.rows_selected == want.rows_selected
    assert all(type(v) is int for states in got.groups.values() for s in states for v in s)
    assert finalize(q, got).rows == finalize(q, want).rows
    nulls = {("A", 1): [[0, 0], [0], [None, 0], [None, 0], [0, 0]]}
    assert ColumnarPartial.combine([*parts, columnar(nulls, funcs)]) is None


def test_a_columnar_partial_merged_into_is_its_dict_from_then_on():
    """Adding another part into a partial read back as columns makes its groups the dict: finalize then
    answers the merged groups, not the columns it was read from."""
    q = parse("SELECT l_suppkey, count(*) AS c FROM lineitem GROUP BY 1 ORDER BY c DESC", SCHEMA)
    p = columnar({(1,): [[5]], (2,): [[3]]}, ("count",))
    p.merge(Partial(("count",), {(2,): [[4]], (3,): [[1]]}, 5))
    assert finalize(q, p).rows == [(2, 7), (1, 5), (3, 1)] and p.rows_selected == 13


@pytest.mark.parametrize("n", [1, 4, 256, 257, 3000])
def test_keys_rank_alike_by_pythons_sort_and_by_numpys(n):
    """result._sortable ranks a few keys (up to SMALL_RANKS) with Python's sort and more with np.unique: the
    same ranks either way, for strings (NUL, 4-byte UTF-8, prefixes), dates and decimals."""
    import numpy as np

    from gquery import result

    rng = random.Random(n)
    kinds = [lambda: rng.choice(["", "a", "ab", "b", "\x00", "é", "🙂", "Z"]) + rng.choice(["", "x", "\x00"]),
             lambda: datetime.date(rng.randint(1, 9999), rng.randint(1, 12), rng.randint(1, 28)),
             lambda: Decimal(rng.randint(-10**20, 10**20)).scaleb(-rng.randint(0, 3))]
    for draw in kinds:
        values = [draw() for _ in range(n)]
        want = np.unique(np.array(values, dtype=object), return_inverse=True)[1].astype(np.int64)
        assert result._sortable(values).tolist() == want.tolist()
