"""Random SQL of the selection+aggregate class over TPC-H lineitem, for comparing with DuckDB.

Every query this writes is in the class (sql.parse must accept it) and stays inside DuckDB's
DECIMAL(18) multiplication on TPC-H's value ranges, so DuckDB answers it. Its ORDER BY, where there
is one, orders the rows totally (every group column is a key), so that LIMIT picks the same rows
on both sides and ordered answers compare row by row.

Most queries group by at most two of GROUPS' small keys, under a WHERE of comparisons, BETWEEN and
short IN lists over NUMBERS, STRINGS and dates (and two columns compared: dates, numbers, strings, and
IN lists holding a column),
under AND/OR/NOT two levels deep. The class's edges
are drawn at modest rates, each independently of the others, so the rest stays as it was:

- IS [NOT] NULL (NULL_TEST, of each atom of a predicate: about 10% of queries), of a numeric, date or
  string column or of arithmetic over them (for the tests' designs with NULLs in most columns);
- wide groups (WIDE_GROUPS of queries): GROUP BY l_orderkey or l_partkey (WIDE), alone or with one
  small key, half of them ORDER BY an aggregate DESC then every group column, LIMIT 1..12, the rest
  unordered and unlimited;
- a long IN list (LONG_IN of queries): l_partkey or l_orderkey [NOT] IN 50..2,000 distinct integers
  about their SF 0.01 ranges (1..2,000 and 1..60,000) or ten times as wide, sometimes with a NULL;
- one deep or long expression (DEEP of queries, a quarter each): a comparison inside 20..60 nested
  parentheses, 10..30 nested NOTs, an AND/OR of 50..300 comparisons, or a sum of 20..100 terms of
  DECIMAL(15,2) columns, small constants and l_quantity * l_discount in an aggregate (or, one time
  in four, compared in WHERE): + widens DuckDB's DECIMAL one digit a term up to DECIMAL(38), and
  nothing wide is multiplied, so DuckDB never refuses it for overflow.

COLUMNS is every column the queries read (what the tests load). A query's constants stay few enough
for a GPU kernel's parameters: an IN list past 16 values is a sorted set in memory, not parameters,
and the AND/OR's comparisons take one constant each (at most 300). A long edge's many draws come from
a generator of its own seeded by one draw (bulk), so a Hypothesis random (st.randoms) stays inside
its 8 KB of recorded choices. Past about 45 nested parentheses the parser recurses deeper than the
interpreter's default 1,000 frames: call sql.parse and the engines under errors.deep_expressions, as
the API's entry points do.
"""

from __future__ import annotations

import random

NUMBERS = {  # column: literals of several scales around its TPC-H values
    "l_quantity": ["1", "24", "25.5", "50", "0", "51", "10.00", "24.001"],
    "l_extendedprice": ["900", "1000.5", "25000", "50000.25", "104949.50", "105000"],
    "l_discount": ["0", "0.01", "0.05", "0.055", "0.060", "0.1", "0.07"],
    "l_tax": ["0", "0.02", "0.04", "0.045", "0.08", "1"],
    "l_suppkey": ["-5", "1", "30", "50", "99.5", "100", "110"],
}
STRINGS = {
    "l_returnflag": ["A", "N", "R", "B", "", "Z", "AA"],
    "l_linestatus": ["F", "O", "G", "A"],
    "l_shipmode": ["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK", "REG", "ZZ"],
}
DATES = ["1992-01-02", "1993-06-30", "1994-01-01", "1995-03-15", "1996-12-31", "1998-08-02", "1998-12-01"]
GROUPS = ["l_returnflag", "l_linestatus", "l_shipmode", "l_quantity", "l_suppkey", "l_shipdate", "l_tax"]
WIDE = {  # wide keys: their literals, and (their SF 0.01 range's top, ten times it) for long IN lists
    "l_orderkey": (["0", "1", "7", "30000", "59999.5", "60000", "600001"], (60_000, 600_000)),
    "l_partkey": (["0", "1", "2", "1000", "1999", "2000", "20001"], (2_000, 20_000)),
}
SMALL_GROUPS = ["l_returnflag", "l_linestatus", "l_shipmode", "l_tax"]  # a wide key's companion
COLUMNS = sorted({*GROUPS, *NUMBERS, *STRINGS, *WIDE, "l_shipdate", "l_commitdate"})  # every column read
COMPARE = ["<", "<=", ">", ">=", "=", "<>"]

