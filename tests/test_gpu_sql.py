"""On a GPU host: SQL of the class on the fused kernel equals the CPU reference and DuckDB exactly, for
every expression and aggregate kind, group-by, mode, odd sizes, negative values, empty selections,
clustered and parted stores; and any thread may query, several at once."""

import threading

import numpy as np
import pyarrow as pa
import pytest

from gquery import answer, sql, store, tpch
from gquery.errors import GqueryError
from gquery.gpu.codegen import NotOnGpu
from gquery.query import BIGINT, DATE, VARCHAR, decimal
from gquery.result import same
from gquery.schema import Schema
from gquery.table import Table

pytestmark = pytest.mark.gpu
MODES = ("resident", "pinned", "registered", "pageable")
D2 = decimal(15, 2)
SCHEMA = Schema({"l_suppkey": BIGINT, "l_quantity": D2, "l_extendedprice": D2,
                 "l_discount": D2, "l_tax": D2, "l_shipdate": DATE, "l_returnflag": VARCHAR, "l_linestatus": VARCHAR}, {})
QUERIES = [
    "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < 700",
    "SELECT SUM(l_extendedprice * l_discount) AS revenue FROM lineitem WHERE l_shipdate >= DATE '1994-01-01' "
    "AND l_shipdate < DATE '1994-01-01' + INTERVAL '1' YEAR AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01 AND l_quantity < 24",
    "SELECT l_returnflag, l_linestatus, SUM(l_quantity), SUM(l_extendedprice * (1 - l_discount) * (1 + l_tax)), "
    "AVG(l_quantity), AVG(l_extendedprice), AVG(l_discount), COUNT(*), MIN(l_extendedprice), MAX(l_tax) FROM lineitem "
    "WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus",
    "SELECT COUNT(*), MIN(l_shipdate), MAX(l_shipdate) FROM lineitem WHERE l_returnflag = 'R' OR NOT l_quantity > 40",
    "SELECT l_linestatus, COUNT(*) FROM lineitem WHERE l_returnflag IN ('A', 'N', 'Q') AND l_tax <> 0.04 GROUP BY l_linestatus",
    "SELECT SUM(-l_quantity + l_tax * 3 - 2), MIN(l_quantity - l_extendedprice) FROM lineitem WHERE l_discount * l_tax >= 0.0021",
    "SELECT SUM(l_extendedprice) FROM lineitem WHERE l_suppkey < -5",
    "SELECT COUNT(*), SUM(l_quantity) FROM lineitem WHERE l_returnflag = 'nope'",
    "SELECT l_shipdate, COUNT(*) FROM lineitem WHERE l_shipdate BETWEEN DATE '1995-03-01' AND DATE '1995-03-03' GROUP BY l_shipdate ORDER BY l_shipdate",
    "SELECT SUM(CAST(l_quantity AS DECIMAL(38,2)) * l_extendedprice * l_extendedprice) FROM lineitem",
    # groups past a block's shared memory (in device memory), and a decimal's groups in steps of its common factor
    "SELECT l_shipdate, COUNT(*), SUM(l_extendedprice), MAX(l_discount) FROM lineitem WHERE l_tax < 0.05 GROUP BY l_shipdate",
    "SELECT l_suppkey, l_quantity, COUNT(*), SUM(l_quantity * l_extendedprice), MIN(l_shipdate) FROM lineitem "
    "GROUP BY l_suppkey, l_quantity ORDER BY 4 DESC, 1, 2 LIMIT 20",
    "SELECT l_quantity, COUNT(*), AVG(l_extendedprice) FROM lineitem WHERE l_quantity > 24.5 GROUP BY l_quantity",
    "SELECT l_returnflag, l_linestatus, COUNT(*) FROM lineitem WHERE l_suppkey < 300 GROUP BY 1, 2 ORDER BY ALL DESC",
    # NULL in predicates: rewritten at binding into the rows where the predicate is TRUE
    "SELECT COUNT(*), SUM(l_quantity) FROM lineitem WHERE l_suppkey < 100 OR l_tax = NULL",
    "SELECT l_returnflag, COUNT(*) FROM lineitem WHERE NOT (l_quantity > 10 AND NULL) AND l_returnflag IN ('A', NULL, 'R') "
    "GROUP BY 1 ORDER BY 1",
    "SELECT COUNT(*), MIN(l_shipdate) FROM lineitem WHERE l_discount IS NOT NULL AND l_suppkey NOT IN (5, NULL)",
    # two string columns compared as strings: each code's rank among both dictionaries merged, looked up a row
    "SELECT COUNT(*), SUM(l_quantity) FROM lineitem WHERE l_returnflag < l_linestatus",
    "SELECT l_linestatus, COUNT(*), MIN(l_returnflag) FROM lineitem WHERE l_linestatus >= l_returnflag OR "
    "NOT (l_returnflag <> l_linestatus) OR l_suppkey < 30 GROUP BY l_linestatus ORDER BY 1",
    # IN lists past the kernel's parameter space: sorted sets in memory, searched
    "SELECT COUNT(*), SUM(l_quantity) FROM lineitem WHERE l_suppkey IN (" + ", ".join(str(v) for v in range(-49, 2000, 3))
    + ") AND l_suppkey * 2 NOT IN (" + ", ".join(str(v) for v in range(-100, 40_000, 8)) + ")",
    # powers of ten past 10^18 (no long long holds them), over values and over zeros
    "SELECT SUM(CAST(l_suppkey AS DECIMAL(38,20))), SUM(l_discount * 0 + 0.0000000000000000001), SUM(l_tax::DECIMAL(38,30)) "
    "FROM lineitem WHERE l_quantity * 0 = 0.0000000000000000001 OR l_suppkey >= 0",
]


def random_table(rows: int, seed: int, sort_by: str | None = None, big: bool = False, price_from: int = 0) -> Table:
    """Engine values of the TPC-H lineitem columns' kinds, negative ones and wide ones where `big`; l_extendedprice
    shifted by `price_from`."""
    rng = np.random.default_rng(seed)
    hi = 2**62 if big else 10**7
    values = {"l_suppkey": rng.integers(-50, 2000, rows), "l_quantity": rng.integers(-5, 51, rows) * 100,
              "l_extendedprice": rng.integers(-hi, hi, rows), "l_discount": rng.integers(0, 11, rows),
              "l_tax": rng.integers(0, 9, rows), "l_shipdate": rng.integers(8036, 10561, rows),
              "l_returnflag": rng.integers(0, 3, rows), "l_linestatus": rng.integers(0, 2, rows)}
    values["l_extendedprice"] += price_from
    if sort_by:
        order = np.argsort(values[sort_by], kind="stable")
        values = {k: v[order] for k, v in values.items()}
    return Table.from_values(values, SCHEMA, {"l_returnflag": ("A", "N", "R"), "l_linestatus": ("F", "O")},
                             f"random({rows}, {seed})", sorted_by=sort_by)


@pytest.fixture(scope="module")
def engine():
    from gquery.gpu.executor import Engine, close_last

    e = Engine()
    yield e
    close_last(e)  # its modules too, on this thread: not left for the interpreter's exit


