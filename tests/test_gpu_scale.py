"""On a GPU host: parted tables, shares over every GPU, parts of unlike shapes in one plan, and a table of
more than 2^32 rows, each equal to an exact sum computed another way."""

from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from conftest import gquery  # noqa: F401  (puts the checkout first on the path)
from gquery import answer, sql, store
from gquery.columns import LineitemColumns
from gquery.encodings import FRAME_ROWS, PAD_WORDS, Packed
from gquery.exact import exact_product_sum
from gquery.query import BIGINT, decimal
from gquery.schema import Schema
from gquery.table import KEY, PRICE, QUANTITY, Column, PartedTable, Table

pytestmark = pytest.mark.gpu
HOST_MODES = ("pinned", "registered", "pageable")
COMBOS = [(m, "frames") for m in ("resident", *HOST_MODES)] + [(m, "index") for m in ("pinned", "registered")]


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


def exact(cols: LineitemColumns, z: int):
    mask = cols.suppkey.astype(np.int64) < z
    return Decimal(f"{exact_product_sum(cols.quantity[mask], cols.extendedprice[mask])}E-4") if mask.any() else None


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


def mission(multi, data, z, mode, scan="auto"):
    query = sql.parse(sql.named_sql("mission", z), answer.schema_of(data))
    return answer.gpu_answer_multi(query, data, multi, mode, repeat=1, warmup=False, scan=scan)


@pytest.mark.parametrize("gpus", [1, 2, 4])
def test_parted_store_every_mode_scan_and_share(multi, tmp_path, gpus):
    from gquery.gpu.multi import MultiEngine

    if gpus > multi.gpus:
        pytest.skip(f"this host has {multi.gpus} GPU(s)")
    engine = multi if gpus == multi.gpus else MultiEngine(gpus)
    path, whole = parted(tmp_path, [1, FRAME_ROWS + 1, 3 * FRAME_ROWS - 1, 40_000])
    pinned = store.open_store(path, engine.memory)
    plain = store.open_store(path)
    for z in (-10, 0, 1, 1500, 2999, 10**6):
        want = exact(whole, z)
        for mode, scan in COMBOS:
            data = pinned if mode in ("resident", "pinned") else plain
            assert mission(engine, data, z, mode, scan).rows == [(want,)], (z, mode, scan)
    r = mission(engine, pinned, 1500, "pinned")
    assert {g["gpu"] for g in r.profile.per_gpu} == set(range(min(gpus, 4)))
    engine.memory.release_table(pinned), engine.memory.release_table(plain)
    if engine is not multi:
        engine.close()


def test_parts_of_unlike_shapes_in_one_plan(multi):
    """Parts whose keys need different low bits in their lists (none, 2 bytes, 4 bytes), whose zone maps rule
    every frame out, or whose planner scans frames where another's scans its lists, answered in one plan on one
    GPU, each as it answers alone, in every host mode."""
    from gquery.gpu.executor import Engine

    rng = np.random.default_rng(11)
    spans = [(0, 200, 5000), (-2**31, 2**31 - 1, 3 * FRAME_ROWS + 1), (10**6, 10**6 + 70_000, 2 * FRAME_ROWS - 3),
             (0, 1, 1), (0, 5000, 40_000)]
    cols = [LineitemColumns.from_values(rng.integers(lo, hi, n, endpoint=True).astype(np.int32),
                                        rng.integers(1, 51, n) * 100, rng.integers(-10**9, 10**9, n))
            for lo, hi, n in spans]
    tables = [Table.from_columns(c) for c in cols]
    for t in tables:
        t.columns[KEY].get("indexed")
    whole = PartedTable(sum(t.rows for t in tables), [Path(f"part{k}") for k in range(len(tables))],
                        [t.rows for t in tables], "unlike parts", {}, tables)
    all_cols = LineitemColumns.from_values(*(np.concatenate([getattr(c, n) for c in cols])
                                             for n in ("suppkey", "quantity", "extendedprice")))
    w = multi.workers[0]
    for z in (-2**31, 0, 150, 10**6 + 35_000, 2**31 - 1):
        query = sql.parse(sql.named_sql("mission", z), answer.schema_of(whole))
        for mode in HOST_MODES:
            for scan in ("auto", "frames") + (("index",) if mode != "pageable" else ()):
                got = w.submit(lambda: answer.gpu_answer(query, whole, w.engine, mode, 1, False, scan=scan)).result()
                assert got.rows == [(exact(all_cols, z),)], (z, mode, scan)
                for t, c in zip(tables, cols):
                    alone = w.submit(lambda: answer.gpu_answer(query, t, w.engine, mode, 1, False, scan=scan)).result()
                    assert alone.rows == [(exact(c, z),)], (z, mode, scan)
    assert isinstance(w.engine, Engine)
    for t in tables:
        multi.memory.release_table(t)


