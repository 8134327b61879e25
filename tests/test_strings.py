"""Strings at the edges of the class: a VARCHAR column of more distinct strings than fit a manifest (its
dictionary two buffers of the store, read when a query first needs it and checked then), codes decoded at
once, and two VARCHAR columns compared (as strings: a part's two dictionaries merged into one order). The
CPU reference, and on a GPU host the fused kernel in every mode, against DuckDB over the same Arrow data,
stored whole and in parts whose dictionaries differ."""

import json
import pickle
from decimal import Decimal

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gquery
from conftest import arrow_data
from gquery import answer, sql, store, tpch
from gquery.arrow import table_of_arrow
from gquery.result import same
from gquery.schema import Dictionary, engine_values, read_schema

ROWS = 150_000
DISTINCT = 90_000  # past the 65,536 a dictionary held in the manifest's JSON allowed
LETTERS = list("abcXYZ 09_") + ["é", "€", "😀", "\u00a0"]  # one- to four-byte UTF-8


def strings_table(seed: int = 3) -> pa.Table:
    """s: one of DISTINCT random strings (the empty one among them), NULL at a twentieth of the rows; w: one of
    a few hundred of them and a few of its own; u: s's strings cut to their first two characters; k, q numbers."""
    rng = np.random.default_rng(seed)
    words = {""}
    while len(words) < DISTINCT:
        words.add("".join(rng.choice(LETTERS, int(rng.integers(1, 9)))))
    words = sorted(words)
    s = [words[i] for i in rng.integers(0, DISTINCT, ROWS)]
    few = [words[i] for i in rng.integers(0, DISTINCT, 300)] + ["a", "b", "zz", "Y"]
    return pa.table({
        "s": pa.array([None if n else v for v, n in zip(s, rng.random(ROWS) < 0.05)], pa.string()),
        "w": pa.array([few[i] for i in rng.integers(0, len(few), ROWS)], pa.string()),
        "u": pa.array([v[:2] for v in s], pa.string()),
        "k": pa.array(rng.integers(0, 1000, ROWS), pa.int64()),
        "q": pa.array([Decimal(int(v)).scaleb(-2) for v in rng.integers(-500, 5000, ROWS)], pa.decimal128(15, 2)),
    })


QUERIES = [
    "SELECT COUNT(*), COUNT(s), MIN(s), MAX(s), MIN(u), MAX(w) FROM t",
    "SELECT s, COUNT(*), SUM(q) FROM t GROUP BY s ORDER BY 2 DESC, s LIMIT 10",
    "SELECT s, SUM(q) FROM t WHERE k < 40 GROUP BY s ORDER BY s DESC NULLS FIRST LIMIT 25",
    "SELECT COUNT(*), SUM(q) FROM t WHERE s < 'b' AND s >= 'XY'",
    "SELECT COUNT(*) FROM t WHERE s IN ('a', 'é€', '', 'Z9', '😀') OR s > 'é'",
    "SELECT COUNT(*), SUM(q) FROM t WHERE s = w",
    "SELECT COUNT(*), SUM(q) FROM t WHERE s < w",
    "SELECT COUNT(*) FROM t WHERE w >= s OR k < 10",
    "SELECT COUNT(*) FROM t WHERE NOT (s <> w)",
    "SELECT COUNT(*), MIN(q) FROM t WHERE u <= s AND u <> w",
    "SELECT COUNT(*) FROM t WHERE s = s",
    "SELECT w, COUNT(*), MIN(s), MAX(s) FROM t WHERE s > w GROUP BY w ORDER BY w LIMIT 20",
    "SELECT u, k, COUNT(*) FROM t WHERE u > w GROUP BY u, k ORDER BY 3 DESC, 1, 2 LIMIT 12",
]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    for table, con, folder in arrow_data(strings_table(), tmp_path_factory.mktemp("strings")):
        yield table, con, store.write_store(table_of_arrow(table), folder / "t.gq", echo=lambda m: None)


