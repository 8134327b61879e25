"""Frames classed a block at a time (prune.classify over ZoneBlocks) against the same frames classed one by
one: every frame's class equal, on zone maps of every kind (clustered, scattered, frames of one value, values
at int64's ends) and random predicates whose constants sit on the frames' own bounds; the estimates close."""

import random

import numpy as np
import pytest

from gquery import prune
from gquery.query import BIGINT, BOOLEAN, And, Column, Compare, InList, Literal, Not, Or
from gquery.table import BLOCK_FRAMES, zone_blocks, zone_spans

LOW, HIGH = -(2**63), 2**63 - 1
COLUMNS = ("a", "b", "c")


def _zone_map(rng: random.Random, frames: int) -> tuple[np.ndarray, np.ndarray]:
    kind = rng.choice(["clustered", "scattered", "points", "narrow", "ends", "mixed"])
    if kind == "clustered":  # sorted values: each frame a narrow range above the last
        edges = np.sort(np.array([rng.randint(-10**6, 10**6) for _ in range(frames + 1)], np.int64))
        return edges[:-1], edges[1:]
    if kind == "scattered":  # every frame spans most of the values
        low = np.array([rng.randint(0, 50) for _ in range(frames)], np.int64)
        return low, np.array([rng.randint(950, 1000) for _ in range(frames)], np.int64)
    if kind == "points":  # frames of one value, a few values
        v = np.array([rng.randint(-3, 3) for _ in range(frames)], np.int64)
        return v, v.copy()
    if kind == "ends":  # values at int64's ends
        low = np.array([rng.choice([LOW, LOW + 1, 0, HIGH - 1]) for _ in range(frames)], np.int64)
        return low, np.maximum(low, np.array([rng.choice([LOW + 1, 0, HIGH - 1, HIGH]) for _ in range(frames)], np.int64))
    low = np.array([rng.randint(-20, 20) for _ in range(frames)], np.int64)
    if kind == "narrow":
        return low, low + np.array([rng.randint(0, 2) for _ in range(frames)], np.int64)
    return low, low + np.array([rng.choice([0, 1, 5, 40]) for _ in range(frames)], np.int64)


def _zones(rng: random.Random, frames: int, blocked: bool) -> prune.Zones:
    rows = np.full(frames, 1024, np.int64)
    rows[-1] = rng.randint(1, 1024)
    low, high, spans, blocks = {}, {}, {}, {}
    for c in COLUMNS:
        low[c], high[c] = _zone_map(rng, frames)
        spans[c] = zone_spans(low[c], high[c])
        blocks[c] = zone_blocks(low[c], high[c], spans[c])
    return prune.Zones(rows, low, high, spans, blocks if blocked else None)


def _constant(rng: random.Random, z: prune.Zones, c: str) -> int:
    """A constant on a frame's own bound, next to one, anywhere between the column's ends, or at int64's."""
    if rng.random() < 0.4:
        return rng.randint(int(z.low[c].min()), int(z.high[c].max()))
    v = int(rng.choice([z.low[c], z.high[c]])[rng.randrange(len(z.rows))]) + rng.choice([-1, 0, 0, 1])
    return v if LOW <= v <= HIGH else rng.choice([LOW, HIGH, 0])


def _predicate(rng: random.Random, z: prune.Zones, depth: int = 0):
    k = rng.random()
    c = rng.choice(COLUMNS)
    if depth > 2 or k < 0.45:
        op = rng.choice(["<", "<=", ">", ">=", "=", "<>"])
        return Compare(op, Column(c, BIGINT), Literal(_constant(rng, z, c), BIGINT))
    if k < 0.55:
        values = tuple(Literal(_constant(rng, z, c), BIGINT) for _ in range(rng.randint(1, 6)))
        return InList(Column(c, BIGINT), values, rng.random() < 0.3)
    if k < 0.75:
        return And(tuple(_predicate(rng, z, depth + 1) for _ in range(rng.randint(2, 3))))
    if k < 0.9:
        return Or(tuple(_predicate(rng, z, depth + 1) for _ in range(2)))
    if k < 0.95:
        return Literal(rng.random() < 0.5, BOOLEAN)
    return Not(_predicate(rng, z, depth + 1))


