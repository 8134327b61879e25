"""On a GPU host: the mission's SQL on the one road in every mode and scan equals DuckDB or Python's own
integers (odd sizes, sums past 64 bits, values across the whole int64 range, every frame width), and every
ladder step equals them too."""

import numpy as np
import pytest

from conftest import gquery
from gquery import answer, sql, tpch
from gquery.columns import LineitemColumns, load_lineitem
from gquery.bench.ladder import LadderRunner  # noqa: F401 (the ladder fixture's)
from gquery.ladder import STEPS
from gquery.plan import MODES
from gquery.reference import DuckDBTable
from gquery.table import Table

pytestmark = pytest.mark.gpu
SCANS = ("frames", "sliced", "index")
INDEX_MODES = ("pinned", "registered")  # where the index and sliced scans read a row's columns in place
COMBOS = [(m, s) for s in SCANS for m in MODES if s == "frames" or m in INDEX_MODES]


@pytest.fixture(scope="module")
def engine():
    from gquery.gpu.executor import Engine, close_last

    e = Engine()
    yield e
    close_last(e)  # its modules too, on this thread: not left for the interpreter's exit


@pytest.fixture(scope="module")
def ladder(engine):
    return LadderRunner(engine)


def mission(engine, table, z, mode, scan="auto", **options):
    """The mission's SQL at Z on the GPU: its one value (a Decimal, or None over no rows) and the answer."""
    if scan in ("index", "sliced"):
        table.columns["l_suppkey"].get("indexed")  # the key's top bytes and bucket lists (a store holds them)
    query = sql.parse(sql.named_sql("mission", z), answer.schema_of(table))
    a = answer.gpu_answer(query, table, engine, mode, repeat=1, warmup=False, scan=scan, **options)
    if scan == "index" and a.plan.tables[0].chunks:
        assert a.plan.tables[0].index is not None  # scanned by its lists, as asked
    if scan == "sliced" and a.plan.tables[0].chunks:
        assert a.plan.tables[0].sliced is not None  # its frames read the key by its top byte, as asked
    return a.rows[0][0], a


def exact(cols: LineitemColumns, z: int):
    """Python's own integers, row by row: the exact sum in ten-thousandths as SQL gives it (None over no rows)."""
    from decimal import Decimal

    from gquery.exact import exact_product_sum

    mask = cols.suppkey.astype(np.int64) < z
    if not mask.any():
        return None
    if cols.rows > 5000:  # NumPy's exact path (tests/test_query.py checks it against Python's)
        return Decimal(f"{exact_product_sum(cols.quantity[mask], cols.extendedprice[mask])}E-4")
    return Decimal(f"{sum(int(q) * int(p) for q, p, m in zip(cols.quantity, cols.extendedprice, mask) if m)}E-4")


def random_columns(rows: int, seed: int, big: bool = False) -> LineitemColumns:
    rng = np.random.default_rng(seed)
    hi = 2**31 - 1 if big else 10_000_000
    return LineitemColumns.from_values(rng.integers(1, 1000, rows), rng.integers(-hi, hi, rows),
                                       rng.integers(-hi, hi, rows), source=f"random({rows}, {seed})")


