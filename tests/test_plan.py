"""The ladder's chunked pipelines' geometry (gquery.plan.make_plan): chunks, streams, launches."""

import math

import pytest

from gquery.errors import GqueryError, UsageError
from gquery.plan import BLOCK_THREADS, GRID_BLOCKS_PER_SM, CHUNK_ALIGN_ROWS, MAX_CHUNK_ROWS, MODES, blocks_for, make_plan

SF10_ROWS = 59_986_052


@pytest.mark.parametrize("rows", [0, 1, 31, 33, 1023, 1025, 2**20 - 1, 2**20 + 1, SF10_ROWS, 6 * 10**9])
@pytest.mark.parametrize("mode", MODES)
def test_chunks_cover_every_row_once(mode, rows):
    plan = make_plan(mode, rows, 20, 132, free_bytes=None)
    spans = list(plan.chunks())
    assert [i for i, _, _ in spans] == list(range(plan.n_chunks))
    assert spans[0][1] == 0 and spans[-1][2] == rows
    assert all(b == c for (_, _, b), (_, c, _) in zip(spans, spans[1:]))
    if mode != "resident":
        assert plan.chunk_rows % CHUNK_ALIGN_ROWS == 0  # every chunk starts 16-byte aligned
        assert plan.chunk_rows <= MAX_CHUNK_ROWS


def test_resident_is_one_launch_over_the_table():
    plan = make_plan("resident", SF10_ROWS, 20, 132)
    assert plan.n_chunks == 1 and plan.streams == 1 and plan.device_bytes == SF10_ROWS * 20
    assert plan.launch(SF10_ROWS).grid == 132 * GRID_BLOCKS_PER_SM


def test_resident_too_large_says_what_to_do():
    with pytest.raises(GqueryError, match="--mode pinned or --mode pageable"):
        make_plan("resident", 6 * 10**9, 20, 132, free_bytes=80 * 2**30)


def test_streamed_plan_is_bounded_by_free_memory():
    free = 1 << 30
    plan = make_plan("pinned", 6 * 10**9, 20, 132, free_bytes=free, chunk_rows=1 << 26)
    assert plan.device_bytes <= free * 0.9
    assert plan.n_chunks == math.ceil(6 * 10**9 / plan.chunk_rows)


def test_streams_and_staging():
    p = make_plan("pageable", SF10_ROWS, 20, 132, streams=4, staging_threads=8)
    assert p.streams == 4 and p.staging_threads == 8 and p.staging_buffers >= 2
    assert make_plan("pinned", SF10_ROWS, 20, 132).staging_threads == 0


def test_launch_geometry():
    plan = make_plan("resident", 1, 20, 132)
    assert plan.launch(1).grid == 1 and plan.launch(1).block == BLOCK_THREADS
    assert plan.launch(0).grid == 1
    assert blocks_for(1000, 512) == 2 and blocks_for(10**9, 512, cap=100) == 100


def test_plan_is_printable_plain_data():
    plan = make_plan("pageable", SF10_ROWS, 20, 132)
    text = plan.describe()
    for word in ("pageable", "chunks", "streams", "launch", "staging", f"{SF10_ROWS:,}"):
        assert word in text
    d = plan.to_dict()
    assert d["mode"] == "pageable" and d["n_chunks"] == plan.n_chunks


@pytest.mark.parametrize("kwargs", [dict(mode="fast"), dict(chunk_rows=0), dict(streams=0)])
def test_bad_plan_options(kwargs):
    args = dict(mode="pinned", rows=10, bytes_per_row=20, sm_count=1) | kwargs
    with pytest.raises(UsageError):
        make_plan(**args)
