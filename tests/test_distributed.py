"""The Dask path (gquery.distributed): a task a store part on local worker processes, exactly equal to
the in-process answer and to Python's own integers; one-line errors, before work where possible.
One local cluster serves the module (starting one takes seconds)."""

import json
import os
import shutil
import sys
import time
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import gquery
from gquery import store
from gquery.cli import main
from gquery.columns import LineitemColumns
from gquery.errors import GqueryError, UsageError
from gquery.result import Partial, finalize
from gquery.sql import named_sql
from gquery.table import Table
from gquery.tpch import find_lineitem

pytest.importorskip("distributed", reason="the Dask path needs pip install 'gquery[dist]'")
from gquery import distributed as D  # noqa: E402

PART_ROWS = (1025, 1, 3071)  # odd sizes: a frame and one, a single row, three frames less one
KEYS = (1, 100)


def random_columns(rows: int, rng, big: bool = False) -> LineitemColumns:
    hi = 2**62 if big else 10_000_000
    return LineitemColumns.from_values(rng.integers(KEYS[0], KEYS[1] + 1, rows), rng.integers(1, 51, rows) * 100,
                                       rng.integers(-hi, hi, rows))


def parted_store(path, parts: list[LineitemColumns]):
    for k, cols in enumerate(parts, start=1):
        store.write_store(Table.from_columns(cols), store.part_path(path, k), echo=lambda m: None)
    return store.finish_parted(path, len(parts), echo=lambda m: None)


def python_sum(parts: list[LineitemColumns], z: int):
    """The answer in Python's own integers, row by row: SUM in ten-thousandths, NULL for no row."""
    products = [int(q) * int(p) for c in parts for k, q, p in zip(c.suppkey, c.quantity, c.extendedprice) if k < z]
    return Decimal(f"{sum(products)}E-4") if products else None


