"""`gquery run --sql / --query` as a user runs it (a separate process): the class answered by the CPU
reference over the store and checked against DuckDB on the same text, the named queries, JSON with exact
decimals as strings, queries outside the class answered by DuckDB with the reason, and one-line errors."""

import json
import math

import pytest

from conftest import gquery
from gquery.gpu.device import probe

NO_GPU = probe()[0] is None


def run_json(sf001, *args):
    r = gquery("run", "--data", sf001.files[0], "--backend", "cpu", "--json", "--repeat", 1, *args)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("name", ["q1", "q6"])
def test_named_queries_match_duckdb(sf001, name):
    out = run_json(sf001, "--query", name)
    assert out["check"] is True and out["checked_against"] == "DuckDB" and out["backend"] == "cpu"
    differ = [(a, b) for r, s in zip(out["rows"], out["duckdb"]["rows"]) for a, b in zip(r, s) if a != b]
    assert len(out["rows"]) == len(out["duckdb"]["rows"]) and all(
        isinstance(a, float) and math.nextafter(a, b) == b for a, b in differ)  # an AVG rounded otherwise
    assert ("unit in the last place" in (out["check_note"] or "")) == bool(differ)
    if name == "q1":
        assert out["columns"][:2] == ["l_returnflag", "l_linestatus"] and len(out["rows"]) == 4
        assert all(isinstance(r[2], str) and "." in r[2] for r in out["rows"])  # exact decimals as strings


def test_mission_by_name_or_by_z_alone(sf001):
    by_name = run_json(sf001, "--query", "mission", "--z", 300)
    assert by_name["sql"] == "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < 300"
    assert by_name["check"] is True and by_name["rows"][0][0] == by_name["duckdb"]["rows"][0][0]
    by_z = run_json(sf001, "--z", 300)  # --z alone with --backend cpu: the mission on the CPU reference
    assert by_z["rows"] == by_name["rows"]


def test_sql_with_groups_dates_strings_and_an_empty_selection(sf001):
    out = run_json(sf001, "--sql", "SELECT l_shipmode, COUNT(*), MIN(l_shipdate), AVG(l_discount) FROM lineitem "
                                   "WHERE l_returnflag IN ('A', 'R') AND l_shipdate < DATE '1995-01-01' + INTERVAL 3 MONTH "
                                   "GROUP BY l_shipmode ORDER BY 1 DESC LIMIT 3")
    assert out["check"] is True and len(out["rows"]) == 3 and out["rows"][0][0] == "TRUCK"
    assert out["rows"][0][2].count("-") == 2 and isinstance(out["rows"][0][3], float)
    empty = run_json(sf001, "--sql", "SELECT SUM(l_tax), COUNT(*) FROM lineitem WHERE l_quantity < 0")
    assert empty["rows"] == [[None, 0]] and empty["check"] is True


def test_outside_the_class_duckdb_answers_and_says_why(sf001):
    r = gquery("run", "--data", sf001.files[0], "--repeat", 1, "--sql",
               "SELECT l_shipmode, COUNT(*) FROM lineitem WHERE l_comment LIKE '%fluffily%' GROUP BY 1")
    assert r.returncode == 0, r.stderr
    assert "LIKE is outside the selection+aggregate class" in r.stdout + r.stderr and "answer (DuckDB)" in r.stdout


@pytest.mark.parametrize("args,message", [
    (["--sql", "SELECT SUM(x.l_tax) FROM lineitem JOIN orders x ON 1 = 1", "--backend", "cpu"], "join"),
    (["--sql", "SELECT SUM(l_nope) FROM lineitem", "--backend", "cpu"], "l_nope"),
    (["--sql", "SELECT SUM(l_tax) FROM lineitem", "--query", "q1"], "not both"),
    (["--query", "q7"], "--query must be one of"),
    (["--query", "q1", "--z", "5"], "has none"),
    (["--query", "mission"], "needs"),
])
def test_bad_sql_is_one_line(sf001, args, message):
    r = gquery("run", "--data", sf001.files[0], "--repeat", 1, *args)
    assert r.returncode in (1, 2) and "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("gquery: error:")]
    assert len(errors) == 1 and message in errors[0], r.stderr