@pytest.mark.parametrize("seed", range(12))
def test_blocks_class_every_frame_as_its_own_test_does(seed):
    rng = random.Random(seed)
    frames = rng.choice([prune.BLOCKED_FRAMES, 5 * BLOCK_FRAMES + 17, 23 * BLOCK_FRAMES])
    z = _zones(rng, frames, blocked=True)
    one_by_one = prune.Zones(z.rows, z.low, z.high, z.spans)
    for _ in range(60):
        e = _predicate(rng, z)
        got, estimate = prune.classify(e, z)
        want, frame_estimate = prune.classify(e, one_by_one)
        assert got.dtype == want.dtype == np.int8
        assert (got == want).all(), e
        assert ((estimate >= 0) & (estimate <= 1)).all(), e
        assert (estimate[want == prune.NEVER] == 0).all() and (estimate[want == prune.ALWAYS] == 1).all()
        if isinstance(e, Compare):  # one comparison: a block's mean is its frames' mean, exactly but for rounding
            for first in range(0, frames, BLOCK_FRAMES):
                block = slice(first, first + BLOCK_FRAMES)
                assert estimate[block].sum() == pytest.approx(frame_estimate[block].sum(), rel=1e-9, abs=1e-9), e


def test_a_small_table_is_classed_frame_by_frame():
    rng = random.Random(0)
    z = _zones(rng, prune.BLOCKED_FRAMES - 1, blocked=True)
    e = Compare("<", Column("a", BIGINT), Literal(_constant(rng, z, "a"), BIGINT))
    got, estimate = prune.classify(e, z)
    want, frame_estimate = prune.classify(e, prune.Zones(z.rows, z.low, z.high, z.spans))
    assert (got == want).all() and (estimate == frame_estimate).all()


@pytest.mark.parametrize("seed", range(6))
def test_parts_classed_together_as_each_alone_and_their_estimates_summed_by_pieces(seed):
    """classify_counted over several parts (their blocks joined; a part too small for blocks among them): each
    part's classes its own classify's, its counts (where given) those of its classes, and its Estimate's sums over
    random pieces of frames those of its frames' estimates (fraction times rows)."""
    rng = random.Random(100 + seed)
    parts = [_zones(rng, rng.choice([prune.BLOCKED_FRAMES, 7 * BLOCK_FRAMES + 5]), blocked=True) for _ in range(3)]
    parts.insert(rng.randint(0, 3), _zones(rng, prune.BLOCKED_FRAMES - 1, blocked=True))  # classed frame by frame
    counted = 0
    for _ in range(40):
        e = _predicate(rng, parts[0]) if rng.random() < 0.9 else None
        for z, (classes, estimate, counts) in zip(parts, prune.classify_counted(e, parts)):
            want, fractions = prune.classify(e, z)
            assert (classes == want).all(), e
            if counts is not None:
                assert counts == tuple(np.bincount(want, minlength=3).tolist()), e
                counted += 1
            rows = z.rows.astype(np.float64)
            selected = fractions * rows
            n = len(z.rows)
            cuts = sorted(rng.sample(range(1, n), 6))
            firsts = np.array([0, *cuts[0::2]])
            ends = np.array([cuts[0], *cuts[1::2], n])[:len(firsts)]
            got = estimate.per_piece(firsts, ends)
            for a, b, g in zip(firsts, ends, got):
                assert g == pytest.approx(selected[a:b].sum(), rel=1e-9, abs=1e-6), (e, a, b)
            assert estimate.total() == pytest.approx(selected.sum(), rel=1e-9, abs=1e-6)
            assert np.allclose(estimate.fractions(), fractions)
    assert counted  # (the blocks counted some parts' frames)