def test_one_table_divided_among_the_gpus(multi):
    cols = columns(5 * FRAME_ROWS + 17, 3)
    table = Table.from_columns(cols)
    table.columns[KEY].get("indexed")
    for z in (0, 700, 3000):
        for mode, scan in COMBOS:
            assert mission(multi, table, z, mode, scan).rows == [(exact(cols, z),)], (z, mode, scan)
    multi.memory.release_table(table)


def test_a_store_opened_with_a_window_holds_no_part(multi, tmp_path):
    path, whole = parted(tmp_path, [5000, 1, 7000, 2 * FRAME_ROWS])
    table = store.open_store(path, multi.memory, window=1)
    assert table.tables is None
    for z in (0, 1234, 5000):
        for mode, scan in COMBOS:
            if mode != "resident":
                assert mission(multi, table, z, mode, scan).rows == [(exact(whole, z),)], (z, mode, scan)
    multi.memory.release_table(table)


def test_api_queries_a_parted_store(tmp_path):
    import gquery

    path, whole = parted(tmp_path, [3000, 4000])
    t = gquery.open(path)
    assert isinstance(t.data, PartedTable)
    r = t.query(1000, mode="pinned")
    assert r.check and r.rows == [(exact(whole, 1000),)]
    once = t.query(1000, mode="registered", warmup=False)  # a one-shot query: its setup inside its one run
    assert once.check and once.rows == r.rows and len(once.times_ms) == 1
    t.close()


def test_api_asks_a_store_on_every_gpu(tmp_path):
    """table.sql(text, gpus=k) on a store opened with gquery.open (its columns page-locked by GPU 0's engine and
    read in place by every GPU: the scale benchmark's call): the exact sum, each GPU a share, the same as one GPU's;
    on one GPU, the whole store on it."""
    import gquery
    from gquery.gpu.device import device_count

    path, whole = parted(tmp_path, [3000, 4000, 2 * FRAME_ROWS + 5])
    t = gquery.open(path)
    text = sql.named_sql("mission", 1000)
    one = t.sql(text, backend="gpu", check=True)
    assert one.check and one.rows == [(exact(whole, 1000),)]
    for gpus in ["all"] + [2] * (device_count() >= 2):
        a = t.sql(text, backend="gpu", gpus=gpus, check=True)
        assert a.check and a.rows == one.rows, gpus
        n = device_count() if gpus == "all" else 2
        assert len(a.profile.per_gpu) == n, gpus
        made = t._plans[("shares", t._parsed[text], "pinned", n)]  # each share's plan, kept for the text
        again = t.sql(text, backend="gpu", gpus=gpus, check=False)
        assert again.rows == one.rows and t._plans[("shares", t._parsed[text], "pinned", n)] is made
        assert set(again.host_ms) == {"parse", "plan", "gpu", "finalize"}
    t.close()