NULL_TEST = 0.05  # an atom of a predicate is IS [NOT] NULL
WIDE_GROUPS = 0.10  # a query grouped by a wide key
LONG_IN = 0.08  # a query whose WHERE holds a long IN list
DEEP = 0.12  # a query with one deep or long expression (DEEP_FORMS, equally)
DEEP_FORMS = ("parentheses", "nots", "and/or", "sum")
SUM_TERMS = {  # a long sum's terms (DECIMAL(15,2) columns, small constants, one small product): each one's mean
    "l_quantity": 25.5, "l_extendedprice": 38_000, "l_discount": 0.05, "l_tax": 0.04, "1": 1, "0.5": 0.5, "2": 2,
    "l_quantity * l_discount": 1.3,
}


def numeric_expression(rng: random.Random) -> str:
    """An argument of SUM/AVG/MIN/MAX whose DuckDB type DuckDB multiplies without overflow."""
    small = ["l_quantity", "l_discount", "l_tax"]
    return rng.choice([
        lambda: rng.choice([*NUMBERS]),
        lambda: f"{rng.choice(small)} * {rng.choice([*NUMBERS])}",
        lambda: "l_extendedprice * (1 - l_discount) * (1 + l_tax)",
        lambda: f"l_quantity * {rng.choice(small)} * {rng.choice(small)}",
        lambda: f"{rng.choice([*NUMBERS])} + {rng.choice(['1', '0.5', '-2', '0.001'])}",
        lambda: f"{rng.choice(['1', '2.5', '100'])} - {rng.choice(small)}",
        lambda: f"{rng.choice([*NUMBERS])} - {rng.choice(small)}",
        lambda: f"-{rng.choice([*NUMBERS])}",
        lambda: f"CAST({rng.choice(small)} AS DECIMAL(18,3))",
        lambda: "(l_quantity + l_tax) * l_discount",
        lambda: f"l_suppkey * {rng.choice(['2', 'l_suppkey', '3'])}",
        lambda: "l_extendedprice * 0.06",
    ])()


