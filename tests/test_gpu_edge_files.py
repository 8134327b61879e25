"""On a GPU host: hand-made lineitem files at the edges of their types, through the store to the fused
kernel, equal the CPU reference and, where DuckDB answers, DuckDB: decimals near 10^13 of DECIMAL(15,2)
and of DECIMAL(38,10), unsigned 32-bit keys up to 2^32 - 1, dates from 0001-01-01 to 9999-12-31 (date32
and date64), empty and non-ASCII strings, tables of 0, 1, 1023 and 1025 rows, every mode in turn."""

import datetime
from decimal import Decimal as D

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gquery import answer, sql, store
from gquery.gpu.codegen import NotOnGpu
from gquery.reference import DuckDBTable
from gquery.result import same
from gquery.tpch import find_lineitem

pytestmark = pytest.mark.gpu
MODES = ("pinned", "resident", "registered", "pageable")


def files() -> dict[str, pa.Table]:
    rng = np.random.default_rng(5)
    dates = [datetime.date(1, 1, 1), datetime.date(1969, 12, 31), datetime.date(1970, 1, 1), datetime.date(9999, 12, 31),
             datetime.date(1994, 6, 1)]
    extremes = pa.table({
        "l_suppkey": pa.array([-2**31, 0, 5, 2**31 - 1, -1], pa.int32()),
        "l_quantity": pa.array([D("-99999999999.99"), D("0.01"), D("99999999999.99"), D("0"), D("1.50")], pa.decimal128(15, 2)),
        "l_extendedprice": pa.array([D("9999999999999.99"), D("-9999999999999.99"), D("1"), D("0.01"), D("2")], pa.decimal128(15, 2)),
        "l_discount": pa.array([D("0.10"), D("0.00"), D("-0.05"), D("1.00"), D("0.07")], pa.decimal128(15, 2)),
        "l_shipdate": pa.array(dates, pa.date32()),
        "l_returnflag": pa.array(["A", "N", "R", "é", ""])})
    unsigned = pa.table({
        "l_suppkey": pa.array([0, 2**32 - 1, 2**31, 5, 2**31 - 1], pa.uint32()),
        "l_quantity": pa.array([D("1.00")] * 5, pa.decimal128(15, 2)),
        "l_extendedprice": pa.array([D("10.00"), D("20.00"), D("30.00"), D("40.00"), D("50.00")], pa.decimal128(15, 2)),
        "l_discount": pa.array([D("0.01")] * 5, pa.decimal128(15, 2)),
        "l_shipdate": pa.array([0, -400, 9000, 2**20, -2**20], pa.date32()),
        "l_returnflag": pa.array(["N"] * 5)})
    wide = pa.table({
        "l_suppkey": pa.array([1, 2, 3, 4], pa.int64()),
        "l_quantity": pa.array([D("1.0000000001"), D("-2.5"), D("922337203.6854775807"), D("-922337203.6854775808")],
                               pa.decimal128(38, 10)),
        "l_extendedprice": pa.array([D("1.00"), D("2.00"), D("3.00"), D("4.00")], pa.decimal128(15, 2)),
        "l_discount": pa.array([D("0.00"), D("0.05"), D("0.10"), D("0.02")], pa.decimal128(15, 2)),
        "l_shipdate": pa.array([0, -86_400_000 * 400, 86_400_000 * 9000, 86_400_000], pa.date64()),
        "l_returnflag": pa.array(["🙂", "A", "🙂", "a"])})
    out = {"extremes": extremes, "unsigned": unsigned, "wide": wide, "one": extremes.slice(3, 1), "empty": extremes.slice(0, 0)}
    for rows in (1023, 1025):  # a frame less one, a frame and one: a partial last frame
        out[f"rows{rows}"] = pa.table({
            "l_suppkey": pa.array(rng.integers(-128, 128, rows), pa.int8()),
            "l_quantity": pa.array([D(int(v)) for v in rng.integers(-9999, 10000, rows)], pa.decimal128(4, 0)),
            "l_extendedprice": pa.array([D(int(v)).scaleb(-2) for v in rng.integers(-10**15, 10**15, rows)], pa.decimal128(15, 2)),
            "l_discount": pa.array([D(int(v)).scaleb(-2) for v in rng.integers(0, 11, rows)], pa.decimal128(15, 2)),
            "l_shipdate": pa.array(rng.integers(-3000, 30000, rows).astype(np.int32), pa.date32()),
            "l_returnflag": pa.array(rng.choice(["A", "N", "R", "é"], rows))})
    return out