@pytest.mark.parametrize("seed", range(4))
def test_every_parts_pieces_summed_together_as_each_part_sums_its_own(seed):
    """per_piece_together over the pieces of several parts one after another (parts classed in one pass, their
    blocks' sums shared; a comparison that tests every frame, or all but a few, from the parts' zone orders; or a part
    classed otherwise among them): each piece's rows those its own part's Estimate sums, MIXED blocks' frames and the
    few frames' corrections included, and those its frames' fractions give."""
    rng = random.Random(300 + seed)

    def scattered(frames: int) -> prune.Zones:  # every frame spans most values: blocks class alike, but near the ends
        rows = np.full(frames, 1024, np.int64)
        rows[-1] = rng.randint(1, 1024)
        low = {c: np.array([rng.randint(0, 50) for _ in range(frames)], np.int64) for c in COLUMNS}
        high = {c: np.array([rng.randint(950, 1000) for _ in range(frames)], np.int64) for c in COLUMNS}
        spans = {c: zone_spans(low[c], high[c]) for c in COLUMNS}
        return prune.Zones(rows, low, high, spans, {c: zone_blocks(low[c], high[c], spans[c]) for c in COLUMNS})

    def atom() -> Compare:
        return Compare(rng.choice(["<", "<=", ">", ">="]), Column(rng.choice(COLUMNS), BIGINT),
                       Literal(rng.choice([rng.randint(-5, 1005), rng.randint(0, 60), rng.randint(940, 1000)]), BIGINT))

    parts = [scattered(rng.choice([prune.BLOCKED_FRAMES, 7 * BLOCK_FRAMES + 5])) for _ in range(3)]
    if seed % 2:
        parts.insert(rng.randint(0, 3), scattered(prune.BLOCKED_FRAMES - 1))  # classed frame by frame
    from gquery.table import zone_order

    together = tested = 0
    for k in range(60):
        e = atom() if rng.random() < 0.5 else And(tuple(atom() for _ in range(rng.randint(2, 3))))
        if k % 3:  # classed by blocks
            estimates = [estimate for _, estimate, _ in prune.classify_counted(e, parts)]
        else:  # a comparison from the columns' zone orders: every frame tested, or every frame but a few
            e = e if isinstance(e, Compare) else e.args[0]
            orders = [zone_order(z.low[e.left.name], z.high[e.left.name], z.spans[e.left.name]) for z in parts]
            estimates = [x for _, x in prune.compare_classes_together(e, orders, parts, [int(z.rows.sum()) for z in parts])]
            tested += all(isinstance(x, prune.TestedEstimate) for x in estimates)
        together += all(isinstance(x, prune.BlockEstimate) for x in estimates)
        firsts, ends, counts = [], [], []
        for z in parts:
            n = len(z.rows)
            cuts = sorted(rng.sample(range(1, n), 6))
            firsts.append(np.array([0, *cuts[0::2]]))
            ends.append(np.array([cuts[0], *cuts[1::2], n])[:len(firsts[-1])])
            counts.append(len(firsts[-1]))
        got = prune.per_piece_together(estimates, counts, np.concatenate(firsts), np.concatenate(ends))
        want = np.concatenate([x.per_piece(f, t) for x, f, t in zip(estimates, firsts, ends)])
        assert got.shape == want.shape and np.allclose(got, want, rtol=1e-12, atol=1e-6), e
        # each frame's fraction times its rows: classed by blocks, their means; from the zone orders, each frame's own
        selected = [prune.classify(e, z if k % 3 else prune.Zones(z.rows, z.low, z.high, z.spans))[1] * z.rows for z in parts]
        direct = [selected[k][a:b].sum() for k, (f, t) in enumerate(zip(firsts, ends)) for a, b in zip(f, t)]
        assert got.tolist() == pytest.approx(direct, rel=1e-9, abs=1e-6), e
    assert (together or seed % 2) and tested  # (every part classed by blocks, or tested: summed in one pass)