def aggregate(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.15:
        return "count(*)"
    if kind < 0.25:
        return f"count({rng.choice([*NUMBERS, 'l_shipdate', 'l_returnflag'])})"
    if kind < 0.35:
        return f"{rng.choice(['min', 'max'])}({rng.choice(['l_shipdate', 'l_shipdate + 1', 'l_shipdate - 30', 'l_shipmode', 'l_returnflag'])})"
    return f"{rng.choice(['sum', 'avg', 'avg', 'min', 'max'])}({numeric_expression(rng)})"


def bulk(rng: random.Random) -> random.Random:
    """A generator of its own for a long edge's many draws, seeded by one draw of rng: a Hypothesis random
    records each draw as a choice (8 KB of them at most), which 2,000 keys or 300 comparisons would pass."""
    return random.Random(rng.getrandbits(64))


def long_sum(rng: random.Random) -> tuple[str, float]:
    """A sum of 20..100 terms, some subtracted, and about its mean over lineitem's rows."""
    rng = bulk(rng)
    terms = [rng.choice([*SUM_TERMS]) for _ in range(rng.randint(20, 100))]
    signs = [1] + [rng.choice([1, 1, -1]) for _ in terms[1:]]
    text = terms[0] + "".join(f" {'+' if s > 0 else '-'} {t}" for s, t in zip(signs[1:], terms[1:]))
    return text, sum(s * SUM_TERMS[t] for s, t in zip(signs, terms))


def null_test(rng: random.Random) -> str:
    """IS [NOT] NULL of a column the queries read, or of arithmetic over such columns."""
    subject = rng.choice([*NUMBERS, *WIDE, *STRINGS, "l_shipdate", "l_commitdate", "l_quantity + l_tax",
                          "(l_extendedprice * (1 - l_discount))", "l_shipdate + 10", "-l_discount", "l_suppkey * 2"])
    return f"{subject} IS {rng.choice(['', 'NOT '])}NULL"


def comparison(rng: random.Random) -> str:
    if rng.random() < NULL_TEST:
        return null_test(rng)
    kind = rng.random()
    if kind < 0.3:
        column = rng.choice([*NUMBERS])
        value = rng.choice(NUMBERS[column])
        return rng.choice([f"{column} {rng.choice(COMPARE)} {value}", f"{value} {rng.choice(COMPARE)} {column}"])
    if kind < 0.4:
        column = rng.choice([*NUMBERS])
        low, high = sorted(rng.sample(NUMBERS[column], 2), key=float)
        return f"{column} {rng.choice(['', 'NOT '])}BETWEEN {low} AND {high}"
    if kind < 0.5:
        column = rng.choice([*NUMBERS])
        values = ", ".join(rng.sample(NUMBERS[column], rng.randint(1, 3)))
        return f"{column} {rng.choice(['', 'NOT '])}IN ({values})"
    if kind < 0.7:
        date = rng.choice(DATES)
        bound = rng.choice([f"DATE '{date}'", f"'{date}'",
                            f"DATE '{date}' {rng.choice('+-')} INTERVAL '{rng.randint(0, 400)}' DAY",
                            f"DATE '{date}' + INTERVAL '{rng.randint(-3, 13)}' MONTH", f"DATE '{date}' - INTERVAL {rng.randint(0, 13)} MONTH",
                            f"DATE '{date}' + INTERVAL '1' YEAR", f"TIMESTAMP '{date} {rng.randint(0, 23):02d}:30:00'",
                            f"DATE '{date}' + {rng.randint(-5, 5)}"])
        column = rng.choice(["l_shipdate", "l_shipdate", "l_shipdate + 10"])
        return f"{column} {rng.choice(COMPARE)} {bound}"
    if kind < 0.85:
        column = rng.choice([*STRINGS])
        if rng.random() < 0.3:
            values = ", ".join(f"'{v}'" for v in rng.sample(STRINGS[column], rng.randint(1, 3)))
            return f"{column} {rng.choice(['', 'NOT '])}IN ({values})"
        return f"{column} {rng.choice(COMPARE)} '{rng.choice(STRINGS[column])}'"
    return rng.choice(["l_discount > l_tax", "l_quantity * l_discount < 1.5", "l_tax + l_discount >= 0.1",
                       "l_extendedprice * (1 - l_discount) > 30000", "l_shipdate < l_commitdate",
                       "l_returnflag < l_linestatus", "l_shipmode >= l_returnflag", "l_linestatus <> l_returnflag",
                       "l_returnflag IN (l_linestatus, 'A')", "l_tax NOT IN (l_discount, 0.02)",
                       "l_shipdate IN (l_commitdate, DATE '1995-03-15')"])


def simple_comparison(rng: random.Random, op: str) -> str:
    """A column compared with one constant (`op` mostly, any other sometimes), or IS [NOT] NULL: an atom of
    a long AND/OR, one kernel parameter at most."""
    op = op if rng.random() < 0.7 else rng.choice(COMPARE)
    kind = rng.random()
    if kind < 0.1:
        return null_test(rng)
    if kind < 0.45:
        column = rng.choice([*NUMBERS])
        return f"{column} {op} {rng.choice(NUMBERS[column])}"
    if kind < 0.55:
        column = rng.choice([*WIDE])
        return f"{column} {op} {rng.choice(WIDE[column][0])}"
    if kind < 0.75:
        return f"l_shipdate {op} DATE '{rng.choice(DATES)}'"
    column = rng.choice([*STRINGS])
    return f"{column} {op} '{rng.choice(STRINGS[column])}'"


def long_in(rng: random.Random) -> str:
    """A wide key [NOT] IN 50..2,000 distinct integers (log-uniform count), sometimes with a NULL among them."""
    rng = bulk(rng)
    column = rng.choice([*WIDE])
    high = rng.choice(WIDE[column][1]) + 100
    values = [str(v) for v in rng.sample(range(1, high + 1), int(50 * 40 ** rng.random()))]
    if rng.random() < 0.1:
        values.insert(rng.randrange(len(values) + 1), "NULL")
    return f"{column} {'NOT ' if rng.random() < 0.3 else ''}IN ({', '.join(values)})"


def deep_predicate(rng: random.Random, form: str) -> str:
    rng = bulk(rng)
    if form == "parentheses":
        depth = rng.randint(20, 60)
        return "(" * depth + comparison(rng) + ")" * depth
    if form == "nots":
        nots = [rng.random() < 0.5 for _ in range(rng.randint(10, 30))]  # each NOT (...) or a bare NOT
        return "".join("NOT (" if p else "NOT " for p in nots) + comparison(rng) + ")" * sum(nots)
    if form == "and/or":
        joiner = rng.choice(["AND", "AND", "OR", "mixed"])
        atoms = [simple_comparison(rng, {"AND": "<>", "OR": "="}.get(joiner, rng.choice(COMPARE)))
                 for _ in range(rng.randint(50, 300))]
        return "(" + atoms[0] + "".join(f" {rng.choice(['AND', 'OR']) if joiner == 'mixed' else joiner} {a}"
                                        for a in atoms[1:]) + ")"
    text, mean = long_sum(rng)  # the sum: compared about its mean
    return f"{text} {rng.choice(COMPARE)} {round(mean * rng.choice([0.5, 1, 1, 2]))}"


def predicate(rng: random.Random, depth: int = 0) -> str:
    kind = rng.random()
    if depth >= 2 or kind < 0.5:
        return comparison(rng)
    if kind < 0.65:
        return f"NOT ({predicate(rng, depth + 1)})"
    joiner = " AND " if kind < 0.85 else " OR "
    return "(" + joiner.join(predicate(rng, depth + 1) for _ in range(rng.randint(2, 3))) + ")"


def joined(rng: random.Random, where: str | None, extra: str) -> str:
    """`extra` alone, or AND/OR the rest of a WHERE."""
    if where is None:
        return extra
    first, second = (where, extra) if rng.random() < 0.5 else (extra, where)
    return f"({first}) {rng.choice(['AND', 'AND', 'OR'])} ({second})"


def query(rng: random.Random) -> str:
    wide = rng.random() < WIDE_GROUPS
    deep = rng.choice(DEEP_FORMS) if rng.random() < DEEP else None
    if deep == "sum" and rng.random() < 0.25:
        deep = "sum in WHERE"
    if wide:
        groups = [rng.choice([*WIDE])] + rng.sample(SMALL_GROUPS, rng.choice([0, 1]))
        rng.shuffle(groups)
    else:
        groups = rng.sample(GROUPS, rng.choice([0, 0, 1, 1, 2]))
    aggregates = [aggregate(rng) for _ in range(rng.randint(1, 4))]
    if deep == "sum":
        aggregates[rng.randrange(len(aggregates))] = f"{rng.choice(['sum', 'sum', 'avg', 'min', 'max'])}({long_sum(rng)[0]})"
    items = [(g, rng.random() < 0.2) for g in groups] + [(a, rng.random() < 0.3) for a in aggregates]
    rng.shuffle(items)
    select = ", ".join(f"{e} AS c{i}" if aliased else e for i, (e, aliased) in enumerate(items))
    sql = f"SELECT {select} FROM lineitem"
    where = predicate(rng) if rng.random() < 0.85 else None
    if rng.random() < LONG_IN:
        where = joined(rng, where, long_in(rng))
    if deep in ("parentheses", "nots", "and/or", "sum in WHERE"):
        where = joined(rng, where, deep_predicate(rng, deep))
    if where is not None:
        sql += f" WHERE {where}"
    if groups:
        sql += " GROUP BY " + ", ".join(groups)
    positions = {e: i + 1 for i, (e, _) in enumerate(items)}
    if wide:  # the top groups by an aggregate, every group column after it: or every group, unordered
        if rng.random() < 0.5:
            keys = [rng.choice(aggregates), *rng.sample(groups, len(groups))]
            names = [str(positions[k]) if rng.random() < 0.5 else k for k in keys]
            directions = [" DESC" if rng.random() < 0.85 else rng.choice(["", " ASC"])] + \
                         [rng.choice(["", "", " ASC", " DESC"]) for _ in groups]
            sql += " ORDER BY " + ", ".join(n + d for n, d in zip(names, directions)) + f" LIMIT {rng.randint(1, 12)}"
    elif groups and rng.random() < 0.7:
        keys = list(groups)
        rng.shuffle(keys)
        if rng.random() < 0.4:
            keys.insert(0, rng.choice(aggregates))
        names = [str(positions[k]) if rng.random() < 0.5 else k for k in keys]
        sql += " ORDER BY " + ", ".join(f"{n}{rng.choice(['', ' DESC', ' ASC'])}" for n in names)
        if rng.random() < 0.5:
            sql += f" LIMIT {rng.randint(0, 12)}"
    elif not groups and rng.random() < 0.2:
        sql += f" ORDER BY 1 LIMIT {rng.randint(0, 2)}"
    return sql