def check(engine, table, text, mode, refusable=False, **options):
    """The GPU's answer equals the CPU reference's; or, where `refusable`, the GPU refuses in one line
    (a value that may pass 128 bits: the CPU answers those)."""
    query = sql.parse(text, SCHEMA)
    try:
        got = answer.gpu_answer(query, table, engine, mode, repeat=1, warmup=False, **options)
    except NotOnGpu as e:
        assert refusable and "128 bits" in str(e), (text, e)
        return None
    want = answer.cpu_answer(query, table)
    assert got.rows == want.rows, (text, mode, got.rows, want.rows)
    return got


@pytest.mark.parametrize("rows,modes", [(1, MODES), (31, ("pinned",)), (1023, ("resident", "registered")),
                                        (1025, ("pinned", "pageable")), (4097, MODES), (70_001, MODES)])
def test_every_query_shape_equals_the_cpu_reference(engine, rows, modes):
    table = random_table(rows, rows)
    for mode in modes:
        for text in QUERIES:
            check(engine, table, text, mode)
    engine.memory.release_table(table)


@pytest.mark.parametrize("text", ["SELECT COUNT(*), SUM(l_quantity), MIN(l_shipdate), AVG(l_tax) FROM lineitem "
                                  "WHERE l_suppkey < -100",
                                  "SELECT l_returnflag, COUNT(*) FROM lineitem WHERE l_returnflag = 'nope' GROUP BY 1"])
def test_a_plan_the_zone_maps_rule_out_whole_runs_nothing_on_the_gpu(engine, text):
    table = random_table(70_001, 3)
    got = check(engine, table, text, "pinned")
    assert got.plan.empty and got.profile.total_ms == 0 and "no GPU job" in got.notes[-1]
    engine.memory.release_table(table)


@pytest.mark.parametrize("mode", MODES)
def test_wide_values_take_128_bits_and_split_sums(engine, mode):
    table = random_table(5003, 7, big=True)
    for text in QUERIES:
        check(engine, table, text, mode, refusable=True)
    engine.memory.release_table(table)


@pytest.mark.parametrize("sort_by", ["l_suppkey", "l_shipdate"])
@pytest.mark.parametrize("mode", ("pinned", "pageable"))
def test_clustered_tables_prune_frames_and_stay_exact(engine, sort_by, mode):
    table = random_table(300_001, 11, sort_by=sort_by)
    for text in QUERIES:
        got = check(engine, table, text, mode, chunk_frames=16)
    plan = answer.gpu_answer(sql.parse(QUERIES[0], SCHEMA), table, engine, mode, warmup=False, scan="frames").plan
    if sort_by == "l_suppkey":
        assert plan.to_dict()["frames"]["never"] > 0 and plan.to_dict()["frames"]["always"] > 0
    assert got.rows
    engine.memory.release_table(table)


INDEXED = [  # queries whose predicate has a range on l_suppkey (the column given bucket lists below)
    "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < {z}",
    "SELECT COUNT(*), SUM(l_quantity), MIN(l_extendedprice), MAX(l_shipdate) FROM lineitem WHERE l_suppkey >= {z} - 40 "
    "AND l_suppkey <= {z} AND l_discount > 3",
    "SELECT l_returnflag, COUNT(*), AVG(l_extendedprice), SUM(l_suppkey) FROM lineitem WHERE l_suppkey < {z} "
    "AND (l_tax = 2 OR l_linestatus = 'O') GROUP BY l_returnflag ORDER BY 1",
    "SELECT l_suppkey, COUNT(*), SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey BETWEEN {z} AND {z} + 3 "
    "GROUP BY l_suppkey ORDER BY 1",
    "SELECT COUNT(*), MAX(l_extendedprice) FROM lineitem WHERE l_suppkey < {z} AND l_tax NOT IN ("
    + ", ".join(str(v) for v in range(-3, 40, 2)) + ")",
]


HASHED = [  # l_extendedprice of a random table spans 2 x 10^7 values: 2^25 groups, too many for a dense array
    "SELECT l_extendedprice, COUNT(*), SUM(l_quantity), MIN(l_shipdate), MAX(l_discount), AVG(l_tax) FROM lineitem "
    "GROUP BY l_extendedprice ORDER BY l_extendedprice",
    "SELECT l_extendedprice, l_returnflag, SUM(l_quantity * l_extendedprice) AS v FROM lineitem WHERE l_suppkey < 700 "
    "GROUP BY l_extendedprice, l_returnflag ORDER BY v DESC, l_extendedprice, l_returnflag LIMIT 50",
    "SELECT l_suppkey, l_extendedprice, COUNT(*) FROM lineitem WHERE l_discount > 3 GROUP BY l_suppkey, l_extendedprice "
    "ORDER BY l_suppkey, l_extendedprice",
]


@pytest.mark.parametrize("rows,modes", [(1025, MODES), (70_001, MODES)])
def test_groups_too_many_for_a_dense_array_are_hashed_and_exact(engine, rows, modes):
    """Groups found by their index in a hash table (codegen.hash_slots): every mode, the frames and the index
    scan, a key met by many warps at once (clustered) and by one row each (random)."""
    for table in (random_table(rows, 11), random_table(rows, 12, sort_by="l_extendedprice")):
        table.columns["l_suppkey"].get("indexed")
        for text in HASHED:
            for mode in modes:
                got = check(engine, table, text, mode, chunk_frames=8)
                assert got.plan.spec.hashed and got.plan.hash_slots >= 2 * len(got.rows), text
            for scan in ("index", "sliced"):
                got = check(engine, table, text, "pinned", scan=scan)
                assert got.plan.spec.hashed
        engine.memory.release_table(table)


def test_groups_that_overflow_the_hash_table_memory_allows_are_refused(engine, monkeypatch):
    """A table capped below the run's groups (HASH_ACC_BYTES): the rows of keys past HASH_PROBES slots are counted,
    and the run is refused in one line (the CPU answers), never answered without them."""
    from gquery.gpu import codegen

    monkeypatch.setattr(codegen, "HASH_ACC_BYTES", 1 << 20)
    table = random_table(70_001, 14)
    query = sql.parse(HASHED[0], SCHEMA)
    with pytest.raises(NotOnGpu, match="the groups overflow a hash table of [0-9,]+ slots"):
        answer.gpu_answer(query, table, engine, "pinned", repeat=1, warmup=False)
    monkeypatch.setattr(codegen, "HASH_ACC_BYTES", 16 << 30)
    check(engine, table, HASHED[0], "pinned")  # the same query, its table twice its groups: answered
    engine.memory.release_table(table)


@pytest.mark.parametrize("rows", [1025, 40_001])
def test_every_grouped_query_hashed_equals_the_cpu_reference(engine, rows, monkeypatch):
    """Every grouped shape of the tests with its groups hashed (the dense array's bound set to nothing)."""
    from gquery.gpu import codegen

    monkeypatch.setattr(codegen, "GLOBAL_ACC_BYTES", 0)
    table = random_table(rows, 13, sort_by="l_suppkey" if rows > 10_000 else None)
    table.columns["l_suppkey"].get("indexed")
    grouped = [q for q in QUERIES if "GROUP BY" in q]
    for text in grouped:
        for mode in MODES:
            got = check(engine, table, text, mode, chunk_frames=8)
            assert got.plan.spec.hashed
    for text in [t.format(z=z) for t in INDEXED if "GROUP BY" in t for z in (3, 700)]:
        for scan in ("index", "frames", "sliced"):
            got = check(engine, table, text, "pinned", scan=scan)
            assert got.plan.spec.hashed
    engine.memory.release_table(table)