@pytest.mark.parametrize("sf", [0.01, 0.1, 1])
def test_tpch_every_mode_and_scan_equals_duckdb(engine, data_dir, sf):
    source = tpch.generate(sf, data_dir, echo=lambda m: None)
    cols = load_lineitem(source)
    table = Table.from_columns(cols)
    duck = DuckDBTable(source, ["l_suppkey", "l_quantity", "l_extendedprice"])
    top = int(cols.suppkey.max())
    try:
        for z in (-3, 0, 1, 30, top // 2, top, top + 1, 2**40):
            want = duck.run_sql(sql.named_sql("mission", z), repeat=1).rows[0][0]
            for mode, scan in COMBOS:
                assert mission(engine, table, z, mode, scan)[0] == want, f"SF {sf}, Z {z}, {mode}, {scan}"
    finally:
        duck.close()
        engine.memory.release_table(table)


@pytest.mark.parametrize("rows", [0, 1, 3, 4, 5, 31, 33, 255, 257, 1023, 1024, 1025, 2047, 2049, 2**20 - 1, 2**20 + 1])
@pytest.mark.parametrize("mode,scan", COMBOS)
def test_odd_sizes_and_partial_chunks(engine, rows, mode, scan):
    cols = random_columns(rows, rows)
    table = Table.from_columns(cols)
    for z in (0, 500, 2000):
        want = exact(cols, z)
        for frames in (None, 1, 3):  # default chunks, a frame a chunk, a short last chunk
            value, a = mission(engine, table, z, mode, scan, chunk_frames=frames)
            assert value == want, f"{rows} rows, Z {z}, {mode}, {scan}, chunk {frames}"
            assert a.partial.rows_selected == int(np.count_nonzero(cols.suppkey < z))
    engine.memory.release_table(table)


@pytest.mark.parametrize("mode,scan", COMBOS)
def test_sum_beyond_int64_is_exact(engine, mode, scan):
    rows = 4099
    limit = 2**31 - 1
    cols = LineitemColumns.from_values(np.arange(rows) % 7, np.full(rows, limit), np.full(rows, limit))
    total = rows * limit * limit
    assert total > 2**63
    tables = [Table.from_columns(cols)]
    assert mission(engine, tables[-1], 100, mode, scan)[0] == exact(cols, 100)
    neg = LineitemColumns.from_values(np.zeros(rows), np.full(rows, -limit), np.full(rows, limit))
    tables.append(Table.from_columns(neg))
    assert mission(engine, tables[-1], 1, mode, scan)[0] == exact(neg, 1) < 0
    mixed = random_columns(100_003, 7, big=True)
    tables.append(Table.from_columns(mixed))
    assert mission(engine, tables[-1], 700, mode, scan)[0] == exact(mixed, 700)
    for t in tables:
        engine.memory.release_table(t)


@pytest.mark.parametrize("mode,scan", COMBOS)
def test_64_bit_values_and_products_are_exact(engine, mode, scan):
    """Values across the whole int64 range: 64-bit frame widths, 128-bit products, negative values,
    constant frames and frames of one row; random Z."""
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
    for z in [int(x) for x in rng.integers(-2**31, 2**31, 6)] + [-2**31, 2**31]:
        assert mission(engine, table, z, mode, scan)[0] == exact(cols, z), (z, mode, scan)
    engine.memory.release_table(table)


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


@pytest.mark.parametrize("mode,scan", COMBOS)
def test_every_frame_width_decodes_exactly(engine, mode, scan):
    """Frames of widths 0, 1, 5, 26, 27, 31, 32 bits, references near -2^31, a partial last frame: the fused
    kernel's decoding against Python's integers, random Z."""
    rng = np.random.default_rng(2026)
    q = frames_of_widths([0, 26, 26, 27, 32, 5, 1], rng, -2**31)
    p = frames_of_widths([31, 31, 32, 32, 32, 0, 1], rng, -2**31)
    for rows in (1, 1023, 5 * 1024 + 7, 7 * 1024):
        keys = rng.integers(0, 5000, rows)
        cols = LineitemColumns(keys.astype(np.int32), q[:rows].copy(), p[:rows].copy(), f"widths {rows}")
        table = Table.from_columns(cols)
        if rows == 7 * 1024:
            assert [int(w) for w in table.columns["l_quantity"].get("packed").widths] == [0, 26, 26, 27, 32, 5, 1]
        for z in [0, 1, 2500, 5000] + [int(x) for x in rng.integers(0, 5000, 3)]:
            assert mission(engine, table, z, mode, scan, chunk_frames=2)[0] == exact(cols, z), (rows, z, mode, scan)
        engine.memory.release_table(table)


def test_resident_columns_are_uploaded_once(engine):
    cols = random_columns(300_001, 3)
    table = Table.from_columns(cols)
    _, first = mission(engine, table, 10, "resident")
    uploads = lambda: {k: v for k, v in table.cache.items() if k[0] == "device"}
    held = uploads()
    for z in (1, 10, 500, 999, 1000, 5000):
        assert mission(engine, table, z, "resident")[0] == exact(cols, z)
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
    for mode, scan in COMBOS:
        assert mission(engine, table, 400, mode, scan)[0] == exact(cols, 400), (mode, scan)
    engine.memory.release_table(table)


@pytest.mark.parametrize("rows", [1, 33, 257, 4097, 2**16 + 3, 1_000_001])
def test_every_ladder_step(ladder, rows):
    cols = random_columns(rows, rows + 1)
    for z in (0, 400):
        want = exact(cols, z)
        scaled = 0 if want is None else int(want.scaleb(4))
        for step in STEPS:
            assert ladder.run(step, cols, z)["value"] == scaled, f"{step.name}, {rows} rows, Z {z}"
    ladder.release()


def test_ladder_refuses_what_int64_partials_cannot_hold(ladder):
    limit = 2**31 - 1
    cols = LineitemColumns.from_values(np.zeros(5000), np.full(5000, limit), np.full(5000, limit))
    second = next(s for s in STEPS if s.output == "gpu_total")
    assert "overflow" in ladder.exactness_problem(second, cols, cols.rows)
    assert ladder.exactness_problem(STEPS[-1], cols, cols.rows) is None  # the engine's kernel is exact


def test_profile_accounts_for_every_chunk(engine):
    cols = random_columns(10_000_000, 5)
    table = Table.from_columns(cols)
    for mode in ("pinned", "registered", "pageable"):
        _, a = mission(engine, table, 500, mode, "frames", chunk_frames=1024)
        p, chunks = a.profile, sum(len(t.chunks) for t in a.plan.tables)
        assert chunks > 1 and len(p.stage("kernel")) == chunks == p.counters["chunks"]
        assert len(p.stage("h2d")) == sum(1 for t in a.plan.tables for c in t.chunks if c.streamed)
        assert (len(p.stage("staging")) > 0) == (mode == "pageable")
        assert p.h2d_bytes == sum(t.stream_bytes for t in a.plan.tables) and 0 < p.stage_ms("h2d") <= p.total_ms
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
