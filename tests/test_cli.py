"""The CLI as a user meets it: separate processes, exit codes, one-line errors."""

import json

import pytest

from conftest import gquery
from gquery import answer, sql
from gquery.columns import load_lineitem
from gquery.gpu.device import probe
from gquery.table import Table

HAS_GPU = probe()[0] is not None


def exact_mission(source, z):
    """The mission's SQL at Z through the CPU reference over the source's columns: its one value."""
    table = Table.from_columns(load_lineitem(source))
    return answer.cpu_answer(sql.parse(sql.named_sql("mission", z), answer.schema_of(table)), table).rows[0][0]


def one_line_error(result, code):
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("gquery: error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_duckdb_json_equals_exact_numpy(sf001, data_dir):
    r = gquery("run", "--sf", "0.01", "--z", "30", "--backend", "duckdb", "--json", "--data-dir", data_dir)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    exact = exact_mission(sf001, 30)
    assert out["rows"] == [[str(exact)]] and out["backend"] == "duckdb"
    assert out["runs"] == [] and out["duckdb"]["median_ms"] > 0 and len(out["duckdb"]["times_ms"]) == 5


def test_z_and_its_sql_print_the_same_json(sf001):
    """--z is sugar for the mission's SQL: one road, one answer object, one JSON shape and check."""
    by_z = json.loads(gquery("run", "--z", "30", "--backend", "cpu", "--json", "--repeat", "1", "--data", sf001.files[0]).stdout)
    text = "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < 30"
    by_sql = json.loads(gquery("run", "--sql", text, "--backend", "cpu", "--json", "--repeat", "1", "--data", sf001.files[0]).stdout)
    assert by_z.keys() == by_sql.keys() and by_z["sql"] == by_sql["sql"] == text
    assert by_z["rows"] == by_sql["rows"] and by_z["check"] is by_sql["check"] is True
    duck = json.loads(gquery("run", "--z", "30", "--backend", "duckdb", "--json", "--data", sf001.files[0]).stdout)
    assert duck.keys() == by_z.keys() and duck["rows"] == by_z["rows"]


def test_table_output(sf001, data_dir):
    r = gquery("run", "--sf", "0.01", "--z", "30", "--backend", "duckdb", "--repeat", "2", "--data-dir", data_dir)
    assert r.returncode == 0
    assert "DuckDB" in r.stdout and "median" in r.stdout and "SELECT SUM" in r.stdout


@pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without a GPU")
def test_auto_without_gpu_says_why_and_still_answers(sf001, data_dir):
    r = gquery("run", "--sf", "0.01", "--z", "30", "--data-dir", data_dir)
    assert r.returncode == 0
    assert "GPU not used:" in r.stderr and "DuckDB" in r.stdout


@pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without a GPU")
def test_backend_gpu_without_gpu_fails_before_any_work(tmp_path):
    r = gquery("run", "--sf", "0.01", "--z", "30", "--backend", "gpu", "--json", "--data-dir", tmp_path)
    assert "no usable GPU" in one_line_error(r, 1)
    assert r.stdout == "" and "DuckDB" not in r.stderr
    assert not list(tmp_path.iterdir()), "no data is generated for a command that cannot run"


@pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without a GPU")
def test_gpu_options_without_gpu_are_ignored_with_one_note(sf001):
    r = gquery("run", "--z", "30", "--backend", "duckdb", "--gpus", "2", "--data", sf001.files[0])
    assert r.returncode == 0, r.stderr
    notes = [line for line in r.stderr.splitlines() if line.startswith("ignored")]
    assert notes == ["ignored --gpus: --backend duckdb runs no GPU"]


@pytest.mark.parametrize("args", [
    ["--sf", "abc", "--z", "1"], ["--sf", "0", "--z", "1"], ["--sf", "-1", "--z", "1"], ["--sf", "nan", "--z", "1"],
    ["--sf", "2000", "--z", "1"], ["--sf", "1", "--z", "1.5"], ["--sf", "1", "--z", "x"], ["--sf", "1"],
    ["--z", "1"], ["--sf", "1", "--z", "1", "--mode", "warp"], ["--sf", "1", "--z", "1", "--backend", "tpu"],
    ["--sf", "1", "--z", "1", "--repeat", "0"], ["--sf", "1", "--z", "1", "--plot", "x.png"],
])
def test_usage_errors_exit_2_in_one_line(args, tmp_path):
    r = gquery("run", *args, "--data-dir", tmp_path)
    one_line_error(r, 2)
    assert not list(tmp_path.iterdir()), "a usage error must not generate data"


def test_other_usage_errors(tmp_path):
    one_line_error(gquery("nosuchcommand"), 2)
    one_line_error(gquery("generate", "--sf", "0.01", "--format", "csv", "--data-dir", tmp_path), 2)


def test_bad_data_exits_1_in_one_line(tmp_path):
    assert "no such file" in one_line_error(gquery("run", "--z", "1", "--data", tmp_path / "nope.parquet"), 1)
    bad = tmp_path / "lineitem.parquet"
    bad.write_bytes(b"garbage")
    assert "lineitem.parquet" in one_line_error(gquery("run", "--z", "1", "--backend", "duckdb", "--data", bad), 1)


def test_generate_then_reuse(tmp_path):
    r = gquery("generate", "--sf", "0.01", "--data-dir", tmp_path)
    assert r.returncode == 0 and "generating" in r.stderr
    assert (tmp_path / "sf0.01" / "lineitem.parquet").exists()
    again = gquery("generate", "--sf", "0.01", "--data-dir", tmp_path)
    assert again.returncode == 0 and "generating" not in again.stderr


def test_data_path_and_tbl(sf001_tbl, sf001):
    r = gquery("run", "--z", "30", "--backend", "duckdb", "--json", "--data", sf001_tbl.files[0])
    assert r.returncode == 0
    assert json.loads(r.stdout)["rows"] == [[str(exact_mission(sf001, 30))]]


@pytest.mark.parametrize("args", [["--help"], []], ids=["help", "no-arguments"])
def test_help_lists_commands(args):
    r = gquery(*args)
    assert r.returncode == 0 and "gquery: error" not in r.stderr
    for cmd in ("generate", "run", "bandwidth", "ladder", "bench"):
        assert cmd in r.stdout


def test_help_texts_are_plain():
    r = gquery("run", "--help")
    assert "(default: $GQUERY_DATA_DIR, else ./dbgen_data)" in " ".join(r.stdout.split())
    assert "<bool>" not in r.stdout and "--json " in r.stdout