TOP_CUT = [  # ORDER BY's first key one slot word or a group column's digit, with LIMIT: hashed groups cut on the GPU
    "SELECT l_extendedprice, SUM(l_quantity) AS q FROM lineitem GROUP BY l_extendedprice ORDER BY q DESC, l_extendedprice "
    "LIMIT 10",  # many ties at the top: every group that reaches the threshold is read back
    "SELECT l_extendedprice, SUM(l_quantity) AS q FROM lineitem GROUP BY 1 ORDER BY q, 1 DESC LIMIT 7",  # ASC, negative
    "SELECT l_extendedprice, COUNT(*) AS n FROM lineitem GROUP BY 1 ORDER BY n DESC, 1 DESC LIMIT 5",
    "SELECT l_extendedprice, MIN(l_shipdate) AS d FROM lineitem WHERE l_suppkey < 700 GROUP BY 1 ORDER BY d, 1 LIMIT 3",
    "SELECT l_extendedprice, MAX(l_discount) FROM lineitem GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1",
    "SELECT l_extendedprice, l_returnflag, COUNT(*) FROM lineitem GROUP BY 1, 2 ORDER BY 1 DESC, 2 LIMIT 12",
    "SELECT l_returnflag, l_extendedprice, SUM(l_tax) FROM lineitem GROUP BY 1, 2 ORDER BY 2, 1 LIMIT 6",
    "SELECT l_suppkey, SUM(l_extendedprice * l_quantity) AS v FROM lineitem GROUP BY 1 ORDER BY v DESC, 1 LIMIT 10",
    "SELECT l_suppkey, SUM(l_extendedprice) AS v FROM lineitem WHERE l_tax < 4 GROUP BY 1 ORDER BY v, 1 LIMIT 4",
]


DENSE_CUT = [  # 16M, 65,536 and 65,536 groups in a dense array: cut there too
    "SELECT l_suppkey, l_shipdate, COUNT(*) AS n FROM lineitem GROUP BY 1, 2 ORDER BY n DESC, 1, 2 LIMIT 5",
    "SELECT l_suppkey, l_tax, SUM(l_quantity) AS q FROM lineitem GROUP BY 1, 2 ORDER BY q DESC, 1, 2 LIMIT 8",
    "SELECT l_suppkey, l_discount, MAX(l_extendedprice) FROM lineitem GROUP BY 1, 2 ORDER BY 1 DESC, 2 LIMIT 9",
]


@pytest.mark.parametrize("design", ["hashed", "big", "dense"])
def test_groups_cut_to_those_order_by_limit_keeps_are_exact(engine, design, monkeypatch):
    """codegen.TopCut on the GPU: only the groups whose ORDER BY key reaches the threshold are read back, and the
    rows are the CPU reference's: ties at the top, ASC and DESC, negative and 128-bit sums (saturated in the key:
    `big`), MIN, MAX, COUNT, a group column first or second, hashed groups and a dense array's; every mode;
    repeated runs read back the same groups; the rows selected are all the run's, not only the groups read back."""
    from gquery.gpu import codegen

    if design != "dense":
        monkeypatch.setattr(codegen, "GLOBAL_ACC_BYTES", 0)  # l_suppkey's groups hashed too
    table = random_table(70_001, 15, big=design == "big")
    # big: l_suppkey's texts (l_extendedprice spans 2^63 values: its keys are wide, test_keys_past_62_bits_...)
    texts = DENSE_CUT if design == "dense" else [t for t in TOP_CUT if design != "big" or t.startswith("SELECT l_suppkey")]
    for text in texts:
        query = sql.parse(text, SCHEMA)
        want = answer.cpu_answer(query, table)
        for mode in MODES:
            got = check(engine, table, text, mode, chunk_frames=8)
            assert got.plan.top is not None and got.plan.spec.hashed == (design != "dense"), (text, mode)
            assert got.partial.rows_selected == want.partial.rows_selected, (text, mode)
        runs = answer.gpu_answer(query, table, engine, "pinned", repeat=3, warmup=True)  # each run's partial compared
        assert runs.rows == want.rows and len(runs.partial.groups) <= len(want.partial.groups)
    if design == "hashed":  # distinct sums: about the 10 kept cross the link, of 2,050 groups (big: most keys saturate)
        spread = answer.gpu_answer(sql.parse(TOP_CUT[-2], SCHEMA), table, engine, "pinned", repeat=1, warmup=False)
        assert len(spread.partial.groups) < 100
    if design == "dense":  # 65,536 groups without LIMIT: their words set on the GPU before each run, read back whole
        for text in DENSE_CUT[1:]:
            whole = text.split(" LIMIT")[0]
            for mode in MODES:
                got = check(engine, table, whole, mode, chunk_frames=8)
                assert got.plan.top is None and not got.plan.spec.hashed and codegen.slot_kernels(got.plan.spec)
            runs = answer.gpu_answer(sql.parse(whole, SCHEMA), table, engine, "pinned", repeat=3, warmup=True)
            assert runs.rows == answer.cpu_answer(sql.parse(whole, SCHEMA), table).rows
    engine.memory.release_table(table)


WIDE_KEYS = [  # keys past 62 bits (wide_table): three words a hash slot, NULL flags and two 64-bit digits
    "SELECT l_extendedprice, COUNT(*), SUM(l_quantity), MIN(l_shipdate) FROM lineitem GROUP BY 1 ORDER BY 1",
    "SELECT l_extendedprice, l_suppkey, COUNT(*), MAX(l_tax) FROM lineitem WHERE l_discount < 5 GROUP BY 1, 2 ORDER BY 1, 2",
    "SELECT l_suppkey, l_extendedprice, SUM(l_quantity) AS q FROM lineitem GROUP BY 1, 2 ORDER BY q DESC, 1, 2 LIMIT 6",
    "SELECT l_extendedprice, COUNT(*) AS n FROM lineitem GROUP BY 1 ORDER BY n DESC, 1 LIMIT 3",
    "SELECT l_extendedprice, l_tax, COUNT(*), SUM(l_extendedprice) FROM lineitem GROUP BY 1, 2 ORDER BY 1 DESC, 2 LIMIT 12",
]


