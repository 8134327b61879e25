"""Parted stores on the CPU: parts written one at a time, resumed, read whole or through a bounded
window; frame views and shares; the CPU reference over parts equals NumPy's over the whole."""

import shutil

import numpy as np
import pytest

from conftest import gquery  # noqa: F401
from gquery import answer, sql, store
from gquery.columns import LineitemColumns
from gquery.encodings import FRAME_ROWS, frames_of, split_frames
from gquery.table import PartedTable, Table

quiet = lambda m: None


def cpu_mission(table, z):
    """The mission's SQL at Z through the CPU reference over a Table or a PartedTable: its one value."""
    return answer.cpu_answer(sql.parse(sql.named_sql("mission", z), answer.schema_of(table)), table).rows[0][0]


def whole_mission(cols: LineitemColumns, z):
    """The same over the whole, as columns held in memory (one Table of them)."""
    return cpu_mission(Table.from_columns(cols), z)


def columns(rows: int, seed: int) -> LineitemColumns:
    rng = np.random.default_rng(seed)
    return LineitemColumns.from_values(rng.integers(-5, 3000, rows).astype(np.int32),
                                       rng.integers(1, 51, rows) * 100, rng.integers(-10**12, 10**12, rows))


def build(tmp_path, sizes):
    path = tmp_path / "lineitem.gq"
    path.mkdir()
    parts = [columns(n, k) for k, n in enumerate(sizes)]
    for k, c in enumerate(parts, start=1):
        store.write_store(Table.from_columns(c), store.part_path(path, k), echo=quiet)
    store.finish_parted(path, len(sizes), echo=quiet)
    whole = LineitemColumns.from_values(*(np.concatenate([getattr(c, n) for c in parts])
                                          for n in ("suppkey", "quantity", "extendedprice")))
    return path, whole


SIZES = [1, FRAME_ROWS - 1, FRAME_ROWS + 1, 5000]


def test_parted_store_opens_whole_and_answers_exactly(tmp_path):
    path, whole = build(tmp_path, SIZES)
    t = store.open_store(path)
    assert isinstance(t, PartedTable) and t.rows == whole.rows and t.part_rows == SIZES
    for z in (-10, -5, 0, 1, 1777, 2999, 3000, 10**9):
        assert cpu_mission(t, z) == whole_mission(whole, z)


@pytest.mark.parametrize("window", [1, 2, 3])
def test_a_store_opened_with_a_window_holds_no_part(tmp_path, window):
    path, whole = build(tmp_path, SIZES)
    t = store.open_store(path, window=window)
    assert t.tables is None
    assert cpu_mission(t, 1500) == whole_mission(whole, 1500)


def test_missing_part_is_refused_and_an_unfinished_store_is_not_a_store(tmp_path):
    path, _ = build(tmp_path, SIZES)
    shutil.rmtree(store.part_path(path, 2))
    with pytest.raises(store.StoreError, match="part-00002.gq is missing"):
        store.open_store(path)
    (path / "manifest.json").unlink()
    assert not store.is_store(path)
    with pytest.raises(store.StoreError, match="part 2 of 4"):
        store.finish_parted(path, 4, echo=quiet)


def test_parquet_parts_become_a_parted_store_and_a_rerun_resumes(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gquery.tpch import find_lineitem

    folder = tmp_path / "lineitem"
    folder.mkdir()
    from decimal import Decimal

    rng = np.random.default_rng(3)
    cents = lambda a: pa.array([Decimal(int(x)).scaleb(-2) for x in a], pa.decimal128(15, 2))
    for k in range(3):
        n = 700 * (k + 1)
        table = pa.table({"l_suppkey": pa.array(rng.integers(1, 100, n), pa.int32()),
                          "l_quantity": cents(rng.integers(1, 51, n) * 100),
                          "l_extendedprice": cents(rng.integers(100, 10**6, n))})
        pq.write_table(table, folder / f"lineitem.{k + 1}.parquet")
    source = find_lineitem(folder)
    path = store.ensure_store(source, echo=quiet)
    assert store.is_parted(path) and store.open_store(path).part_rows == [700, 1400, 2100]
    kept = store.part_path(path, 1).stat().st_mtime_ns
    (path / "manifest.json").unlink()
    shutil.rmtree(store.part_path(path, 3))
    lines = []
    store.ensure_store(source, echo=lines.append)
    assert store.part_path(path, 1).stat().st_mtime_ns == kept  # whole parts are kept, not rewritten
    written = [ln for ln in lines if ln.startswith("part ")]
    assert len(written) == 1 and written[0].startswith("part 3/3: 2,100 rows encoded")  # only the missing part
    assert "2 of 3 parts already encoded (2,100 rows); resuming" in lines  # (as a stopped generation says it)
    assert written[0].endswith("; 4,200 rows so far")  # (the kept parts' rows counted: one part left, in this process)
    assert store.open_store(path).rows == 4200


@pytest.mark.parametrize("shares", [1, 2, 3, 7])
def test_frame_views_cover_every_row_once(shares):
    cols = columns(5 * FRAME_ROWS + 17, 9)
    t = Table.from_columns(cols)
    ranges = split_frames(frames_of(t.rows), shares)
    assert ranges[0][0] == 0 and ranges[-1][1] == frames_of(t.rows)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    views = [t.view(a, b) for a, b in ranges]
    assert sum(v.rows for v in views) == t.rows
    for enc in ("plain", "packed", "sliced"):
        t.encoded(enc)
    for enc, column, want in (("packed", "l_extendedprice", cols.extendedprice), ("sliced", "l_suppkey", cols.suppkey),
                              ("packed", "l_suppkey", cols.suppkey), ("plain", "l_quantity", cols.quantity)):
        got = np.concatenate([t.view(a, b).columns[column].encodings[enc].decode() for a, b in ranges])
        assert np.array_equal(got, want), (enc, column)
    key = [t.view(a, b).columns["l_suppkey"].encodings["sliced"] for a, b in ranges]
    assert sum(k.histogram for k in key).tolist() == t.columns["l_suppkey"].encodings["sliced"].histogram.tolist()


def test_gpus_option_is_checked_before_work(tmp_path):
    from gquery.errors import UsageError
    from gquery.options import parse_gpus

    assert parse_gpus("all") == "all" and parse_gpus("3") == 3
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(UsageError):
            parse_gpus(bad)