QUERIES = [
    "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < 3",
    "SELECT SUM(l_extendedprice * (1 - l_discount)), COUNT(*), AVG(l_quantity), MIN(l_shipdate), MAX(l_shipdate) FROM lineitem",
    "SELECT l_returnflag, SUM(l_quantity), COUNT(*), MIN(l_extendedprice) FROM lineitem GROUP BY l_returnflag ORDER BY l_returnflag",
    "SELECT MIN(l_suppkey), MAX(l_suppkey), SUM(l_suppkey), COUNT(*) FROM lineitem WHERE l_shipdate < DATE '1970-01-01'",
    "SELECT COUNT(*), SUM(l_extendedprice) FROM lineitem WHERE l_shipdate BETWEEN DATE '0001-01-01' AND DATE '1969-12-31' "
    "OR l_returnflag IN ('é', '🙂', '') OR l_suppkey > 2147483646",
    "SELECT l_shipdate, COUNT(*), MAX(l_quantity) FROM lineitem WHERE l_discount <= 0.05 GROUP BY l_shipdate ORDER BY 1 LIMIT 7",
    "SELECT SUM(l_quantity * l_extendedprice * l_discount) FROM lineitem WHERE NOT l_quantity > 0",
    # scales past 10^18 (no long long holds the power), over values and over zeros
    "SELECT SUM(CAST(l_suppkey AS DECIMAL(38,20))), SUM(l_discount * 0 + 0.0000000000000000001), COUNT(*) FROM lineitem "
    "WHERE l_quantity * 0 = 0.0000000000000000001 OR l_suppkey >= 0",
]


def stored(engine, folder, data: pa.Table) -> tuple:
    """A hand-made lineitem file in `folder`, through the store into the engine's memory, and DuckDB over it."""
    folder.mkdir()
    pq.write_table(data, folder / "lineitem.parquet")
    source = find_lineitem(folder)
    table = store.open_store(store.ensure_store(source, echo=lambda m: None), engine.memory)
    return table, DuckDBTable(source, list(table.columns), threads=2)


@pytest.fixture(scope="module")
def engine():
    from gquery.gpu.executor import Engine, close_last

    e = Engine()
    yield e
    close_last(e)


@pytest.mark.parametrize("name", list(files()))
def test_hand_made_files_equal_the_cpu_reference_and_duckdb(engine, tmp_path, name):
    table, duck = stored(engine, tmp_path / name, files()[name])
    on_gpu = 0
    try:
        for k, text in enumerate(QUERIES):
            query = sql.parse(text, table.schema)
            want = answer.cpu_answer(query, table)
            theirs = duck.run_sql(text, repeat=1)
            if theirs.unavailable is None:  # DuckDB's own DECIMAL(18) products overflow on some of these: the CPU is exact
                assert same(want.result, theirs.rows, bool(query.order_by)), (name, text, want.rows, theirs.rows)
            mode = MODES[k % len(MODES)]
            try:
                got = answer.gpu_answer(query, table, engine, mode, repeat=1, warmup=False)
            except NotOnGpu as e:
                assert "\n" not in str(e) and "128 bits" in str(e), (name, text, e)
                continue
            assert got.rows == want.rows, (name, mode, text, got.rows, want.rows)
            on_gpu += 1
    finally:
        duck.close()
        engine.memory.release_table(table)
    assert on_gpu >= len(QUERIES) - 2


WIDE_KEY_QUERIES = [  # keys past 62 bits: BIGINT columns over their whole range, NULL among them
    "SELECT l_orderkey, COUNT(*), SUM(l_quantity), MIN(l_shipdate) FROM lineitem GROUP BY l_orderkey ORDER BY l_orderkey",
    "SELECT l_orderkey, l_partkey, COUNT(*), MAX(l_extendedprice) FROM lineitem GROUP BY 1, 2 ORDER BY 1, 2",
    "SELECT l_partkey, SUM(l_extendedprice) AS v FROM lineitem WHERE l_quantity > 0 GROUP BY 1 ORDER BY v DESC, 1 LIMIT 4",
    "SELECT l_orderkey, COUNT(l_partkey) AS n FROM lineitem GROUP BY 1 ORDER BY n DESC, 1 NULLS FIRST LIMIT 3",
]