def wide_table(rows: int, seed: int, few: bool, nulls: bool = False) -> Table:
    """random_table's columns with l_extendedprice over every BIGINT value, -2^63 to 2^63 - 1: a few keys, each on
    many rows (`few`: warps claim one slot at once), or one a row; NULL at some rows of it and of l_tax (`nulls`)."""
    t = random_table(rows, seed)
    rng = np.random.default_rng(seed + 7)
    values = {n: t.columns[n].values() for n in t.columns}
    ends = np.array([-2**63, 2**63 - 1, 0, -1, 7, 2**62, -2**62 - 3], dtype=np.int64)
    values["l_extendedprice"] = (rng.choice(ends, rows) if few else
                                 rng.integers(-2**63, 2**63 - 1, rows, dtype=np.int64, endpoint=True))
    values["l_extendedprice"][:2] = ends[:2]  # the type's two ends, whatever the draw
    valid = {"l_extendedprice": rng.random(rows) > 0.1, "l_tax": rng.random(rows) > 0.2} if nulls else None
    return Table.from_values(values, SCHEMA, {n: c.dictionary for n, c in t.columns.items() if c.dictionary},
                             f"wide({rows}, {seed}, {few}, {nulls})", valid=valid)


@pytest.mark.parametrize("few,nulls", [(True, False), (False, False), (True, True)])
def test_keys_past_62_bits_hash_as_three_words_and_are_exact(engine, few, nulls):
    """GROUP BY a BIGINT over its whole range (2^64 values), alone or with a second column: no one-word index
    holds the key, so a slot keeps its NULL flags and a digit a column (hash_slot_wide in fused.cuh); many rows of
    a few keys claim slots at once, or every row its own; ORDER BY an aggregate LIMIT cuts them (partitions by the
    key's hash), a group column's order reads every group; NULL a key of its own; every mode; the CPU reference's
    rows."""
    table = wide_table(70_001, 41, few, nulls)
    for text in WIDE_KEYS:
        for mode in MODES:
            got = check(engine, table, text, mode, chunk_frames=8)
            assert got.plan.spec.wide_keys and got.plan.spec.hashed, (text, mode)
            assert (got.plan.top is not None) == (" LIMIT " in text and "BY 1 DESC" not in text), (text, mode)
    engine.memory.release_table(table)


def test_parts_of_wide_keys_add_into_one_hash_table(engine):
    """Two parts whose keys span every BIGINT value (one with NULL keys): their digits count from one base modulo
    2^64, so they add into one table of three-word keys, read back once; the CPU reference's rows in every mode."""
    from gquery.table import PartedTable

    tables = [wide_table(30_001, 43, few=True), wide_table(20_001, 44, few=False, nulls=True)]
    parted = PartedTable(50_002, [], [30_001, 20_001], "two wide parts", {}, tables)
    for text in WIDE_KEYS:
        for mode in MODES:
            got = check(engine, parted, text, mode, chunk_frames=8)
            assert got.plan.spec.wide_keys and got.plan.word_tables == 1, (text, mode)
    for t in tables:
        engine.memory.release_table(t)


def test_parts_far_apart_add_into_one_hash_table_and_are_cut_there(engine):
    """Two parts whose l_extendedprice keys lie 10^12 apart: their groups hashed add into one table counted from
    the smallest key (a hash table needs no dense range), read back once and cut by ORDER BY ... LIMIT there;
    equal to the CPU reference over the same parts in every mode."""
    from gquery.table import PartedTable

    tables = [random_table(40_001, 21), random_table(30_001, 22, price_from=10**12)]
    parted = PartedTable(70_002, [], [40_001, 30_001], "two parts", {}, tables)
    for text in (TOP_CUT[0], TOP_CUT[5], HASHED[0]):
        for mode in MODES:
            got = check(engine, parted, text, mode, chunk_frames=8)
            assert got.plan.spec.hashed and got.plan.word_tables == 1 and (got.plan.top is not None) == ("LIMIT" in text)
    for t in tables:
        engine.memory.release_table(t)


NULL_QUERIES = [  # over columns with NULLs (nulled_table): three truth values, aggregates over the rows they take
    "SELECT COUNT(*), COUNT(l_tax), SUM(l_quantity * l_extendedprice), AVG(l_discount), MIN(l_shipdate), MAX(l_tax) "
    "FROM lineitem WHERE l_suppkey < 700",
    "SELECT COUNT(*), SUM(l_extendedprice) FROM lineitem WHERE NOT (l_discount > 4 AND l_tax < 5) OR l_quantity IS NULL",
    "SELECT COUNT(*), SUM(l_quantity) FROM lineitem WHERE l_tax NOT IN (1, 2, 3) AND NOT l_quantity BETWEEN 10 AND 20",
    "SELECT COUNT(*), MIN(l_extendedprice) FROM lineitem WHERE l_tax IS NOT NULL AND (l_returnflag = 'R' OR l_discount <> 5)",
    "SELECT l_returnflag, COUNT(*), COUNT(l_discount), SUM(l_tax), AVG(l_quantity), MAX(l_shipdate) FROM lineitem "
    "WHERE NOT l_shipdate < DATE '1995-01-01' GROUP BY 1 ORDER BY 1",
    "SELECT l_suppkey, COUNT(l_tax) AS n, SUM(l_quantity) FROM lineitem GROUP BY 1 ORDER BY n DESC, 1 LIMIT 5",
    "SELECT l_suppkey, MIN(l_tax), MAX(l_discount), COUNT(*) FROM lineitem WHERE l_extendedprice > 0 GROUP BY 1 ORDER BY 1",
    "SELECT COUNT(l_quantity), SUM(l_quantity), MIN(l_quantity) FROM lineitem WHERE l_quantity IS NULL",
    # NULL a group of its own: the group column's last digit
    "SELECT l_tax, COUNT(*), SUM(l_quantity), MAX(l_discount) FROM lineitem GROUP BY 1 ORDER BY 1",
    "SELECT l_returnflag, l_discount, COUNT(l_shipdate), MIN(l_shipdate) FROM lineitem WHERE l_suppkey < 1000 "
    "GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT 9",
    "SELECT l_tax, l_discount, AVG(l_extendedprice) FROM lineitem WHERE l_tax IS NULL OR l_discount > 7 GROUP BY ALL",
]


def nulled_table(rows: int, seed: int, sort_by: str | None = None) -> Table:
    """random_table's values, NULL at some rows of l_quantity, l_discount, l_tax and l_shipdate (l_tax at every
    row of the first frames, l_shipdate at none of the last ones)."""
    t = random_table(rows, seed, sort_by)
    rng = np.random.default_rng(seed + 1)
    valid = {c: rng.random(rows) > share for c, share in
             (("l_quantity", 0.1), ("l_discount", 0.3), ("l_tax", 0.05), ("l_shipdate", 0.5))}
    valid["l_tax"][:3000] = False
    valid["l_shipdate"][-5000:] = True
    values = {n: t.columns[n].values() for n in t.columns}
    return Table.from_values(values, SCHEMA, {n: c.dictionary for n, c in t.columns.items() if c.dictionary}, t.source,
                             sorted_by=sort_by, valid=valid)


