"""The store from the command line: generate writes it, encode builds it, --data reads it."""

from conftest import gquery


def test_generate_writes_a_verified_store_and_run_reads_it(tmp_path):
    r = gquery("generate", "--sf", "0.01", "--data-dir", tmp_path)
    assert r.returncode == 0, r.stderr
    store = tmp_path / "sf0.01" / "lineitem.gq"
    assert (store / "manifest.json").is_file() and "verified" in r.stderr
    direct = gquery("run", "--z", "30", "--backend", "duckdb", "--data", tmp_path / "sf0.01" / "lineitem.parquet")
    via = gquery("run", "--z", "30", "--backend", "duckdb", "--data", store)
    assert direct.returncode == via.returncode == 0, via.stderr
    pick = lambda out: [l for l in out.splitlines() if l.startswith("DuckDB")][0].split()[1]
    assert pick(direct.stdout) == pick(via.stdout)


def test_encode_builds_and_refuses_damage_in_one_line(sf001, tmp_path):
    out = tmp_path / "mine.gq"
    r = gquery("encode", "--data", sf001.files[0], "--out", out)
    assert r.returncode == 0 and (out / "manifest.json").is_file(), r.stderr
    (out / "manifest.json").write_text("{")
    bad = gquery("run", "--z", "30", "--backend", "duckdb", "--data", out)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert [l for l in bad.stderr.splitlines() if l.startswith("gquery: error:")][0].count("unreadable manifest") == 1
    missing = gquery("encode", "--data", tmp_path / "nope.parquet")
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_encode_gives_any_column_the_bucket_lists_and_the_planner_scans_a_narrow_range_by_them(sf001, tmp_path):
    """--index names the column that keeps bucket lists (a physical design, like --sort-by): the planner weighs
    the index scan on a narrow range of it; a column that is not stored is refused in one line, nothing written."""
    from gquery import answer, sql, store
    from gquery.gpu.fusedplan import plan_fused

    out = tmp_path / "by-date.gq"
    r = gquery("encode", "--data", sf001.files[0], "--out", out, "--columns", "l_shipdate,l_quantity,l_extendedprice",
               "--index", "l_shipdate")
    assert r.returncode == 0, r.stderr
    table = store.open_store(out)
    assert table.columns["l_shipdate"].has("indexed") and "indexed" not in table.columns["l_quantity"].stored
    text = "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_shipdate = DATE '1995-06-17'"
    query = sql.parse(text, answer.schema_of(table))
    plan = plan_fused(query, [table], "pinned", 132).choose()
    assert plan.tables[0].index is not None and plan.tables[0].index.column == "l_shipdate"
    lists = table.columns["l_shipdate"].get("indexed")
    rows = lists.ids[plan.tables[0].index.first:plan.tables[0].index.end]
    days = table.columns["l_shipdate"].values()
    assert set(rows.tolist()) >= set(((days == 9298).nonzero()[0]).tolist())  # 1995-06-17 is day 9298
    none = gquery("encode", "--data", sf001.files[0], "--out", tmp_path / "none.gq", "--columns", "l_suppkey", "--index", "none")
    assert none.returncode == 0 and not store.open_store(tmp_path / "none.gq").columns["l_suppkey"].has("indexed")
    bad = gquery("encode", "--data", sf001.files[0], "--out", tmp_path / "bad.gq", "--columns", "l_quantity", "--index", "l_tax")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr and not (tmp_path / "bad.gq").exists()
    assert [ln for ln in bad.stderr.splitlines() if ln.startswith("gquery: error:")] == \
        ["gquery: error: --index l_tax: not among the stored columns"]