@pytest.mark.parametrize("seed", range(4))
def test_atoms_kept_across_constants_class_as_made_afresh(seed):
    """A WHERE's atoms classed over blocks, and its ranges' means, are kept (a new constant of a Q6 classes the
    atom that changed): predicates that share all atoms but one class every frame and estimate it as with nothing
    kept, what a caller gets is its own to change, and no more than ATOMS_KEPT are kept."""
    rng = random.Random(200 + seed)
    z = _zones(rng, 23 * BLOCK_FRAMES, blocked=True)
    atoms = [_predicate(rng, z, depth=3) for _ in range(4)]  # comparisons
    for _ in range(40):
        atoms[rng.randrange(4)] = _predicate(rng, z, depth=3 if rng.random() < 0.8 else 2)
        e = And(tuple(atoms)) if rng.random() < 0.8 else Or((And(tuple(atoms[:2])), Not(atoms[2])))
        got, estimate = prune.classify(e, z)
        assert prune._atoms and len(prune._atoms) <= prune.ATOMS_KEPT
        prune._atoms.clear()
        want, fresh = prune.classify(e, z)
        assert (got == want).all() and (estimate == fresh).all(), e
        assert got.flags.writeable and estimate.flags.writeable


def test_piece_sums_are_each_pieces_own():
    """prune.piece_sums over pieces in order, apart or one right after another, the first anywhere and the last
    ending anywhere: each the sum of its frames alone (integers exactly)."""
    rng = random.Random(7)
    for _ in range(300):
        a = np.array([rng.randint(0, 1000) for _ in range(rng.randint(1, 300))], np.int64)
        pieces, at = [], rng.randrange(len(a))
        while at < len(a):
            end = rng.randint(at + 1, len(a))
            pieces.append((at, end))
            at = end + rng.choice([0, 0, 1, 5, 40])
        firsts, ends = np.array([f for f, _ in pieces], np.int64), np.array([e for _, e in pieces], np.int64)
        got = prune.piece_sums(a, firsts, ends, np.int64)
        assert got.tolist() == [int(a[f:e].sum()) for f, e in pieces]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("sparse", [False, True])
def test_a_comparison_is_counted_and_classed_from_the_sorted_zone_map_as_a_frame_at_a_time(seed, sparse, monkeypatch):
    """compare_summary's counts and total, and compare_classes' classes and estimate (sums over random pieces, its
    fractions), against classify's a frame at a time, on zone maps of every kind and constants on the frames' own
    bounds; `sparse`: the frames across the constant's side classed alone however many they are (else past 1/16 of
    the frames, classify_parts', but where every frame is tested: its estimate from running sums in frame order)."""
    from gquery.table import zone_order

    if sparse:
        monkeypatch.setattr(prune, "SPARSE_SHARE", 0)
    rng = random.Random(300 + seed)
    frames = rng.choice([prune.BLOCKED_FRAMES, 5 * BLOCK_FRAMES + 17])
    z = _zones(rng, frames, blocked=True)
    rows = int(z.rows.sum())
    for _ in range(40):
        c = rng.choice(COLUMNS)
        e = Compare(rng.choice(["<", "<=", ">", ">="]), Column(c, BIGINT), Literal(_constant(rng, z, c), BIGINT))
        want, fractions = prune.classify(e, prune.Zones(z.rows, z.low, z.high, z.spans))
        by_blocks = prune.classify(e, z)[1]  # what classify_parts estimates (its blocks' means)
        order = zone_order(z.low[c], z.high[c], z.spans[c])
        last = prune.last_fractions(e, z.low[c][-1:], z.high[c][-1:], *(x[-1:] for x in z.spans[c]))
        counts, total = prune.compare_summary(e, order, rows, float(last[0]))
        assert counts == tuple(int((want == k).sum()) for k in (prune.NEVER, prune.CHECK, prune.ALWAYS)), e
        classes, estimate = prune.compare_classes(e, order, z, rows)
        assert classes.dtype == np.int8 and (classes == want).all(), e
        if max(abs(int(z.low[c].min())), abs(int(z.high[c].max()))) < 2**50:  # (the running sums are floats: near
            assert total == pytest.approx((fractions * z.rows).sum(), rel=1e-9, abs=1e-6)  # int64's ends, far off)
        low_side, high_side = (prune.NEVER, prune.ALWAYS) if e.op in ("<", "<=") else (prune.ALWAYS, prune.NEVER)
        few = min(int((want != low_side).sum()), int((want != high_side).sum()))  # frames across either side
        sparse_here = sparse or few * 16 <= frames or (want != prune.CHECK).sum() * 16 <= frames  # (few frames
        # across a side, or few not tested: else classify_parts' blocks)
        selected = (fractions if sparse_here else by_blocks) * z.rows
        cuts = sorted(rng.sample(range(1, frames), 6))
        firsts, ends = np.array([0, *cuts[0::2]]), np.array([cuts[0], *cuts[1::2], frames])[:4]
        for a, b, g in zip(firsts, ends, estimate.per_piece(firsts, ends)):
            assert g == pytest.approx(selected[a:b].sum(), rel=1e-9, abs=1e-6), (e, a, b)
        assert estimate.total() == pytest.approx(selected.sum(), rel=1e-9, abs=1e-6)
        assert np.allclose(estimate.fractions(), fractions if sparse_here else by_blocks)