@pytest.mark.parametrize("rows,hashed", [(1025, False), (70_001, False), (70_001, True)])
def test_columns_with_nulls_on_the_gpu_equal_the_cpu_reference(engine, rows, hashed, monkeypatch):
    """The kernel reads each column's validity: predicates of three truth values, aggregates over the rows where
    their argument is not NULL (none: NULL, COUNT 0), NULL a group key of its own, COUNT(x) ordering a cut of the
    groups; every mode, random and clustered, dense and hashed groups."""
    from gquery.gpu import codegen

    if hashed:
        monkeypatch.setattr(codegen, "GLOBAL_ACC_BYTES", 0)
    for table in (nulled_table(rows, 31), nulled_table(rows, 32, sort_by="l_tax")):
        assert table.columns["l_tax"].nulls
        for text in NULL_QUERIES:
            for mode in MODES:
                got = check(engine, table, text, mode, chunk_frames=8)
                assert got.plan.spec.nullable and got.plan.spec.hashed == (hashed and "GROUP BY" in text), text
                assert (got.plan.top is not None) == (hashed and "LIMIT" in text), text  # by a COUNT(x): cut
        engine.memory.release_table(table)


@pytest.mark.parametrize("mode", ("pinned", "registered"))
@pytest.mark.parametrize("keys", [(1, 200), (1, 100_000), (-(2**31), 2**31 - 1)])
def test_the_index_scan_equals_the_cpu_reference_at_every_bucket_edge(engine, mode, keys):
    """The index scan against the CPU reference: keys that fit a bucket each (no low bits), 17-bit keys (2-byte
    low bits), keys across the whole int32 range (4-byte low bits); constants at the edges of buckets (a
    bucket's first value, its last, the one after) and random ones; frames and index alike."""
    rng = np.random.default_rng(keys[1] % 1000)
    rows = 5 * 1024 + 3
    table = random_table(rows, 17)
    values = {n: table.columns[n].values() for n in table.columns}
    values["l_suppkey"] = rng.integers(keys[0], keys[1], rows, endpoint=True)
    table = Table.from_values(values, SCHEMA, {"l_returnflag": ("A", "N", "R"), "l_linestatus": ("F", "O")}, "keys")
    lists = table.columns["l_suppkey"].get("indexed")
    edges = [lists.reference + b * lists.bucket + d for b in (0, 1, 17, 255, 256) for d in (-1, 0, 1)]
    for z in edges + [int(x) for x in rng.integers(keys[0] - 5, keys[1] + 5, 3)]:
        for text in INDEXED:
            query = sql.parse(text.format(z=z), SCHEMA)
            want = answer.cpu_answer(query, table).rows
            for scan in ("index", "frames", "sliced"):
                got = answer.gpu_answer(query, table, engine, mode, repeat=1, warmup=False, scan=scan)
                assert got.rows == want, (keys, z, text, scan)
                if scan == "index" and got.plan.tables[0].chunks:  # a table with frames to scan ran by its lists
                    assert got.plan.tables[0].index is not None and got.profile.counters["index_scans"] == 1
                if scan == "sliced" and got.plan.tables[0].chunks and got.plan.by_top is None and \
                        "l_suppkey" not in {got.plan.spec.columns[i] for i in got.plan.spec.value_slots}:
                    assert got.plan.tables[0].sliced is not None  # its frames read the key by its top byte
    engine.memory.release_table(table)


def test_a_sparse_query_over_a_store_reads_the_lists_and_little_else(engine, tmp_path):
    """auto over a store (which holds l_suppkey's bucket lists): a sparse range reads its buckets' entries and
    the selected rows' values in place, far under the frames' bytes; a dense one scans the frames."""
    rng = np.random.default_rng(12)
    rows = 2_000_000
    values = {"l_suppkey": rng.integers(1, 100_001, rows), "l_quantity": rng.integers(1, 51, rows) * 100,
              "l_extendedprice": rng.integers(90_000, 10_000_000, rows)}
    schema = Schema({c: SCHEMA.types[c] for c in values}, {})
    path = store.write_store(Table.from_values(values, schema, {}, "sparse"), tmp_path / "lineitem.gq", echo=lambda m: None)
    table = store.open_store(path, engine.memory)
    text = "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < {z}"
    sparse = answer.gpu_answer(sql.parse(text.format(z=30), schema), table, engine, "pinned", repeat=1)
    assert sparse.plan.tables[0].index is not None and sparse.profile.h2d_bytes == 0
    frames = answer.gpu_answer(sql.parse(text.format(z=30), schema), table, engine, "pinned", repeat=1, scan="frames")
    assert sparse.rows == frames.rows == answer.cpu_answer(sql.parse(text.format(z=30), schema), table).rows
    # the frames read the key in place for the fifth of frames its zone maps cannot rule out: more than 0.1 B a row
    assert sparse.profile.pcie_bytes_per_row < 0.1 < frames.profile.pcie_bytes_per_row
    dense = answer.gpu_answer(sql.parse(text.format(z=50_000), schema), table, engine, "pinned", repeat=1)
    assert dense.plan.tables[0].index is None and "by the index" in dense.explain()
    engine.memory.release_table(table)


def test_a_parted_store_with_differing_dictionaries(engine, tmp_path):
    """Each part has its own dictionary (one lacks 'R'): codes, group bases and constants per part."""
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    paths = []
    for k, flags in enumerate((["A", "N"], ["A", "N", "R"], ["R"])):
        n = 3000 + 777 * k
        t = pa.table({"l_suppkey": pa.array(rng.integers(1, 900, n)),
                      "l_quantity": pa.array([f"{q}.00" for q in rng.integers(1, 50, n)]).cast(pa.decimal128(15, 2)),
                      "l_extendedprice": pa.array([f"{q}.{c:02d}" for q, c in zip(rng.integers(900, 99000, n), rng.integers(0, 99, n))]).cast(pa.decimal128(15, 2)),
                      "l_returnflag": pa.array(list(rng.choice(flags, n)))})
        paths.append(tmp_path / f"lineitem.{k + 1}.parquet")
        pq.write_table(t, paths[-1])
    source = tpch.find_lineitem(tmp_path)
    parted = store.open_store(store.write_parted(source, tmp_path / "lineitem.gq", echo=lambda m: None), engine.memory)
    from gquery.reference import DuckDBTable

    duck = DuckDBTable(source, ["l_suppkey", "l_quantity", "l_extendedprice", "l_returnflag"])
    for text in ("SELECT l_returnflag, COUNT(*), SUM(l_quantity * l_extendedprice) FROM lineitem GROUP BY l_returnflag",
                 "SELECT SUM(l_extendedprice) FROM lineitem WHERE l_returnflag >= 'N' AND l_suppkey < 500",
                 "SELECT MAX(l_quantity) FROM lineitem WHERE l_returnflag = 'R'",
                 # each part's codes its own strings: a MIN or MAX of them in a table of words a part
                 "SELECT MIN(l_returnflag), MAX(l_returnflag), COUNT(*) FROM lineitem WHERE l_suppkey < 600",
                 "SELECT l_suppkey, MIN(l_returnflag), MAX(l_returnflag) FROM lineitem GROUP BY 1",
                 "SELECT l_returnflag, MIN(l_returnflag), MAX(l_quantity) FROM lineitem GROUP BY 1"):
        query = sql.parse(text, answer.schema_of(parted))
        for mode in MODES:
            got = answer.gpu_answer(query, parted, engine, mode, repeat=1, warmup=False)
            assert same(got.result, duck.run_sql(text, repeat=1).rows, False), (text, mode)
    duck.close()
    engine.memory.release_table(parted)