def test_a_dictionary_is_one_sorted_arrow_array_searched_and_decoded_at_once():
    d = Dictionary(["", "A", "a", "é", "😀"])
    assert len(d) == 5 and d[1] == "A" and d[-1] == "😀" and d[1:3] == ["A", "a"] and list(d) == ["", "A", "a", "é", "😀"]
    assert d.code("a") == 2 and d.code("b") is None and d.index("é") == 3 and "A" in d and "B" not in d and 3 not in d
    with pytest.raises(ValueError):
        d.index("b")
    with pytest.raises(IndexError):
        d[5]
    assert d.decode(np.array([4, 0, 2])) == ["😀", "", "a"]
    assert d == ("", "A", "a", "é", "😀") and d == Dictionary(list(d)) and d != Dictionary(["", "A"])
    assert pickle.loads(pickle.dumps(d)) == d
    values, strings, valid = engine_values(pa.array(["b", "a", None, "b", "é"]), read_schema(pa.schema([("x", pa.string())])).types["x"])
    assert list(strings) == ["a", "b", "é"] and values.tolist() == [1, 0, 0, 1, 2] and valid.tolist() == [True, True, False, True, True]


def test_a_store_keeps_many_strings_in_buffers_read_when_first_asked_for(data):
    table, con, path = data
    manifest = json.loads((path / "manifest.json").read_text())
    entry = manifest["columns"]["s"]
    distinct = len(set(table["s"].drop_null().to_pylist()))
    assert entry["dictionary"] == distinct > 65_536 and {"strings", "offsets"} <= set(entry["buffers"])
    assert (path / "s.strings.bin").is_file() and (path / "s.offsets.bin").is_file()
    assert store.check_store(path) == ROWS
    t = gquery.open(str(path), name="t")
    held = t.data.columns["s"].dictionary
    assert len(held) == distinct and held._strings is None  # opened: its length known, its strings not read
    got = t.sql(QUERIES[1], backend="cpu", check=False)
    assert same(got.result, con.execute(QUERIES[1]).fetchall(), True)
    assert held._strings is not None and held.strings.to_pylist() == sorted(set(table["s"].drop_null().to_pylist()))


@pytest.mark.parametrize("source", ["store", "arrow"])
def test_the_cpu_answers_as_duckdb(data, source):
    table, con, path = data
    t = gquery.open(str(path) if source == "store" else table, name="t")
    for text in QUERIES:
        assert same(t.sql(text, backend="cpu", check=False).result, con.execute(text).fetchall(), "ORDER BY" in text), text


def test_two_string_expressions_other_than_columns_are_refused_in_one_line(data):
    _, _, path = data
    t = gquery.open(str(path), name="t")
    schema = answer.schema_of(t.data)
    assert sql.parse("SELECT COUNT(*) FROM t WHERE 'b' > s", schema, table="t").where is not None
    with pytest.raises(gquery.GqueryError) as e:
        t.sql("SELECT COUNT(*) FROM t WHERE s < 1", backend="cpu", check=False)
    assert "\n" not in str(e.value)


@pytest.mark.gpu
def test_the_gpu_answers_as_duckdb_in_every_mode_whole_and_in_parts(data, tmp_path):
    """The same queries through the fused kernel: a code's rank looked up in a table a part (two columns
    compared), string constants as codes, and a store in two parts whose dictionaries differ."""
    from gquery.gpu.executor import Engine, close_last

    table, con, path = data
    folder = tmp_path / "parts"
    folder.mkdir()
    half = ROWS // 2
    for k, part in enumerate((table.slice(0, half), table.slice(half)), start=1):
        pq.write_table(part, folder / f"lineitem.{k}.parquet")
    parted = store.write_parted(tpch.find_lineitem(folder), tmp_path / "parts.gq", echo=lambda m: None)
    engine = Engine()
    try:
        for p in (path, parted):
            t = store.open_store(p, engine.memory)
            schema = answer.schema_of(t)
            for n, text in enumerate(QUERIES):
                query = sql.parse(text, schema, table="t")
                want = con.execute(text).fetchall()
                for mode in ("resident", "pinned", "registered", "pageable"):
                    got = answer.gpu_answer(query, t, engine, mode, repeat=1, warmup=False)
                    assert same(got.result, want, "ORDER BY" in text), (p.name, mode, text, got.rows[:3], want[:3])
            engine.memory.release_table(t)
    finally:
        close_last(engine)


