"""On a GPU host: every mode and every ladder step equals DuckDB or an exact Python sum."""

import numpy as np
import pytest

from conftest import gquery
from gquery import tpch
from gquery.columns import LineitemColumns, load_lineitem
from gquery.ladder import STEPS
from gquery.plan import MODES
from gquery.query import Query, numpy_select_sum, to_decimal
from gquery.reference import DuckDBReference

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def engine():
    from gquery.gpu.executor import Engine

    e = Engine()
    yield e
    e.close()


@pytest.fixture(scope="module")
def ladder(engine):
    from gquery.gpu.ladder import LadderRunner

    return LadderRunner(engine)


def exact(cols: LineitemColumns, z: int):
    """Python's own integers, row by row where small, else NumPy's exact path."""
    mask = cols.suppkey.astype(np.int64) < Query(z).z_int64
    if cols.rows <= 5000:
        products = [int(q) * int(p) for q, p, m in zip(cols.quantity, cols.extendedprice, mask) if m]
        return to_decimal(sum(products), len(products))
    return numpy_select_sum(cols, Query(z))


def random_columns(rows: int, seed: int, big: bool = False) -> LineitemColumns:
    rng = np.random.default_rng(seed)
    hi = 2**31 - 1 if big else 10_000_000
    return LineitemColumns.from_values(rng.integers(1, 1000, rows), rng.integers(-hi, hi, rows),
                                       rng.integers(-hi, hi, rows), source=f"random({rows}, {seed})")


@pytest.mark.parametrize("sf", [0.01, 0.1, 1])
def test_tpch_every_mode_equals_duckdb(engine, data_dir, sf):
    source = tpch.generate(sf, data_dir, echo=lambda m: None)
    cols = load_lineitem(source)
    ref = DuckDBReference(source)
    top = int(cols.suppkey.max())
    try:
        for z in (-3, 0, 1, 30, top // 2, top, top + 1, 2**40):
            expected = ref.run(Query(z), repeat=1).value
            for mode in MODES:
                got = engine.run(cols, Query(z), engine.plan(cols, mode)).value
                assert got == expected, f"SF {sf}, Z {z}, {mode}"
    finally:
        ref.close()
        engine.memory.evict(cols)


@pytest.mark.parametrize("rows", [0, 1, 3, 4, 5, 31, 33, 255, 257, 1023, 1025, 2**20 - 1, 2**20 + 1])
@pytest.mark.parametrize("mode", MODES)
def test_odd_sizes_and_partial_chunks(engine, rows, mode):
    cols = random_columns(rows, rows)
    for z in (0, 500, 2000):
        want = exact(cols, z)
        for chunk in (None, 1024, 3072):  # default, many small chunks, a short last chunk
            plan = engine.plan(cols, mode, **({} if chunk is None or mode == "resident" else {"chunk_rows": chunk}))
            result = engine.run(cols, Query(z), plan)
            assert result.value == want, f"{rows} rows, Z {z}, {mode}, chunk {chunk}"
            assert result.selected_rows == int(np.count_nonzero(cols.suppkey < z))
    engine.memory.evict(cols)


@pytest.mark.parametrize("mode", MODES)
def test_sum_beyond_int64_is_exact(engine, mode):
    rows = 4099
    limit = 2**31 - 1
    cols = LineitemColumns.from_values(np.arange(rows) % 7, np.full(rows, limit), np.full(rows, limit))
    total = rows * limit * limit
    assert total > 2**63
    assert engine.run(cols, Query(100), engine.plan(cols, mode)).value == to_decimal(total, rows)
    neg = LineitemColumns.from_values(np.zeros(rows), np.full(rows, -limit), np.full(rows, limit))
    assert engine.run(neg, Query(1), engine.plan(neg, mode)).value == to_decimal(-total, rows)
    mixed = random_columns(100_003, 7, big=True)
    assert engine.run(mixed, Query(700), engine.plan(mixed, mode)).value == exact(mixed, 700)
    for c in (cols, neg, mixed):
        engine.memory.evict(c)


def test_resident_columns_are_uploaded_once(engine):
    cols = random_columns(300_001, 3)
    plan = engine.plan(cols, "resident")
    first = engine.run(cols, Query(10), plan)
    assert engine.memory.resident(cols)[1] is False  # cached: no second upload
    for z in (1, 10, 500, 999, 1000, 5000):
        assert engine.run(cols, Query(z), plan).value == exact(cols, z)
    assert first.profile.h2d_bytes == 0
    engine.memory.evict(cols)


@pytest.mark.parametrize("rows", [1, 33, 257, 4097, 2**16 + 3, 1_000_001])
def test_every_ladder_step(ladder, rows):
    cols = random_columns(rows, rows + 1)
    for z in (0, 400):
        want = exact(cols, z)
        scaled = 0 if want is None else int(want.scaleb(4))
        for step in STEPS:
            assert ladder.run(step, cols, Query(z))["value"] == scaled, f"{step.name}, {rows} rows, Z {z}"


def test_ladder_refuses_what_int64_partials_cannot_hold(ladder):
    limit = 2**31 - 1
    cols = LineitemColumns.from_values(np.zeros(5000), np.full(5000, limit), np.full(5000, limit))
    second = next(s for s in STEPS if s.output == "gpu_total")
    assert "overflow" in ladder.exactness_problem(second, cols, cols.rows)
    assert ladder.exactness_problem(STEPS[-1], cols, cols.rows) is None  # the engine's kernel is exact


def test_cupy_one_liner_matches(engine):
    from gquery.gpu import cupy_baseline

    if not cupy_baseline.available():
        pytest.skip("CuPy is not installed")
    cols = random_columns(1_000_003, 11)
    dev, _ = engine.memory.resident(cols)
    ms, value = cupy_baseline.one_liner(dev, cols.rows, Query(300), repeat=2)
    assert ms > 0 and value == int(exact(cols, 300).scaleb(4))
    engine.memory.evict(cols)


def test_profile_accounts_for_every_chunk(engine):
    cols = random_columns(10_000_000, 5)
    for mode in ("pinned", "pageable"):
        plan = engine.plan(cols, mode, chunk_rows=1 << 20)
        p = engine.run(cols, Query(500), plan).profile
        assert len(p.stage("h2d")) == len(p.stage("kernel")) == plan.n_chunks
        assert (len(p.stage("staging")) == plan.n_chunks) == (mode == "pageable")
        assert p.h2d_bytes == cols.nbytes and 0 < p.stage_ms("h2d") <= p.total_ms
        assert all(i.end_ms >= i.start_ms >= 0 for i in p.intervals)
    engine.memory.evict(cols)


def test_cli_run_all_modes_match(data_dir):
    r = gquery("run", "--sf", "0.01", "--z", "30", "--mode", "all", "--repeat", "2", "--data-dir", data_dir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("MATCH") == 3 and "MISMATCH" not in r.stdout


def test_bandwidth_command():
    r = gquery("bandwidth", "--size-mb", "64", "--repeat", "3", "--json")
    assert r.returncode == 0, r.stderr
    import json

    limits = json.loads(r.stdout)["limits"]
    assert limits["d2d_gbps"] > limits["h2d_pinned_gbps"] > 0 and limits["host_staging_gbps"] > 0