@pytest.mark.parametrize("sf", [0.01, 0.1])
def test_tpch_queries_equal_duckdb(engine, data_dir, sf):
    from gquery.reference import DuckDBTable

    source = tpch.generate(sf, data_dir, echo=lambda m: None)
    table = store.open_store(store.ensure_store(source, echo=lambda m: None), engine.memory)
    duck = DuckDBTable(source, list(table.columns))
    for name, z in (("mission", 30), ("mission", 5000), ("q6", None), ("q1", None)):
        text = sql.named_sql(name, z)
        query = sql.parse(text, table.schema)
        want = duck.run_sql(text, repeat=1).rows
        for mode in MODES:
            for scan in ("auto", "frames", "sliced", "index"):
                got = answer.gpu_answer(query, table, engine, mode, repeat=1, warmup=False, scan=scan)
                assert same(got.result, want, bool(query.order_by)), (name, mode, scan)
    duck.close()
    engine.memory.release_table(table)


def test_many_threads_query_one_and_several_tables(data_dir):
    """N threads x M queries through the API, mixed modes, over one table and over several; every answer
    checked against the CPU reference; a table closed in one thread is refused in another."""
    import gquery

    source = tpch.generate(0.01, data_dir, echo=lambda m: None)
    path = store.ensure_store(source, echo=lambda m: None)
    tables = [gquery.open(path), gquery.open(path)]
    texts = [sql.named_sql("mission", 30), sql.named_sql("mission", 600), sql.named_sql("q6"), sql.named_sql("q1")]
    errors, answers = [], []

    def work(k: int) -> None:
        try:
            for m in range(8):
                t = tables[(k + m) % len(tables)]
                a = t.sql(texts[(k * 3 + m) % len(texts)], mode=MODES[(k + m) % len(MODES)], warmup=False)
                answers.append(a.check)
                r = t.query(30 + k, mode=MODES[m % 3], warmup=False)
                answers.append(r.check)
        except Exception as e:  # handed back to the test
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert answers and all(answers)
    closer = threading.Thread(target=tables[0].close)
    closer.start()
    closer.join()
    with pytest.raises(GqueryError, match="closed"):
        tables[0].sql(texts[0])
    tables[1].close()


def test_sql_over_every_gpu_of_the_host():
    """The frames divided among every GPU (a share a GPU, each its own fused kernel on its own thread):
    the exact partials added give the CPU reference's rows."""
    from gquery.gpu.device import device_count
    from gquery.gpu.multi import MultiEngine

    if device_count() < 2:
        pytest.skip(f"this host has {device_count()} GPU(s)")
    multi = MultiEngine("all")
    try:
        for table in (random_table(300_001, 5), random_table(5003, 6, big=True)):
            for text in QUERIES:
                query = sql.parse(text, SCHEMA)
                try:
                    got = answer.gpu_answer_multi(query, table, multi, "pinned", repeat=1, warmup=False)
                except NotOnGpu as e:
                    assert "128 bits" in str(e)
                    continue
                assert got.rows == answer.cpu_answer(query, table).rows, text
                assert len(got.profile.per_gpu) == multi.gpus
            multi.memory.release_table(table)
    finally:
        multi.close()


def test_a_held_table_plans_a_repeated_text_once_and_comes_to_its_warm_scan(data_dir):
    """A repeated text on an open table reuses its parsed query and fused plan; its answers stay exact.
    Calls without warm-up weigh what a scan must still read from disk against every run of the query
    so far: they may begin on the fused kernel, but come to the scan a warm call chooses and stay.
    Weighing one call alone chose the fused kernel for ever (its bytes were read by then, the key's
    slices never: 3 ms of GPU where the indexed key takes 0.2, SF 10 on H100)."""
    import gquery

    source = tpch.generate(0.01, data_dir, echo=lambda m: None)
    path = store.ensure_store(source, echo=lambda m: None)
    t = gquery.open(path)
    scan = lambda a: getattr(a.plan, "encoding", "fused")  # noqa: E731 (the key scan's plan names its key)
    for z in (3, 60):
        text = sql.named_sql("mission", z)
        cold = [t.query(z, mode="pinned", warmup=False) for _ in range(60)]
        warm = t.query(z, mode="pinned")
        assert all(a.check and a.rows == warm.rows for a in cold)
        choices = [scan(a) for a in cold]
        first = choices.index(scan(warm))  # raises where the warm scan is never reached
        assert choices[first:] == [scan(warm)] * (60 - first), choices
        assert text in t._parsed
    assert len(t._parsed) == 2 and len(t._plans) == 2
    q6 = [t.sql(sql.named_sql("q6"), warmup=False) for _ in range(2)]
    assert all(a.check for a in q6) and len(t._plans) == 3
    assert q6[0].plan.reasons == q6[1].plan.reasons  # a kept plan's reasons are not added to call after call
    t.close()
    with pytest.raises(GqueryError, match="closed"):
        t.sql(text)


@pytest.mark.parametrize("mode", ["pinned", "pageable"])
def test_new_constants_that_keep_an_earlier_texts_choices_are_exact(data_dir, mode):
    """A held table keeps the warm choice of a plan whose every frame is tested, or passes whole
    (fusedplan._kept_choice): a new constant proven to class every frame so too plans as that choice, with its own
    constants, top byte's undecided buckets, group bases and LIMIT, and launches from its layout. Every answer equal to the CPU reference's, and
    every family of constants but its first few answered so."""
    import gquery
    from gquery.answer import settle

    source = tpch.generate(0.01, data_dir, echo=lambda m: None)
    t = gquery.open(store.ensure_store(source, echo=lambda m: None))
    families = [
        [sql.named_sql("mission", z) for z in (50, 51, 53, 48, 52, 50)],
        ["SELECT SUM(l_extendedprice * l_discount), COUNT(*) FROM lineitem WHERE l_shipdate >= DATE '1994-01-%02d' "
         "AND l_shipdate < DATE '1995-01-01' AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24" % d
         for d in (1, 2, 3, 5, 4, 1)],
        ["SELECT l_returnflag, l_linestatus, SUM(l_quantity * (%d + l_tax)), COUNT(*) FROM lineitem WHERE l_quantity < %d "
         "GROUP BY 1, 2 ORDER BY 1, 2" % (k, q) for k, q in ((1, 30), (2, 31), (7, 30), (3, 32), (1, 30))],
        ["SELECT l_suppkey, SUM(l_quantity) AS q FROM lineitem WHERE l_extendedprice > %d GROUP BY l_suppkey "
         "ORDER BY q DESC, l_suppkey LIMIT %d" % (p, n) for p, n in ((20000, 5), (20001, 6), (20002, 5), (20010, 9))],
        # every frame passing whole: past the largest key, and no WHERE
        [sql.named_sql("mission", z) for z in (200, 201, 250, 10**6)],
        ["SELECT l_partkey, SUM(l_quantity) AS q FROM lineitem GROUP BY l_partkey ORDER BY q DESC, l_partkey LIMIT %d" % n
         for n in (3, 4, 9, 20)],
    ]
    kept = 0
    for family in families:
        for text in family:
            got = t.sql(text, mode=mode)
            assert got.check, (text, mode)
            kept += got.plan.kept_from is not None
            settle()  # (the encodings a warm choice reads, read in the background: then its choice is kept)
    assert kept >= sum(len(f) for f in families) - 3 * len(families), kept
    t.close()