def _codes_value(e, codes: dict) -> np.ndarray:
    """A lowered value over every code pair: a column's codes, 2 x them, or their ranks' table."""
    from gquery.query import Arith, Column, Literal, Recode

    if isinstance(e, Column):
        return codes[e.name]
    if isinstance(e, Literal):
        return np.int64(e.value)
    if isinstance(e, Recode):
        return np.asarray(e.table, dtype=np.int64)[codes[e.arg.name]]
    assert isinstance(e, Arith) and e.op == "*", e
    return _codes_value(e.left, codes) * _codes_value(e.right, codes)


@pytest.mark.parametrize("sizes", [(1, 1), (3, 2), (2, 5000), (300, 4097), (5000, 4500)])
def test_two_string_columns_lowered_compare_as_their_strings_at_every_code_pair(sizes):
    """prune.lower of a comparison of two VARCHAR columns of other dictionaries (one small: the large one's
    codes doubled against a table of the small one's ranks; both large: both ranked among the strings merged;
    one dictionary: the codes), evaluated over every pair of codes (50,000 drawn where they are more), equals
    comparing their strings."""
    import operator
    import random

    from gquery.prune import lower
    from gquery.query import VARCHAR, Column, Compare

    rng = random.Random(sum(sizes))
    pool = sorted({"".join(rng.choice(LETTERS + ["\x00"]) for _ in range(rng.randint(0, 5))) for _ in range(20000)})
    a, b = (Dictionary(sorted(rng.sample(pool, n))) for n in sizes)
    if len(a) * len(b) <= 50_000:  # every pair of codes, else 50,000 of them drawn
        codes = dict(zip("ab", (g.ravel() for g in np.meshgrid(np.arange(len(a)), np.arange(len(b)), indexing="ij"))))
    else:
        draw = np.random.default_rng(len(a))
        codes = {"a": draw.integers(0, len(a), 50_000), "b": draw.integers(0, len(b), 50_000)}
    strings = {"a": np.array(list(a), dtype=object)[codes["a"]], "b": np.array(list(b), dtype=object)[codes["b"]]}
    ops = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "=": operator.eq, "<>": operator.ne}
    for op, holds in ops.items():
        for x, y in (("a", "b"), ("b", "a"), ("a", "a")):
            lowered = lower(Compare(op, Column(x, VARCHAR), Column(y, VARCHAR)), {"a": a, "b": b}, {})
            got = ops[lowered.op](_codes_value(lowered.left, codes), _codes_value(lowered.right, codes))
            assert np.array_equal(got, np.vectorize(holds)(strings[x], strings[y])), (sizes, op, x, y, lowered)