@pytest.mark.skipif(not NO_GPU, reason="checks the behaviour without a GPU")
def test_backend_gpu_without_a_gpu_is_one_line(sf001):
    r = gquery("run", "--data", sf001.files[0], "--query", "q6", "--backend", "gpu")
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1].startswith("gquery: error: no usable GPU")


@pytest.mark.skipif(not NO_GPU, reason="checks the behaviour without a GPU")
def test_the_api_without_a_gpu_answers_on_the_cpu_and_says_why(sf001):
    import gquery as g
    from gquery.errors import GqueryError

    t = g.open(sf001.files[0])
    a = t.sql("SELECT COUNT(*), SUM(l_quantity) FROM lineitem WHERE l_discount > 0.05")
    assert a.backend == "cpu" and "GPU not used" in a.why and a.rows[0][0] > 0
    r = t.query(30)
    assert r.backend == "cpu" and r.rows[0][0] is not None and "pycuda" in r.why
    assert r.rows == t.sql("SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < 30").rows
    with pytest.raises(GqueryError, match="no usable GPU"):
        t.sql("SELECT COUNT(*) FROM lineitem", backend="gpu")
    with pytest.raises(GqueryError, match="no usable GPU"):
        t.query(30, backend="gpu")
    t.close()
    with pytest.raises(GqueryError, match="closed"):
        t.sql("SELECT COUNT(*) FROM lineitem")


Q6_TEXT = ("SELECT SUM(l_extendedprice * l_discount) AS revenue FROM lineitem WHERE l_shipdate >= DATE '1994-01-01' "
           "AND l_shipdate < DATE '1995-01-01' AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24")


def test_the_api_over_parquet_or_an_arrow_table_without_a_store_reads_every_column(sf001, tmp_path):
    """No store beside the file: the API still holds every column SQL may name, not the mission's three."""
    import shutil

    import duckdb
    import pyarrow.parquet as pq

    import gquery as g

    alone = tmp_path / "lineitem.parquet"
    shutil.copy(sf001.files[0], alone)
    expected = duckdb.sql(Q6_TEXT.replace("FROM lineitem", f"FROM '{alone}'")).fetchall()
    assert expected[0][0] is not None
    for data in (alone, pq.read_table(alone)):
        t = g.open(data)
        a = t.sql(Q6_TEXT)
        assert a.rows == expected and a.columns == ["revenue"]
        text = str(a)  # what print(answer) shows: a table and who answered
        assert text.splitlines()[0].strip() == "revenue" and str(expected[0][0]) in text
        assert f"answered by {a.backend}" in text
        assert not (tmp_path / "lineitem.gq").exists()  # the API reads files in place: it builds no store
        t.close()


def test_a_table_of_engine_values_gives_the_mission_scan_its_int32_key():
    """Table.from_values holds every column as int64; the mission's plain scan reads its key as int32,
    converted when asked for, and a key past int32 is refused in one line, never misread."""
    import numpy as np

    from gquery.errors import GqueryError
    from gquery.query import BIGINT, decimal
    from gquery.schema import Schema
    from gquery.table import Table

    schema = Schema({"l_suppkey": BIGINT, "l_quantity": decimal(15, 2), "l_extendedprice": decimal(15, 2)}, {})
    values = {"l_suppkey": np.array([5, 40, 2**31 - 1]), "l_quantity": np.array([100, 200, 300]),
              "l_extendedprice": np.array([7, 8, 9])}
    cols = Table.from_values(values, schema).plain_columns()
    assert cols.suppkey.dtype == np.int32 and cols.suppkey.tolist() == [5, 40, 2**31 - 1]
    too_wide = Table.from_values({**values, "l_suppkey": np.array([5, 2**31, 1])}, schema)
    with pytest.raises(GqueryError, match="outside int32"):
        too_wide.plain_columns()
    assert too_wide.values("l_suppkey")[0].tolist() == [5, 2**31, 1]  # SQL over it still reads every value


# --- the answer where a user wants it: SQL from a file or standard input, CSV, Parquet, a file ----------
GROUPED = "SELECT l_returnflag, SUM(l_quantity), AVG(l_tax), MIN(l_shipdate) FROM lineitem GROUP BY 1 ORDER BY 1"


