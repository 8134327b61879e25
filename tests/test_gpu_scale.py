"""On a GPU host: parted tables, windows read from disk, shares over every GPU, and a table of more
than 2^32 rows, each equal to an exact sum computed another way."""

import numpy as np
import pytest

from conftest import gquery  # noqa: F401  (puts the checkout first on the path)
from gquery import store
from gquery.columns import LineitemColumns
from gquery.encodings import FRAME_ROWS, PAD_WORDS, Packed, Sliced
from gquery.mission import MissionQuery, numpy_select_sum, to_decimal
from gquery.table import KEY, PRICE, QUANTITY, Column, PartedTable, Table
from gquery.mission import select_sum

pytestmark = pytest.mark.gpu
HOST_MODES = ("pinned", "registered", "pageable")


@pytest.fixture(scope="module")
def multi():
    from gquery.gpu.multi import MultiEngine

    e = MultiEngine("all")
    yield e
    e.close()


def columns(rows: int, seed: int) -> LineitemColumns:
    rng = np.random.default_rng(seed)
    return LineitemColumns.from_values(rng.integers(-5, 3000, rows).astype(np.int32), rng.integers(1, 51, rows) * 100,
                                       rng.integers(-10**9, 10**9, rows), source=f"random({rows}, {seed})")


def parted(tmp_path, sizes, seed=7):
    """A parted store of parts of the given row counts, and the columns it holds, concatenated."""
    path = tmp_path / "lineitem.gq"
    path.mkdir()
    parts = [columns(n, seed + k) for k, n in enumerate(sizes)]
    for k, c in enumerate(parts, start=1):
        store.write_store(Table.from_columns(c), store.part_path(path, k), echo=lambda m: None)
    store.finish_parted(path, len(sizes), echo=lambda m: None)
    whole = LineitemColumns.from_values(*(np.concatenate([getattr(c, n) for c in parts])
                                          for n in ("suppkey", "quantity", "extendedprice")))
    return path, whole


def run(engine, table, z, mode, encoding="auto"):
    q = MissionQuery(z)
    return engine.run(table, q, engine.plan(table, q, mode, encoding))


@pytest.mark.parametrize("gpus", [1, 2, 4])
def test_parted_store_every_mode_and_share(multi, tmp_path, gpus):
    from gquery.gpu.multi import MultiEngine

    if gpus > multi.gpus:
        pytest.skip(f"this host has {multi.gpus} GPU(s)")
    engine = multi if gpus == multi.gpus else MultiEngine(gpus)
    path, whole = parted(tmp_path, [1, FRAME_ROWS + 1, 3 * FRAME_ROWS - 1, 40_000])
    pinned = store.open_store(path, engine.memory)
    plain = store.open_store(path)
    for z in (-10, 0, 1, 1500, 2999, 10**6):
        want = numpy_select_sum(whole, MissionQuery(z))
        for mode in ("resident", "pinned"):
            for encoding in ("plain", "packed", "sliced", "indexed"):  # shares of parts: the lists' ranges
                r = run(engine, pinned, z, mode, encoding)
                assert r.value == want, (z, mode, encoding)
        for mode in ("registered", "pageable"):
            assert run(engine, plain, z, mode).value == want, (z, mode)
    r = run(engine, pinned, 1500, "pinned")
    assert {g["gpu"] for g in r.profile.per_gpu} == set(range(min(gpus, 4)))
    assert all(i.lane.startswith("gpu") for i in r.profile.intervals)
    engine.memory.release_table(pinned), engine.memory.release_table(plain)
    if engine is not multi:
        engine.close()


def test_unlike_tables_queued_as_one_batch(multi):
    """run_many queues tables back to back on shared streams and buffers: tables whose keys need
    different low-slice types, whose planner picks different encodings, or that no row of can pass,
    each give the answer they give alone, in every host mode."""
    rng = np.random.default_rng(11)
    spans = [(0, 200, 5000), (-2**31, 2**31 - 1, 3 * FRAME_ROWS + 1), (10**6, 10**6 + 70_000, 2 * FRAME_ROWS - 3),
             (0, 1, 1), (0, 5000, 40_000)]
    cols = [LineitemColumns.from_values(rng.integers(lo, hi, n, endpoint=True).astype(np.int32),
                                        rng.integers(1, 51, n) * 100, rng.integers(-10**9, 10**9, n))
            for lo, hi, n in spans]
    tables = [Table.from_columns(c) for c in cols]
    w = multi.workers[0]
    for z in (-2**31, 0, 150, 10**6 + 35_000, 2**31 - 1):
        q = MissionQuery(z)
        for mode in HOST_MODES:
            for encoding in ("auto", "plain", "sliced") + (("indexed",) if mode != "pageable" else ()):
                plans = [w.submit(w.engine.plan, t, q, mode, encoding).result() for t in tables]
                batch = w.submit(w.engine.run_many, list(zip(tables, plans)), q).result()
                for t, c, p, r in zip(tables, cols, plans, batch):
                    alone = w.submit(w.engine.run, t, q, p).result()
                    assert (r.value, r.selected_rows) == (alone.value, alone.selected_rows) \
                        == (numpy_select_sum(c, q), int(np.count_nonzero(c.suppkey < z))), (z, mode, encoding)
                assert len({r.started for r in batch}) == 1  # one time axis for the batch
    for t in tables:
        multi.memory.release_table(t)