def test_opening_a_store_of_string_columns_reads_no_dictionary_and_imports_no_pyarrow(data):
    """A fresh process opens the store (its manifest: each dictionary's length and digest) without reading a
    dictionary or importing pyarrow, whose import a first answer that reads no string would wait for."""
    import subprocess
    import sys

    _, _, path = data
    code = ("import sys, gquery; t = gquery.open(sys.argv[1]); d = t.data.columns['s'].dictionary; "
            "print(len(d), d._strings is None, 'pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True).stdout.split()
    assert int(out[0]) > 65_536 and out[1:] == ["True", "False"], out


def test_a_version_4_store_with_its_dictionaries_in_its_manifest_is_still_read(tmp_path):
    """A store gquery wrote before dictionaries had buffers of their own (version 4: each listed in the
    manifest, its CRC in the column's trailer), with NULLs: opened, checked whole and answered as DuckDB answers
    over the parquet it was written from; not rebuilt (a generated store may have no parquet left)."""
    import shutil
    from pathlib import Path

    folder = Path(__file__).parent / "data" / "store-v4"
    path = shutil.copytree(folder / "lineitem.gq", tmp_path / "lineitem.gq")
    assert json.loads((path / "manifest.json").read_text())["version"] == 4
    assert store.check_store(path) == 1500
    t = gquery.open(str(path))
    con = duckdb.connect()
    for text in ["SELECT l_returnflag, l_linestatus, COUNT(*), SUM(l_quantity), MIN(l_shipmode), COUNT(l_discount) "
                 "FROM lineitem GROUP BY 1, 2 ORDER BY 1, 2",
                 "SELECT COUNT(*) FROM lineitem WHERE l_comment > l_shipinstruct AND l_shipmode IN ('AIR', 'MAIL')",
                 "SELECT l_shipmode, MAX(l_comment), COUNT(*) FROM lineitem GROUP BY 1 ORDER BY 1 NULLS FIRST"]:
        want = con.execute(text.replace("FROM lineitem", f"FROM '{folder / 'lineitem.parquet'}'")).fetchall()
        assert same(t.sql(text, backend="cpu", check=False).result, want, True), text
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["version"] = 3
    store._write_manifest(path, manifest)
    with pytest.raises(store.StoreError, match="store version 3, this gquery reads 4 and 5") as e:
        gquery.open(str(path))
    assert "\n" not in str(e.value)


def uneven_parts(folder):
    """Three parquet parts that differ where one kernel must still serve them all: s of 3,000, then 6,000 and 5
    distinct strings against w's 4,000 (the smaller side of s < w changes from part to part), NULLs in k and s
    in the first part only, none in the others; a parted store of them."""
    rng = np.random.default_rng(11)
    pool = sorted({"".join(rng.choice(LETTERS, int(rng.integers(1, 7)))) for _ in range(40_000)})
    folder.mkdir()
    for part, (n_s, nulls) in enumerate(((3000, 0.1), (6000, 0.0), (5, 0.0)), start=1):
        rows = 20_000
        s = [pool[i] for i in rng.choice(len(pool), n_s, replace=False)]
        w = [pool[i] for i in rng.choice(len(pool), 4000, replace=False)]
        s_rows = [s[i] for i in np.concatenate([np.arange(n_s), rng.integers(0, n_s, rows - n_s)])]
        null = rng.random(rows) < nulls
        pq.write_table(pa.table({
            "s": pa.array([None if z else v for v, z in zip(s_rows, null)], pa.string()),
            "w": pa.array([w[i] for i in np.concatenate([np.arange(4000), rng.integers(0, 4000, rows - 4000)])], pa.string()),
            "k": pa.array([None if z else int(v) for v, z in zip(rng.integers(0, 50, rows), null[::-1])], pa.int64()),
            "q": pa.array(rng.integers(-500, 5000, rows), pa.int64()),
        }), folder / f"lineitem.{part}.parquet")
    return store.write_parted(tpch.find_lineitem(folder), folder.parent / "uneven.gq", echo=lambda m: None)


UNEVEN = [
    "SELECT COUNT(*), SUM(q) FROM t WHERE s < w",
    "SELECT COUNT(*) FROM t WHERE w >= s OR k IS NULL",
    "SELECT COUNT(*), COUNT(k), SUM(k), MIN(s) FROM t WHERE s IS NOT NULL AND NOT (s = w)",
    "SELECT k, COUNT(*), COUNT(s) FROM t WHERE k IS NULL OR k < 10 GROUP BY k ORDER BY k NULLS FIRST",
]


def test_parts_that_differ_in_nulls_and_dictionary_sizes_lower_to_one_kernel(tmp_path):
    """The planner lowers a predicate alike in every part (prune.string_sides: one side of s < w ranked by a
    table in every part; IS NULL tested in every part where any holds a NULL), so the parts share one kernel:
    no 'parts lower the query to different kernels' refusal; the CPU answers as DuckDB."""
    from gquery.gpu.fusedplan import plan_fused

    path = uneven_parts(tmp_path / "uneven")
    t = store.open_store(path)
    con = duckdb.connect()
    for text in UNEVEN:
        query = sql.parse(text, answer.schema_of(t), table="t")
        plan = plan_fused(query, answer.parts_of(t), "pinned", 132)  # NotOnGpu where the parts lowered apart
        assert len(plan.tables) == 3 and plan.spec.nullable, text
        if " w" in text:  # s's codes ranked by a table (4,000 strings at most in w's largest part: w is the small side)
            assert "[" in plan.spec.predicate and "* " in plan.spec.predicate, plan.spec.predicate
        want = con.execute(text.replace("FROM t", f"FROM read_parquet('{tmp_path / 'uneven'}/*.parquet')")).fetchall()
        assert same(answer.cpu_answer(query, t).result, want, "ORDER BY" in text), text


@pytest.mark.gpu
def test_parts_that_differ_in_nulls_and_dictionary_sizes_answer_on_the_gpu_as_duckdb(tmp_path):
    """The same parts on the GPU, every mode: a part without a NULL reads its validity as every bit set."""
    from gquery.gpu.executor import Engine, close_last

    path = uneven_parts(tmp_path / "uneven")
    con = duckdb.connect()
    engine = Engine()
    try:
        t = store.open_store(path, engine.memory)
        for text in UNEVEN:
            query = sql.parse(text, answer.schema_of(t), table="t")
            want = con.execute(text.replace("FROM t", f"FROM read_parquet('{tmp_path / 'uneven'}/*.parquet')")).fetchall()
            for mode in ("resident", "pinned", "registered", "pageable"):
                got = answer.gpu_answer(query, t, engine, mode, repeat=1, warmup=False)
                assert same(got.result, want, "ORDER BY" in text), (mode, text, got.rows[:3], want[:3])
        engine.memory.release_table(t)
    finally:
        close_last(engine)


def test_a_small_dictionary_decodes_from_its_list_as_a_large_one_by_arrow(monkeypatch):
    """Dictionary.decode: up to SMALL_DICTIONARY strings from a Python list kept once read, past it an Arrow
    take: the same strings for the same codes, repeated and in any order."""
    from gquery import schema

    strings = sorted({"", "a", "ab", "\x00", "é", "🙂", "N", "R", "A"})
    codes = np.array([3, 0, 0, len(strings) - 1, 5, 3], dtype=np.int64)
    small = schema.Dictionary(strings).decode(codes)
    monkeypatch.setattr(schema, "SMALL_DICTIONARY", 0)
    assert small == schema.Dictionary(strings).decode(codes) == [strings[c] for c in codes]


@pytest.mark.parametrize("string_type", [pa.string(), pa.large_string(), pa.string_view(), pa.dictionary(pa.int32(), pa.string())])
def test_a_string_column_of_every_arrow_string_type_with_nulls_answers_as_duckdb(string_type, tmp_path):
    """A file's string column with NULLs, in any of Arrow's string types (string_view has no smallest value in
    Arrow: its NULLs were filled before it was made one type), is held and answered as DuckDB answers it."""
    path = tmp_path / "sv.parquet"
    values = ["b", None, "é", "", None, "a"]
    pq.write_table(pa.table({"s": pa.array(values, pa.string()).cast(string_type), "k": pa.array(range(6), pa.int64())}),
                   path)
    con = duckdb.connect()
    con.execute(f"CREATE VIEW sv AS SELECT * FROM read_parquet('{path}')")
    t = gquery.open(path)
    for text in ["SELECT MIN(s), MAX(s), COUNT(s), COUNT(*) FROM sv", "SELECT s, SUM(k) FROM sv GROUP BY s ORDER BY s",
                 "SELECT COUNT(*) FROM sv WHERE s IS NULL OR s > 'a'"]:
        assert t.sql(text, backend="cpu", check=False).rows == con.execute(text).fetchall(), text
