"""Encode/decode round trips of every encoding, on the CPU: the layouts the scan kernel decodes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gquery.encodings import (FRAME_ROWS, NO_ROWS, PAD_WORDS, TOP_BITS, Indexed, bit_width, common_factor, frame_view,
                              index_key, pack, slice_key)

INT64 = st.integers(-(2**63), 2**63 - 1)


def test_bit_width_is_exact_at_every_power_of_two():
    xs = [0] + [v for k in range(64) for v in (2**k - 1, 2**k, 2**k + 1) if v < 2**64] + [2**64 - 1]
    got = bit_width(np.array(xs, dtype=np.uint64))
    assert [int(w) for w in got] == [x.bit_length() for x in xs]


@settings(max_examples=60, deadline=None)
@given(arrays(np.int64, st.integers(0, 2 * FRAME_ROWS + 5), elements=INT64))
def test_pack_round_trips_any_int64(values):
    p = pack(values)
    assert np.array_equal(p.decode(), values)
    assert p.words.size == int(p.widths.sum()) * 32 + PAD_WORDS  # 32 x width words a frame
    for row in range(0, len(values), 97):
        assert p.value_at(row) == int(values[row])


@pytest.mark.parametrize("values", [
    np.zeros(0, np.int64), np.array([7]), np.full(FRAME_ROWS, -5), np.array([-(2**63), 2**63 - 1]),
    np.arange(FRAME_ROWS + 1) * 100, np.array([2**62, -(2**62)] * 600),
])
def test_pack_edges(values):
    p = pack(values)
    assert np.array_equal(p.decode(), values)
    if len(values) and (values == values[0]).all():
        assert p.max_width == 0  # a constant frame takes no bits
    if len(values) and int(values.min()) == -(2**63):
        assert p.max_width == 64 and p.factor == 1


def test_common_factor_of_whole_units():
    quantities = np.arange(1, 51) * 100
    assert common_factor(quantities) == 100
    p = pack(quantities)
    assert p.factor == 100 and p.max_width == 6  # 1..50 after the factor, relative to 1: 6 bits
    assert common_factor(np.array([3, 5])) == 1 and common_factor(np.zeros(4, np.int64)) == 1


@settings(max_examples=60, deadline=None)
@given(arrays(np.int32, st.integers(0, 3000), elements=st.integers(-(2**31), 2**31 - 1)),
       st.lists(st.integers(-(2**33), 2**33), min_size=1, max_size=8))
def test_sliced_key_decides_exactly_what_key_lt_z_decides(keys, zs):
    s = slice_key(keys)
    assert np.array_equal(s.decode(), keys)
    assert int(s.histogram.sum()) == len(keys)
    top = s.top[:len(keys)].astype(np.int64)
    low = s.low.astype(np.int64) if s.low is not None else np.zeros(len(keys), np.int64)
    for z in zs:
        z_top, z_low = s.thresholds(z)
        decided = top < z_top
        tied = top == z_top
        assert np.array_equal(decided | (tied & (low < z_low)), keys < z)
        lo, undecided = s.estimate(z)
        assert lo == int(decided.sum()) and undecided == (0 if z_top == NO_ROWS else int(tied.sum()))
        assert lo <= int((keys < z).sum()) <= lo + undecided


def test_sliced_buckets_span_the_keys_whatever_their_width():
    """Equal buckets over the keys' span: a 24-bit span (SF 1000's 10M suppliers) uses all 256 top
    values, not the 153 a bit-aligned top slice would, so a tie leaves ~1/256 of the rows undecided."""
    for largest in (10_000_000, 6_000_000, 1_000_000, 2**20, 70_000):
        keys = np.arange(1, largest + 1, dtype=np.int32)
        s = slice_key(keys)
        assert np.array_equal(s.decode(), keys)
        assert int(s.top[:s.rows].max()) == 255 and s.histogram.min() > 0
        assert s.estimate(30)[1] <= -(-largest // 256)
        assert int(s.low.max()) < s.bucket


def test_sliced_low_bits_take_the_narrowest_type():
    assert slice_key(np.array([1, 200], np.int32)).low is None  # 8 bits: the top byte is the key
    assert slice_key(np.array([1, 100_000], np.int32)).low.dtype == np.uint16  # 17 bits: 9 low
    assert slice_key(np.array([-(2**31), 2**31 - 1], np.int32)).low.dtype == np.uint32


@settings(max_examples=60, deadline=None)
@given(arrays(np.int32, st.integers(0, 3000), elements=st.integers(-(2**31), 2**31 - 1)),
       st.lists(st.integers(-(2**33), 2**33), min_size=1, max_size=8))
def test_bucket_lists_select_exactly_what_key_lt_z_selects(keys, zs):
    """The indexed key: every row listed once, in its sliced bucket, ascending within it; for any
    Z, the prefix's first entries (pass outright) and Z's bucket's entries with low < z_low are
    exactly the rows with key < Z."""
    s = slice_key(keys)
    ix = index_key(s)
    assert np.array_equal(ix.decode(), keys) and np.array_equal(ix.histogram, s.histogram)
    starts = ix.starts
    for b in range(1 << TOP_BITS):
        listed = ix.ids[starts[b]:starts[b + 1]].astype(np.int64)
        assert (np.diff(listed) > 0).all() and (s.top[listed] == b).all()
    for z in zs:
        passed, read = ix.prefix(z)
        _, z_low = ix.thresholds(z)
        low = ix.low[passed:read].astype(np.int64) if ix.low is not None else np.zeros(read - passed, np.int64)
        chosen = np.concatenate([ix.ids[:passed], ix.ids[passed:read][low < z_low]]).astype(np.int64)
        assert np.array_equal(np.sort(chosen), np.flatnonzero(keys < z))
        assert ix.estimate(z) == s.estimate(z)


@pytest.mark.parametrize("rows", [1, FRAME_ROWS - 1, FRAME_ROWS + 1, 3 * FRAME_ROWS + 7, 2_500_000])
def test_bucket_lists_of_a_share_are_the_share_s_rows(rows):
    """frame_view of an indexed key (one GPU's share): each bucket's range of the share, rebased,
    in as many pieces of host threads as the rows allow."""
    keys = np.random.default_rng(rows).integers(-(2**31), 2**31, rows).astype(np.int32)
    ix = index_key(slice_key(keys))
    frames = -(-rows // FRAME_ROWS)
    for a, b in {(0, frames), (frames // 2, frames), (0, max(1, frames // 3))}:
        share = frame_view(ix, a, b)
        assert np.array_equal(share.decode(), keys[a * FRAME_ROWS:b * FRAME_ROWS])
        assert int(share.histogram.sum()) == share.rows and share.ids.dtype == ix.ids.dtype


def test_bucket_lists_that_are_not_every_row_once_do_not_decode():
    ix = index_key(slice_key(np.arange(5000, dtype=np.int32)))
    twice = ix.ids.copy()
    twice[1] = twice[0]
    with pytest.raises(ValueError, match="twice"):
        Indexed(ix.rows, ix.dtype, ix.reference, ix.bucket, twice, ix.low, ix.histogram).decode()
    past = ix.ids.copy()
    past[-1] = ix.rows
    with pytest.raises(ValueError, match="past the last row"):
        Indexed(ix.rows, ix.dtype, ix.reference, ix.bucket, past, ix.low, ix.histogram).decode()
