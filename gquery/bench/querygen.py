"""Random SQL of the selection+aggregate class over TPC-H lineitem, for comparing with DuckDB.

Every query this writes is in the class (sql.parse must accept it) and stays inside DuckDB's
DECIMAL(18) multiplication on TPC-H's value ranges, so DuckDB answers it. Its ORDER BY, where there
is one, orders the rows totally (every group column is a key), so that LIMIT picks the same rows
on both sides and ordered answers compare row by row.
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
COMPARE = ["<", "<=", ">", ">=", "=", "<>"]


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


def comparison(rng: random.Random) -> str:
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
                       "l_extendedprice * (1 - l_discount) > 30000", "l_shipdate < l_commitdate"])


def predicate(rng: random.Random, depth: int = 0) -> str:
    kind = rng.random()
    if depth >= 2 or kind < 0.5:
        return comparison(rng)
    if kind < 0.65:
        return f"NOT ({predicate(rng, depth + 1)})"
    joiner = " AND " if kind < 0.85 else " OR "
    return "(" + joiner.join(predicate(rng, depth + 1) for _ in range(rng.randint(2, 3))) + ")"


def query(rng: random.Random) -> str:
    groups = rng.sample(GROUPS, rng.choice([0, 0, 1, 1, 2]))
    aggregates = [aggregate(rng) for _ in range(rng.randint(1, 4))]
    items = [(g, rng.random() < 0.2) for g in groups] + [(a, rng.random() < 0.3) for a in aggregates]
    rng.shuffle(items)
    select = ", ".join(f"{e} AS c{i}" if aliased else e for i, (e, aliased) in enumerate(items))
    sql = f"SELECT {select} FROM lineitem"
    if rng.random() < 0.85:
        sql += f" WHERE {predicate(rng)}"
    if groups:
        sql += " GROUP BY " + ", ".join(groups)
    positions = {e: i + 1 for i, (e, _) in enumerate(items)}
    if groups and rng.random() < 0.7:
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