@pytest.mark.parametrize("mode", ["pinned", "pageable"])
def test_new_texts_that_keep_the_choices_of_a_plan_of_several_classes_are_exact(data_dir, mode):
    """A held table ordered by l_shipdate (its dates rule frames out) keeps the warm choice of a plan whose frames are
    of several classes for texts whose predicate lowers as its did (a new constant in a select item, a new LIMIT) or
    whose AND terms that differ test every frame (Q6's l_quantity bound). Every answer equal to the CPU reference's,
    and every family but its first text answered so."""
    import gquery
    import pyarrow.parquet as pq
    from gquery.answer import settle

    source = tpch.generate(0.01, data_dir, echo=lambda m: None)
    arrow = pq.read_table(source.files[0])
    arrow = arrow.cast(pa.schema([pa.field(f.name, pa.string() if f.type == pa.string_view() else f.type)
                                  for f in arrow.schema]))  # (Arrow sorts no string views)
    t = gquery.open(arrow.sort_by("l_shipdate"))
    families = [
        ["SELECT SUM(l_extendedprice * l_discount), COUNT(*) FROM lineitem WHERE l_shipdate >= DATE '1994-01-01' "
         "AND l_shipdate < DATE '1995-01-01' AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < %d" % q
         for q in (24, 25, 23, 26, 22)],
        ["SELECT l_returnflag, l_linestatus, SUM(l_extendedprice * (%d - l_discount) * (1 + l_tax)), AVG(l_quantity), "
         "COUNT(*) FROM lineitem WHERE l_shipdate <= DATE '1995-06-17' GROUP BY 1, 2 ORDER BY 1, 2" % k for k in (1, 2, 5, 3)],
        ["SELECT l_suppkey, SUM(l_quantity) AS q FROM lineitem WHERE l_shipdate BETWEEN DATE '1996-02-01' AND "
         "DATE '1996-05-01' GROUP BY l_suppkey ORDER BY q DESC, l_suppkey LIMIT %d" % n for n in (5, 6, 3, 9)],
    ]
    kept = 0
    for family in families:
        first = None
        for text in family:
            got = t.sql(text, mode=mode)
            assert got.check, (text, mode)
            first = first or got.plan
            assert len({tp.frames.one_class for tp in first.tables}) == 1 and first.tables[0].frames.one_class is None
            kept += got.plan.kept_from is not None
            settle()
    assert kept >= sum(len(f) - 1 for f in families) - 2, kept
    t.close()


def test_a_repeated_text_replays_its_queued_run_until_the_memory_changes(data_dir):
    """A repeated text's run replays what its first run queued (kept on the plan: addresses, host views, kernel
    arguments) while the memory's generation is unchanged; texts taking turns rewrite the scratch their kernels
    read in place (the frames' classes, the lists' starts); memory freed (another table's, closed) makes the
    next run prepare again. Every answer exact all along, in turns and after."""
    import gquery
    from gquery.gpu import memory

    source = tpch.generate(0.01, data_dir, echo=lambda m: None)
    t = gquery.open(store.ensure_store(source, echo=lambda m: None), pinned=True)
    texts = [sql.named_sql("mission", 30), sql.named_sql("q6"), sql.named_sql("q1"),
             "SELECT l_returnflag, COUNT(*) FROM lineitem WHERE l_suppkey IN (" + ", ".join(map(str, range(1, 90, 2)))
             + ") GROUP BY 1 ORDER BY 1"]

    def launches():
        found = []
        for text in texts:
            a = t.sql(text, mode="pinned")
            assert a.check and len(a.plan._launches) == 1, text
            found.append(next(iter(a.plan._launches.values())))
        return found

    same = lambda one, two: all(a is b for a, b in zip(one, two))  # noqa: E731
    try:
        for _ in range(40):  # reads and compiles in the background change the memory a while: then it settles
            first = launches()
            if same(launches(), first):
                break
        again = launches()
        assert same(first, again), "a settled repeated text prepared its run again"
        before = memory.generation()
        other = gquery.open(store.ensure_store(source, echo=lambda m: None), pinned=True)
        assert other.sql(texts[2], mode="resident").check and memory.generation() == before  # allocations move nothing
        other.close()  # its device copies freed, its registrations let go: a new generation
        assert memory.generation() != before
        after = launches()
        assert not any(a is b for a, b in zip(again, after))
    finally:
        t.close()