@pytest.mark.parametrize("seed", range(6))
def test_several_tables_classed_together_are_each_classed_alone(seed, monkeypatch):
    """compare_classes_together: several tables' few frames compared at once give each table the classes, the
    lists and the estimate (per piece, total) that compare_classes gives it alone, tables whose frames are few
    beside tables classed otherwise (every frame tested, by blocks, in frame order)."""
    from gquery.table import zone_order

    monkeypatch.setattr(prune, "SPARSE_SHARE", random.Random(seed).choice([0, 16]))
    rng = random.Random(700 + seed)
    tables = []
    for _ in range(rng.randint(1, 5)):
        frames = rng.choice([prune.BLOCKED_FRAMES, 5 * BLOCK_FRAMES + 17])
        z = _zones(rng, frames, blocked=True)
        tables.append((z, int(z.rows.sum())))
    for _ in range(30):
        c = rng.choice(COLUMNS)
        z0 = rng.choice(tables)[0]
        e = Compare(rng.choice(["<", "<=", ">", ">="]), Column(c, BIGINT), Literal(_constant(rng, z0, c), BIGINT))
        orders = [zone_order(z.low[c], z.high[c], z.spans[c]) for z, _ in tables]
        together = prune.compare_classes_together(e, orders, [z for z, _ in tables], [rows for _, rows in tables])
        for (z, rows), order, (classes, estimate) in zip(tables, orders, together):
            alone, by_itself = prune.compare_classes(e, order, z, rows)
            assert classes.dtype == np.int8 and classes.tolist() == alone.tolist(), e
            assert type(estimate) is type(by_itself), e
            for name in ("passing", "tested", "complement"):
                assert np.array_equal(getattr(estimate, name, ()), getattr(by_itself, name, ())), (e, name)
            frames = len(z.rows)
            firsts, ends = np.array([0, frames // 3, frames - 1]), np.array([frames // 3, frames - 1, frames])
            assert estimate.per_piece(firsts, ends).tolist() == by_itself.per_piece(firsts, ends).tolist(), e
            assert estimate.total() == by_itself.total(), e


def _assert_cut_alike(found, whole, rng: random.Random, e) -> None:
    """Frames found without their classes give the stretches, tested frames and pieces (at a random gap, split and
    target) that the same frames classed frame by frame (`whole`) give."""
    from gquery.gpu.fusedplan import _pieces

    for name in ("touched", "passing"):
        for got, want in zip(getattr(found, name), getattr(whole, name)):
            assert got.tolist() == want.tolist(), (e, name)
    assert found.tested_frames.tolist() == whole.tested_frames.tolist(), e
    frames = whole.n
    gap, split, target = rng.choice([0, 1, 3, frames]), rng.choice([1, 4, 64]), rng.choice([1, 5, 1024])
    offsets = np.array([0, frames])
    for got, want in zip(_pieces([found], np.array([gap]), np.array([split]), target, offsets),
                         _pieces([whole], np.array([gap]), np.array([split]), target, offsets)):
        assert got.tolist() == want.tolist(), e


@pytest.mark.parametrize("seed", range(6))
def test_frames_of_a_few_frames_across_a_constant_stretch_as_their_classes_do(seed, monkeypatch):
    """A table's frames classed from compare_classes' sorted lists (its SparseEstimate: few frames across the
    constant, every other ruled out or passing whole) give the stretches, pieces and tested frames that its classes
    give frame by frame (fusedplan._Frames, which the chunks are cut from); and so do the counts alone where a
    class is held by no frame or by every one."""
    from gquery.gpu.fusedplan import _Frames, _stretches
    from gquery.table import zone_order

    monkeypatch.setattr(prune, "SPARSE_SHARE", 0)  # (every comparison's frames classed from the lists)
    rng = random.Random(500 + seed)
    frames = rng.choice([prune.BLOCKED_FRAMES, 5 * BLOCK_FRAMES + 17])
    z = _zones(rng, frames, blocked=True)
    rows = int(z.rows.sum())
    sparse = 0
    for _ in range(40):
        c = rng.choice(COLUMNS)
        e = Compare(rng.choice(["<", "<=", ">", ">="]), Column(c, BIGINT), Literal(_constant(rng, z, c), BIGINT))
        order = zone_order(z.low[c], z.high[c], z.spans[c])
        classes, estimate = prune.compare_classes(e, order, z, rows)
        counts = tuple(int((classes == k).sum()) for k in (prune.NEVER, prune.CHECK, prune.ALWAYS))
        listed, whole = _Frames(lambda: (classes, estimate), counts), _Frames(classes)
        sparse += listed._sparse is not None
        _assert_cut_alike(listed, whole, rng, e)
    assert sparse  # (some comparisons classed from the lists)
    for classes in [np.full(frames, k, np.int8) for k in (prune.NEVER, prune.CHECK, prune.ALWAYS)] + [
            np.array([rng.choice([prune.NEVER, prune.CHECK, prune.ALWAYS]) for _ in range(frames)], np.int8)]:
        whole = _Frames(classes)  # (a class that no frame or every frame holds: its stretches from the counts)
        for got, want in zip(whole.touched, _stretches(classes != prune.NEVER)):
            assert got.tolist() == want.tolist()
        for got, want in zip(whole.passing, _stretches(classes == prune.ALWAYS)):
            assert got.tolist() == want.tolist()


def test_a_comparison_that_tests_all_but_a_few_frames_finds_those_few_in_its_binary_searches():
    """Where every frame but a few holds values on both sides of the constant (the mission's key as generated, past a
    few hundred suppliers), compare_classes finds the few from the two binary searches: its classes, and its
    estimate's every piece, total and fractions, those of classify a frame at a time; a frame's bounds within a
    few frames' share no longer so."""
    from gquery.table import zone_order

    rng = random.Random(78)
    frames = 5 * BLOCK_FRAMES + 17
    low = np.array([rng.randint(-100, 100) for _ in range(frames)], np.int64)
    high = np.array([rng.randint(10**6, 2 * 10**6) for _ in range(frames)], np.int64)
    for at in rng.sample(range(frames), 9):  # a few frames wholly above the constants, a few wholly below
        low[at], high[at] = (3 * 10**6, 3 * 10**6 + rng.randint(0, 9)) if at % 2 else (-500, -400 + rng.randint(0, 9))
    low[-1], high[-1] = 3 * 10**6, 3 * 10**6  # (the last frame, of fewer rows, among them)
    z = prune.Zones(np.r_[np.full(frames - 1, 1024), 300].astype(np.int64), {"a": low}, {"a": high},
                    {"a": zone_spans(low, high)})
    rows = int(z.rows.sum())
    order = zone_order(low, high, z.spans["a"])
    for c in [101, 5000, 10**6 - 1, -200]:
        for op in ("<", "<=", ">", ">="):
            e = Compare(op, Column("a", BIGINT), Literal(c, BIGINT))
            classes, estimate = prune.compare_classes(e, order, z, rows)
            want, fractions = prune.classify(e, z)
            assert (classes == want).all(), e
            assert isinstance(estimate, prune.MostlyTestedEstimate) == (c != -200), e  # (-200: most frames above it)
            firsts = np.array([0, 3, frames // 2, frames - 5, 0])
            ends = np.array([3, frames // 2, frames - 5, frames, frames])
            assert np.allclose(estimate.per_piece(firsts, ends), [(fractions * z.rows)[a:b].sum() for a, b in zip(firsts, ends)])
            assert estimate.total() == pytest.approx((fractions * z.rows).sum())
            assert np.allclose(estimate.fractions(), fractions)


def test_a_clustered_columns_frames_are_classed_in_three_stretches():
    """A column whose frames' lows and highs both ascend (a store clustered by it) is classed from the two binary
    searches alone: its estimate a StretchEstimate (no array a frame), its classes and every piece's estimate
    those of classify a frame at a time; a column whose frames do not ascend is not."""
    from gquery.table import zone_order

    rng = random.Random(77)
    frames = 5 * BLOCK_FRAMES + 17
    edges = np.sort(np.array([rng.randint(-10**6, 10**6) for _ in range(frames + 1)], np.int64))
    low, high = edges[:-1], edges[1:]
    z = prune.Zones(np.r_[np.full(frames - 1, 1024), 300].astype(np.int64), {"a": low}, {"a": high},
                    {"a": zone_spans(low, high)})
    rows = int(z.rows.sum())
    order = zone_order(low, high, z.spans["a"])
    assert order.in_frame_order
    for c in [int(low[0]) - 1, int(low[frames // 2]), int(high[frames // 3]) + 1, int(high[-1]) + 1]:
        for op in ("<", "<=", ">", ">="):
            e = Compare(op, Column("a", BIGINT), Literal(c, BIGINT))
            classes, estimate = prune.compare_classes(e, order, z, rows)
            want, fractions = prune.classify(e, z)
            assert isinstance(estimate, prune.StretchEstimate) and (classes == want).all(), e
            firsts = np.array([0, 3, frames // 2, frames - 5])
            ends = np.array([3, frames // 2, frames - 5, frames])
            assert np.allclose(estimate.per_piece(firsts, ends), [(fractions * z.rows)[a:b].sum() for a, b in zip(firsts, ends)])
            assert np.allclose(estimate.fractions(), fractions)
    shuffled = rng.sample(range(frames), frames)
    assert not zone_order(low[shuffled], high[shuffled], zone_spans(low[shuffled], high[shuffled])).in_frame_order


@pytest.mark.parametrize("seed", range(4))
def test_frames_classed_in_three_stretches_give_what_their_classes_give(seed):
    """A clustered column's frames as a plan finds them from their StretchEstimate alone (compare_classes_together
    without classes: no array a frame) give the stretches, tested frames, pieces and written classes that the same
    classes give frame by frame (fusedplan._Frames); two constants classed alike are alike to a kept cut, and two
    classed apart are not."""
    from gquery.gpu.fusedplan import _classed_alike, _Frames, _kept_classes
    from gquery.table import zone_order

    rng = random.Random(310 + seed)
    frames = rng.choice([BLOCK_FRAMES + 3, 5 * BLOCK_FRAMES + 17])
    edges = np.sort(np.array([rng.randint(-10**4, 10**4) for _ in range(frames + 3)], np.int64))
    low, high = edges[:-3], edges[3:]  # (each frame's range over three others': a constant's middle several frames)
    z = prune.Zones(np.r_[np.full(frames - 1, 1024), 300].astype(np.int64), {"a": low}, {"a": high},
                    {"a": zone_spans(low, high)})
    rows = int(z.rows.sum())
    order = zone_order(low, high, z.spans["a"])
    kept = []
    for _ in range(30):
        c = rng.choice([int(low[0]) - 1, int(high[-1]) + 1, rng.randint(-10**4, 10**4), int(low[rng.randrange(frames)])])
        e = Compare(rng.choice(["<", "<=", ">", ">="]), Column("a", BIGINT), Literal(c, BIGINT))
        [(none, estimate)] = prune.compare_classes_together(e, [order], [z], [rows], classes=False)
        classes = prune.compare_classes(e, order, z, rows)[0]
        assert none is None and isinstance(estimate, prune.StretchEstimate) and (estimate.classes() == classes).all()
        counts = tuple(int((classes == k).sum()) for k in (prune.NEVER, prune.CHECK, prune.ALWAYS))
        stretched, whole = _Frames(lambda: (None, estimate), counts), _Frames(classes)
        _assert_cut_alike(stretched, whole, rng, e)
        written = np.full(frames, 9, np.int8)
        stretched.write_classes(written)
        assert written.tolist() == classes.tolist() and "classes" not in stretched.__dict__, e
        for other_classes, other in kept:  # a kept cut's classes: alike exactly where the classes are equal
            assert _classed_alike(other, stretched) == (other_classes == classes).all(), e
        kept.append((classes, _kept_classes(stretched)))


@pytest.mark.parametrize("seed", range(4))
def test_a_predicates_conjuncts_narrow_each_columns_range_to_the_values_it_can_select(seed):
    """narrowed: each column's range bounds every value of its range that the top-level comparisons and IN lists
    select (its low at least the range's), and where it is compared by < <= > >= = alone, is exactly their range."""
    rng = random.Random(900 + seed)
    for _ in range(200):
        ranges = {c: tuple(sorted(rng.randint(-20, 20) for _ in range(2))) for c in COLUMNS}
        terms = []
        for _ in range(rng.randint(1, 4)):
            c = rng.choice(COLUMNS)
            if rng.random() < 0.8:
                terms.append(Compare(rng.choice(["<", "<=", ">", ">=", "=", "<>"]), Column(c, BIGINT),
                                     Literal(rng.randint(-25, 25), BIGINT)))
            else:
                terms.append(InList(Column(c, BIGINT), tuple(Literal(rng.randint(-25, 25), BIGINT) for _ in range(3))))
        e = terms[0] if len(terms) == 1 else And(tuple(terms))
        got = prune.narrowed(e, ranges)
        for c, (lo, hi) in ranges.items():
            selectable = [v for v in range(lo, hi + 1) if all(
                t.arg.name != c or v in {x.value for x in t.values} if isinstance(t, InList) else
                t.left.name != c or {"<": v < t.right.value, "<=": v <= t.right.value, ">": v > t.right.value,
                                     ">=": v >= t.right.value, "=": v == t.right.value, "<>": True}[t.op] for t in terms)]
            g_lo, g_hi = got[c]
            assert lo <= g_lo <= g_hi and all(g_lo <= v <= g_hi for v in selectable), (e, c)
            if selectable and not any(t.arg.name == c if isinstance(t, InList) else t.left.name == c and t.op == "<>"
                                      for t in terms):  # (IN and <> bound it less tightly)
                assert (g_lo, g_hi) == (min(selectable), max(selectable)), (e, c)
