"""NULLs held: a column's validity (a bit a row) in memory and in the store, SQL's three truth values and
NULL-skipping aggregates on the CPU reference, exact against DuckDB; damaged validity refused in one line; the
GPU's plan and kernels over columns with NULLs (their answers: tests/test_gpu_sql.py)."""

import datetime
import json
import re
import shutil
import subprocess
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

import gquery
from conftest import arrow_data
from gquery import store
from gquery.arrow import table_of_arrow
from gquery.gpu import codegen
from gquery.gpu.fusedplan import plan_fused
from gquery.result import Partial, same
from gquery.schema import engine_values, read_schema
from gquery.sql import parse

ROWS = 3000


def with_nulls(seed: int = 5) -> pa.Table:
    """Columns of every kind the engines hold, each NULL at some rows (k at a tenth, z at every one)."""
    rng = np.random.default_rng(seed)

    def some(values, share):
        return [None if x else v for x, v in zip(rng.random(ROWS) < share, values)]

    return pa.table({
        "k": pa.array(some(rng.integers(0, 20, ROWS).tolist(), 0.1), pa.int64()),
        "q": pa.array(some([Decimal(int(v)).scaleb(-2) for v in rng.integers(-500, 5000, ROWS)], 0.2), pa.decimal128(15, 2)),
        "p": pa.array(some([Decimal(int(v)).scaleb(-2) for v in rng.integers(0, 10**6, ROWS)], 0.05), pa.decimal128(15, 2)),
        "d": pa.array(some([datetime.date(1995, 1, 1) + datetime.timedelta(days=int(v)) for v in rng.integers(0, 400, ROWS)],
                           0.3), pa.date32()),
        "s": pa.array(some(rng.choice(["A", "N", "R"], ROWS).tolist(), 0.15), pa.string()),
        "z": pa.array([None] * ROWS, pa.int32()),
        "f": pa.array(rng.integers(0, 5, ROWS), pa.int64()),
    })


QUERIES = [
    "SELECT COUNT(*), COUNT(k), SUM(q), AVG(q), MIN(d), MAX(p) FROM t",
    "SELECT COUNT(*) FROM t WHERE k IS NULL",
    "SELECT COUNT(*), SUM(p) FROM t WHERE k IS NOT NULL AND q > 10",
    "SELECT COUNT(*), SUM(p) FROM t WHERE NOT (k < 5)",
    "SELECT COUNT(*) FROM t WHERE NOT (k < 5 OR q > 20)",
    "SELECT COUNT(*) FROM t WHERE NOT (k < 5 AND q > 20)",
    "SELECT COUNT(*) FROM t WHERE k NOT IN (1, 2, 3)",
    "SELECT COUNT(*) FROM t WHERE NOT s IN ('A', 'N')",
    "SELECT COUNT(*) FROM t WHERE s <> 'A'",
    "SELECT COUNT(*) FROM t WHERE q + p > 100 OR q * p IS NULL",
    "SELECT COUNT(*) FROM t WHERE NOT (d = TIMESTAMP '1995-03-01 10:00:00')",
    "SELECT COUNT(*) FROM t WHERE NOT (k > 3 AND NULL)",
    "SELECT COUNT(*) FROM t WHERE NOT k BETWEEN 3 AND 8",
    "SELECT k, COUNT(*), COUNT(q), SUM(q), AVG(p), MIN(d), MAX(k) FROM t GROUP BY k ORDER BY k",
    "SELECT k, COUNT(*), SUM(q) FROM t GROUP BY k ORDER BY k DESC",
    "SELECT s, k, SUM(q * p) FROM t GROUP BY s, k ORDER BY 3 DESC, 1, 2 LIMIT 7",
    "SELECT s, SUM(q) AS v FROM t WHERE d < DATE '1995-06-01' GROUP BY s ORDER BY v DESC, s",
    "SELECT COUNT(z), SUM(z), MIN(z), MAX(z), AVG(z), COUNT(*) FROM t",
    "SELECT z, COUNT(*) FROM t GROUP BY z",
    "SELECT f, SUM(z), COUNT(z), MIN(q) FROM t WHERE k = 3 GROUP BY f ORDER BY 2 DESC, 1",
    "SELECT COUNT(*) FROM t WHERE z = 1 OR z IS NULL",
    "SELECT k, SUM(q) FROM t GROUP BY k ORDER BY k DESC NULLS FIRST LIMIT 3",
    "SELECT s, k, COUNT(*) FROM t GROUP BY s, k ORDER BY s DESC NULLS FIRST, k NULLS FIRST LIMIT 8",
    "SELECT f, MAX(z) AS m, MIN(s) FROM t GROUP BY f ORDER BY m NULLS FIRST, f DESC NULLS LAST",
]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    yield from arrow_data(with_nulls(), tmp_path_factory.mktemp("nulls"))