def test_the_public_call_says_where_its_wall_clock_went_and_the_benchmark_times_it(data_dir):
    """table.sql's answer carries its wall clock and the host's phases (parse, plan, queue, gpu, finalize),
    which add up to no more than it, the GPU's events inside the gpu phase; the queries benchmark times the
    same call beside DuckDB's execute(...).fetchall(), and a text's first call as a new text of a compiled
    shape."""
    import gquery
    from gquery.answer import HOST_PHASES
    from gquery.bench.queries import NEW_TEXTS, measure
    from gquery.reference import DuckDBTable

    source = tpch.generate(0.01, data_dir, echo=lambda m: None)
    t = gquery.open(store.ensure_store(source, echo=lambda m: None), pinned=True)
    a = t.sql(sql.named_sql("q1"), backend="gpu", check=False)
    assert list(a.host_ms) == list(HOST_PHASES) and all(v >= 0 for v in a.host_ms.values())
    assert sum(a.host_ms.values()) <= a.wall_ms and a.profile.total_ms <= a.host_ms["gpu"] + 0.05
    assert a.to_dict()["wall_ms"] == a.wall_ms
    duck = DuckDBTable(source, ["l_suppkey", "l_quantity", "l_extendedprice"])
    try:
        one, two = (measure(t, duck, sql.named_sql("mission", z), 1) for z in (30, 300))
    finally:
        duck.close()
        t.close()
    assert one["match"] and two["match"] and one["new_text_ms"] > 0 and list(two["new_text_host_ms"]) == list(HOST_PHASES)
    assert len(one["wall_times_ms"]) >= 7 and one["wall_ms"] >= one["gpu_ms"] and one["duckdb_ms"] > 0
    assert one["overhead_ms"] == one["wall_ms"] - one["gpu_ms"] and one["rows"] != two["rows"]
    assert len(one["new_text_times_ms"]) == NEW_TEXTS and one["new_text_ms"] in one["new_text_times_ms"]
    assert one["new_text_overhead_ms"] == sorted(one["new_text_overheads_ms"])[NEW_TEXTS // 2]


def test_fresh_processes_exit_cleanly_with_reads_in_the_background(tmp_path):
    """A process whose first query starts reading a key's lists and compiling kernels in the background
    exits at once after its answer: 24 of them, each exits 0 with nothing on stderr (daemon threads with the
    GPU's context pushed made 1 in 60 abort at exit: PyCUDA's "context stack was not empty", a double free)."""
    import subprocess
    import sys

    table = random_table(300_001, 21)
    table.columns["l_suppkey"].get("indexed")
    path = tmp_path / "t.gq"
    store.write_store(table, path, echo=lambda m: None)
    code = ("import sys, gquery\nt = gquery.open(sys.argv[1])\n"
            "print(t.sql(sys.argv[2], backend='gpu', check=False).rows)\n")
    for k in range(24):
        z = (30, 700)[k % 2]
        r = subprocess.run([sys.executable, "-c", code, str(path),
                            f"SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < {z}"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stderr == "", (k, r.returncode, r.stderr[-2000:])


def test_a_warm_query_runs_on_the_asking_thread_and_every_module_is_loaded_on_the_gpus_own(data_dir, monkeypatch):
    """A query whose kernels are loaded runs on the asking thread where GPU 0's is idle (no thread hand-off); a new
    shape's first run loads its modules on GPU 0's thread, where PyCUDA unloads them: none is ever tied to another."""
    import gquery
    from gquery.gpu import kernels
    from gquery.gpu.device import device_thread

    source = tpch.generate(0.01, data_dir, echo=lambda m: None)
    table = gquery.open(store.ensure_store(source, echo=lambda m: None))
    ran_on, real, before = [], answer.gpu_runs, set(kernels._modules)
    monkeypatch.setattr(answer, "gpu_runs", lambda *a, **k: (ran_on.append(threading.get_ident()), real(*a, **k))[1])
    text = "SELECT MAX(l_quantity - l_tax), COUNT(*) FROM lineitem WHERE l_discount * 7 > l_tax + 0.03 AND l_suppkey < 61"
    for sibling in (text, text, text.replace("61", "62")):
        assert table.sql(sibling, backend="gpu").check, sibling
    gpu_thread = device_thread(0)._thread.ident
    assert ran_on == [gpu_thread, threading.get_ident(), threading.get_ident()]  # a new shape's, then here
    assert {key[1] for key in set(kernels._modules) - before} == {gpu_thread}  # (other tests' engines load on theirs)
    table.close()


@pytest.mark.parametrize("mode", ["pinned", "pageable"])
def test_a_new_constants_launch_made_from_a_kept_layout_is_exact(engine, data_dir, mode):
    """Plans that cut the same chunks (a new constant in WHERE or a select item, a new LIMIT) or scan the same tables
    by index launch from the layout the first prepared (fused.layout_key): its host views and addresses kept, each
    chunk's constants, long IN list, top byte's undecided buckets and group bases the new plan's, its index scans'
    buckets, its classes and starts written. Every answer equal
    to the CPU reference's, whichever plan ran last."""
    from gquery.gpu import fused

    source = tpch.generate(0.01, data_dir, echo=lambda m: None)
    table = store.open_store(store.ensure_store(source, echo=lambda m: None), engine.memory)
    families = [
        ["SELECT SUM(l_extendedprice * l_discount), COUNT(*) FROM lineitem WHERE l_quantity < %d AND l_discount > 0.02" % q
         for q in (10, 24, 25, 49, 3)],
        ["SELECT l_returnflag, SUM(l_quantity * (%d - l_tax)), MIN(l_shipdate) FROM lineitem WHERE l_quantity > 5 "
         "GROUP BY 1 ORDER BY 1" % k for k in (1, 2, 7)],
        ["SELECT COUNT(*), SUM(l_quantity) FROM lineitem WHERE l_suppkey IN (%s)" % ", ".join(str(v + k) for v in range(1, 60, 3))
         for k in (0, 1, 2)],
        ["SELECT l_shipdate, COUNT(*) FROM lineitem WHERE l_shipdate >= DATE '1995-03-%02d' AND l_quantity < 30 "
         "GROUP BY 1 ORDER BY 1 LIMIT %d" % (d, n) for d, n in ((1, 5), (9, 7), (20, 100))],
        ["SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < %d" % z for z in (40, 41, 77, 40)],
        # by index (pinned): each constant's buckets' entries, its starts written in the kept places
        ["SELECT SUM(l_quantity * l_extendedprice), COUNT(*) FROM lineitem WHERE l_suppkey < %d" % z for z in (3, 40, 77, 2)],
    ]
    scans = ("auto", "auto", "auto", "auto", "sliced", "index")
    reused = by_index = 0
    for family, scan in zip(families, scans):
        first = None
        for text in family * 2:  # each text again after the others: its own launch, written back
            query = sql.parse(text, table.schema)
            got = answer.gpu_answer(query, table, engine, mode, repeat=1, warmup=False, scan=scan)
            assert got.rows == answer.cpu_answer(query, table).rows, (text, mode)
            launch, key = got.plan._launches[engine.memory.tag], fused.layout_key(got.plan)
            assert launch.generation == fused.generation(), text  # current after its run (FusedRunner._prepared)
            if first is not None and key == first[1] and launch.generation == first[0].generation:
                assert launch is not first[0] and all(a[1] is b[1] for a, b in zip(launch.chunks, first[0].chunks)), text
                reused += 1  # made from the kept layout (no memory freed since it was prepared)
                by_index += bool(launch.scans)
            else:
                first = (launch, key)
    assert reused >= 10 and (mode != "pinned" or by_index >= 3), (reused, by_index)
    engine.memory.release_table(table)


def test_a_scratch_buffer_grows_with_room_for_a_slightly_larger_request(engine):
    """A buffer grown with headroom serves a later request up to that much larger as it is: nothing freed, the
    memory's generation (every prepared launch's address book) unchanged; past it, grown again and the generation
    moves."""
    from gquery.gpu import memory

    memory_ = engine.memory
    first = int(memory_.scratch_device("test:ring", 1 << 20, 1.25))
    before = memory.generation()
    assert int(memory_.scratch_device("test:ring", (1 << 20) + (1 << 18), 1.25)) == first
    host = memory_.scratch_host("test:stage", 1000, np.uint8, pinned=True, headroom=1.25)
    assert len(host) == 1000 and len(memory_.scratch_host("test:stage", 1250, np.uint8, pinned=True)) == 1250
    assert memory.generation() == before
    memory_.scratch_device("test:ring", (1 << 20) + (1 << 19), 1.25)
    assert memory.generation() != before


@pytest.mark.parametrize("mode", ["pinned", "pageable"])
def test_new_constants_of_a_clustered_table_keep_the_ring_their_chunk_grows_into(engine, mode):
    """Each next constant over a table clustered by its column cuts one chunk a few frames longer: the ring slots
    (and pageable stages) the first grew keep room for it, so no constant frees a buffer or moves the memory's
    generation (its launch prepared once). Every answer equal to the CPU reference's."""
    from gquery.gpu import memory

    table = random_table(300_001, 5, sort_by="l_suppkey")
    before = None
    for z in range(700, 760, 6):
        got = check(engine, table, f"SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < {z}",
                    mode, scan="frames")
        assert any(ch.streamed for ch in got.plan.tables[0].chunks), got.plan.describe()
        before = memory.generation() if before is None else before
    assert memory.generation() == before
    engine.memory.release_table(table)