def synthetic(rows: int) -> tuple[Table, dict]:
    """A table of `rows` rows built from packed encodings alone (2^32 int64s would be 34 GB). Keys: one
    1024-row pattern of bytes, every frame pointing at the same words. Factors: constant within a frame
    (width 0), the frame's reference varying with the frame number."""
    frames = -(-rows // FRAME_ROWS)
    pattern = (np.arange(FRAME_ROWS, dtype=np.int64) * 37 % 256).astype(np.uint32)
    words = np.zeros(8 * FRAME_ROWS // 32 + PAD_WORDS, dtype=np.uint32)
    for i, v in enumerate(pattern):  # 8 bits a value, little-endian within each word
        words[i // 4] |= np.uint32(int(v) << (8 * (i % 4)))
    key_meta = np.zeros((frames, 2), dtype=np.int64)
    key_meta[:, 1] = 8  # word offset 0, width 8: every frame the same words
    key = Packed(rows, np.dtype(np.int64), 1, key_meta, words, np.full(frames, int(pattern.max()), dtype=np.int64))
    f = np.arange(frames, dtype=np.int64)
    q_ref, p_ref = 1 + f % 50, 1000 + f % 1000 - 700 * (f % 3 == 0)

    def constant_frames(refs, factor):
        meta = np.zeros((frames, 2), dtype=np.int64)
        meta[:, 0] = refs
        return Packed(rows, np.dtype(np.int64), factor, meta, np.zeros(PAD_WORDS, dtype=np.uint32), refs * factor)

    types = {KEY: BIGINT, QUANTITY: decimal(15, 2), PRICE: decimal(15, 2)}
    cols = {KEY: Column(KEY, {"packed": key}, types[KEY]),
            QUANTITY: Column(QUANTITY, {"packed": constant_frames(q_ref, 100)}, types[QUANTITY]),
            PRICE: Column(PRICE, {"packed": constant_frames(p_ref, 1)}, types[PRICE])}
    largest = {QUANTITY: 100 * 50, PRICE: 2000}
    table = Table(rows, cols, f"synthetic({rows:,})", largest)
    assert answer.schema_of(table) == Schema(types, {})
    return table, {"pattern": pattern.astype(np.int64), "q": 100 * q_ref, "p": p_ref, "tail": frames * FRAME_ROWS - rows}


def synthetic_answer(parts: dict, z: int):
    """Σ over frames of (rows of the frame whose key < z) x q x p, in Python integers."""
    pattern, q, p, tail = parts["pattern"], parts["q"], parts["p"], parts["tail"]
    per_frame = int(np.count_nonzero(pattern < z))
    last = int(np.count_nonzero(pattern[:FRAME_ROWS - tail] < z))
    qp = q * p  # < 2^23 a frame: the sum over 4M frames fits int64
    total = per_frame * int(qp[:-1].sum()) + last * int(qp[-1])
    selected = per_frame * (len(q) - 1) + last
    return (Decimal(f"{total}E-4") if selected else None), selected


def test_more_than_2_to_the_32_rows(multi):
    from gquery.gpu.executor import Engine, close_last

    rows = 2**32 + 3 * FRAME_ROWS + 5
    table, parts = synthetic(rows)
    engine = Engine()
    try:
        for z in (1, 100, 256):
            want, selected = synthetic_answer(parts, z)
            query = sql.parse(sql.named_sql("mission", z), answer.schema_of(table))
            for mode in ("resident", "pinned"):
                a = answer.gpu_answer(query, table, engine, mode, repeat=1, warmup=False)
                assert (a.rows, a.partial.rows_selected) == ([(want,)], selected), (z, mode)
                assert a.plan.tables[0].index_option is None  # 32-bit row ids: frames only
        assert synthetic_answer(parts, 256)[1] == rows
        assert mission(multi, table, 100, "pinned").rows == [(synthetic_answer(parts, 100)[0],)]  # frame views past 2^32
    finally:
        engine.memory.release_table(table)
        multi.memory.release_table(table)
        close_last(engine)  # its modules too, on this thread