def test_a_nulls_place_holds_the_columns_smallest_value_and_its_validity_says_so():
    a = pa.chunked_array([pa.array([Decimal("1.50"), None], pa.decimal128(15, 2)), pa.array([Decimal("-2.25")], pa.decimal128(15, 2))])
    values, dictionary, valid = engine_values(a, read_schema(pa.schema([("x", a.type)])).types["x"])
    assert values.tolist() == [150, -225, -225] and dictionary is None and valid.tolist() == [True, False, True]
    strings = engine_values(pa.array([None, None], pa.string()), read_schema(pa.schema([("s", pa.string())])).types["s"])
    assert strings[0].tolist() == [0, 0] and strings[1] == ("",) and not strings[2].any()  # no string is ever seen
    assert engine_values(pa.array([1, 2]), read_schema(pa.schema([("i", pa.int64())])).types["i"])[2] is None


@pytest.mark.parametrize("sort_by", [None, "k", "q"])
def test_a_store_holds_nulls_and_the_cpu_answers_as_duckdb(data, sort_by):
    """Written (clustered or not: the validity moves with its rows), verified, opened and checked whole; every
    query's rows are DuckDB's over the same Arrow table."""
    table, con, folder = data
    said = []
    path = store.write_store(table_of_arrow(table), folder / f"t-{sort_by}.gq", echo=said.append, sort_by=sort_by)
    assert f"NULLs held: k {table['k'].null_count:,}, q " in said[-1] and f"z {ROWS:,}, verified)" in said[-1]
    assert store.check_store(path) == ROWS
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["columns"]["z"]["nulls"] == ROWS and "nulls" not in manifest["columns"]["f"]
    t = gquery.open(str(path), name="t")
    for text in QUERIES:
        got = t.sql(text, backend="cpu", check=False)
        assert same(got.result, con.execute(text).fetchall(), "ORDER BY" in text), text


def test_an_arrow_table_with_nulls_answers_as_duckdb(data):
    table, con, _ = data
    t = gquery.open(table, name="t")
    for text in QUERIES:
        assert same(t.sql(text, backend="cpu", check=False).result, con.execute(text).fetchall(), "ORDER BY" in text), text


def _valid_file(path):
    return path / "k.valid.bin"


def _recount(path, nulls):
    m = json.loads((path / "manifest.json").read_text())
    m["columns"]["k"]["nulls"] = nulls
    store._write_manifest(path, m)


@pytest.mark.parametrize("damage,message", [
    (lambda p: _valid_file(p).write_bytes(_valid_file(p).read_bytes()[:-1]), "truncated"),
    (lambda p: _valid_file(p).write_bytes(bytes(b ^ 0x10 for b in _valid_file(p).read_bytes())), "corrupt"),
    (lambda p: _valid_file(p).unlink(), "missing"),
    (lambda p: _recount(p, 1), "count of NULLs disagrees"),
    (lambda p: _recount(p, 0), "count of NULLs disagrees"),
    (lambda p: _recount(p, -3), "count of NULLs disagrees"),
])
def test_damaged_validity_is_refused_in_one_line(data, damage, message):
    table, _, folder = data
    path = store.write_store(table_of_arrow(table), folder / "damaged.gq", echo=lambda m: None)
    damage(path)
    with pytest.raises(store.StoreError, match=message) as e:
        store.check_store(path)
    assert "\n" not in str(e.value)


def test_nulls_first_is_kept_where_asked():
    """ORDER BY ... NULLS FIRST puts NULLs first, whichever the direction; DuckDB's default, and NULLS LAST, last."""
    schema = read_schema(with_nulls().schema)
    q = parse("SELECT k, COUNT(*) FROM t GROUP BY k ORDER BY k DESC NULLS FIRST, 2, 2 NULLS LAST", schema, "t")
    assert q.nulls_first == (0,) and "ORDER BY k DESC NULLS FIRST" in q.describe()
    assert parse("SELECT k, COUNT(*) FROM t GROUP BY k ORDER BY k", schema, "t").nulls_first == ()