def run_cli(*args, stdin: str | None = None):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "gquery", *map(str, args)], input=stdin, capture_output=True,
                          text=stdin is not None or None, timeout=600)


def test_version_is_the_packages():
    import gquery

    r = run_cli("--version", stdin="")
    assert r.returncode == 0 and r.stdout == f"gquery {gquery.__version__}\n"


def test_sql_from_standard_input_or_a_file_is_the_same_query(sf001, tmp_path):
    by_text = run_json(sf001, "--sql", GROUPED)
    r = run_cli("run", "--data", sf001.files[0], "--backend", "cpu", "--json", "--repeat", 1, "--sql", "-",
                stdin=GROUPED + ";\n")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rows"] == by_text["rows"]
    (tmp_path / "q.sql").write_text(f"-- the returned flags\n{GROUPED}\n")
    assert run_json(sf001, "--file", tmp_path / "q.sql")["rows"] == by_text["rows"]


def test_csv_and_parquet_are_the_answers_arrow(sf001, tmp_path):
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    import gquery

    t = gquery.open(sf001.files[0])
    want = t.sql(GROUPED, backend="cpu", check=False).arrow()
    t.close()
    r = run_cli("run", "--data", sf001.files[0], "--backend", "cpu", "--repeat", 1, "--sql", GROUPED, "--output", "csv",
                stdin="")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == 'l_returnflag,sum(l_quantity),avg(l_tax),min(l_shipdate)' and len(lines) == 1 + want.num_rows
    got = pcsv.read_csv(pa_bytes(r.stdout.encode()), convert_options=pcsv.ConvertOptions(column_types=want.schema))
    assert got.equals(want)
    out = tmp_path / "answer.parquet"
    r = run_cli("run", "--data", sf001.files[0], "--backend", "cpu", "--repeat", 1, "--sql", GROUPED,
                "--output", "parquet", "--out", out, stdin="")
    assert r.returncode == 0 and r.stdout == "" and f"wrote {out}" in r.stderr, r.stderr
    assert pq.read_table(out).equals(want)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["answer.parquet"]  # no temporary file left beside it


def pa_bytes(data: bytes):
    import pyarrow as pa

    return pa.BufferReader(data)


def test_a_failed_query_leaves_the_out_file_as_it_was(sf001, tmp_path):
    out = tmp_path / "kept.json"
    out.write_text("what was there\n")
    r = run_cli("run", "--data", sf001.files[0], "--backend", "cpu", "--sql", "SELECT SUM(l_nope) FROM lineitem",
                "--output", "json", "--out", out, stdin="")
    assert r.returncode == 1 and "unknown column l_nope" in r.stderr and "Traceback" not in r.stderr
    assert out.read_text() == "what was there\n" and sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]
    r = run_cli("run", "--data", sf001.files[0], "--backend", "cpu", "--z", 30, "--repeat", 1, "--json", "--out", out,
                stdin="")
    assert r.returncode == 0 and json.loads(out.read_text())["sql"].endswith("l_suppkey < 30")


@pytest.mark.parametrize("args, message", [
    (["--z", 30, "--output", "parquet"], "--output parquet writes a file: give --out FILE"),
    (["--z", 30, "--output", "xml"], "--output must be one of table, json, csv, parquet"),
    (["--z", 30, "--json", "--output", "csv"], "--json is --output json"),
    (["--sql", "-"], "standard input holds no SQL"),
    (["--sql", GROUPED, "--file", "q.sql"], "give --sql or --file, not both"),
])
def test_output_options_fail_in_one_line_before_any_work(sf001, args, message):
    r = run_cli("run", "--data", sf001.files[0], "--backend", "cpu", *args, stdin="")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"gquery: error: {message}"), r.stderr