def test_bigint_keys_over_their_whole_range_group_on_the_gpu_as_duckdb_groups_them(engine, tmp_path):
    """GROUP BY BIGINT columns holding -2^63 and 2^63 - 1 (and NULL): no one-word index holds such a key, so the
    GPU hashes it as three words (codegen.KernelSpec.wide_keys); through the store, every mode, DuckDB's rows."""
    rng = np.random.default_rng(11)
    rows = 5000
    ends = np.array([-2**63, 2**63 - 1, 0, -1, 2**62, 12345], dtype=np.int64)
    orderkey = rng.choice(ends, rows).tolist()
    partkey = rng.integers(-2**63, 2**63 - 1, rows, dtype=np.int64, endpoint=True).tolist()
    partkey[:len(ends)] = ends.tolist()
    for i in range(0, rows, 7):
        orderkey[i] = None
    data = pa.table({
        "l_orderkey": pa.array(orderkey, pa.int64()), "l_partkey": pa.array(partkey, pa.int64()),
        "l_suppkey": pa.array(rng.integers(1, 100, rows), pa.int32()),
        "l_quantity": pa.array([D(int(v)) for v in rng.integers(-50, 51, rows)], pa.decimal128(15, 2)),
        "l_extendedprice": pa.array([D(int(v)).scaleb(-2) for v in rng.integers(-10**9, 10**9, rows)], pa.decimal128(15, 2)),
        "l_discount": pa.array([D(int(v)).scaleb(-2) for v in rng.integers(0, 11, rows)], pa.decimal128(15, 2)),
        "l_shipdate": pa.array(rng.integers(8000, 10500, rows).astype(np.int32), pa.date32()),
        "l_returnflag": pa.array(rng.choice(["A", "N", "R"], rows))})
    table, duck = stored(engine, tmp_path / "bigint-ends", data)
    try:
        for k, text in enumerate(WIDE_KEY_QUERIES):
            query = sql.parse(text, table.schema)
            theirs = duck.run_sql(text, repeat=1)
            assert theirs.unavailable is None, (text, theirs.unavailable)
            for mode in MODES:
                got = answer.gpu_answer(query, table, engine, mode, repeat=1, warmup=False)
                assert got.plan.spec.wide_keys, (text, mode)
                assert same(got.result, theirs.rows, True), (text, mode, got.rows[:5], theirs.rows[:5])
    finally:
        duck.close()
        engine.memory.release_table(table)


DATE_SHIFTS = [  # a date plus or minus days: infinity and -infinity stay so (DuckDB's), a finite date's sum its day
    "SELECT MAX(l_shipdate + 30), MIN(l_shipdate - l_suppkey), COUNT(*) FROM lineitem WHERE l_shipdate + 1 > DATE '1970-01-01'",
    "SELECT l_returnflag, MIN(l_shipdate + l_suppkey), MAX(l_shipdate - 7) FROM lineitem GROUP BY 1 ORDER BY 1",
]


@pytest.mark.parametrize("infinite", [False, True])
def test_dates_plus_days_on_the_gpu_and_over_infinite_dates_on_the_cpu(engine, tmp_path, infinite):
    """A date plus days over finite dates is the fused kernel's; over a table holding DuckDB's infinity or
    -infinity (which such a sum keeps) it is left to the CPU reference, saying why in one line. Both DuckDB's rows."""
    rng = np.random.default_rng(3)
    rows = 3000
    days = rng.integers(-3000, 30000, rows).astype(np.int64)
    if infinite:
        days[[5, 1500, 2999]] = [2**31 - 1, -(2**31 - 1), 2**31 - 1]
    data = pa.table({
        "l_suppkey": pa.array(rng.integers(-100, 100, rows), pa.int16()),
        "l_quantity": pa.array([D(1)] * rows, pa.decimal128(15, 2)),
        "l_extendedprice": pa.array([D(2)] * rows, pa.decimal128(15, 2)),
        "l_discount": pa.array([D(0)] * rows, pa.decimal128(15, 2)),
        "l_shipdate": pa.array(days.astype(np.int32), pa.int32()).cast(pa.date32()),
        "l_returnflag": pa.array(rng.choice(["A", "N", "R"], rows))})
    table, duck = stored(engine, tmp_path / f"shifts-{infinite}", data)
    try:
        for k, text in enumerate(DATE_SHIFTS):
            query = sql.parse(text, table.schema)
            want = answer.cpu_answer(query, table)
            theirs = duck.run_sql(text, repeat=1)
            assert theirs.unavailable is None and same(want.result, theirs.rows, True), (text, want.rows, theirs.rows)
            if infinite:
                with pytest.raises(NotOnGpu, match="infinity or -infinity") as refused:
                    answer.gpu_answer(query, table, engine, MODES[k], repeat=1, warmup=False)
                assert "\n" not in str(refused.value)
            else:
                got = answer.gpu_answer(query, table, engine, MODES[k], repeat=1, warmup=False)
                assert got.rows == want.rows, (text, got.rows, want.rows)
    finally:
        duck.close()
        engine.memory.release_table(table)