def test_a_null_group_key_crosses_json():
    p = Partial(("count", "sum"), {(None, "A"): [[3], [None, 0]], (7, None): [[1], [5, 1]]}, rows_selected=4)
    back = Partial.from_json(json.loads(json.dumps(p.to_json())))
    assert back.groups == p.groups and back.rows_selected == 4


def test_the_gpu_plan_reads_validity_and_is_null_of_a_column_without_any_is_false(data):
    """The fused kernel reads a column's validity with its frames: a frame with a NULL in a predicate column is
    tested row by row (never ALWAYS: a NULL fails every test), by its frames only (no index or top-byte scan),
    an aggregate over a column with NULLs counts the rows it takes; a group column with NULLs gets one digit more,
    its last NULL's; IS NULL of a column that has none rules out every frame."""
    table, _, _ = data
    t = table_of_arrow(table)
    plan = plan_fused(parse("SELECT SUM(q), COUNT(p), MIN(d) FROM t WHERE f >= 0 AND k < 30", t.schema, "t"), [t], "pinned", 132)
    assert plan.tables[0].counts()["always"] == 0 and plan.tables[0].index_option is None and plan.by_top is None
    assert [(a.kind, bool(a.valid)) for a in plan.spec.accumulators] == [("sum", True), ("count", True), ("min", True)]
    assert {plan.spec.columns[i] for i in plan.spec.nullable} == {"k", "q", "p", "d"}
    whole = plan_fused(parse("SELECT SUM(f) FROM t WHERE f >= 0", t.schema, "t"), [t], "pinned", 132)
    assert whole.tables[0].counts()["always"] == whole.tables[0].classes.size and not whole.spec.nullable
    keyed = plan_fused(parse("SELECT k, COUNT(*) FROM t GROUP BY k", t.schema, "t"), [t], "pinned", 132)
    assert keyed.spec.group_cards == (32,) and codegen.null_digit(keyed.spec, 0) == 31  # 0 .. 19, and NULL
    assert "(ok0 ? (v0 - g0) : 31LL)" in codegen.source(keyed.spec, 128)
    unkeyed = plan_fused(parse("SELECT f, COUNT(*) FROM t GROUP BY f", t.schema, "t"), [t], "pinned", 132)
    assert unkeyed.spec.group_cards == (8,) and codegen.null_digit(unkeyed.spec, 0) is None  # 0 .. 4
    assert plan_fused(parse("SELECT COUNT(*) FROM t WHERE f IS NULL", t.schema, "t"), [t], "pinned", 132).empty
    kept = plan_fused(parse("SELECT SUM(f) FROM t WHERE f IS NOT NULL", t.schema, "t"), [t], "pinned", 132)
    assert not kept.empty and all(tp.counts()["never"] == 0 for tp in kept.tables)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_kernels_over_columns_with_nulls_compile_without_spills(data, tmp_path):
    """Three truth values in the predicate, aggregates counting the rows they take, dense and hashed groups, the
    slot kernels' cut by COUNT(x): nvcc compiles each, no spills."""
    from gquery.gpu import kernels
    from gquery.gpu.fused import fused_build

    table, _, _ = data
    t = table_of_arrow(table)
    texts = ["SELECT SUM(q * p), COUNT(p), COUNT(*), MIN(d), MAX(p), AVG(p) FROM t WHERE NOT (k < 3 AND d > DATE '1995-03-01') "
             "OR k IS NULL",
             "SELECT f, SUM(p), COUNT(d), MIN(d) FROM t WHERE k NOT IN (1, 2, 3) OR s = 'A' GROUP BY f ORDER BY 2 DESC LIMIT 2",
             "SELECT f, COUNT(k) AS n, MAX(q) FROM t GROUP BY f ORDER BY n DESC LIMIT 3",
             "SELECT s, k, SUM(q), COUNT(*) FROM t WHERE d IS NULL OR p > 0 GROUP BY s, k"]
    for k, text in enumerate(texts):
        spec = plan_fused(parse(text, t.schema, "t"), [t], "pinned", 132, whole=True).spec
        if k >= 2:
            spec = codegen.replace(spec, hashed=True)
        build = fused_build(spec)
        (tmp_path / f"n{k}.cu").write_text(build.text())
        r = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-Xptxas", "-v", f"-I{kernels.CUDA_DIR}", *build.nvcc_options(),
                            "-o", str(tmp_path / f"n{k}.cubin"), str(tmp_path / f"n{k}.cu")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", r.stderr)
        assert spills and all(x == ("0", "0") for x in spills), r.stderr