@pytest.mark.skipif(not NO_GPU, reason="checks the behaviour without a GPU")
def test_without_a_gpu_auto_asks_duckdb_over_the_files_and_builds_no_store(sf001, tmp_path):
    """DuckDB is the fast engine on a CPU: auto answers with it, in place, saying so; the NumPy
    reference (--backend cpu) gives the same rows; --backend duckdb takes SQL outside the class too."""
    import shutil

    path = tmp_path / "lineitem.parquet"
    shutil.copy(sf001.files[0], path)
    r = gquery("run", "--data", path, "--json", "--repeat", 1, "--query", "q6")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["backend"] == "duckdb" and "GPU not used" in out["why"] and "--backend cpu" in out["why"]
    assert out["check"] is None and sorted(p.name for p in tmp_path.iterdir()) == ["lineitem.parquet"]
    assert run_json(sf001, "--query", "q6")["rows"] == out["rows"]
    like = gquery("run", "--data", path, "--json", "--repeat", 1, "--backend", "duckdb", "--sql",
                  "SELECT COUNT(*) FROM lineitem WHERE l_comment LIKE '%fluffily%'")
    assert like.returncode == 0 and json.loads(like.stdout)["rows"][0][0] > 0, like.stderr


def test_csv_is_what_duckdbs_copy_writes_and_a_table_shows_decimals_positionally(tmp_path):
    """Dates past Python's years (DuckDB's infinity, BC, 10000-01-01), a DECIMAL's small values and a DOUBLE: the CSV
    is DuckDB's COPY's, byte for byte (pyarrow's writer wrote '<value out of range: 2147483647>', a year -768, 6.10E-8);
    the table and the JSON show 0.0000000610, not str's 6.10E-8."""
    from decimal import Decimal

    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    import gquery as gq

    path = tmp_path / "edge.parquet"
    pq.write_table(pa.table({"d": pa.array([-2**31 + 1, -719163, -10**6, 2**31 - 1, 2932897, 9000], pa.date32()),
                             "x": pa.array([Decimal("0.0000000610"), Decimal(0), Decimal("-0.0000000001"), Decimal("1.5"),
                                            None, Decimal(2)], pa.decimal128(18, 10)),
                             "i": pa.array([1, 2, 3, 4, 5, 6], pa.int64())}), path)
    sql = "SELECT d, MIN(x), AVG(i), SUM(i) FROM edge GROUP BY d ORDER BY d"
    r = run_cli("run", "-q", "--data", path, "--backend", "cpu", "--repeat", 1, "--sql", sql, "--output", "csv", stdin="")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "duckdb.csv"
    duckdb.connect().execute(f"COPY ({sql.replace('FROM edge', f'FROM read_parquet({str(path)!r})')}) TO '{out}' (HEADER)")
    assert r.stdout.encode() == out.read_bytes() and "0769-02-04 (BC),-0.0000000001,3.0,3" in r.stdout
    shown = gq.open(path).sql("SELECT MIN(x), MAX(x) FROM edge WHERE i = 1", backend="cpu")
    assert str(shown.result).splitlines()[-1].split() == ["0.0000000610", "0.0000000610"]
    r = run_cli("run", "-q", "--data", path, "--backend", "cpu", "--repeat", 1, "--sql", "SELECT MIN(x) FROM edge",
                "--json", stdin="")
    assert json.loads(r.stdout)["rows"] == [["-0.0000000001"]]


def test_quiet_says_nothing_but_the_answer_and_errors(sf001, tmp_path):
    import shutil

    path = tmp_path / "lineitem.parquet"
    shutil.copy(sf001.files[0], path)
    r = gquery("run", "-q", "--data", path, "--backend", "cpu", "--repeat", 1, "--query", "q6", "--output", "csv")
    assert r.returncode == 0 and r.stderr == "" and r.stdout.splitlines()[0] == 'revenue'
    bad = gquery("run", "--quiet", "--data", path, "--backend", "cpu", "--sql", "SELECT SUM(l_nope) FROM lineitem")
    assert bad.returncode == 1 and bad.stderr.startswith("gquery: error: unknown column l_nope")


@pytest.mark.parametrize("sql", ['SELECT SUM("é"), SUM("order"), SUM("my col") FROM odd', "SELECT SUM(é) FROM odd",
                                 "SELECT COUNT(*) FROM odd WHERE n NOT IN (1, NULL)",
                                 "SELECT COUNT(*), SUM(\"order\") FROM odd WHERE NOT (n = NULL)"])
