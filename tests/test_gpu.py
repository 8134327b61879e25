"""On a GPU host: every mode x encoding and every ladder step equals DuckDB or an exact Python sum."""

import numpy as np
import pytest

from conftest import gquery
from gquery import tpch
from gquery.columns import LineitemColumns, load_lineitem
from gquery.ladder import STEPS
from gquery.plan import LIST_MODES, MODES
from gquery.mission import MissionQuery, numpy_select_sum, to_decimal
from gquery.reference import DuckDBReference
from gquery.table import Table

pytestmark = pytest.mark.gpu
ENCODINGS = ("plain", "packed", "sliced", "indexed")
# every mode x encoding that runs: the indexed key gathers factors by row id, which pageable memory
# does not allow (test_planner checks that it is refused there)
COMBOS = [(m, e) for e in ENCODINGS for m in MODES if e != "indexed" or m in LIST_MODES]


@pytest.fixture(scope="module")
def engine():
    from gquery.gpu.executor import Engine, close_last

    e = Engine()
    yield e
    close_last(e)  # its modules too, on this thread: not left for the interpreter's exit


@pytest.fixture(scope="module")
def ladder(engine):
    from gquery.gpu.ladder import LadderRunner

    return LadderRunner(engine)


def run(engine, table, z, mode, encoding="auto", **options):
    return engine.run(table, MissionQuery(z), engine.plan(table, MissionQuery(z), mode, encoding, **options))


def exact(cols: LineitemColumns, z: int):
    """Python's own integers, row by row where small, else NumPy's exact path."""
    mask = cols.suppkey.astype(np.int64) < MissionQuery(z).z_int64
    if cols.rows <= 5000:
        products = [int(q) * int(p) for q, p, m in zip(cols.quantity, cols.extendedprice, mask) if m]
        return to_decimal(sum(products), len(products))
    return numpy_select_sum(cols, MissionQuery(z))


def random_columns(rows: int, seed: int, big: bool = False) -> LineitemColumns:
    rng = np.random.default_rng(seed)
    hi = 2**31 - 1 if big else 10_000_000
    return LineitemColumns.from_values(rng.integers(1, 1000, rows), rng.integers(-hi, hi, rows),
                                       rng.integers(-hi, hi, rows), source=f"random({rows}, {seed})")