def test_a_store_of_a_table_whose_files_are_gone_is_never_replaced_without_force(tmp_path):
    """A store whose parquet was not kept (generate --parts) holds a table no file holds: run --store and encode
    --out of another file refuse to replace it, in one line, and it stays whole; encode --force replaces it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gquery import store

    assert gquery("generate", "--sf", "0.02", "--parts", "2", "--data-dir", tmp_path / "gen").returncode == 0
    kept = tmp_path / "gen" / "sf0.02" / "lineitem.gq"
    rows = store.open_store(kept).rows
    other = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3]}), other)
    for args in (["run", "--data", other, "--store", kept, "--sql", "SELECT SUM(a) FROM t", "--backend", "cpu"],
                 ["encode", "--data", other, "--out", kept]):
        r = gquery(*args)
        errors = [line for line in r.stderr.splitlines() if line.startswith("gquery: error:")]
        assert r.returncode == 1 and "Traceback" not in r.stderr and len(errors) == 1, r.stderr
        assert "a store of another table (whose files were not kept); not replacing it" in errors[0]
        assert store.open_store(kept).rows == rows and store.is_parted(kept)
    assert gquery("encode", "--data", other, "--out", kept, "--force").returncode == 0
    assert store.open_store(kept).rows == 3


def test_encode_takes_column_names_in_any_case_and_refuses_an_empty_list(sf001, tmp_path):
    """--columns, --sort-by and --index name columns as SQL does, in any ASCII case (the store keeps the data's own
    names); --columns "" names none, refused in one line (it stored every column)."""
    from gquery import store

    out = tmp_path / "upper.gq"
    r = gquery("encode", "--data", sf001.files[0], "--out", out, "--columns", "L_SUPPKEY,L_Quantity,l_shipdate",
               "--sort-by", "L_SHIPDATE", "--index", "L_SuppKey")
    assert r.returncode == 0, r.stderr
    table = store.open_store(out)
    assert list(table.columns) == ["l_suppkey", "l_quantity", "l_shipdate"] and table.sorted_by == "l_shipdate"
    assert table.columns["l_suppkey"].has("indexed")
    empty = gquery("encode", "--data", sf001.files[0], "--out", tmp_path / "none.gq", "--columns", " , ")
    assert empty.returncode == 2 and not (tmp_path / "none.gq").exists()
    assert [ln for ln in empty.stderr.splitlines() if ln.startswith("gquery: error:")] == \
        ["gquery: error: --columns names no column: give them comma-separated, or leave the option out for every column"]


def test_the_cache_store_of_files_rewritten_since_is_built_again(tmp_path):
    """A store gquery built in its own cache for --data FILE is rebuilt when the file changes (it was refused as
    stale from then on, naming `gquery encode`, which would write a store beside the user's file); the user's files
    are left as they are."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    data, stores = tmp_path / "t.parquet", tmp_path / "stores"
    env = {**os.environ, "GQUERY_STORE_DIR": str(stores)}
    ask = ("run", "--data", data, "--backend", "cpu", "--repeat", "1", "-q", "--output", "csv", "--sql", "SELECT SUM(x) FROM t")
    pq.write_table(pa.table({"x": pa.array([1, 2, 3], pa.int64())}), data)
    first = gquery(*ask, env=env)
    assert first.returncode == 0 and first.stdout.splitlines()[-1] == "6", first.stderr
    pq.write_table(pa.table({"x": pa.array([1, 2, 3, 4], pa.int64())}), data)
    os.utime(data, ns=(os.stat(data).st_atime_ns, os.stat(data).st_mtime_ns + 10**9))  # (a later write, whatever the clock)
    again = gquery(*ask, "--validate", env=env)
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == "10", again.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stores", "t.parquet"] and len(list(stores.iterdir())) == 1


def test_a_damaged_cache_store_says_to_remove_it_and_the_next_run_builds_it_again(tmp_path):
    """A store gquery built in its own cache, damaged: refused in one line that names the store to remove (it named
    `gquery encode`, which writes another store beside the user's file and leaves the damaged one in use)."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    data, stores = tmp_path / "t.parquet", tmp_path / "stores"
    env = {**os.environ, "GQUERY_STORE_DIR": str(stores)}
    ask = ("run", "--data", data, "--backend", "cpu", "--repeat", "1", "-q", "--output", "csv", "--sql", "SELECT SUM(x) FROM t")
    pq.write_table(pa.table({"x": pa.array(range(5000), pa.int64())}), data)
    assert gquery(*ask, env=env).returncode == 0
    [built] = list(stores.iterdir())
    words = built / "x.words.bin"
    words.write_bytes(words.read_bytes()[:10])
    r = gquery(*ask, env=env)
    errors = [line for line in r.stderr.splitlines() if line.startswith("gquery: error:")]
    assert r.returncode == 1 and len(errors) == 1 and errors[0].endswith(f"remove {built} (gquery's cache: the next run "
                                                                        "builds it again)"), r.stderr
    import shutil

    shutil.rmtree(built)
    again = gquery(*ask, env=env)
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == str(sum(range(5000))), again.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stores", "t.parquet"]