def test_the_check_against_duckdb_holds_any_column_name_and_columns_folded_away(tmp_path, sql):
    """DuckDB's own table for the check holds columns of any name (a keyword, é, a space: quoted) and every column the
    text names, though the binder folded its predicate away (n NOT IN (1, NULL) is never true): each failed the run
    (exit 1) while the answer was right."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "odd.parquet"
    pq.write_table(pa.table({"é": pa.array([1, 2], pa.int64()), "order": pa.array([3, 4], pa.int64()),
                             "my col": pa.array([5, 6], pa.int64()), "n": pa.array([1, None], pa.int64())}), path)
    r = gquery("run", "--data", path, "--backend", "cpu", "--repeat", "1", "--sql", sql)
    assert r.returncode == 0, r.stderr
    assert "MATCH DuckDB" in r.stdout


def test_a_cpu_answer_over_a_store_whose_files_are_gone_says_why_it_is_unchecked(tmp_path):
    """A store generated part by part keeps no parquet: the CPU reference's answer says that DuckDB has no files to
    read (it said `not checked`, no reason)."""
    r = gquery("generate", "--sf", "0.02", "--parts", "2", "--data-dir", tmp_path)
    assert r.returncode == 0, r.stderr
    r = gquery("run", "--sf", "0.02", "--z", "30", "--backend", "cpu", "--repeat", "1", "--data-dir", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "none — the store's files are gone: DuckDB has none to read" in r.stdout


@pytest.mark.parametrize("sql", ["SELECT MAX(d) FROM e", "SELECT MAX(t), MAX(f) FROM e", "SELECT MAX(u), COUNT(*) FROM e",
                                 "SELECT MIN(d32 - 1), MAX(d32 + 1) FROM e"])
@pytest.mark.parametrize("backend", ["auto", "duckdb"])
def test_duckdbs_answer_is_written_as_duckdb_holds_it(tmp_path, sql, backend):
    """Where DuckDB answers (backend duckdb, or auto without a GPU), --output csv is its COPY's bytes and --output
    parquet its own Arrow table: they were made from its Python rows, so an infinite date was written 9999-12-31, a
    nanosecond timestamp rounded to microseconds, a FLOAT a DOUBLE, a date past Python's years a string, and a
    UBIGINT a Python traceback."""
    import datetime

    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "e.parquet"
    pq.write_table(pa.table({"t": pa.array([10**18 + 123456789, 5], pa.timestamp("ns")), "f": pa.array([0.1, 0.2], pa.float32()),
                             "u": pa.array([2**64 - 1, 1], pa.uint64()), "d": pa.array([2**31 - 1, 0], pa.date32()),
                             "d32": pa.array([datetime.date(1, 1, 1), datetime.date(9999, 12, 31)])}), path)
    on_file = sql.replace("FROM e", f"FROM read_parquet('{path}')")
    con = duckdb.connect()
    try:
        con.execute(f"COPY ({on_file}) TO '{tmp_path / 'duckdb.csv'}' (HEADER)")
        arrow = con.sql(on_file).to_arrow_table()
    finally:
        con.close()
    r = run_cli("run", "-q", "--data", path, "--backend", backend, "--repeat", 1, "--sql", sql, "--output", "csv")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (tmp_path / "duckdb.csv").read_bytes()
    out = tmp_path / "answer.parquet"
    r = run_cli("run", "-q", "--data", path, "--backend", backend, "--repeat", 1, "--sql", sql, "--output", "parquet",
                "--out", out)
    assert r.returncode == 0, r.stderr
    assert pq.read_table(out) == arrow


def test_a_folders_damaged_part_is_named(tmp_path):
    """A folder of parquet parts, one of them cut short: the error names that part, not the first."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import gquery as gq

    folder = tmp_path / "fold"
    folder.mkdir()
    pq.write_table(pa.table({"a": [1, 2]}), folder / "p0.parquet")
    pq.write_table(pa.table({"a": [3, 4]}), folder / "p1.parquet")
    whole = (folder / "p1.parquet").read_bytes()
    (folder / "p1.parquet").write_bytes(whole[:len(whole) // 2])
    with pytest.raises(gq.GqueryError, match="p1.parquet: cannot read parquet"):
        gq.open(folder)
    r = run_cli("run", "-q", "--data", folder, "--backend", "cpu", "--sql", "SELECT SUM(a) FROM fold", stdin="")
    assert r.returncode == 1 and "p1.parquet: cannot read parquet" in r.stderr and len(r.stderr.splitlines()) == 1


def test_processes_at_once_build_the_cache_store_once(tmp_path, monkeypatch):
    """Six runs at once over a file whose store in gquery's cache is missing, then stale: one builds it, the others
    find it built (they built it together, and said each other's half-written store was damaged: remove it)."""
    import os
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "mr.parquet"
    pq.write_table(pa.table({"x": list(range(20_000)), "y": [i % 7 for i in range(20_000)]}), path)
    monkeypatch.setenv("GQUERY_STORE_DIR", str(tmp_path / "stores"))
    for rewritten in (False, True):
        if rewritten:
            os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 5))
        runs = [subprocess.Popen([sys.executable, "-m", "gquery", "run", "-q", "--data", str(path), "--backend", "cpu",
                                  "--repeat", "1", "--sql", "SELECT COUNT(*), SUM(y) FROM mr", "--output", "csv"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
        done = [(r.communicate(timeout=600), r.returncode) for r in runs]
        assert all(rc == 0 and err == "" and out == "count_star(),sum(y)\n20000,59997\n" for (out, err), rc in done), done


@pytest.mark.parametrize("sql", ["SELECT g, k, COUNT(*) FROM tie3 GROUP BY g, k ORDER BY g",
                                 "SELECT g, k, COUNT(*) FROM tie3 GROUP BY g, k LIMIT 2",
                                 "SELECT g, k, COUNT(*) FROM tie3 GROUP BY g, k ORDER BY g LIMIT 3"])
def test_the_duckdb_check_takes_ties_in_any_order_and_any_of_them_at_the_limit(tmp_path, sql):
    """Rows tied in ORDER BY come in any order (gquery's by the group key, DuckDB's as its threads met them), and
    LIMIT keeps any of the tied rows (or of unordered ones): the check compares the ORDER BY's values in sequence and
    each run of ties as a multiset, the run LIMIT cut by its count (it said MISMATCH and exited 1 for right answers)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 5000
    path = tmp_path / "tie3.parquet"
    pq.write_table(pa.table({"g": pa.array([i % 2 for i in range(n)], pa.int32()),
                             "k": pa.array([(i * 7919) % n for i in range(n)], pa.int64())}), path)
    r = run_cli("run", "-q", "--data", path, "--backend", "cpu", "--repeat", 1, "--sql", sql, "--json", stdin="")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["check"] is True


def test_a_check_with_its_query_compares_runs_of_ties_and_nothing_else_loosely():
    from gquery.query import Column, INTEGER, Output, Query
    from gquery.result import Result, compare

    g, k = Column("g", INTEGER), Column("k", INTEGER)
    ordered = Query("q", (Output("g", g), Output("k", k)), group_by=(g, k), order_by=((0, False),))
    ours = Result([("g", INTEGER), ("k", INTEGER)], [(0, 1), (0, 2), (1, 3)])
    assert compare(ours, [(0, 2), (0, 1), (1, 3)], True, ordered).equal  # a run of ties in another order
    assert not compare(ours, [(0, 1), (0, 5), (1, 3)], True, ordered).equal  # another row within a run
    assert not compare(ours, [(1, 3), (0, 1), (0, 2)], True, ordered).equal  # another ORDER BY sequence
    limited = Query("q", ordered.outputs, group_by=(g, k), order_by=((0, False),), limit=2)
    cut = Result(ours.columns, [(0, 1), (0, 2)])
    found = compare(cut, [(0, 7), (0, 1)], True, limited)  # LIMIT kept other rows of the tied run
    assert found.equal and found.tied_at_limit == 2 and "counted, not compared" in found.says("DuckDB")
    assert not compare(cut, [(0, 7), (1, 1)], True, limited).equal  # (its ORDER BY values still compared)
    assert compare(cut, [(0, 2), (0, 1)], True, limited).says("DuckDB") is None  # (the same rows: compared)