def test_one_table_divided_among_the_gpus(multi):
    cols = columns(5 * FRAME_ROWS + 17, 3)
    table = Table.from_columns(cols)
    for z in (0, 700, 3000):
        for mode in ("resident", "pinned", "pageable"):
            assert run(multi, table, z, mode, "sliced").value == numpy_select_sum(cols, MissionQuery(z))
        for mode in ("resident", "pinned"):  # each GPU's share of the key's bucket lists
            assert run(multi, table, z, mode, "indexed").value == numpy_select_sum(cols, MissionQuery(z))
    multi.memory.release_table(table)


@pytest.mark.parametrize("window", [1, 2])
def test_window_reads_parts_from_disk(multi, tmp_path, window):
    path, whole = parted(tmp_path, [5000, 1, 7000, 2 * FRAME_ROWS])
    table = store.open_store(path, multi.memory, window=window)
    assert table.tables is None
    for z in (0, 1234, 5000):
        for mode in HOST_MODES:
            assert run(multi, table, z, mode).value == numpy_select_sum(whole, MissionQuery(z)), (z, mode)
        for mode in ("pinned", "registered"):  # the lists read from disk only when asked for
            assert run(multi, table, z, mode, "indexed").value == numpy_select_sum(whole, MissionQuery(z)), (z, mode)
    assert select_sum(table, MissionQuery(1234)) == numpy_select_sum(whole, MissionQuery(1234))
    multi.memory.release_table(table)  # each GPU's page-locked memory freed on its own thread, not by a later collection


def test_api_queries_a_parted_store(tmp_path):
    import gquery

    path, whole = parted(tmp_path, [3000, 4000])
    t = gquery.open(path)
    assert isinstance(t.data, PartedTable)
    r = t.query(1000, mode="pinned")
    assert r.check and r.rows == [(numpy_select_sum(whole, MissionQuery(1000)),)]
    once = t.query(1000, mode="registered", warmup=False)  # a one-shot query: its setup inside its one run
    assert once.check and once.rows == r.rows and len(once.times_ms) == 1
    t.close()


def synthetic(rows: int) -> tuple[Table, dict]:
    """A table of `rows` rows built from encodings alone (no plain column: 2^32 int64s would be 34 GB).
    Keys: one 1024-row pattern of top bytes repeated (buckets of 1: the key is the top byte). Factors:
    constant within a frame (width 0), the frame's reference varying with the frame number."""
    frames = -(-rows // FRAME_ROWS)
    pattern = (np.arange(FRAME_ROWS, dtype=np.int64) * 37 % 256).astype(np.uint8)
    top = np.empty(frames * FRAME_ROWS, dtype=np.uint8)
    top.reshape(frames, FRAME_ROWS)[:] = pattern
    histogram = np.bincount(pattern, minlength=256).astype(np.int64) * frames
    tail = frames * FRAME_ROWS - rows  # the last frame's padding is not rows
    histogram -= np.bincount(pattern[FRAME_ROWS - tail:], minlength=256) if tail else 0
    key = Sliced(rows, np.dtype(np.int32), 0, 1, top, None, histogram)
    f = np.arange(frames, dtype=np.int64)
    q_ref, p_ref = 1 + f % 50, 1000 + f % 1000 - 700 * (f % 3 == 0)

    def constant_frames(refs, factor):
        meta = np.zeros((frames, 2), dtype=np.int64)
        meta[:, 0] = refs
        return Packed(rows, np.dtype(np.int64), factor, meta, np.zeros(PAD_WORDS, dtype=np.uint32))

    columns = {KEY: Column(KEY, {"sliced": key}), QUANTITY: Column(QUANTITY, {"packed": constant_frames(q_ref, 100)}),
               PRICE: Column(PRICE, {"packed": constant_frames(p_ref, 1)})}
    largest = {QUANTITY: 100 * 50, PRICE: 2000}
    return Table(rows, columns, f"synthetic({rows:,})", largest), {"pattern": pattern, "q": 100 * q_ref, "p": p_ref,
                                                                   "tail": tail}


def synthetic_answer(parts: dict, z: int):
    """Σ over frames of (rows of the frame whose key < z) x q x p, in Python integers."""
    pattern, q, p, tail = parts["pattern"], parts["q"], parts["p"], parts["tail"]
    per_frame = int(np.count_nonzero(pattern < z))
    last = int(np.count_nonzero(pattern[:FRAME_ROWS - tail] < z))
    qp = q * p  # < 2^23 a frame: the sum over 4M frames fits int64
    total = per_frame * int(qp[:-1].sum()) + last * int(qp[-1])
    selected = per_frame * (len(q) - 1) + last
    return to_decimal(total, selected), selected


def test_more_than_2_to_the_32_rows(multi):
    from gquery.gpu.executor import Engine, close_last

    rows = 2**32 + 3 * FRAME_ROWS + 5
    table, parts = synthetic(rows)
    engine = Engine()
    try:
        for z in (1, 100, 256):
            want, selected = synthetic_answer(parts, z)
            for mode in ("resident", "pinned"):
                r = run(engine, table, z, mode, "sliced")
                assert (r.value, r.selected_rows) == (want, selected), (z, mode)
        assert synthetic_answer(parts, 256)[1] == rows
        r = run(multi, table, 100, "pinned", "sliced")  # frame views past 2^32 on every GPU
        assert r.value == synthetic_answer(parts, 100)[0]
    finally:
        engine.memory.release_table(table)
        multi.memory.release_table(table)
        close_last(engine)  # its modules too, on this thread
