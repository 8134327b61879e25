"""The planner's choices: encoding, where each buffer lives and why, the scan variant."""

import numpy as np
import pytest

from gquery.columns import LineitemColumns
from gquery.errors import UsageError
from gquery.plan import LIST_MODES, MODES, plan_query
from gquery.table import Table


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(1)
    rows = 1_000_000
    return Table.from_columns(LineitemColumns.from_values(
        rng.integers(1, 100_001, rows), rng.integers(1, 51, rows) * 100, rng.integers(90_000, 10_000_000, rows)))


def placements(plan):
    return {(b.column, b.name): b.placement for b in plan.buffers}


def test_sparse_query_reads_factors_and_low_bits_in_place(table):
    plan = plan_query(table, 30, "pinned", 132)
    assert plan.encoding == "sliced"
    p = placements(plan)
    assert p[("l_suppkey", "top")] == "stream" and p[("l_suppkey", "low")] == "zero_copy"
    assert p[("l_quantity", "words")] == p[("l_extendedprice", "words")] == "zero_copy"
    assert table.rows <= plan.bytes_by_placement("stream") < table.rows + 1024  # a byte a row (whole frames)
    assert "gather" in [name for name, _ in plan.steps()]


def test_dense_query_ships_packed_factors(table):
    plan = plan_query(table, 50_000, "pinned", 132)
    p = placements(plan)
    assert p[("l_quantity", "words")] == "stream" and p[("l_suppkey", "low")] == "zero_copy"
    assert plan.bytes_by_placement("stream") / table.rows < 6
    assert any("shipped in bulk" in r for r in plan.reasons)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("encoding", ["plain", "packed", "sliced", "indexed"])
def test_modes_place_buffers_where_they_can_be_read(table, listed, mode, encoding):
    table = listed if encoding == "indexed" else table  # `table` holds no lists: auto scans it
    if encoding == "indexed" and mode not in LIST_MODES:
        with pytest.raises(UsageError, match="gathers each selected row's factors"):
            plan_query(table, 500, mode, 132, encoding=encoding)
        return
    plan = plan_query(table, 500, mode, 132, encoding=encoding)
    kinds = set(placements(plan).values())
    if mode == "resident":
        assert kinds == {"resident"}
    elif mode == "pageable":
        assert kinds == {"stream"}  # pageable memory cannot be read in place
    else:
        assert "resident" not in kinds
    assert plan.kernel.key == encoding


def test_selectivity_bounds_contain_the_truth(table):
    keys = table.plain_columns().suppkey
    for z in (-5, 0, 1, 30, 777, 50_000, 100_000, 100_001, 10**12):
        plan = plan_query(table, z, "pinned", 132)
        lo, hi = plan.selected_estimate
        assert lo <= int((keys < z).sum()) <= hi


def test_wide_products_where_values_need_them():
    big = LineitemColumns(np.zeros(3, np.int32), np.array([2**40, 1, 1]), np.array([2**30, 1, 1]), "big")
    plan = plan_query(Table.from_columns(big), 1, "pinned", 132)
    assert plan.kernel.wide and any("128-bit" in r for r in plan.reasons)
    small = LineitemColumns(np.zeros(3, np.int32), np.array([2**31 - 1] * 3), np.array([2**31 - 1] * 3), "small")
    assert not plan_query(Table.from_columns(small), 1, "pinned", 132).kernel.wide


def test_plan_prints_its_steps_and_reasons(table):
    text = plan_query(table, 30, "pinned", 132).describe()
    for word in ("transfer", "decode-and-scan", "gather", "combine", "why:", "sliced"):
        assert word in text


@pytest.fixture(scope="module")
def listed():
    """A table that holds its key's bucket lists, as a store opened from disk does."""
    rng = np.random.default_rng(2)
    rows = 1_000_000
    t = Table.from_columns(LineitemColumns.from_values(
        rng.integers(1, 100_001, rows), rng.integers(1, 51, rows) * 100, rng.integers(90_000, 10_000_000, rows)))
    t.encoded("indexed")
    return t


@pytest.mark.parametrize("mode", LIST_MODES)
def test_auto_reads_the_bucket_lists_for_a_sparse_z_and_scans_for_a_dense_one(listed, mode):
    sparse = plan_query(listed, 30, mode, 132)
    assert sparse.encoding == "indexed" and sparse.kernel.key == "indexed" and sparse.kernel.id_bytes == 4
    keys = listed.plain_columns().suppkey
    passed, read = sparse.entries
    assert passed == 0 and read == int(listed.columns["l_suppkey"].encodings["indexed"].histogram[0])
    assert read >= int((keys < 30).sum())
    assert sparse.geometry.n_chunks == 1 and "MB to read against" in sparse.reasons[0]
    dense = plan_query(listed, 50_000, mode, 132)
    assert dense.encoding == "sliced"
    every = plan_query(listed, 10**9, mode, 132)  # every row passes: the lists would gather them all
    assert every.encoding == "sliced"


def test_auto_scans_where_the_lists_cannot_be_used(table, listed):
    assert plan_query(listed, 30, "pageable", 132).encoding == "sliced"  # factors cannot be gathered there
    assert plan_query(table, 30, "pinned", 132).encoding == "sliced"  # no lists held: none are built for auto
    assert "indexed" not in table.columns["l_suppkey"].encodings


def test_a_list_plan_prints_what_it_reads(listed):
    plan = plan_query(listed, 777, "pinned", 132, encoding="indexed")
    passed, read = plan.entries
    keys = listed.plain_columns().suppkey
    assert passed <= int((keys < 777).sum()) <= read
    text = plan.describe()
    assert "bucket lists" in text and f"{read:,} entries" in text and "gather" in text
    assert {b.placement for b in plan.buffers} == {"zero_copy"}
