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