@pytest.mark.parametrize("sf", [0.01, 0.1, 1])
def test_tpch_every_mode_equals_duckdb(engine, data_dir, sf):
    source = tpch.generate(sf, data_dir, echo=lambda m: None)
    cols = load_lineitem(source)
    table = Table.from_columns(cols)
    ref = DuckDBReference(source)
    top = int(cols.suppkey.max())
    try:
        for z in (-3, 0, 1, 30, top // 2, top, top + 1, 2**40):
            expected = ref.run(MissionQuery(z), repeat=1).value
            for mode, encoding in COMBOS:
                got = run(engine, table, z, mode, encoding).value
                assert got == expected, f"SF {sf}, Z {z}, {mode}, {encoding}"
    finally:
        ref.close()
        engine.memory.release_table(table)


@pytest.mark.parametrize("rows", [0, 1, 3, 4, 5, 31, 33, 255, 257, 1023, 1024, 1025, 2047, 2049, 2**20 - 1, 2**20 + 1])
@pytest.mark.parametrize("mode,encoding", COMBOS)
def test_odd_sizes_and_partial_chunks(engine, rows, mode, encoding):
    cols = random_columns(rows, rows)
    table = Table.from_columns(cols)
    for z in (0, 500, 2000):
        want = exact(cols, z)
        for chunk in (None, 1024, 3072):  # default, many small chunks, a short last chunk
            options = {} if chunk is None or mode == "resident" else {"chunk_rows": chunk}
            result = run(engine, table, z, mode, encoding, **options)
            assert result.value == want, f"{rows} rows, Z {z}, {mode}, {encoding}, chunk {chunk}"
            assert result.selected_rows == int(np.count_nonzero(cols.suppkey < z))
    engine.memory.release_table(table)


@pytest.mark.parametrize("mode,encoding", COMBOS)
def test_sum_beyond_int64_is_exact(engine, mode, encoding):
    rows = 4099
    limit = 2**31 - 1
    cols = LineitemColumns.from_values(np.arange(rows) % 7, np.full(rows, limit), np.full(rows, limit))
    total = rows * limit * limit
    assert total > 2**63
    tables = [Table.from_columns(cols)]
    assert run(engine, tables[-1], 100, mode, encoding).value == to_decimal(total, rows)
    neg = LineitemColumns.from_values(np.zeros(rows), np.full(rows, -limit), np.full(rows, limit))
    tables.append(Table.from_columns(neg))
    assert run(engine, tables[-1], 1, mode, encoding).value == to_decimal(-total, rows)
    mixed = random_columns(100_003, 7, big=True)
    tables.append(Table.from_columns(mixed))
    assert run(engine, tables[-1], 700, mode, encoding).value == exact(mixed, 700)
    for t in tables:
        engine.memory.release_table(t)


@pytest.mark.parametrize("mode,encoding", COMBOS)
def test_64_bit_values_and_products_are_exact(engine, mode, encoding):
    """Values across the whole int64 range: 64-bit frame widths, 128-bit products (the scan's wide
    variant), negative values, constant frames and frames of one row; random Z."""
    rng = np.random.default_rng(42)
    rows = 3 * 1024 + 1
    top = 2**63 - 1
    q = rng.integers(-top, top, rows, dtype=np.int64)
    p = rng.integers(-top, top, rows, dtype=np.int64)
    q[:1024] = 7  # a constant frame (width 0)
    p[1024:2048] = rng.integers(-3, 3, 1024)
    keys = rng.integers(-2**31, 2**31 - 1, rows)
    cols = LineitemColumns(keys.astype(np.int32), q, p, "int64 edges")
    table = Table.from_columns(cols)
    assert table.wide_products()
    for z in [int(x) for x in rng.integers(-2**31, 2**31, 6)] + [-2**31, 2**31]:
        mask = keys < z
        want = to_decimal(sum(int(a) * int(b) for a, b in zip(q[mask], p[mask])), int(mask.sum()))
        assert run(engine, table, z, mode, encoding).value == want, (z, mode, encoding)
    engine.memory.release_table(table)


def test_sparse_selection_reads_in_place_and_dense_ships(engine):
    rng = np.random.default_rng(8)
    cols = LineitemColumns.from_values(rng.integers(1, 100_001, 2_000_000), rng.integers(1, 51, 2_000_000) * 100,
                                       rng.integers(90_000, 10_000_000, 2_000_000))
    table = Table.from_columns(cols)
    sparse = engine.plan(table, MissionQuery(30), "pinned")
    assert sparse.placement("l_suppkey", "low") == "zero_copy"
    assert sparse.placement("l_quantity", "words") == "zero_copy"
    result = engine.run(table, MissionQuery(30), sparse)
    assert result.value == exact(cols, 30)
    assert result.profile.pcie_bytes_per_row < 1.5 and result.profile.zero_copy_bytes > 0
    dense = engine.plan(table, MissionQuery(50_000), "pinned")
    assert dense.placement("l_quantity", "words") == "stream"
    assert engine.run(table, MissionQuery(50_000), dense).value == exact(cols, 50_000)
    assert engine.run(table, MissionQuery(50_000), dense).profile.pcie_bytes_per_row < 6
    engine.memory.release_table(table)


def test_resident_columns_are_uploaded_once(engine):
    cols = random_columns(300_001, 3)
    table = Table.from_columns(cols)
    first = run(engine, table, 10, "resident", "plain")
    uploads = lambda: {k: v for k, v in table.cache.items() if k[0] == "device"}
    held = uploads()
    for z in (1, 10, 500, 999, 1000, 5000):
        assert run(engine, table, z, "resident", "plain").value == exact(cols, z)
    assert uploads() == held  # cached: no second upload (the same device allocations)
    assert first.profile.h2d_bytes == 0
    engine.memory.release_table(table)
    assert not table.cache


def test_store_round_trip_on_the_gpu(engine, tmp_path):
    from gquery import store

    cols = random_columns(50_001, 9)
    path = store.write_store(Table.from_columns(cols), tmp_path / "lineitem.gq", echo=lambda m: None)
    table = store.open_store(path, engine.memory)
    assert table.pinned
    for mode in MODES:
        assert run(engine, table, 400, mode).value == exact(cols, 400), mode
    engine.memory.release_table(table)


@pytest.mark.parametrize("rows", [1, 33, 257, 4097, 2**16 + 3, 1_000_001])
def test_every_ladder_step(ladder, rows):
    cols = random_columns(rows, rows + 1)
    for z in (0, 400):
        want = exact(cols, z)
        scaled = 0 if want is None else int(want.scaleb(4))
        for step in STEPS:
            assert ladder.run(step, cols, MissionQuery(z))["value"] == scaled, f"{step.name}, {rows} rows, Z {z}"


def test_ladder_refuses_what_int64_partials_cannot_hold(ladder):
    limit = 2**31 - 1
    cols = LineitemColumns.from_values(np.zeros(5000), np.full(5000, limit), np.full(5000, limit))
    second = next(s for s in STEPS if s.output == "gpu_total")
    assert "overflow" in ladder.exactness_problem(second, cols, cols.rows)
    assert ladder.exactness_problem(STEPS[-1], cols, cols.rows) is None  # the engine's kernel is exact


def test_cupy_one_liner_matches(engine):
    from gquery.bench import cupy_baseline

    if not cupy_baseline.available():
        pytest.skip("CuPy is not installed")
    cols = random_columns(1_000_003, 11)
    dev, _ = engine.memory.resident(cols)
    ms, value = cupy_baseline.one_liner(dev, cols.rows, MissionQuery(300), repeat=2)
    assert ms > 0 and value == int(exact(cols, 300).scaleb(4))
    engine.memory.evict(cols)


def test_profile_accounts_for_every_chunk(engine):
    cols = random_columns(10_000_000, 5)
    table = Table.from_columns(cols)
    for mode in ("pinned", "registered", "pageable"):
        plan = engine.plan(table, MissionQuery(500), mode, "plain", chunk_rows=1 << 20)
        p = engine.run(table, MissionQuery(500), plan).profile
        assert len(p.stage("h2d")) == len(p.stage("kernel")) == plan.geometry.n_chunks
        assert (len(p.stage("staging")) == plan.geometry.n_chunks) == (mode == "pageable")
        assert p.h2d_bytes == cols.nbytes and 0 < p.stage_ms("h2d") <= p.total_ms
        assert all(i.end_ms >= i.start_ms >= 0 for i in p.intervals)
    engine.memory.release_table(table)


def test_cli_run_all_modes_match(data_dir):
    r = gquery("run", "--sf", "0.01", "--z", "30", "--mode", "all", "--repeat", "2", "--data-dir", data_dir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("MATCH") == len(MODES) and "MISMATCH" not in r.stdout


def test_bandwidth_command():
    r = gquery("bandwidth", "--size-mb", "64", "--repeat", "3", "--json")
    assert r.returncode == 0, r.stderr
    import json

    limits = json.loads(r.stdout)["limits"]
    assert limits["d2d_gbps"] > limits["h2d_pinned_gbps"] > 0 and limits["host_staging_gbps"] > 0


def frames_of_widths(widths, rng, low: int) -> np.ndarray:
    """Whole frames of 1024 values, frame i spanning exactly widths[i] bits above the reference
    low + i (both ends present)."""
    out = []
    for i, w in enumerate(widths):
        ref = low + i
        f = ref + rng.integers(0, 1 << w, 1024, dtype=np.uint64).astype(np.int64) if w else np.full(1024, ref)
        f[0], f[-1] = ref, ref + (1 << w) - 1
        out.append(f)
    return np.concatenate(out)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("encoding", ["packed", "sliced"])
def test_frame_tiles_equal_the_vector_loop_at_every_width(engine, mode, encoding):
    """The frame loop's two sums (offsets from the references when both widths are <= 32 and add up
    to <= 58, value by value otherwise) against the vector loop and Python's integers: widths
    0, 1, 26 + 31, 26 + 32 = 58, 27 + 32 = 59, 32 + 32; references near -2^31 so that n x rq x rp
    leaves 64 bits while every product stays below 2^63 (64-bit products; the 128-bit ones are
    test_64_bit_values_and_products_are_exact's); a partial last frame; random Z."""
    rng = np.random.default_rng(2026)
    q = frames_of_widths([0, 26, 26, 27, 32, 5, 1], rng, -2**31)
    p = frames_of_widths([31, 31, 32, 32, 32, 0, 1], rng, -2**31)
    for rows in (1, 1023, 5 * 1024 + 7, 7 * 1024):
        keys = rng.integers(0, 5000, rows)
        cols = LineitemColumns(keys.astype(np.int32), q[:rows].copy(), p[:rows].copy(), f"widths {rows}")
        table = Table.from_columns(cols)
        assert not table.wide_products()
        if rows == 7 * 1024:
            assert [int(w) for w in table.encoded("packed")["l_quantity"].widths] == [0, 26, 26, 27, 32, 5, 1]
        for z in [0, 1, 2500, 5000] + [int(x) for x in rng.integers(0, 5000, 3)]:
            want = exact(cols, z)
            for tiles in (True, False):
                options = {} if mode == "resident" else {"chunk_rows": 2048}
                result = run(engine, table, z, mode, encoding, tiles=tiles, **options)
                assert result.value == want, (rows, z, mode, encoding, tiles)
        engine.memory.release_table(table)


def test_an_equal_plan_reuses_its_job_until_the_table_is_released(engine):
    """Engine._job keeps what follows from a plan (pointers, ranges) for the next equal plan,
    at most JOBS_KEPT a table; releasing the table's memory drops them, and the next query
    page-locks and resolves again."""
    from gquery.gpu.executor import JOBS_KEPT

    cols = random_columns(5000, 3)
    table = Table.from_columns(cols)
    jobs = lambda: [k for k in table.cache if k[0] == "job"]
    first = run(engine, table, 500, "pinned", "sliced", chunk_rows=1024)
    assert first.value == exact(cols, 500) and len(jobs()) == 1
    again = run(engine, table, 500, "pinned", "sliced", chunk_rows=1024)  # a new, equal plan
    assert again.value == first.value and len(jobs()) == 1 and again.profile.setup_ms == 0.0
    for z in range(JOBS_KEPT + 3):
        assert run(engine, table, z * 50, "pinned", "sliced").value == exact(cols, z * 50)
    assert len(jobs()) == JOBS_KEPT
    engine.memory.release_table(table)
    assert jobs() == []
    assert run(engine, table, 500, "pinned", "sliced", chunk_rows=1024).value == first.value
    engine.memory.release_table(table)


@pytest.mark.parametrize("mode", LIST_MODES)
@pytest.mark.parametrize("id_bytes", [4, 8])
def test_bucket_lists_at_every_bucket_edge(engine, mode, id_bytes):
    """The list loop against Python's integers: keys that fit the top byte (no low bits), 17-bit
    keys (2-byte low bits), keys across the whole int32 range (4-byte low bits); Z at the edges of
    buckets (the first entry of a bucket, its last, the one after) and random; 4- and 8-byte row
    ids (8 bytes are what a table past 2^32 rows takes: here the same lists, widened)."""
    import dataclasses

    rng = np.random.default_rng(id_bytes)
    rows = 5 * 1024 + 3
    for lo, hi in ((1, 200), (1, 100_000), (-(2**31), 2**31 - 1)):
        keys = rng.integers(lo, hi, rows, endpoint=True)
        cols = LineitemColumns(keys.astype(np.int32), rng.integers(-10**7, 10**7, rows), rng.integers(1, 10**9, rows),
                               f"keys {lo}..{hi}")
        table = Table.from_columns(cols)
        key = table.encoded("indexed")["l_suppkey"]
        if id_bytes == 8:
            key = dataclasses.replace(key, ids=key.ids.astype(np.uint64))
            table.columns["l_suppkey"].encodings["indexed"] = key
        edges = [key.reference + b * key.bucket + d for b in (0, 1, 17, 255, 256) for d in (-1, 0, 1)]
        for z in edges + [int(x) for x in rng.integers(lo - 5, hi + 5, 4)] + [-(2**31), 2**31]:
            plan = engine.plan(table, MissionQuery(z), mode, "indexed")
            assert plan.kernel.key == "indexed" and plan.kernel.id_bytes == id_bytes
            result = engine.run(table, MissionQuery(z), plan)
            assert result.value == exact(cols, z), (lo, hi, z, mode, id_bytes)
            assert result.selected_rows == int(np.count_nonzero(keys < z))
        engine.memory.release_table(table)


def test_a_sparse_query_over_a_store_reads_the_lists_and_little_else(engine, tmp_path):
    """auto over a store (which holds the key's bucket lists): a sparse Z reads a prefix of the
    lists and the selected rows' factors in place, far under the sliced key's byte a row; the
    profile's bytes come from the kernel's counters."""
    from gquery import store

    rng = np.random.default_rng(12)
    rows = 2_000_000
    cols = LineitemColumns.from_values(rng.integers(1, 100_001, rows), rng.integers(1, 51, rows) * 100,
                                       rng.integers(90_000, 10_000_000, rows))
    path = store.write_store(Table.from_columns(cols), tmp_path / "lineitem.gq", echo=lambda m: None)
    table = store.open_store(path, engine.memory)
    lists = run(engine, table, 30, "pinned")
    assert lists.plan.encoding == "indexed" and lists.value == exact(cols, 30)
    scan = run(engine, table, 30, "pinned", "sliced")
    assert scan.value == lists.value
    assert lists.profile.pcie_bytes_per_row < 0.1 < 1 <= scan.profile.pcie_bytes_per_row
    assert lists.profile.h2d_bytes == 0 and lists.profile.zero_copy_bytes > 0
    dense = run(engine, table, 50_000, "pinned")
    assert dense.plan.encoding == "sliced" and dense.value == exact(cols, 50_000)
    engine.memory.release_table(table)


def test_page_locked_memory_is_freed_on_whichever_thread_collects_it(engine):
    """Page-locked host memory made on a GPU's own thread, left in a reference cycle and collected on a
    thread with no context current, is freed there (PyCUDA's page-locked arrays could be freed only on
    their context's thread: on 2 GPUs such garbage leaked with "out-of-thread context could not be
    cleaned up", which this suite fails on). The driver then no longer knows the addresses."""
    import ctypes
    import gc
    import threading
    import weakref

    from gquery.gpu.device import device_thread
    from gquery.gpu.memory import _libcuda

    class Holder:
        pass

    def make():
        made = []
        for a in (engine.memory.pinned_empty(5000, np.int64), engine.memory.mapped_empty(3000, np.uint32)):
            a[:] = np.arange(len(a))
            h = Holder()
            h.cycle, h.view = h, a[7:70]
            made.append((h, a.ctypes.data, weakref.ref(a.base)))
        return made

    made = device_thread(0).call(make)
    lib = _libcuda()
    flags = ctypes.c_uint()
    for h, address, _ in made:
        assert lib.cuMemHostGetFlags(ctypes.byref(flags), ctypes.c_void_p(address)) == 0  # page-locked now
        assert h.view[0] == 7
    buffers = [ref for _, _, ref in made]
    addresses = [address for _, address, _ in made]
    del made, h
    gc.disable()  # the cycles are collected on the other thread, not here
    try:
        collector = threading.Thread(target=gc.collect, name="collector")
        collector.start()
        collector.join()
    finally:
        gc.enable()
    assert all(ref() is None for ref in buffers)
    for address in addresses:  # freed: the driver no longer counts the address as page-locked
        assert lib.cuMemHostGetFlags(ctypes.byref(flags), ctypes.c_void_p(address)) != 0