def value(r):
    """The one value of the mission's one row."""
    [(v,)] = r.result.rows
    return v


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes on this host, reached by address as a remote scheduler would be."""
    with D.Session(None, "cpu", 2) as session:
        yield session


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    rng = np.random.default_rng(9)
    root = tmp_path_factory.mktemp("dask")
    parts = [random_columns(n, rng) for n in PART_ROWS]
    wide = [random_columns(n, rng, big=True) for n in (700, 900)]  # sums far past 2^64
    return {"parted": (parted_store(root / "parted.gq", parts), parts),
            "single": (store.write_store(Table.from_columns(parts[2]), root / "single.gq", echo=lambda m: None),
                       parts[2:]),
            "wide": (parted_store(root / "wide.gq", wide), wide)}


Z_VALUES = [-(2**40), 0, KEYS[0], KEYS[0] + 1, 37, 64, KEYS[1], KEYS[1] + 1, 2**40]  # NULL at and below the least key


@pytest.mark.parametrize("name", ["parted", "single", "wide"])
def test_dask_equals_the_in_process_answer_exactly(cluster, stores, name):
    path, parts = stores[name]
    rng = np.random.default_rng(len(name))
    for z in Z_VALUES + [int(z) for z in rng.integers(KEYS[0], KEYS[1], 3)]:
        r = D.run_distributed(path, named_sql("mission", z), scheduler=cluster.scheduler)
        expected = python_sum(parts, z)
        assert value(r) == expected == finalize(r.query, D.in_process(path, named_sql("mission", z))).rows[0][0], z
        assert (value(r) is None) == (z <= KEYS[0]) and r.selected_rows == sum(int((c.suppkey < z).sum()) for c in parts)
        assert [p.rows for p in r.parts] == [c.rows for c in parts] and r.rows == sum(c.rows for c in parts)
        assert r.workers == 2 and r.backend == "cpu" and not r.local and all(p.worker.startswith("tcp://") for p in r.parts)
    if name == "wide":
        assert abs(r.partial.groups[()][0][0]) > 2**64  # the partials were added as Python ints


def test_tasks_return_exact_strings_never_floats(stores):
    path, parts = stores["wide"]
    payload, selected, ms, worker = D.part_task(str(store.part_path(path, 1)), named_sql("mission", 50))
    [group] = payload["groups"]
    assert all(isinstance(v, str) for state in group["states"] for v in state) and isinstance(selected, int)
    [[total, rows]] = Partial.from_json(payload).groups[()]
    assert Decimal(f"{total}E-4") == python_sum(parts[:1], 50) and rows == selected and worker == "in-process"


def test_overhead_is_a_dict_a_report_can_embed(cluster, stores):
    path, parts = stores["parted"]
    o = D.overhead(path, named_sql("mission", 50), scheduler=cluster.scheduler, repeat=2)
    assert o["result"] == [[str(python_sum(parts, 50))]] and o["parts"] == 3 and o["workers"] == 2
    assert o["in_process_ms"] > 0 and o["dask_ms"] > 0 and o["ratio"] == o["dask_ms"] / o["in_process_ms"]
    assert len(o["dask_times_ms"]) == len(o["in_process_times_ms"]) == 2
    json.dumps(o)


def test_held_parts_stay_on_their_worker_and_follow_a_rebuilt_store(cluster, stores, tmp_path):
    """hold=True: part k goes to the k-th worker every time and stays open there; answers stay
    exact; a store rebuilt in place (its manifest rewritten) is opened afresh, not answered from
    the old copy; release() lets every held part go."""
    path = tmp_path / "held.gq"
    rng = np.random.default_rng(21)
    parts = [random_columns(n, rng) for n in PART_ROWS]
    parted_store(path, parts)
    first = [cluster.run(path, named_sql("mission", z), hold=True) for z in (37, 64, 37)]
    assert [value(r) for r in first] == [python_sum(parts, 37), python_sum(parts, 64), python_sum(parts, 37)]
    placed = [[p.worker for p in r.parts] for r in first]
    assert placed[0] == placed[1] == placed[2] and len(set(placed[0])) == 2  # round robin over both workers
    rebuilt = [random_columns(n, rng) for n in PART_ROWS]
    shutil.rmtree(path)
    time.sleep(0.01)  # a new manifest mtime even on coarse clocks
    parted_store(path, rebuilt)
    assert value(cluster.run(path, named_sql("mission", 64), hold=True)) == python_sum(rebuilt, 64)
    assert cluster.release() == len(PART_ROWS) and cluster.release() == 0
    o = D.overhead(path, named_sql("mission", 50), scheduler=cluster.scheduler, repeat=2, hold=True)
    assert o["hold"] and o["result"] == [[str(python_sum(rebuilt, 50))]]


@pytest.fixture(scope="module")
def parquet_store(tmp_path_factory, stores):
    """A parted store built from three parquet files, which DuckDB then reads to check the answer."""
    _, parts = stores["parted"]
    folder = tmp_path_factory.mktemp("pq") / "lineitem"
    folder.mkdir()
    dec = lambda values: pa.array([Decimal(int(v)).scaleb(-2) for v in values], pa.decimal128(15, 2))
    for k, c in enumerate(parts, start=1):
        pq.write_table(pa.table({"l_suppkey": pa.array(c.suppkey, pa.int64()), "l_quantity": dec(c.quantity),
                                 "l_extendedprice": dec(c.extendedprice)}), folder / f"lineitem.{k}.parquet")
    return store.ensure_store(find_lineitem(folder), echo=lambda m: None), parts


def test_cli_on_a_local_cluster_prints_the_exact_answer_checked_by_duckdb(parquet_store):
    path, parts = parquet_store
    assert store.is_parted(path) and store.unchanged_sources(path)
    r = gquery("run", "--data", path, "--z", 50, "--scheduler", "local", "--workers", 2, "--repeat", 2)
    assert r.returncode == 0, r.stderr
    assert f" {python_sum(parts, 50)} " in r.stdout
    assert "MATCH against DuckDB" in r.stdout and "a local cluster at tcp://" in r.stdout and "2 workers" in r.stdout
    assert all(f"part-0000{k}.gq" in r.stdout for k in (1, 2, 3))


@pytest.mark.parametrize("sql", ["SELECT COUNT(*) FROM lineitem",
                                 "SELECT COUNT(*) FROM lineitem WHERE l_suppkey NOT IN (1, NULL)"])
def test_cli_on_a_local_cluster_checks_a_query_of_no_column_read_against_duckdb(parquet_store, sql):
    """COUNT(*), and a predicate the binder folds away (NOT IN a list holding NULL), read no column: DuckDB's table is
    still made of the columns the text names, or one (it raised 'DuckDBTable needs at least one column')."""
    path, parts = parquet_store
    r = gquery("run", "--data", path, "--sql", sql, "--scheduler", "local", "--workers", 2, "--repeat", 1)
    assert r.returncode == 0, r.stderr
    assert "MATCH against DuckDB" in r.stdout


def test_cli_on_a_local_cluster_checks_a_table_named_other_than_its_store_against_duckdb(tmp_path, monkeypatch):
    """A file whose store lies in gquery's cache (its folder named for the table and a digest): DuckDB's table for the
    check is named as the SQL names it, trips (it was named for the store's folder, and DuckDB failed: no table trips)."""
    monkeypatch.setenv("GQUERY_STORE_DIR", str(tmp_path / "stores"))
    (tmp_path / "trips").mkdir()
    path = tmp_path / "trips" / "trips.parquet"
    pq.write_table(pa.table({"v": pa.array([1, 2, 3, None], pa.int64()), "s": ["a", "b", "a", "c"]}), path)
    r = gquery("run", "--data", path, "--sql", "SELECT s, SUM(v) FROM trips GROUP BY s ORDER BY s", "--scheduler", "local",
               "--workers", 1, "--backend", "cpu", "--repeat", 1, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["check"] is True and out["rows"] == [["a", 4], ["b", 2], ["c", None]]


def test_cli_on_a_running_scheduler_checks_against_the_cpu_reference_without_sources(cluster, stores, capsys):
    path, parts = stores["parted"]
    code = run_main(["run", "--data", str(path), "--z", "2", "--scheduler", cluster.scheduler, "--json", "--repeat", "1"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["check"] is True and out["checked_against"] == "the CPU reference over the store"
    assert out["rows"] == [[str(python_sum(parts, 2))]] and out["scheduler"] == cluster.scheduler and not out["local"]
    code = run_main(["run", "--data", str(path), "--z", "0", "--scheduler", cluster.scheduler, "--no-validate"])
    printed = capsys.readouterr().out
    assert code == 0 and " NULL" in printed and "not validated" in printed


def run_main(argv) -> int:
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code


def one_error(capsys, code: int, argv) -> str:
    t0 = time.perf_counter()
    assert run_main(argv) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("gquery: error:")]
    assert len(lines) == 1, err
    return lines[0], time.perf_counter() - t0


@pytest.mark.parametrize("extra,message", [
    (["--workers", "2"], "give --scheduler local"),
    (["--scheduler", "local", "--mode", "pinned"], "give it with --backend gpu"),
    (["--scheduler", "local", "--backend", "gpu", "--mode", "resident"], "pinned, registered or pageable"),
    (["--scheduler", "local", "--backend", "duckdb"], "runs no Dask workers"),
    (["--scheduler", "local", "--explain", "--gpus", "2"], "--explain, --gpus: not with --scheduler"),
    (["--scheduler", "local", "--workers", "0"], "at least 1"),
    (["--scheduler", "local", "--repeat", "0"], "at least 1"),
    (["--scheduler", "no-port"], "not a Dask scheduler address"),
])
def test_bad_combinations_are_one_line_before_work(stores, capsys, extra, message):
    path, _ = stores["parted"]
    line, seconds = one_error(capsys, 2, ["run", "--data", str(path), "--z", "5", *extra])
    assert message in line and seconds < 5  # no cluster was started


def test_unreachable_scheduler_is_one_line_and_quick(stores):
    path, _ = stores["parted"]
    t0 = time.perf_counter()
    r = gquery("run", "--data", path, "--z", 5, "--scheduler", "tcp://127.0.0.1:1")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("gquery: error: cannot reach the Dask scheduler at tcp://127.0.0.1:1")
    assert len(r.stderr.strip().splitlines()) == 1 and time.perf_counter() - t0 < D.CONNECT_TIMEOUT_S + 15


def test_what_is_not_a_store_is_one_line_before_any_cluster(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "empty", tmp_path / "missing"):
        with pytest.raises(GqueryError, match="not a gquery store|no such file") as e:
            D.run_distributed(path, named_sql("mission", 5))
        assert "\n" not in str(e.value)
    line, seconds = one_error(capsys, 1, ["run", "--data", str(tmp_path / "empty"), "--z", "5", "--scheduler", "local"])
    assert "holds no .parquet or .tbl files" in line and seconds < 5


def test_a_failing_worker_is_one_line_naming_the_part(cluster, stores, tmp_path):
    path = shutil.copytree(stores["parted"][0], tmp_path / "damaged.gq")
    buffer = store.part_path(path, 3) / "l_extendedprice.words.bin"  # a buffer the query reads
    data = bytearray(buffer.read_bytes())
    data[len(data) // 2] ^= 0xFF
    buffer.write_bytes(bytes(data))
    with pytest.raises(GqueryError, match="part-00003.gq: .* is corrupt") as e:
        D.run_distributed(path, named_sql("mission", 50), scheduler=cluster.scheduler)
    assert "\n" not in str(e.value)


def test_local_gpu_workers_are_pinned_one_a_gpu(monkeypatch):
    """No GPU is touched: the workers only report what they were given."""
    monkeypatch.setattr(D, "gpu_ids", lambda: ["3", "5"])
    with pytest.raises(UsageError, match="3 workers asked for, but this host has 2 GPU"):
        D.Session(None, "gpu", 3)
    with D.Session(None, "gpu") as s:
        seen = s.client.run(lambda: (os.environ.get("CUDA_VISIBLE_DEVICES"), __import__("threading").active_count()))
        assert sorted(v for v, _ in seen.values()) == ["3", "5"] and s.workers == 2
        assert set(s.client.nthreads().values()) == {1}


def test_gpu_ids_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 7")
    assert D.gpu_ids() == ["2", "7"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert D.gpu_ids() == []


def test_without_dask_the_scheduler_option_says_how_to_install_it(stores, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now fails
    with pytest.raises(GqueryError, match=r"pip install 'gquery\[dist\]'"):
        D.require_dask()
    line, _ = one_error(capsys, 1, ["run", "--data", str(stores["parted"][0]), "--z", "5", "--scheduler", "local"])
    assert "gquery[dist]" in line


@pytest.mark.gpu
def test_gpu_workers_equal_the_in_process_gpu_answer(stores):
    """On a GPU host: a local cluster of one worker a GPU, each part through gquery.api there."""
    path, parts = stores["parted"]
    for z in (0, 37, 2**40):
        r = D.run_distributed(path, named_sql("mission", z), backend="gpu")
        local = D.in_process(path, named_sql("mission", z), backend="gpu")
        assert value(r) == python_sum(parts, z) == finalize(r.query, local).rows[0][0] and r.backend == "gpu" and r.local
    o = D.overhead(path, named_sql("mission", 37), backend="gpu", repeat=2)
    assert o["result"] == [[str(python_sum(parts, 37))]] and o["workers"] == len(D.gpu_ids())
    held = D.overhead(path, named_sql("mission", 37), backend="gpu", repeat=2, hold=True)
    assert held["result"] == o["result"] and held["hold"]


SQL_TEXTS = ["SELECT COUNT(*), SUM(l_quantity * l_extendedprice), MIN(l_extendedprice), AVG(l_quantity) FROM lineitem "
             "WHERE l_suppkey BETWEEN 15 AND 60",
             "SELECT SUM(l_extendedprice) FROM lineitem WHERE l_suppkey < 0",
             "SELECT MAX(l_quantity - l_extendedprice) FROM lineitem WHERE l_quantity * 2 > l_extendedprice OR l_suppkey = 7"]


@pytest.mark.parametrize("name", ["parted", "single", "wide"])
def test_sql_on_dask_equals_the_cpu_reference_over_the_whole_store(cluster, stores, name):
    """Each worker answers its part's partial aggregates; added on the client they are the answer of the
    whole store, exactly, whatever the parts (sums far past 2^64 in `wide`)."""
    from gquery.answer import cpu_answer

    path, _ = stores[name]
    whole = store.open_store(path)
    for text in SQL_TEXTS:
        r = cluster.run(path, text)
        want = cpu_answer(r.query, whole)
        assert r.result.rows == want.rows, text
        assert r.selected_rows == want.partial.rows_selected and [p.worker.startswith("tcp://") for p in r.parts]


@pytest.mark.gpu
@pytest.mark.parametrize("hold", [False, True])
def test_sql_on_gpu_workers_equals_the_cpu_reference_over_the_whole_store(stores, hold):
    """On a GPU host: one worker a GPU, each part's fused kernel on its worker's GPU (opened a query,
    or held open between queries), the exact partials added on the client."""
    from gquery.answer import cpu_answer

    for name in ("parted", "wide"):
        path, _ = stores[name]
        whole = store.open_store(path)
        with D.Session(None, "gpu") as session:
            for text in SQL_TEXTS:
                r = session.run(path, text, "pinned", repeat=2, hold=hold)
                want = cpu_answer(r.query, whole)
                assert r.result.rows == want.rows and r.backend == "gpu", (name, text)
                assert r.selected_rows == want.partial.rows_selected and r.workers == len(D.gpu_ids())


def test_sql_cli_on_a_local_cluster_is_checked_by_duckdb(parquet_store, capsys):
    path, _ = parquet_store
    code = run_main(["run", "--data", str(path), "--sql", SQL_TEXTS[0], "--scheduler", "local", "--workers", "2",
                     "--json", "--repeat", "1"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["check"] is True and out["checked_against"] == "DuckDB" and len(out["parts"]) == 3
    assert out["columns"][0] == "count_star()" and isinstance(out["rows"][0][1], str)  # exact decimals as strings
