"""Texts parsed in an earlier process, kept on disk (gquery.textcache): a fresh process asking one answers it
without importing sqlglot, with the Query a parse gives; another table, a damaged or foreign file, and a folder that
cannot be written each cost a parse, never an answer."""

import json
import os
import random
import subprocess
import sys

import pytest

from gquery import sql, store, textcache
from gquery.answer import schema_of
from gquery.bench.querygen import query as random_query
from gquery.errors import GqueryError, deep_expressions

ASK = """
import json, sys
import gquery
t = gquery.open(sys.argv[1], name=sys.argv[3] if len(sys.argv) > 3 else None)
a = t.sql(sys.argv[2], backend="cpu", check=False)
print(json.dumps({"rows": [[str(v) for v in r] for r in a.rows], "sqlglot": "sqlglot" in sys.modules}))
"""
MISSION = "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < 30"


def ask(path, text, cache, *name):
    done = subprocess.run([sys.executable, "-c", ASK, str(path), text, *name], capture_output=True, text=True,
                          env={**os.environ, "GQUERY_QUERY_CACHE": str(cache)}, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


@pytest.fixture(scope="module")
def table(sf001):
    return store.open_store(store.ensure_store(sf001, echo=lambda m: None))


def test_a_text_asked_again_in_a_fresh_process_is_answered_without_sqlglot(sf001, tmp_path):
    path = store.ensure_store(sf001, echo=lambda m: None)
    first, _ = ask(path, MISSION, tmp_path)
    again, said = ask(path, MISSION, tmp_path)
    assert first["sqlglot"] and not again["sqlglot"] and said == ""
    assert again["rows"] == first["rows"]
    other, _ = ask(path, MISSION.replace("30", "31"), tmp_path)  # a new text: parsed
    assert other["sqlglot"]


def test_another_tables_name_or_schema_is_another_key(table, tmp_path, monkeypatch):
    monkeypatch.setenv("GQUERY_QUERY_CACHE", str(tmp_path))
    monkeypatch.setattr(textcache, "_written", 0)  # (this test process's earlier tests kept their own first texts)
    monkeypatch.setattr(textcache, "_pending", [])
    schema = schema_of(table)
    key = textcache.table_key("lineitem", schema)
    textcache.keep(MISSION, key, sql.parse(MISSION, schema))
    assert list(tmp_path.iterdir()) == []  # kept for the process's exit: no call waits for a write
    textcache.write_kept()
    assert textcache.load(MISSION, "lineitem", key) == sql.parse(MISSION, schema)
    assert textcache.load(MISSION, "lineitem", textcache.table_key("other", schema)) is None
    fewer = type(schema)({n: t for n, t in schema.types.items() if n != "l_tax"}, schema.left_out)
    assert textcache.load(MISSION, "lineitem", textcache.table_key("lineitem", fewer)) is None


def test_a_query_read_back_is_its_parse_notes_and_all(table, tmp_path, monkeypatch):
    """Every node of the class pickles and reads back as gquery's query nodes alone (random texts of querygen)."""
    monkeypatch.setenv("GQUERY_QUERY_CACHE", str(tmp_path))
    monkeypatch.setattr(textcache, "_written", 0)
    monkeypatch.setattr(textcache, "_pending", [])
    monkeypatch.setattr(textcache, "KEPT_A_PROCESS", 10**6)
    schema, rng, read = schema_of(table), random.Random(11), 0
    key = textcache.table_key("lineitem", schema)
    for _ in range(300):
        text = random_query(rng)
        try:
            q = deep_expressions(sql.parse)(text, schema)
        except GqueryError:
            continue
        textcache.keep(text, key, q)
        textcache.write_kept()  # (as at exit: the interpreter's own recursion limit)
        back = textcache.load(text, "lineitem", key)
        if back is None:  # not kept: a tree so deep pickles past the limit (or a thread's C stack)
            assert len(text) > textcache.LONGEST_TEXT or not _pickles(q)
            continue
        assert back == q and back.notes == q.notes and repr(back) == repr(q), text
        read += 1
    assert read > 150


def _pickles(q) -> bool:
    import pickle

    try:
        pickle.dumps(q)
    except RecursionError:
        return False
    return True


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "foreign", "another text", "a constant"])
def test_a_damaged_or_foreign_file_is_a_miss_and_the_text_is_parsed_again(sf001, tmp_path, damage):
    path = store.ensure_store(sf001, echo=lambda m: None)
    first, _ = ask(path, MISSION, tmp_path)
    [kept] = list(tmp_path.glob("*.query"))
    data = kept.read_bytes()
    if damage == "truncated":
        kept.write_bytes(data[:len(data) // 2])
    elif damage == "garbage":
        kept.write_bytes(bytes(random.Random(3).randrange(256) for _ in range(len(data))))
    elif damage == "empty":
        kept.write_bytes(b"")
    elif damage == "foreign":  # a pickle that would call a function of os: never unpickled
        kept.write_bytes(b"cos\ngetcwd\n(tR.")
    elif damage == "a constant":  # Z = 30 made 90 by one byte: it still unpickles, as the query of another Z
        assert data.count(b"K\x1e") == 1
        kept.write_bytes(data.replace(b"K\x1e", b"K\x5a"))
    else:  # the file of another text, renamed to this one's
        other, _ = ask(path, MISSION.replace("30", "3000"), tmp_path / "other")
        kept.write_bytes(next((tmp_path / "other").glob("*.query")).read_bytes())
    again, said = ask(path, MISSION, tmp_path)
    assert again["sqlglot"] and again["rows"] == first["rows"] and said == ""
    assert ask(path, MISSION, tmp_path)[0]["sqlglot"] is False  # written again by the parse


def test_the_same_texts_file_for_another_schema_renamed_to_this_ones_is_a_miss(tmp_path):
    """Two tables of one name whose column differs in scale (DECIMAL(12,2), DECIMAL(12,3)) ask one text: each one's
    file, given the other's name, is a miss (a file held no digest of its key: it was read as the other table's query,
    and answered (None, 0) where DuckDB answers (2.25, 1))."""
    from decimal import Decimal

    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = "SELECT SUM(d), COUNT(*) FROM t WHERE d > 2"
    paths = {}
    for scale in (2, 3):
        folder = tmp_path / f"s{scale}"
        folder.mkdir()
        paths[scale] = folder / "t.parquet"
        pq.write_table(pa.table({"d": pa.array([Decimal("1.50"), Decimal("2.25")], pa.decimal128(12, scale))}),
                       paths[scale])
    files = {}
    for scale, path in paths.items():
        ask(path, text, tmp_path / f"cache{scale}")
        [files[scale]] = list((tmp_path / f"cache{scale}").glob("*.query"))
    data = {scale: f.read_bytes() for scale, f in files.items()}
    files[2].write_bytes(data[3])
    files[3].write_bytes(data[2])
    for scale, path in paths.items():
        again, _ = ask(path, text, tmp_path / f"cache{scale}")
        want = duckdb.connect().execute(f"SELECT SUM(d), COUNT(*) FROM read_parquet('{path}') WHERE d > 2").fetchall()
        assert again["sqlglot"] and again["rows"] == [[str(v) for v in r] for r in want]


def test_a_folder_that_cannot_be_written_is_said_once_and_the_answers_come(sf001, tmp_path):
    path = store.ensure_store(sf001, echo=lambda m: None)
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    got, said = ask(path, MISSION, blocked / "queries")
    lines = [line for line in said.splitlines() if line]
    assert len(lines) == 1 and "the query cache" in lines[0] and "cannot be written" in lines[0]
    assert got["rows"] == ask(path, MISSION, tmp_path)[0]["rows"]


def test_a_process_writes_its_first_texts_alone_and_the_folder_is_cut_to_its_newer_half(table, tmp_path, monkeypatch):
    monkeypatch.setenv("GQUERY_QUERY_CACHE", str(tmp_path))
    monkeypatch.setattr(textcache, "_written", 0)
    monkeypatch.setattr(textcache, "_pending", [])
    monkeypatch.setattr(textcache, "KEPT_A_PROCESS", 5)
    monkeypatch.setattr(textcache, "FILES_KEPT", 8)
    for k in range(8):  # another process's files, older
        (tmp_path / f"{k:064x}.query").write_bytes(b"x")
        os.utime(tmp_path / f"{k:064x}.query", ns=(k * 10**9, k * 10**9))
    schema = schema_of(table)
    key = textcache.table_key("lineitem", schema)
    for z in range(1, 9):
        text = MISSION.replace("30", str(z))
        textcache.keep(text, key, sql.parse(text, schema))
    textcache.write_kept()
    names = sorted(p.name for p in tmp_path.glob("*.query"))
    assert len(names) == 4 + 5  # the newer half of the 8, and this process's first 5
    assert [n for n in names if n.startswith("0" * 63)] == [f"{k:064x}.query" for k in range(4, 8)]


def test_a_parser_whose_files_cannot_be_found_keeps_and_reads_nothing(table, tmp_path, monkeypatch):
    """sqlglot imported without a spec (its files unknown, so a changed parser could not change the key): no text is
    kept or read, and nothing raises."""
    import types

    monkeypatch.setenv("GQUERY_QUERY_CACHE", str(tmp_path))
    monkeypatch.setattr(textcache, "_pending", [])
    monkeypatch.setattr(textcache, "_written", 0)
    textcache._code.cache_clear()
    monkeypatch.setitem(sys.modules, "sqlglot", types.ModuleType("sqlglot"))  # (__spec__ None: find_spec raises)
    try:
        key = textcache.table_key("lineitem", schema_of(table))
        assert key is None
        textcache.keep(MISSION, key, None)
        textcache.write_kept()
        assert textcache.load(MISSION, "lineitem", key) is None and list(tmp_path.iterdir()) == []
    finally:
        textcache._code.cache_clear()
