"""The catalogue of issue #8: every bad input, bad option and interruption a new user met, through
the CLI as a separate process. Each must end in its documented exit code with exactly one
'gquery: error:' line and no traceback, leave nothing on disk, and never depend on the machine."""

import os
import signal
import stat
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import gquery
from gquery import api
from gquery.gpu.device import probe

HAS_GPU = probe()[0] is not None
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without a GPU")
INT64_MAX = 2**63 - 1


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*")}


def one_error(r, code: int) -> str:
    assert r.returncode == code, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("gquery: error:")]
    assert len(errors) == 1, r.stderr
    assert errors[0] != "gquery: error:" and errors[0].strip() != "gquery: error:"
    return errors[0]


def dec(values, precision=15, scale=2):
    return pa.array([None if v is None else Decimal(v) for v in values], pa.decimal128(precision, scale))


def hundredths(values, precision=38):
    return pa.array([Decimal(v).scaleb(-2) for v in values], pa.decimal128(precision, 2))


GOOD = dict(l_suppkey=pa.array([1, 2], pa.int64()), l_quantity=dec(["1.00", "2.50"]),
            l_extendedprice=dec(["10.25", "3.00"]))


def parquet(tmp_path: Path, name: str, statistics: bool = True, **change) -> Path:
    columns = {k: v for k, v in (GOOD | change).items() if v is not None}
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.table(columns), path, write_statistics=statistics)
    return path


def run_data(path: Path, *extra, z: int = 30):
    return gquery("run", "--z", z, "--repeat", "1", "--data", path, *extra)


TBL_ROW = "1|2|{key}|4|{q}|{p}|0|0|N|O|1996-01-01|1996-01-01|1996-01-01|x|y|z|\n"

BAD_FILES = {  # name: (how to make it, what the one line must say)
    "key stored as string": (lambda d: parquet(d, "str", l_suppkey=pa.array(["1", "2"])),
                             "Cannot compare values of type VARCHAR"),
    "missing column": (lambda d: parquet(d, "miss", l_extendedprice=None),
                       "unknown column l_extendedprice; the table has l_suppkey, l_quantity"),
    "garbage parquet": (lambda d: write_bytes(d / "garbage.parquet", b"not parquet at all"), "cannot read parquet"),
    "truncated parquet": (lambda d: truncated(d), "cannot read parquet"),
    "empty parquet file": (lambda d: write_bytes(d / "empty.parquet", b""), "Parquet file size is 0 bytes"),
    "empty .tbl file": (lambda d: write_bytes(d / "empty.tbl", b""), "Empty CSV file"),
    ".tbl with text in l_quantity": (lambda d: tbl(d, q="abc"), "'abc' is not a valid decimal128 number"),
    ".tbl with three decimals": (lambda d: tbl(d, q="1.234"), "Rescaling Decimal value would cause data loss"),
    ".tbl with a short row": (lambda d: write_bytes(d / "short.tbl", b"1|2|3|4|1.00|2.00\n"), "Expected 17 columns"),
    "not a table's file": (lambda d: write_bytes(d / "x.csv", b"a,b"), "not a table's file"),
    "a device, not a file": (lambda d: Path("/dev/null"), "/dev/null: not a table's file"),
    "a folder of parquet and .tbl": (lambda d: mixed(d / "mixed"), "mixed: holds both .parquet and .tbl files"),
}
# Files the mission's own road once refused (its input contract: int32 keys, DECIMAL(p,2) factors, no
# NULL): on the one road they are tables like any other, answered exactly and checked against DuckDB
ANSWERED_FILES = {
    "float64 quantity": lambda d: parquet(d, "f64", l_quantity=pa.array([1.0, 2.5])),
    "key beyond int32": lambda d: parquet(d, "k64", l_suppkey=pa.array([1, 2**40], pa.int64())),
    "null key": lambda d: parquet(d, "nk", l_suppkey=pa.array([1, None], pa.int64())),
    "null quantity": lambda d: parquet(d, "nq", l_quantity=dec(["1.00", None])),
    "null price": lambda d: parquet(d, "np", l_extendedprice=dec([None, None])),
    "null price, no statistics": lambda d: parquet(d, "ns", statistics=False, l_extendedprice=dec([None, "1.00"])),
    "scale 3": lambda d: parquet(d, "s3", l_quantity=dec(["1.000", "2.500"], scale=3)),
    "scale 0": lambda d: parquet(d, "s0", l_extendedprice=dec(["1", "2"], scale=0)),
    "decimal(38,2) beyond int64": lambda d: parquet(d, "wide", l_quantity=hundredths([1, INT64_MAX + 1])),
    "decimal(38,2) beyond int64, no statistics": lambda d: parquet(d, "wides", statistics=False,
                                                                   l_extendedprice=hundredths([-(2**63) - 1, 1])),
    "decimal(76,2)": lambda d: parquet(d, "d256", l_quantity=pa.array([1, 2], pa.decimal256(76, 2))),
    ".tbl with an empty key": lambda d: tbl(d, key=""),
}


