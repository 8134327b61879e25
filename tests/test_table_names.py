"""Any table by its name: a file or folder is the table its name says (trips.parquet is `trips`, a folder
rides/ of parts is `rides`, TPC-H's files stay `lineitem`), through the CLI, the API, the store built
beside it and DuckDB's check; `name=` names it otherwise; the wrong name is the user's to fix, in one line."""

import json
import shutil
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gquery
from conftest import gquery as cli
from gquery import store
from gquery.sources import table_name
from gquery.sql import named_sql
from gquery.tpch import find_lineitem


@pytest.mark.parametrize("paths, name", [
    (["d/lineitem.parquet"], "lineitem"), (["d/lineitem.tbl"], "lineitem"), (["sf10/lineitem", "sf10/lineitem/lineitem.3.parquet"], "lineitem"),
    (["x/trips.parquet"], "trips"), (["rides", "rides/part-1.parquet", "rides/part-2.parquet"], "rides"),
    (["my-data.parquet"], "my-data"), (["x/edge.gq"], "edge"), ([], "lineitem"),
])
def test_a_table_is_named_by_its_files(paths, name):
    assert table_name([Path(p) for p in paths]) == name


def trips(folder: Path, name: str = "trips.parquet") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    pq.write_table(pa.table({"city": pa.array(["Oslo", "Lima", "Oslo", "Pune"]),
                             "fare": pa.array([Decimal("12.50"), Decimal("7.25"), Decimal("30.00"), Decimal("4.75")],
                                              pa.decimal128(9, 2)),
                             "km": pa.array([3, 2, 11, 1], pa.int32())}), path)
    return path


def run_json(*args):
    r = cli("run", "--backend", "cpu", "--json", "--repeat", 1, *args)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


def test_the_cli_asks_a_file_by_its_stem_and_checks_it_against_duckdb(tmp_path):
    path = trips(tmp_path / "data")
    out = run_json("--data", path, "--sql", "SELECT city, COUNT(*), SUM(fare), MAX(km) FROM trips GROUP BY city ORDER BY city")
    assert out["check"] is True and out["checked_against"] == "DuckDB"
    assert out["rows"] == [["Lima", 1, "7.25", 2], ["Oslo", 2, "42.50", 11], ["Pune", 1, "4.75", 1]]
    built = store.cache_path_for(find_lineitem(path))  # in gquery's cache folder: nothing written beside the data
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["trips.parquet"]
    assert built.name.startswith("trips-") and store.table_name(built) == "trips"  # the store keeps the name
    again = run_json("--data", built, "--sql", "SELECT SUM(km) FROM trips")
    assert again["rows"] == [[17]]
    r = cli("run", "--backend", "cpu", "--data", path, "--sql", "SELECT COUNT(*) FROM lineitem")
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1] == \
        "gquery: error: unknown table lineitem: the data is the table trips"
    assert "DuckDB: loading" not in r.stderr  # the user's typo: nothing loaded to say so


def test_a_folder_of_parts_is_the_folders_table(tmp_path):
    folder = tmp_path / "rides"
    trips(folder, "part-1.parquet")
    trips(folder, "part-2.parquet")
    out = run_json("--data", folder, "--sql", "SELECT COUNT(*), SUM(fare) FROM rides")
    assert out["rows"] == [[8, "109.00"]] and out["check"] is True


def test_a_name_that_must_be_quoted(tmp_path):
    path = trips(tmp_path, "my-data.parquet")
    out = run_json("--data", path, "--sql", 'SELECT MIN(fare) FROM "my-data"')
    assert out["rows"] == [["4.75"]] and out["check"] is True


def test_named_queries_ask_the_table_by_its_name(sf001, tmp_path):
    """--z and --query are the named query's text over the data's table, whatever it is called."""
    copy = tmp_path / "orders_2024.parquet"
    shutil.copy(sf001.files[0], copy)
    out = run_json("--data", copy, "--z", 30)
    assert out["sql"] == 'SELECT SUM(l_quantity * l_extendedprice) FROM "orders_2024" WHERE l_suppkey < 30'
    assert out["check"] is True and out["rows"] == run_json("--data", sf001.files[0], "--z", 30)["rows"]
    assert run_json("--data", copy, "--query", "q6")["check"] is True