def reader(path: Path) -> str:
    """DuckDB's own read of a test file, for the expected answer."""
    if path.suffix == ".tbl":
        names = ", ".join(f"'c{k}': 'VARCHAR'" for k in range(17))
        return (f"(SELECT CAST(NULLIF(c2, '') AS BIGINT) AS l_suppkey, CAST(c4 AS DECIMAL(15,2)) AS l_quantity, "
                f"CAST(c5 AS DECIMAL(15,2)) AS l_extendedprice FROM read_csv('{path}', delim='|', header=false, "
                f"columns={{{names}}}))")
    return f"read_parquet('{path}')"


def write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def truncated(folder: Path) -> Path:
    whole = parquet(folder, "whole").read_bytes()
    (folder / "whole.parquet").unlink()
    return write_bytes(folder / "truncated.parquet", whole[: len(whole) // 2])


def mixed(folder: Path) -> Path:
    """A folder of a parquet file and a .tbl file: which is the table, the folder does not say."""
    folder.mkdir()
    parquet(folder, "part-1")
    tbl(folder).rename(folder / "part-2.tbl")
    return folder


def tbl(folder: Path, key="1", q="1.00", p="2.00") -> Path:
    path = folder / "lineitem.tbl"
    path.write_text(TBL_ROW.format(key=key, q=q, p=p) * 2)
    return path


@pytest.mark.parametrize("case", BAD_FILES, ids=list(BAD_FILES))
def test_bad_file_is_one_line_before_any_engine(tmp_path, case):
    make, message = BAD_FILES[case]
    path = make(tmp_path)
    before = files_under(tmp_path)
    r = run_data(path)  # backend auto: the same refusal with or without a GPU
    line = one_error(r, 1)
    assert message in line and (path.name in line or "DuckDB failed" in line or "unknown column" in line), line
    assert "GPU: loading" not in r.stderr
    assert ("DuckDB: " in r.stderr) == (case == "key stored as string")  # only DuckDB can say what it refuses
    store = tmp_path / f"{path.stem}.gq"  # a readable file gets its whole store beside it before the query is read
    assert r.stdout == "" and all(p == store or store in p.parents for p in files_under(tmp_path) - before)
    assert not store.exists() or (store / "manifest.json").exists()


@pytest.mark.parametrize("case", ANSWERED_FILES, ids=list(ANSWERED_FILES))
def test_files_the_mission_once_refused_are_answered_and_checked(tmp_path, case):
    """--z is the mission's SQL on the one road: what the class holds answers on the GPU, checked; what
    it does not (NULLs, doubles), or any query where no GPU is usable, DuckDB answers, saying why."""
    import json

    path = ANSWERED_FILES[case](tmp_path)
    r = run_data(path, "--json")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    out = json.loads(r.stdout)
    duck = duckdb.sql(f"SELECT SUM(l_quantity * l_extendedprice) FROM {reader(path)} WHERE l_suppkey < 30").fetchall()
    assert out["rows"] == [[None if v is None else str(v) if isinstance(v, Decimal) else v for v in duck[0]]]
    assert out["check"] is True or (out["backend"] == "duckdb" and out["why"])


@pytest.mark.parametrize("narrow", [pa.decimal32(7, 2), pa.decimal64(15, 2), pa.decimal64(18, 0)], ids=str)
def test_decimal32_and_decimal64_columns_are_held_as_decimals(tmp_path, narrow):
    """pyarrow's 4- and 8-byte decimals (written into a parquet file's Arrow schema since pyarrow 18): opening
    such a file, or such a table, raised Arrow's 'min_max has no kernel' from the column's zone maps."""
    values = [Decimal("1.50"), None, Decimal("-3.25"), Decimal("99.99")]
    if narrow.scale == 0:
        values = [None if v is None else Decimal(int(v * 100)) for v in values]
    table = pa.table({"k": pa.array([1, 2, 3, 4], pa.int32()), "d": pa.array(values, narrow)})
    pq.write_table(table, tmp_path / "narrow.parquet")
    sql = "SELECT SUM(d), MIN(d), MAX(d), COUNT(d), SUM(k * d) FROM narrow WHERE d > 0 OR k = 2"
    want = duckdb.sql(sql.replace("FROM narrow", f"FROM read_parquet('{tmp_path / 'narrow.parquet'}')")).fetchall()
    encoded = gquery("encode", "--data", tmp_path / "narrow.parquet", "--out", tmp_path / "narrow.gq")
    assert encoded.returncode == 0, encoded.stderr
    for source in (tmp_path / "narrow.parquet", table, tmp_path / "narrow.gq"):
        got = api.open(source, name="narrow").sql(sql, backend="cpu")
        assert got.rows == want


def exact(pairs) -> str:
    return str(Decimal(f"{sum(q * p for q, p in pairs)}E-4"))


def wide_file(tmp_path, name, q, p, precision=15, rows=1):
    return parquet(tmp_path, name, l_suppkey=pa.array([1] * rows, pa.int64()),
                   l_quantity=hundredths([q] * rows, precision), l_extendedprice=hundredths([p] * rows, precision))


def run_json(*args) -> dict:
    import json

    r = run_data(*args, "--json")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("q,p,rows,overflows", [
    (3_000_000_000, 3_000_000_000, 1000, True), (2_147_483_647, 2_147_483_647, 1, True),
    (2_500_000_000, 100, 3, False)], ids=["30,000,000.00 squared", "21,474,836.47 squared", "25,000,000.00 x 1.00"])
def test_beyond_the_old_limits_is_exact_and_says_when_duckdb_overflows(tmp_path, q, p, rows, overflows):
    """Products past DECIMAL(18): DuckDB refuses the text (its multiplication overflows) and says so; the
    answer is still exact, from the engines' 128-bit arithmetic."""
    out = run_json(wide_file(tmp_path, "big", q, p, rows=rows))
    assert out["rows"] == [[exact([(q, p)] * rows)]]
    assert (out["duckdb"]["unavailable"] or "").startswith("Out of Range Error: Overflow in multiplication") == overflows
    if not HAS_GPU:  # DuckDB answers where no GPU is usable; where its products overflow, the CPU reference does
        assert (out["backend"], out["check"]) == ("cpu" if overflows else "duckdb", None)
        assert (out["checked_against"] or "").startswith("none — DuckDB refuses: Out of Range Error") == overflows
    else:  # the GPU's answer, checked against the CPU reference, says that DuckDB refuses the text
        assert ("DuckDB refuses: Out of Range Error" in (out["check_note"] or "")) == overflows


def test_decimal38_within_int64_is_exact(tmp_path):
    q, p = INT64_MAX, -(2**63)
    path = parquet(tmp_path, "wide", l_quantity=hundredths([q, 1]), l_extendedprice=hundredths([p, 1]))
    out = run_json(path, "--backend", "duckdb")
    assert out["rows"] == [[exact([(q, p), (1, 1)])]] and out["backend"] == "duckdb"


def test_beyond_duckdbs_decimal38_the_engines_answer_exactly(tmp_path):
    q = p = INT64_MAX
    out = run_json(wide_file(tmp_path, "huge", q, p, precision=38, rows=100))
    assert out["duckdb"]["unavailable"].startswith("Out of Range Error") and out["duckdb"]["rows"] == []
    assert out["rows"] == [[exact([(q, p)] * 100)]]
    table = run_data(tmp_path / "huge.parquet")
    assert exact([(q, p)] * 100) in table.stdout and "DuckDB   cannot answer" in table.stdout
    if not HAS_GPU:
        assert "none — DuckDB refuses" in table.stdout


def test_zero_rows_is_null_not_an_error(tmp_path):
    empty = dict(l_suppkey=pa.array([], pa.int64()), l_quantity=dec([]), l_extendedprice=dec([]))
    path = parquet(tmp_path, "zero", **empty)
    assert run_json(path, "--backend", "duckdb")["rows"] == [[None]]
    assert run_json(path, "--backend", "cpu")["rows"] == [[None]]


@pytest.mark.parametrize("args,code,message", [
    (["run", "--sf", "0.01", "--z", "1", "--chunk-rows", "0"], 2, "--chunk-rows must be a positive integer"),
    (["run", "--sf", "0.01", "--z", "1", "--gpus", "0"], 2, "--gpus must be a positive integer"),
    (["run", "--sf", "0.01", "--z", "1", "--mode", "warp"], 2, "mode must be one of"),
    (["run", "--sf", "0.01", "--z", "1", "--repeat", "0"], 2, "repeat must be at least 1"),
    (["run", "--sf", "0.01", "--z", "1", "--repeat", "1000000000000"], 2, "repeat must be at most 100,000"),
    pytest.param(["run", "--sf", "0.01", "--z", "1", "--backend", "gpu"], 1, "no usable GPU", marks=no_gpu_only),
    pytest.param(["run", "--sf", "0.01", "--z", "1", "--backend", "gpu", "--json"], 1, "no usable GPU",
                 marks=no_gpu_only),
    pytest.param(["bench", "--sf", "0.01"], 1, "gquery bench needs a GPU", marks=no_gpu_only),
    (["bench", "--sf", "0.01", "--design", "sorted"], 2, "--design must be one of as-generated, clustered:l_suppkey"),
    (["bench", "--sf", "0.01", "--query", "q7"], 2, "--query must be one of mission, q6, q1, top-suppliers, per-day"),
    pytest.param(["ladder", "--sf", "0.01"], 1, "gquery ladder needs a GPU", marks=no_gpu_only),
    (["ladder", "--sf", "-1"], 2, "scale factor must be a number from 0.01 to 1000"),  # (before the GPU's absence)
    (["ladder", "--sf", "0.01", "--repeat", "0"], 2, "repeat must be at least 1"),
    (["run", "--sf", "0.01", "--query", "mission"], 2, "the mission query needs Z"),
    (["run", "--sf", "0.01", "--z", "1", "--data", ""], 2, "--data names no path (an empty string)"),
    (["run", "--sf", "0.01", "--z", "1", "--out="], 2, "--out names no path (an empty string)"),
    (["encode", "--data", "x.parquet", "--out", ""], 2, "--out names no path (an empty string)"),
])
def test_options_fail_before_any_work(tmp_path, args, code, message):
    r = gquery(*args, "--data-dir", tmp_path)
    assert message in one_error(r, code)
    assert r.stdout == "" and not list(tmp_path.iterdir()), "nothing may be generated"


def test_encode_of_a_store_says_it_is_one():  # (it said the folder held no table's files, "nor a gquery store")
    r = gquery("encode", "--data", Path(__file__).parent / "data" / "store-v4" / "lineitem.gq")
    assert "is a gquery store already: encode reads parquet or .tbl files" in one_error(r, 2)


@pytest.mark.parametrize("kind", ["a file", "under a file"])
def test_data_dir_that_cannot_be_a_folder(tmp_path, kind):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    r = gquery("generate", "--sf", "0.01", "--data-dir", blocker if kind == "a file" else blocker / "sub")
    assert "--data-dir" in one_error(r, 1)
    assert files_under(tmp_path) == {blocker} and blocker.read_text() == "x"


def test_no_arguments_is_help_not_an_empty_error():
    r = gquery()
    assert r.returncode == 0 and "gquery: error" not in r.stderr and "Commands:" in r.stdout


def fake_tpchgen(tmp_path: Path) -> tuple[Path, Path]:
    """A tpchgen-cli that writes a partial file, says its pid, and keeps running."""
    script, pid_file = tmp_path / "fake-tpchgen", tmp_path / "fake.pid"
    script.write_text("#!/bin/bash\n"
                      'out=""; while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
                      'echo partial > "$out/lineitem.parquet"\n'
                      f'echo $$ > {pid_file}\n'
                      "exec sleep 60\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, pid_file


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def stopped_generation(tmp_path: Path, signum: int, *args: str) -> str:
    """`gquery generate ARGS` with a tpchgen-cli that never ends, sent `signum` once the generator
    runs; checks that the generator did not outlive gquery, and returns (exit code, stderr)."""
    script, pid_file = fake_tpchgen(tmp_path)
    cli = f"import sys; from gquery import cli, tpch; tpch.tpchgen_binary = lambda: {str(script)!r}; cli.main()"
    proc = subprocess.Popen([sys.executable, "-c", cli, "generate", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    generator = int(pid_file.read_text())
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    for _ in range(100):  # the orphan, if any, is reaped by init a moment later
        if not alive(generator):
            break
        time.sleep(0.05)
    else:
        os.kill(generator, signal.SIGKILL)
        pytest.fail("tpchgen-cli outlived gquery")
    return proc.returncode, err


@pytest.mark.parametrize("signum,code,line", [(signal.SIGTERM, 143, "gquery: terminated"),
                                              (signal.SIGINT, 130, "gquery: interrupted")], ids=["SIGTERM", "SIGINT"])
def test_signal_during_generation_ends_the_generator_and_leaves_nothing(tmp_path, signum, code, line):
    data = tmp_path / "data"
    rc, err = stopped_generation(tmp_path, signum, "--sf", "0.02", "--data-dir", str(data))
    assert rc == code and "Traceback" not in err, err
    assert err.splitlines()[-1] == line
    assert not list(data.glob(".sf*")) and not (data / "sf0.02" / "lineitem.parquet").exists()


DEEP = {  # expressions a thousand terms long or hundreds deep (issue: the class without edges)
    "200 nested parentheses": "SELECT SUM(a) FROM t WHERE " + "(" * 200 + "a < 500" + ")" * 200,
    "30 nested NOTs": "SELECT COUNT(*) FROM t WHERE " + "NOT " * 30 + "a < 5",
    "an AND of 1,000 comparisons": "SELECT SUM(b) FROM t WHERE " + " AND ".join(f"a <> {i}" for i in range(0, 2000, 2)),
    "an OR of 1,000 comparisons": "SELECT COUNT(*), MIN(a) FROM t WHERE " + " OR ".join(f"a = {3 * i}" for i in range(1000)),
    "a SUM of 500 terms": "SELECT SUM(" + " + ".join(("a", "b", "2")[i % 3] for i in range(500)) + ") FROM t",
    # bound in one pass (an AND of 4,000 took 8.6 s, an IN list of 4,000 15 s: each level or constant redid the rest)
    "an IN list of 4,000 constants": "SELECT COUNT(*), SUM(b) FROM t WHERE a IN (" + ", ".join(
        str(7 * i) for i in range(4000)) + ")",
    "an AND of 4,000, some in parentheses": "SELECT COUNT(*) FROM t WHERE " + " AND ".join(
        f"(a <> {i} AND (b <> {i % 5 - 2} OR a > {i}))" if i % 3 else f"a <> {i}" for i in range(4000)),
    "an OR of ANDs": "SELECT COUNT(*), MAX(b) FROM t WHERE " + " OR ".join(
        f"(a > {i} AND (a < {i + 3} AND b <> 0))" for i in range(0, 5000, 10)),
    # bound in one pass (each level of a chain of minuses asked of the chain below it, and walked it: 0.8 s at 999)
    "990 unary minuses": "SELECT SUM(" + "- " * 990 + "a), MIN(" + "- (" * 495 + "b" + ")" * 495 + ") FROM t WHERE "
                         + "- " * 990 + "a < 5",
}


@pytest.mark.parametrize("name", list(DEEP))
def test_deep_and_long_expressions_are_answered_as_duckdb_answers_them(name):
    import gquery as g

    data = pa.table({"a": pa.array(range(5000), pa.int64()), "b": pa.array([i % 7 - 3 for i in range(5000)], pa.int64())})
    table = g.open(data, name="t")
    before = sys.getrecursionlimit()
    con = duckdb.connect()
    con.register("t", data)
    answer, theirs = table.sql(DEEP[name], backend="cpu"), con.execute(DEEP[name])
    assert answer.rows == theirs.fetchall()
    assert answer.columns == [d[0] for d in theirs.description]  # (DuckDB's names: (-((-(a)))) nested as deep)
    assert sys.getrecursionlimit() == before  # raised while gquery walks the tree, then restored


def test_an_expression_deeper_than_gquery_walks_is_one_line():
    import gquery as g
    from gquery.errors import GqueryError

    table = g.open(pa.table({"a": pa.array([1, 2], pa.int64())}), name="t")
    with pytest.raises(GqueryError, match="nests its expressions deeper") as e:
        table.sql("SELECT SUM(a) FROM t WHERE " + "(" * 3000 + "a < 5" + ")" * 3000, backend="cpu")
    assert "\n" not in str(e.value)


def test_long_runs_of_blanks_are_read_in_one_pass():
    """Runs of 300,000 blanks before, inside and after a text, with newlines among some: answered as the text without
    them (a run was scanned again from each of its characters: 100,000 spaces took 12 s, a million hung)."""
    import gquery as g

    table = g.open(pa.table({"a": pa.array([1, 2, 3], pa.int64())}), name="t")
    run = " " * 300_000
    text = f"{run}SELECT SUM(a){run}\t\n{run}FROM t{run}\n-- the end\n{run}WHERE a < 3{run}"
    assert table.sql(text, backend="cpu").rows == [(3,)]


EMPTY_TEXTS = ["", "   ", "-- a comment alone", ";"]


@pytest.mark.parametrize("text", EMPTY_TEXTS)
@pytest.mark.parametrize("backend", ["auto", "duckdb", "cpu"])
def test_a_text_of_no_statement_is_one_line(tmp_path, text, backend):
    """No statement (an empty text, blanks, a comment, a semicolon alone): one line from every backend, DuckDB's
    too (its cursor gave none, and gquery raised AttributeError)."""
    r = gquery("run", "--data", parquet(tmp_path, "t"), "--sql", text, "--backend", backend, "--repeat", "1")
    assert "no SQL statement" in one_error(r, 1)


def test_a_table_of_no_column_the_engines_hold_is_duckdbs_or_one_line(tmp_path):
    """COUNT(*) over a file whose every column the engines leave out (a double): DuckDB answers it under auto; the
    CPU reference refuses in one line (it counted the rows of a column it had none of: StopIteration)."""
    path = tmp_path / "doubles.parquet"
    pq.write_table(pa.table({"f": [1.5, 2.5]}), path)
    assert "every column the engines leave out (f: type double" in one_error(
        gquery("run", "--data", path, "--sql", "SELECT COUNT(*) FROM doubles", "--backend", "cpu"), 1)
    r = gquery("run", "--data", path, "--sql", "SELECT COUNT(*) FROM doubles", "--json", "--repeat", "1")
    assert r.returncode == 0 and "Traceback" not in r.stderr and __import__("json").loads(r.stdout)["rows"] == [[2]]
    import gquery as api

    with pytest.raises(api.GqueryError, match="every column the engines leave out"):
        api.open(pa.table({})).sql("SELECT COUNT(*) FROM lineitem", backend="cpu")


@pytest.mark.parametrize("sql,said", [
    ("SELECT COUNT(*) FROM t WHERE l_suppkey < {d}", "an integer literal of 5,000 digits"),
    ("SELECT COUNT(*) FROM t LIMIT {d}", "a LIMIT of 5,000 digits"),
    ("SELECT SUM(l_suppkey) FROM t WHERE DATE '1995-01-01' + INTERVAL '{d}' DAY > DATE '1995-01-01'", "an interval of 5,000"),
    ("SELECT COUNT(*) FROM t WHERE l_suppkey < 1.{d}", "a decimal literal of more than 38 digits (1.9999"),
])
def test_a_number_of_thousands_of_digits_is_one_line(tmp_path, sql, said):
    """Literals past Python's 4,300 digits read from text (it raised ValueError): refused in one line, short."""
    r = gquery("run", "--data", parquet(tmp_path, "t"), "--sql", sql.format(d="9" * 5000), "--backend", "cpu")
    line = one_error(r, 1)
    assert said in line and len(line) < 300, line
    import gquery as api

    statement = api.open(str(parquet(tmp_path, "t"))).prepare("SELECT COUNT(*) FROM t WHERE l_suppkey < ?")
    with pytest.raises(api.GqueryError, match="an integer parameter of 16,610 bits"):
        statement.run(10**5000, backend="cpu")
    with pytest.raises(api.GqueryError, match="an integer literal of 100,000 digits"):
        statement.run(Decimal("1e99999"), backend="cpu")


def test_a_closed_standard_output_is_one_line(tmp_path):
    """Started with its standard output closed, run says where the answer could go (it raised AttributeError on
    sys.stdout, None) and writes it with --out."""
    command = [sys.executable, "-m", "gquery", "run", "--data", str(parquet(tmp_path, "t")), "--z", "3", "--backend", "cpu"]
    for extra in ([], ["--json"]):
        r = subprocess.run(command + extra, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, close_fds=True,
                           preexec_fn=lambda: os.close(1), timeout=600)
        assert "standard output is closed" in one_error(r, 2)
    out = tmp_path / "answer.json"
    r = subprocess.run(command + ["--json", "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, preexec_fn=lambda: os.close(1), timeout=600)
    assert r.returncode == 0 and "Traceback" not in r.stderr and '"rows"' in out.read_text()


@pytest.mark.parametrize("kind", ["a link", "a pipe"])
def test_out_that_is_no_regular_file_is_one_line_and_left_as_it_is(tmp_path, kind):
    """--out a symbolic link or a FIFO: refused before any work (the answer is written whole, by a rename, which
    replaced the link or pipe itself with a file), and left as it was."""
    target = tmp_path / "target.csv"
    target.write_text("kept\n")
    out = tmp_path / "out.csv"
    if kind == "a link":
        out.symlink_to(target)
    else:
        os.mkfifo(out)
    r = gquery("run", "--data", parquet(tmp_path, "t"), "--z", "3", "--backend", "cpu", "--output", "csv", "--out", out)
    assert "a link, a pipe or a device, not a file" in one_error(r, 2)
    assert (out.is_symlink() if kind == "a link" else stat.S_ISFIFO(out.lstat().st_mode)) and target.read_text() == "kept\n"


@pytest.mark.parametrize("aim", ["the SQL file", "the data", "the data by another path", "a store's manifest",
                                 "the store beside the data", "a folder of the data"])
def test_out_that_is_what_the_command_reads_is_refused_and_left_as_it_was(tmp_path, aim):
    """--out naming the SQL file, the parquet, a file inside the store read (or beside the data), or in a folder of
    data: refused before any work, the input left whole (the answer replaced it and the command exited 0)."""
    data = parquet(tmp_path, "t")
    sql_file = tmp_path / "q.sql"
    sql_file.write_text("SELECT SUM(l_quantity) FROM t")
    store = tmp_path / "t.gq"
    assert gquery("encode", "--data", data).returncode == 0
    folder = tmp_path / "parts"
    folder.mkdir()
    parquet(folder, "part-1")
    reads, out = {"the SQL file": (data, sql_file), "the data": (data, data),
                  "the data by another path": (data, tmp_path / "." / "t.parquet"),
                  "a store's manifest": (store, store / "manifest.json"),
                  "the store beside the data": (data, store / "manifest.json"),
                  "a folder of the data": (folder, folder / "answer.csv")}[aim]
    before = {p: p.read_bytes() for p in (data, sql_file, store / "manifest.json")}
    r = gquery("run", "--data", reads, "--file", sql_file, "--backend", "cpu", "--output", "csv", "--out", out)
    assert one_error(r, 2).endswith("write the answer elsewhere") and "DuckDB: " not in r.stderr
    assert {p: p.read_bytes() for p in before} == before and not (folder / "answer.csv").exists()


def test_two_datasets_or_a_store_for_a_store_are_one_line_before_any_work(tmp_path):
    """--sf beside --data, or --store beside a --data that is a store: one of them was left out of the run silently;
    now a usage line, before anything is generated or built."""
    data = parquet(tmp_path, "t")
    assert gquery("encode", "--data", data).returncode == 0
    r = gquery("run", "--sf", "0.01", "--data", data, "--z", "3", "--data-dir", tmp_path / "gen")
    assert one_error(r, 2) == "gquery: error: give --sf (a generated dataset) or --data PATH, not both"
    r = gquery("run", "--data", tmp_path / "t.gq", "--store", tmp_path / "other.gq", "--z", "3")
    assert "is a store already" in one_error(r, 2)
    assert not (tmp_path / "gen").exists() and not (tmp_path / "other.gq").exists()


def test_out_in_a_missing_folder_is_one_line_before_any_work(tmp_path):
    """--out in a folder that is not there: said before the query, naming the folder (the write named its temporary
    file, after the query had run)."""
    out = tmp_path / "missing" / "answer.csv"
    r = gquery("run", "--data", parquet(tmp_path, "t"), "--z", "3", "--backend", "cpu", "--output", "csv", "--out", out)
    assert one_error(r, 2) == f"gquery: error: --out {out}: no such folder {out.parent}"
    assert "DuckDB: " not in r.stderr and not out.parent.exists()