def test_the_api_names_a_table_by_its_files_or_as_told(tmp_path):
    path = trips(tmp_path)
    t = gquery.open(path)
    assert t.name == "trips" and t.sql("SELECT COUNT(*) FROM trips", backend="cpu").rows == [(4,)]
    with pytest.raises(gquery.UnknownName, match="unknown table lineitem: the data is the table trips"):
        t.sql("SELECT COUNT(*) FROM lineitem", backend="cpu")
    t.close()
    named = gquery.open(path, name="rides")
    assert named.sql("SELECT SUM(km) FROM rides", backend="cpu").rows == [(17,)]
    named.close()
    arrow = gquery.open(pq.read_table(path))
    assert arrow.name == "lineitem" and arrow.sql("SELECT MAX(km) FROM lineitem", backend="cpu").rows == [(11,)]
    arrow.close()
    with pytest.raises(gquery.UsageError, match="name must be a table name"):
        gquery.open(path, name="")


def test_tpch_data_stays_lineitem(sf001):
    t = gquery.open(sf001.files[0])
    assert t.name == "lineitem" and t.query(30, backend="cpu").sql == named_sql("mission", 30)
    t.close()


def test_asking_another_table_builds_no_store(tmp_path):
    path = trips(tmp_path)
    r = cli("run", "--data", path, "--sql", "SELECT COUNT(*) FROM lineitem")
    assert r.returncode == 1 and r.stderr == "gquery: error: unknown table lineitem: the data is the table trips\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trips.parquet"]


def test_a_glob_is_the_files_it_matches_named_for_their_folder(tmp_path):
    folder = tmp_path / "rides"
    trips(folder, "part-1.parquet")
    trips(folder, "part-2.parquet")
    (folder / "notes.txt").write_text("not data")
    pattern = folder / "part-*.parquet"
    out = run_json("--data", pattern, "--sql", "SELECT COUNT(*), SUM(km) FROM rides")
    assert out["rows"] == [[8, 34]] and out["check"] is True
    t = gquery.open(str(pattern))
    assert t.name == "rides" and t.sql("SELECT MAX(fare) FROM rides", backend="cpu").rows == [(Decimal("30.00"),)]
    t.close()
    trips(folder, "part-3.tbl")
    for bad, message in ((folder / "part-*", "matches parquet, tbl files; a table is parquet or .tbl files, of one format"),
                         (folder / "*.csv", "no file matches")):
        r = cli("run", "--data", bad, "--sql", "SELECT COUNT(*) FROM rides")
        assert r.returncode == 1 and r.stderr.strip().splitlines()[-1] == f"gquery: error: {bad}: {message}"


def test_sql_that_reads_its_files_itself_names_the_data(tmp_path):
    """As a DuckDB user writes it: FROM read_parquet('glob') or FROM 'file.parquet', with no --data."""
    folder = tmp_path / "rides"
    trips(folder, "part-1.parquet")
    trips(folder, "part-2.parquet")
    text = f"SELECT city, SUM(km) FROM read_parquet('{folder}/part-*.parquet') GROUP BY city ORDER BY city"
    out = run_json("--sql", text)
    assert out["sql"] == f'SELECT city, SUM(km) FROM "rides" GROUP BY city ORDER BY city' and out["check"] is True
    assert out["rows"] == [["Lima", 4], ["Oslo", 28], ["Pune", 2]]
    one = run_json("--sql", f"select max(fare) from '{folder / 'part-1.parquet'}'")
    assert one["rows"] == [["30.00"]] and one["sql"] == 'select max(fare) from "part-1"'
    r = cli("run", "--sql", f"SELECT COUNT(*) FROM read_parquet('{tmp_path}/none-*.parquet')")
    assert r.returncode == 1 and "no file matches" in r.stderr.strip().splitlines()[-1]
