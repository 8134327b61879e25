"""The fused kernel's planner, on the CPU: lowering a predicate to a part's own terms, the zone maps'
three answers per frame, chunks and where each column's bytes come from, the arithmetic widths the
kernel is generated with, and (with nvcc) that every generated kernel compiles without spills."""

import dataclasses
import re
import shutil
import subprocess

import numpy as np
import pytest

from gquery.gpu.fusedplan import plan_fused
from gquery.gpu import codegen, nvrtc, kernels
from gquery.gpu import fused
from gquery.gpu.fused import fused_build
from gquery.prune import ABSENT, ALWAYS, CHECK, NEVER, Zones, classify, lower
from gquery.query import (BIGINT, BOOLEAN, DATE, DOUBLE, INTEGER, VARCHAR, Aggregate, And, Arith, Cast, Column, Compare, InList,
                          Literal, Not, Or, Output, Query, decimal)
from gquery.schema import Dictionary, Schema
from gquery.result import python_values
from gquery.table import Table

D2 = decimal(15, 2)
TYPES = {"k": BIGINT, "q": D2, "p": D2, "d": D2, "t": DATE, "s": VARCHAR}
SCHEMA = Schema(TYPES, {})
NVCC = shutil.which("nvcc")


def col(name):
    return Column(name, TYPES[name])


def table(rows=50_000, seed=1, sort_by=None, p_hi=10**7, k_from=1):
    rng = np.random.default_rng(seed)
    values = {"k": rng.integers(k_from, k_from + 9_999, rows), "q": rng.integers(1, 51, rows) * 100, "p": rng.integers(-p_hi, p_hi, rows),
              "d": rng.integers(0, 11, rows), "t": rng.integers(8000, 10500, rows), "s": rng.integers(0, 3, rows)}
    if sort_by:
        order = np.argsort(values[sort_by], kind="stable")
        values = {k: v[order] for k, v in values.items()}
    return Table.from_values(values, SCHEMA, {"s": ("A", "N", "R")}, sorted_by=sort_by)


def query(where, *aggregates, group_by=()):
    outs = tuple(Output(f"c{i}", a) for i, a in enumerate(aggregates))
    return Query("<test>", tuple(Output(g.name, g) for g in group_by) + outs, where, tuple(group_by))


def total(arg, t=decimal(38, 4)):
    return Aggregate("sum", arg, t)


PRODUCT = Arith("*", col("q"), col("p"), decimal(18, 4))


# --- lowering ------------------------------------------------------------------------------------------------
def test_strings_become_codes_of_the_parts_own_dictionary():
    d = {"s": ("A", "N", "R")}
    r = {"s": (0, 2)}
    assert lower(Compare("=", col("s"), Literal("N", VARCHAR)), d, r) == Compare("=", Column("s", BIGINT), Literal(1, BIGINT))
    assert lower(Compare("=", col("s"), Literal("Q", VARCHAR)), d, r).right.value == ABSENT
    assert lower(Compare("<", col("s"), Literal("B", VARCHAR)), d, r) == Compare("<", Column("s", BIGINT), Literal(1, BIGINT))
    assert lower(Compare(">", col("s"), Literal("N", VARCHAR)), d, r) == Compare(">=", Column("s", BIGINT), Literal(2, BIGINT))
    assert lower(Compare(">=", Literal("N", VARCHAR), col("s")), d, r) == Compare("<", Column("s", BIGINT), Literal(2, BIGINT))
    same_shape = [lower(InList(col("s"), (Literal("A", VARCHAR), Literal("Z", VARCHAR))), {"s": dd}, r) for dd in (("A", "N"), ("Z",))]
    assert [[v.value for v in x.values] for x in same_shape] == [[0, ABSENT], [ABSENT, 0]]


@pytest.mark.parametrize("op,constant,scale,want", [
    ("<", 650, 3, ("<", 65)),   # q < 0.650 on hundredths: q < 65
    ("<", 651, 3, ("<", 66)),   # q < 0.651: q <= 65, that is q < 66
    ("<=", 651, 3, ("<=", 65)),
    (">", 651, 3, (">", 65)),
    (">=", 651, 3, (">=", 66)),
    ("=", 651, 3, ("<", 0)),  # no hundredth equals 0.651: never (below the column's smallest)
    ("<>", 651, 3, (">=", 0)),  # always
    ("<", 10, 3, ("<", 1)),  # 0.010 is 1 hundredth
    ("<", -50, 0, ("<", -1)),  # below the column: clamped just past its range
    ("<", 24, 0, ("<", 2400)),
    ("<", 10**30, 0, ("<", 5001)),  # clamped just past the column's range: fits 64 bits
])
def test_constants_take_the_columns_scale_exactly(op, constant, scale, want):
    lit = Literal(constant, INTEGER if scale == 0 else decimal(40, scale))
    got = lower(Compare(op, col("q"), lit), {}, {"q": (0, 5000)})
    assert (got.op, got.right.value) == want


# --- zone maps --------------------------------------------------------------------------------------------------
def test_three_answers_a_frame():
    z = Zones(np.full(4, 1024), {"k": np.array([0, 10, 20, 30])}, {"k": np.array([9, 19, 29, 39])})
    cls, frac = classify(Compare("<", Column("k", BIGINT), Literal(20, BIGINT)), z)
    assert cls.tolist() == [ALWAYS, ALWAYS, NEVER, NEVER]
    cls, frac = classify(Compare("<", Column("k", BIGINT), Literal(25, BIGINT)), z)
    assert cls.tolist() == [ALWAYS, ALWAYS, CHECK, NEVER] and frac[2] == pytest.approx(0.5)
    both = And((Compare(">=", Column("k", BIGINT), Literal(10, BIGINT)), Compare("<", Column("k", BIGINT), Literal(25, BIGINT))))
    assert classify(both, z)[0].tolist() == [NEVER, ALWAYS, CHECK, NEVER]
    assert classify(Not(both), z)[0].tolist() == [ALWAYS, NEVER, CHECK, ALWAYS]
    either = Or((Compare("<", Column("k", BIGINT), Literal(5, BIGINT)), Compare(">", Column("k", BIGINT), Literal(35, BIGINT))))
    assert classify(either, z)[0].tolist() == [CHECK, NEVER, NEVER, CHECK]
    points = Zones(np.full(2, 1024), {"k": np.array([3, 4])}, {"k": np.array([3, 9])})
    assert classify(InList(Column("k", BIGINT), (Literal(3, BIGINT),)), points)[0].tolist() == [ALWAYS, NEVER]
    several = Compare("<", Arith("*", Column("k", BIGINT), Column("k", BIGINT), BIGINT), Literal(5, BIGINT))
    assert classify(several, z)[0].tolist() == [CHECK] * 4  # of several columns: tested row by row


def test_a_clustered_table_ships_only_the_frames_a_range_can_touch(monkeypatch):
    from gquery.gpu import fusedplan

    t = table(1_000_000, sort_by="k")
    q = query(Compare("<", col("k"), Literal(2_000, INTEGER)), total(PRODUCT))
    plan = plan_fused(q, [t], "pinned", 132)
    frames = plan.to_dict()["frames"]
    assert frames["never"] > 0.7 * t.frames and frames["always"] > 0.1 * t.frames and frames["check"] <= 2
    # ~200 frames that pass whole save less of k's bytes than a chunk of their own costs: one chunk
    assert not any(c.always for c in plan.tables[0].chunks)
    monkeypatch.setattr(fusedplan, "GAP_BYTES", 64 << 10)  # a chunk as cheap as 30 frames of k: split off
    plan = plan_fused(q, [t], "pinned", 132)
    always = [c for c in plan.tables[0].chunks if c.always]
    assert always and all("k" not in c.streamed for c in always)  # no predicate column where every row passes
    covered = sorted((c.first, c.end) for c in plan.tables[0].chunks)
    touched = np.flatnonzero(plan.tables[0].classes != NEVER)
    assert covered[0][0] <= touched[0] and covered[-1][1] >= touched[-1] + 1


def test_sparse_selections_read_values_in_place_and_dense_ones_ship_them():
    t = table(200_000)
    sparse = plan_fused(query(Compare("<", col("k"), Literal(3, INTEGER)), total(PRODUCT)), [t], "pinned", 132)
    # values read in place for the few selected rows (and k for the fifth of frames its zone maps cannot rule out)
    assert {c for ch in sparse.tables[0].chunks for c in ch.zero_copy} == {"k", "q", "p"}
    dense = plan_fused(query(Compare("<", col("k"), Literal(9000, INTEGER)), total(PRODUCT)), [t], "pinned", 132)
    assert not any(ch.zero_copy for ch in dense.tables[0].chunks)
    staged = plan_fused(query(Compare("<", col("k"), Literal(3, INTEGER)), total(PRODUCT)), [t], "pageable", 132)
    assert not any(ch.zero_copy for ch in staged.tables[0].chunks)
    resident = plan_fused(query(Compare("<", col("k"), Literal(3, INTEGER)), total(PRODUCT)), [t], "resident", 132)
    assert all(not ch.streamed and not ch.zero_copy for ch in resident.tables[0].chunks)
    assert "ruled out" in sparse.describe() and "in place" in sparse.describe()


# --- the generated kernel ----------------------------------------------------------------------------------------
def test_arithmetic_width_comes_from_the_ranges():
    narrow = plan_fused(query(None, total(PRODUCT)), [table()], "pinned", 132).spec
    assert narrow.accumulators[0].kind == "sum" and "i128" not in narrow.accumulators[0].code
    wide = plan_fused(query(None, total(PRODUCT)), [table(p_hi=2**62)], "pinned", 132).spec
    assert "i128" in wide.accumulators[0].code
    cube = Arith("*", PRODUCT, col("p"), decimal(38, 6))
    with pytest.raises(codegen.NotOnGpu, match="128 bits"):
        plan_fused(query(None, total(cube, decimal(38, 6))), [table(p_hi=2**62)], "pinned", 132)
    huge = plan_fused(query(None, total(col("p"), decimal(38, 2))), [table(p_hi=2**62)], "pinned", 132).spec
    assert huge.accumulators[0].kind == "sum"  # 2^62 x 50,000 rows is far from 2^127


def test_a_long_in_list_is_a_sorted_set_argument_not_thousands_of_parameters():
    values = [9, 3, 3, 7] + list(range(100, 140))
    plan = plan_fused(query(InList(col("k"), tuple(Literal(v, INTEGER) for v in values)), total(PRODUCT)), [table()],
                      "pinned", 132)
    assert plan.spec.set_slots == (0,) and plan.tables[0].constants == (tuple(sorted(set(values))),)
    source = codegen.source(plan.spec, 128)
    assert "in_set(" in source and "const long long* __restrict__ k0, long long k0n" in source
    short = plan_fused(query(InList(col("k"), tuple(Literal(v, INTEGER) for v in values[:4])), total(PRODUCT)), [table()],
                       "pinned", 132)
    assert short.spec.set_slots == () and "in_set(" not in codegen.source(short.spec, 128)  # a short list: inline


def test_one_kernel_serves_every_part_and_constants_are_arguments():
    parts = [table(9000, seed) for seed in (1, 2)]
    parts[1].columns["s"].dictionary = Dictionary(("N", "R", "S"))
    where = And((Compare("=", col("s"), Literal("R", VARCHAR)), Compare("<", col("k"), Literal(700, INTEGER))))
    plan = plan_fused(query(where, total(PRODUCT)), parts, "pinned", 132)
    assert [tp.constants for tp in plan.tables] == [(2, 700), (1, 700)]
    other = plan_fused(query(And((Compare("=", col("s"), Literal("A", VARCHAR)), Compare("<", col("k"), Literal(9, INTEGER)))),
                             total(PRODUCT)), parts, "pinned", 132)
    assert fused_build(other.spec) == fused_build(plan.spec)  # a new constant never recompiles
    # the shape's one spec (fusedplan._interned): its hash, words and builds found by the first plan serve the next
    assert other.spec is plan.spec and fused_build(other.spec) is fused_build(plan.spec)


def test_group_accumulators_in_shared_memory_else_in_device_memory_else_hashed_else_refused(monkeypatch):
    groups = plan_fused(query(None, total(PRODUCT), Aggregate("count", None, BIGINT), group_by=(col("s"),)), [table()], "pinned", 132)
    assert groups.spec.groups == 4 and groups.spec.words == 3 and groups.spec.in_shared  # 3 codes, rounded up to a power of two
    many = plan_fused(query(None, Aggregate("count", None, BIGINT), group_by=(col("k"),)), [table()], "pinned", 132)
    assert many.spec.groups == 16384 and not many.spec.in_shared  # 9,999 keys: the table's words in device memory
    assert "in device memory" in many.describe() and "FUSED_BEGIN_IN_DEVICE_MEMORY(acc)" in codegen.source(many.spec, 128)
    pairs = query(None, total(PRODUCT), group_by=(col("k"), col("p")))  # 16,384 x 2^25 groups: too many for a dense array
    hashed = plan_fused(pairs, [table()], "pinned", 132)
    assert hashed.spec.hashed and not hashed.spec.in_shared and hashed.spec.groups == 2**39
    assert hashed.hash_slots == 131_072  # twice the 50,000 rows a run can select, a power of two
    assert "a hash table of 131,072 slots" in hashed.describe()
    assert "hash_slot(keys, hash_mask, group, 4096LL)" in codegen.source(hashed.spec, 128)
    narrowed = plan_fused(query(Compare("<", col("t"), Literal(8010, DATE)), total(PRODUCT), group_by=(col("k"), col("p"))),
                          [table(50_000, sort_by="t")], "pinned", 132)
    assert narrowed.spec.hashed and narrowed.hash_slots <= 2 * 2048  # only the frames the predicate can select from count
    wide = plan_fused(query(None, Aggregate("count", None, BIGINT), group_by=(col("p"),)), [table(p_hi=2**62)], "pinned", 132)
    assert wide.spec.hashed and wide.spec.wide_keys and wide.spec.key_words == 3  # 2^63 values: past a one-word index
    source = codegen.source(wide.spec, 128)
    assert "hash_slot_wide(keys, hash_mask, group, group0, group1, 4096LL)" in source and "#define GROUPS" not in source
    assert "three words" in wide.describe()
    pair = query(None, Aggregate("count", None, BIGINT), group_by=(col("p"), col("k")))  # 2^63 x 16,384: 77 bits
    assert plan_fused(pair, [table(p_hi=2**62)], "pinned", 132).spec.wide_keys
    monkeypatch.setattr(codegen, "HASH_ACC_BYTES", 1 << 20)  # fewer slots than twice the rows: a run may overflow them
    assert plan_fused(pairs, [table()], "pinned", 132).hash_slots == 16_384  # (refused then: tests/test_gpu_sql.py)
    monkeypatch.setattr(codegen, "HASH_ACC_BYTES", 1 << 15)
    with pytest.raises(codegen.NotOnGpu, match="1,024 slots takes more than 0.03125 MB of device memory"):
        plan_fused(pairs, [table()], "pinned", 132)


def test_a_whole_tables_hashed_groups_are_cut_to_those_order_by_limit_can_keep():
    """codegen.TopCut: where one table of hashed groups (or a dense array of 65,536 or more) is the whole answer
    and ORDER BY's first key is one slot word (COUNT's rows, a 128-bit SUM, MIN, MAX) or a group column's digit
    of the index, the run reads back only the groups that can be among the first LIMIT rows; not for AVG, a sum
    kept as two, no LIMIT, fewer dense groups, a share of a larger table, or a LIMIT past 2^20 / 64 partitions'
    worth."""
    def ordered(q, by, limit):
        return Query(q.sql, q.outputs, q.where, q.group_by, by, limit)

    pairs = query(None, total(PRODUCT), Aggregate("count", None, BIGINT), Aggregate("avg", col("q"), DOUBLE),
                  Aggregate("min", col("t"), DATE), group_by=(col("k"), col("p")))  # outputs k, p, c0 .. c3
    cut = plan_fused(ordered(pairs, ((2, True), (0, False)), 10), [table()], "pinned", 132, whole=True).top
    assert (cut.limit, cut.word, cut.wide, cut.ascending, cut.bits) == (10, 1, True, False, 12)
    assert plan_fused(ordered(pairs, ((3, False),), 5), [table()], "pinned", 132, whole=True).top.word == 0  # COUNT: rows
    assert plan_fused(ordered(pairs, ((5, False),), 5), [table()], "pinned", 132, whole=True).top.word == 5  # MIN after two sums (AVG keeps one)
    by_key = plan_fused(ordered(pairs, ((0, True),), 5), [table()], "pinned", 132, whole=True)
    assert (by_key.top.word, by_key.top.shift, by_key.top.mask) == (-1, 25, 16383)  # k's digit: above p's 2^25
    assert "only the groups that reach it are read back" in " ".join(by_key.why)
    assert "can be among the first 5 by k copied back" in by_key.describe() and by_key.to_dict()["top_cut"]["limit"] == 5
    second = plan_fused(ordered(pairs, ((1, False),), 5), [table()], "pinned", 132, whole=True).top
    assert (second.shift, second.mask, second.ascending) == (0, 2**25 - 1, True)
    assert plan_fused(ordered(pairs, ((4, True),), 5), [table()], "pinned", 132, whole=True).top is None  # AVG
    assert plan_fused(ordered(pairs, ((2, True),), None), [table()], "pinned", 132, whole=True).top is None  # no LIMIT
    assert plan_fused(ordered(pairs, ((2, True),), 10), [table()], "pinned", 132).top is None  # perhaps a share
    assert plan_fused(ordered(pairs, ((2, True),), 20_000), [table()], "pinned", 132, whole=True).top is None  # 2^21 partitions
    assert plan_fused(ordered(pairs, ((2, True),), 16_384), [table()], "pinned", 132, whole=True).top.bits == 20
    dense = query(None, Aggregate("count", None, BIGINT), group_by=(col("k"),))
    assert plan_fused(ordered(dense, ((1, True),), 3), [table()], "pinned", 132, whole=True).top is None  # 16,384: whole
    many = plan_fused(ordered(query(None, Aggregate("count", None, BIGINT), group_by=(col("k"), col("q"))), ((2, True),), 3),
                      [table()], "pinned", 132, whole=True)  # 16,384 x 64 groups in a dense array: cut there too
    assert not many.spec.hashed and many.top.word == 0 and "fused_slots_gather" in codegen.source(many.spec, 128)
    # its million words set on the GPU before a run (no image copied over PCIe), a hashed table's keys emptied too
    init = codegen.source(many.spec, 128).split("void fused_init(")[1].split("\n}")[0]
    assert "acc[i * WORDS + w] = INITIAL[w]" in init and "EMPTY_KEY" not in init
    hashed = plan_fused(query(Compare("<", col("k"), Literal(300, INTEGER)), total(PRODUCT), group_by=(col("p"), col("s"))),
                        [table()], "pinned", 132).spec
    assert hashed.hashed and "keys[i] = EMPTY_KEY;" in codegen.source(hashed, 128).split("void fused_init(")[1]
    assert "void fused_init(" not in codegen.source(plan_fused(dense, [table()], "pinned", 132).spec, 128)  # a few: an image
    wide = query(None, total(Arith("*", col("p"), col("p"), decimal(30, 4))), group_by=(col("k"), col("t")))
    kept_as_two = plan_fused(ordered(wide, ((2, True),), 3), [table(3000, p_hi=2**62)], "pinned", 132, whole=True)
    assert kept_as_two.spec.hashed and kept_as_two.spec.accumulators[0].kind == "wide" and kept_as_two.top is None


def test_a_group_columns_common_factor_divides_its_groups():
    """l_quantity's values are whole hundredths (100 .. 5,000): 50 groups in steps of 100, not 4,901 values, and
    the keys read back are the values themselves."""
    plan = plan_fused(query(None, Aggregate("count", None, BIGINT), group_by=(col("q"),)), [table()], "pinned", 132)
    assert plan.spec.group_steps == (100,) and plan.spec.groups == 64 and plan.tables[0].group_bases == (1,)
    assert "(v0 / 100LL - g0)" in codegen.source(plan.spec, 128)
    narrowed = plan_fused(query(Compare(">", col("q"), Literal(2450, D2)), Aggregate("count", None, BIGINT), group_by=(col("q"),)),
                          [table()], "pinned", 132)
    assert narrowed.tables[0].group_bases[0] * 100 <= 2500  # a bound between steps is rounded down: every value >= base


SHAPES = [
    query(Compare("<", col("k"), Literal(30, INTEGER)), total(PRODUCT)),
    # scales past 10^18 (no long long holds the power): a wide sum, and a column of zeros held in 64 bits
    query(Compare(">", Arith("+", col("k"), Literal(1, decimal(20, 19)), decimal(38, 19)), Literal(0, INTEGER)),
          total(Cast(col("k"), decimal(38, 20)), decimal(38, 20)),
          total(Cast(Arith("*", col("k"), Literal(0, INTEGER), BIGINT), decimal(38, 37)), decimal(38, 37))),
    query(And((Compare(">=", col("t"), Literal(8766, DATE)), Compare("<", col("q"), Literal(24, INTEGER)))),
          total(Arith("*", col("p"), col("d"), decimal(18, 4))), Aggregate("avg", col("q"), DOUBLE),
          Aggregate("min", col("t"), DATE), Aggregate("max", col("p"), D2), group_by=(col("s"),)),
    query(Or((InList(col("s"), (Literal("A", VARCHAR), Literal("R", VARCHAR))), Not(Compare("=", col("d"), Literal(4, D2))))),
          total(Arith("-", Arith("*", col("p"), Arith("-", Literal(1, INTEGER), col("d"), decimal(16, 2)), decimal(18, 4)),
                      col("q"), decimal(19, 4)), decimal(38, 4)), Aggregate("count", None, BIGINT), group_by=(col("s"), col("d"))),
    query(Compare("<", col("q"), Literal(2400, D2)), total(PRODUCT), Aggregate("min", col("t"), DATE),
          group_by=(col("k"), col("q"))),  # 16,384 x 32 groups: in device memory
    query(Compare("<", col("k"), Literal(300, INTEGER)), total(PRODUCT), Aggregate("max", col("t"), DATE),
          group_by=(col("p"), col("s"))),  # 2^25 x 4 groups: too many for a dense array, hashed
    # IN lists past the kernel's parameter space (5,000 values: 40 KB of them): sorted sets in memory
    query(And((InList(col("k"), tuple(Literal(v, INTEGER) for v in range(1, 10_000, 2))),
               InList(Arith("*", col("k"), Literal(3, INTEGER), BIGINT), tuple(Literal(v, INTEGER) for v in range(0, 30_000, 7)),
                      negated=True))), total(PRODUCT), Aggregate("count", None, BIGINT)),
]


def _shape_builds(shape: int) -> list:
    if shape < len(SHAPES):
        spec = plan_fused(SHAPES[shape], [table(3000)], "pinned", 132).spec
    elif shape == len(SHAPES):  # 128-bit products and sums kept as two halves
        spec = plan_fused(query(None, total(Arith("*", col("p"), col("p"), decimal(30, 4)))), [table(3000, p_hi=2**62)],
                          "pinned", 132).spec
    else:  # a key past 62 bits (2^63 x 16,384 groups): three words a slot
        spec = plan_fused(query(Compare("<", col("k"), Literal(300, INTEGER)), total(PRODUCT), Aggregate("min", col("t"), DATE),
                                group_by=(col("p"), col("k"))), [table(3000, p_hi=2**62)], "pinned", 132).spec
        assert spec.wide_keys
    # the frame loop, and the index scan over the first predicate column (low bits of 2 bytes, or none); the
    # frame loop reading a predicate column that no aggregate reads by its top byte (low bits of 0 to 8 bytes)
    index = [codegen.IndexKernel(spec.predicate_slots[0], low) for low in (2, 0)] if spec.predicate_slots else []
    only = [i for i in spec.predicate_slots if i not in spec.value_slots][:1]
    sliced = [codegen.SlicedKernel(i, low) for i in only for low in (0, 1, 2, 4, 8)]
    return [fused_build(spec), *(fused_build(spec, i) for i in index), *(fused_build(spec, sliced=k) for k in sliced)]


def _no_spills(report: str) -> None:
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    assert spills and all(s == ("0", "0") for s in spills), report


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on the PATH")
@pytest.mark.parametrize("shape", range(len(SHAPES) + 2))
def test_generated_kernels_compile_without_spills(shape, tmp_path):
    for k, build in enumerate(_shape_builds(shape)):
        source = tmp_path / f"fused{k}.cu"
        source.write_text(build.text())
        r = subprocess.run([NVCC, "-cubin", "-arch=sm_90", "-Xptxas", "-v", f"-I{kernels.CUDA_DIR}", *build.nvcc_options(),
                            "-o", str(tmp_path / f"k{k}.cubin"), str(source)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "constant is too large" not in r.stderr, r.stderr  # (nvcc's warning, not an error: the value is wrong)
        _no_spills(r.stderr)


@pytest.mark.gpu
@pytest.mark.skipif(nvrtc.library() is None, reason="NVRTC is not installed on this host")
@pytest.mark.parametrize("shape", range(len(SHAPES) + 2))
def test_generated_kernels_compile_in_process_without_spills(shape, no_local_memory):
    """NVRTC, as the engine compiles (gpu/kernels.py): the headers handed over in memory, none of the
    toolkit's; every entry loaded on the GPU uses no local memory."""
    for build in _shape_builds(shape):
        no_local_memory(build)


def test_a_group_columns_groups_are_narrowed_by_the_predicate():
    between = And((Compare(">=", col("t"), Literal(9000, DATE)), Compare("<=", col("t"), Literal(9002, DATE))))
    plan = plan_fused(query(between, Aggregate("count", None, BIGINT), group_by=(col("t"),)), [table()], "pinned", 132)
    assert plan.spec.groups == 4 and plan.tables[0].group_bases == (9000,)  # 3 days, rounded up to a power of two


def test_scattered_frames_are_one_chunk_not_thousands():
    """Frames a predicate can touch, scattered one in every 40, cost a chunk each if not merged: the
    ruled-out frames between them are shipped (cheaper than a chunk's fixed cost) and skipped by class."""
    t = table(400_000)
    k = t.columns["k"].get("packed")
    touched = np.arange(k.frames) % 40 == 0
    k.zmax[:] = np.where(touched, 5, 9999)  # a zone map that makes every 40th frame touchable by k < 6
    k.meta[:, 0] = np.where(touched, 1, 9000)
    t.columns["k"]._zones = None
    plan = plan_fused(query(Compare("<", col("k"), Literal(6, INTEGER)), total(PRODUCT)), [t], "pinned", 132)
    frames = plan.to_dict()["frames"]
    assert frames["never"] == k.frames - int(touched.sum()) and len(plan.tables[0].chunks) == 1


def test_parts_whose_predicate_columns_range_alike_share_one_lowered_predicate():
    """A parted store's parts lower a WHERE once where its columns' ranges and dictionaries are the same (one
    object: its hash and kernel spec found once; a dictionary known by its object); a part of other ranges, or
    of a dictionary of its own, lowers it as it would alone."""
    from gquery.gpu.fusedplan import _lowered
    from gquery.prune import string_sides

    where = And((Compare("<", col("k"), Literal(20_000, INTEGER)), InList(col("s"), (Literal("N", VARCHAR),), False)))
    one = table(seed=1)
    parts = [one, one, table(seed=1), table(seed=2, k_from=5_000)]
    dictionaries = [{n: t.columns[n].dictionary for n in ("k", "s")} for t in parts]
    ranges = [t.ranges(["k", "s"]) for t in parts]
    nulls, sides = {"k": False, "s": False}, string_sides(where, dictionaries)
    got = _lowered(query(where, total(PRODUCT)), dictionaries, ranges, nulls, sides)
    alone = [lower(where, d, r, nulls, sides) for d, r in zip(dictionaries, ranges)]
    assert got == alone and alone[0] == alone[2] != alone[3]
    assert got[0] is got[1] and got[2] is not got[0] and got[3] is not got[0]


def test_a_run_of_scattered_frames_is_cut_by_the_frames_it_touches_not_by_its_span():
    """A run merged from frames scattered one in every 40 spans 2,930 frames but touches 74: one piece, not
    three of the smallest size (SF 100, l_suppkey < 2: 58 pieces a part, 530 launches for a few dozen frames)."""
    from gquery.gpu.fusedplan import MIN_CHUNK_FRAMES

    t = table(3_000_000)
    k = t.columns["k"].get("packed")
    touched = np.arange(k.frames) % 40 == 0
    k.zmax[:] = np.where(touched, 5, 9999)
    k.meta[:, 0] = np.where(touched, 1, 9000)
    t.columns["k"]._zones = None
    assert k.frames > 2 * MIN_CHUNK_FRAMES
    q = query(Compare("<", col("k"), Literal(6, INTEGER)), total(PRODUCT))
    chunks = plan_fused(q, [t], "pinned", 132).tables[0].chunks
    end = int(np.flatnonzero(touched)[-1]) + 1
    assert len(chunks) == 1 and (chunks[0].first, chunks[0].end) == (0, end)
    # a smaller target cuts the run into pieces of about as many touched frames each, of equal span
    chunks = plan_fused(q, [t], "pinned", 132, chunk_frames=25).tables[0].chunks
    assert len(chunks) == 3 and chunks[0].first == 0 and chunks[-1].end == end
    assert all(abs(c.frames - chunks[0].frames) <= 1 for c in chunks)


def test_a_few_tested_frames_among_many_that_pass_whole_do_not_cut_the_run_into_chunks():
    """603 tested frames scattered among 57,978 that pass whole (l_suppkey < 100000 at SF 10) were 589
    chunks: each stretch that passes whole was split off to save its 100 frames of the key."""
    t = table(2_000_000)
    k = t.columns["k"].get("packed")
    tested = np.arange(k.frames) % 97 == 0
    k.zmax[:] = np.where(tested, 9999, 5000)  # k < 9999: every frame passes whole but every 97th
    k.meta[:, 0] = 1
    t.columns["k"]._zones = None
    plan = plan_fused(query(Compare("<", col("k"), Literal(9999, INTEGER)), total(PRODUCT)), [t], "pinned", 132)
    assert plan.to_dict()["frames"]["check"] == int(tested.sum())
    assert len(plan.tables[0].chunks) <= 2
    # k is read in place for the tested frames alone, not shipped for every frame of the chunk
    assert all("k" in c.zero_copy and "k" not in c.streamed and c.tested_in_place > 0 for c in plan.tables[0].chunks)
    assert "k" in plan_fused(query(Compare("<", col("k"), Literal(9999, INTEGER)), total(PRODUCT)), [t], "pageable",
                             132).tables[0].chunks[0].streamed  # pageable memory cannot be read in place


def test_a_parted_store_is_cut_into_chunks_for_the_whole_query_not_for_each_part():
    """Chunks are sized from the frames every part touches together: a part is not cut into
    CHUNKS_PER_QUERY pieces of its own (each piece costs the host its copies and launch to queue), and
    a run is cut into pieces of equal size, never a whole one and a sliver."""
    from gquery.gpu.fusedplan import CHUNKS_PER_QUERY, MIN_CHUNK_FRAMES

    t = table(1_200_000)  # 1,172 frames, each tested
    q = query(Compare("<", col("k"), Literal(9_000, INTEGER)), total(PRODUCT))
    one = plan_fused(q, [t], "pinned", 132)
    assert len(one.tables[0].chunks) == 2 and t.frames // 2 <= MIN_CHUNK_FRAMES  # the smallest chunk rules one part
    parts = plan_fused(q, [t] * 12, "pinned", 132)
    per_part = [len(tp.chunks) for tp in parts.tables]
    assert per_part == [1] * 12 and sum(per_part) >= CHUNKS_PER_QUERY
    for tp in (one.tables[0], *parts.tables):
        sizes = [c.frames for c in tp.chunks]
        assert max(sizes) - min(sizes) <= 1
        assert sorted((c.first, c.end) for c in tp.chunks)[0][0] == 0 and max(c.end for c in tp.chunks) >= \
            int(np.flatnonzero(tp.classes != NEVER)[-1]) + 1


def _pieces_frame_by_frame(classes: np.ndarray, gap: int, split: int, target: int) -> list[tuple]:
    """The chunking rule of fusedplan._pieces for one table, a frame at a time: touched frames with at most `gap`
    ruled-out frames between them are one run; in a run a stretch of at least `split` frames that all pass is a
    segment of its own, the rest segments between; a segment is cut into ceil(its touched frames / target) pieces of
    equal span."""
    runs: list[list[int]] = []
    for i in map(int, np.flatnonzero(classes != NEVER)):
        if runs and i - runs[-1][1] <= gap:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    out = []
    for a, b in runs:
        segments, at, i = [], a, a
        while i < b:
            j = i
            while j < b and classes[j] == ALWAYS:
                j += 1
            if j - i >= split:  # a long stretch that passes whole
                if i > at:
                    segments.append((at, i, False))
                segments.append((i, j, True))
                at = j
            i = max(j, i + 1)
        if at < b:
            segments.append((at, b, False))
        for s, e, whole in segments:
            n = -(-(e - s if whole else int((classes[s:e] != NEVER).sum())) // target)
            out += [(s + (e - s) * k // n, s + (e - s) * (k + 1) // n, whole) for k in range(n)]
    return out


@pytest.mark.parametrize("seed", range(8))
def test_every_tables_pieces_cut_at_once_are_each_tables_cut_frame_by_frame(seed):
    """fusedplan._pieces cuts several tables' frames at once, one after another, each found from its classes or from
    lists of its few frames: each table's pieces are those its frames give alone, cut frame by frame by the rule (a
    run never crosses into the next table, whose first frames may be touched where the last table's last are)."""
    import random

    from gquery.gpu.fusedplan import _Frames, _pieces
    from gquery.prune import SparseEstimate

    rng = random.Random(seed)
    tables, gaps, splits = [], [], []
    for _ in range(rng.randint(1, 6)):
        n = rng.choice([0, 1, 7, 300])
        weights = rng.choice([(1, 1, 1), (8, 1, 1), (1, 1, 8), (0, 0, 1), (1, 0, 0)])  # NEVER, CHECK, ALWAYS
        tables.append(np.array(rng.choices([NEVER, CHECK, ALWAYS], weights, k=n), np.int8))
        gaps.append(rng.choice([0, 1, 5, n]))
        splits.append(rng.choice([1, 3, 64, n + 1]))
    target = rng.choice([1, 4, 50, 1024])
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in tables])]).astype(np.int64)
    def frames(classes: np.ndarray) -> _Frames:
        """The table's frames as a plan finds them: from its classes, or from sorted lists of its few frames (a
        comparison's, the others ruled out, or passing whole: `complement`) as compare_classes makes them."""
        kind = rng.choice(["classes", "listed", "complement"])
        if kind == "classes":
            return _Frames(classes)
        tested = np.flatnonzero(classes == CHECK)
        passing = np.flatnonzero(classes != ALWAYS if kind == "complement" else classes == ALWAYS)
        estimate = SparseEstimate(len(classes), 1024 * len(classes), passing, kind == "complement", tested,
                                  np.full(len(tested), 0.5))
        counts = tuple(int((classes == k).sum()) for k in (NEVER, CHECK, ALWAYS))
        return _Frames(lambda: (classes, estimate), counts)

    firsts, ends, wholes = _pieces([frames(c) for c in tables], np.array(gaps, np.int64), np.array(splits, np.int64),
                                   target, offsets)
    want = [(s + o, e + o, w) for c, g, sp, o in zip(tables, gaps, splits, offsets.tolist())
            for s, e, w in _pieces_frame_by_frame(c, g, sp, target)]
    assert list(zip(firsts.tolist(), ends.tolist(), wholes.tolist())) == want


def test_ranges_on_one_column_intersect_before_they_multiply():
    z = Zones(np.full(1, 1024), {"d": np.array([0])}, {"d": np.array([10])})
    between = And((Compare(">=", Column("d", D2), Literal(5, D2)), Compare("<=", Column("d", D2), Literal(7, D2))))
    assert classify(between, z)[1][0] == pytest.approx(3 / 11)  # not (6/11) x (8/11)


# --- the index scan ----------------------------------------------------------------------------------------------
def indexed_table(rows=400_000, seed=5):
    t = table(rows, seed)
    t.columns["k"].get("indexed")  # the bucket lists, derived in memory (a store reads them from disk)
    return t


def test_a_narrow_range_on_a_column_with_bucket_lists_is_scanned_by_index_and_a_wide_one_by_frames():
    t = indexed_table()
    narrow = plan_fused(query(Compare("<", col("k"), Literal(30, INTEGER)), total(PRODUCT)), [t], "pinned", 132).choose()
    ix = narrow.tables[0].index
    lists = t.columns["k"].get("indexed")
    assert ix is not None and ix.column == "k" and (ix.bucket_first, ix.bucket_end) == (0, 1)
    assert (ix.first, ix.end) == (0, int(lists.histogram[0])) and ix.first_value == lists.reference
    assert list(ix.starts) == [0, ix.entries]
    assert "index-scan" in dict(narrow.steps()) and "by the index on k" in narrow.describe()
    wide = plan_fused(query(Compare("<", col("k"), Literal(9_000, INTEGER)), total(PRODUCT)), [t], "pinned", 132).choose()
    assert wide.tables[0].index is None and wide.tables[0].index_option is not None
    assert "0 of 1 table(s) scanned by the index" in wide.describe()
    # where no column of the predicate has lists, or a kernel cannot read rows in place, frames only
    assert plan_fused(query(Compare("<", col("d"), Literal(1, INTEGER)), total(PRODUCT)), [t], "pinned", 132).tables[0].index_option is None
    for mode in ("pageable", "resident"):
        assert plan_fused(query(Compare("<", col("k"), Literal(30, INTEGER)), total(PRODUCT)), [t], mode, 132).choose(scan="index").tables[0].index is None


def test_a_share_of_frames_reads_its_top_bytes_in_the_whole_columns_buckets():
    """A GPU's share of a table (Table.view: some of its frames, the whole column's top bytes viewed) is planned
    in the buckets its top bytes were cut in, the whole column's, not its own range's: the run would refuse
    its top bytes (gquery.errors: "top bytes disagree with its zone maps", as `gpus=2` over a clustered store
    did). The index option's estimate reads the lists' buckets alike."""
    from gquery.encodings import FRAME_ROWS
    from gquery.gpu.fusedplan import _sliced_scan

    t = table(200_000, seed=3, sort_by="k")  # a clustered key: each share's own range is a part of the whole's
    whole = t.columns["k"].get("sliced")
    t.columns["k"].get("indexed")
    frames = -(-t.rows // FRAME_ROWS)
    for share in (t.view(0, frames // 3), t.view(frames // 3, frames)):
        assert share.columns["k"].range() != t.columns["k"].range()
        assert share.columns["k"].slice_range() == t.columns["k"].range()
        top = share.columns["k"].get("sliced")
        scan = _sliced_scan("k", 0, share, None, 1, {})
        assert (scan.reference, scan.bucket) == (top.reference, top.bucket) == (whole.reference, whole.bucket)
        plan = plan_fused(query(Compare("<", col("k"), Literal(5_000, INTEGER)), total(PRODUCT)), [share], "pinned", 132)
        for tp in plan.choose().tables:
            assert tp.sliced is None or (tp.sliced.reference, tp.sliced.bucket) == (whole.reference, whole.bucket)


def test_the_index_scans_buckets_cover_every_value_the_predicate_can_select():
    """Exact by construction: the entries read are every row whose value lies in the buckets that hold the
    column's range among selectable rows (prune.narrowed), whatever else the predicate says."""
    t = indexed_table(300_000, seed=9)
    lists = t.columns["k"].get("indexed")
    values = t.columns["k"].values()
    for lo, hi in ((1, 1), (17, 4000), (2500, 2600), (9990, 20_000), (0, 10)):
        where = And((Compare(">=", col("k"), Literal(lo, INTEGER)), Compare("<=", col("k"), Literal(hi, INTEGER)),
                     Compare(">", col("d"), Literal(2, INTEGER))))
        plan = plan_fused(query(where, total(PRODUCT)), [t], "pinned", 132).choose(scan="index")
        ix = plan.tables[0].index
        if ix is None:  # every frame ruled out: nothing to scan
            assert not plan.tables[0].chunks
            continue
        rows = lists.ids[ix.first:ix.end]
        wanted = np.flatnonzero((values >= lo) & (values <= hi))
        assert set(wanted.tolist()) <= set(rows.tolist())
        in_lists = values[rows]
        assert in_lists.min() >= ix.first_value and in_lists.max() < ix.first_value + ix.bucket * (ix.bucket_end - ix.bucket_first)


def test_the_cold_lists_are_read_once_they_pay_for_themselves():
    """Without warm-up, a byte on disk counts: the lists (not yet read) are chosen only once the runs they
    serve would have paid for reading them. Until then a call choosing as an earlier one did reuses its tables."""
    t = indexed_table()
    opt_plan = plan_fused(query(Compare("<", col("k"), Literal(30, INTEGER)), total(PRODUCT)), [t], "pinned", 132)
    column = t.columns["k"]
    column.encodings.pop("indexed")
    column.stored, column.on_disk = ("packed", "indexed"), {"indexed": 50 << 20}
    column.load = lambda enc, lists=indexed_table().columns["k"].get("indexed"): lists
    assert opt_plan.choose(runs=1).tables[0].index is None
    # the same scans chosen again: their tables, and so the runs they queued, reused; the note counts this call's runs
    one, two = opt_plan.choose(runs=1), opt_plan.choose(runs=2)
    assert one is not two and all(a is b for a, b in zip(one.tables, two.tables)) and two._launches is one._launches
    assert "for 2 runs" in two.describe() and "for 1 run," in one.describe()
    bought = opt_plan.choose(runs=10_000)
    assert bought.tables[0].index is not None and "for 10000 runs" in bought.describe()
    # the lists read, nothing is left on disk: the choice is the warm one, made once
    assert opt_plan.choose(runs=10_000) is opt_plan.choose(runs=3) is opt_plan.choose()


@pytest.mark.parametrize("few_words,tiny_words", [(0, 0), (1 << 40, 0), (1 << 40, 1 << 40)])
def test_every_group_is_read_at_once_exactly_as_one_at_a_time(few_words, tiny_words, monkeypatch):
    """codegen.read_groups (NumPy over the accumulator words) against read_group (one group's words into
    Python integers): counts, 128-bit sums that fit 64 bits and sums that do not, negative ones, the
    wide sums' two halves, min and max; groups that selected no row left out. A table of many groups
    read a column at a time, of a few by one copy (codegen.FEW_WORDS), alike; a tiny table's words read as
    Python integers (codegen.TINY_WORDS) give what NumPy's read gives, the rows an accumulator over a column
    with NULLs took too."""
    monkeypatch.setattr(codegen, "FEW_WORDS", few_words)
    monkeypatch.setattr(codegen, "TINY_WORDS", tiny_words)
    t = table(3000, p_hi=2**62)
    nullable = Table.from_values({n: t.columns[n].values() for n in t.columns}, SCHEMA, {"s": ("A", "N", "R")},
                                 valid={"p": np.arange(3000) % 7 != 0})
    spec = plan_fused(query(None, total(PRODUCT), total(Arith("*", col("p"), col("p"), decimal(30, 4)), decimal(38, 4)),
                            Aggregate("min", col("t"), DATE), Aggregate("max", col("p"), D2),
                            Aggregate("count", col("p"), BIGINT), group_by=(col("k"),)),
                      [nullable], "pinned", 132).spec
    assert [(a.kind, bool(a.valid)) for a in spec.accumulators] == [("sum", True), ("wide", True), ("min", False),
                                                                   ("max", True), ("count", True)]
    rng = np.random.default_rng(3)
    for fits, empty in ((True, 0.3), (False, 0.3), (True, 0.0), (False, 0.0), ("zero high", 0.3), ("small", 0.0)):
        words = rng.integers(0, 2**64, spec.groups * spec.words, dtype=np.uint64)
        table_words = words.reshape(spec.groups, spec.words)
        table_words[:, 0] >>= np.uint64(1)  # a count of rows is below 2^63 (rows are 64-bit indices)
        lows, k = [], 1  # each 128-bit sum's low word (a wide sum's two)
        for a in spec.accumulators:
            lows += [k] if a.kind == "sum" else [k, k + 2] if a.kind == "wide" else []
            if a.valid:  # the count of rows an accumulator took is below 2^63 too
                table_words[:, k + a.value_words] >>= np.uint64(1)
            k += a.words
        table_words[table_words[:, 0] == 0, 0] = 1
        table_words[rng.random(spec.groups) < empty, 0] = 0  # groups that selected no row
        if fits is True:  # every 128-bit sum's high word the sign of its low word
            for k in lows:
                table_words[:, k + 1] = np.where(table_words[:, k].view(np.int64) < 0, np.uint64(2**64 - 1), np.uint64(0))
        elif fits:  # every high word 0: low words past 2^63 are sums past int64 ("zero high"), or none are ("small")
            for k in lows:
                table_words[:, k + 1] = 0
                if fits == "small":
                    table_words[:, k] >>= np.uint64(2)
        index, counts, values, counted = codegen.read_groups(spec, words)
        assert index.tolist() == codegen.selected_groups(spec, words).tolist()
        for i, g in enumerate(index.tolist()):
            rows, exact = codegen.read_group(spec, words, g)
            assert counts[i] == rows and [v[i] for v in values] == exact
        if tiny_words:  # as NumPy reads the same words
            monkeypatch.setattr(codegen, "TINY_WORDS", 0)
            np_index, np_counts, np_values, np_counted = codegen.read_groups(spec, words)
            monkeypatch.setattr(codegen, "TINY_WORDS", tiny_words)
            assert index.dtype == counts.dtype == np.int64
            assert index.tolist() == np_index.tolist() and counts.tolist() == np_counts.tolist()
            assert [python_values(v) for v in values] == [python_values(v) for v in np_values]
            assert [c is None or (c.dtype == np.int64, c.tolist()) for c in counted] == \
                [c is None or (True, c.tolist()) for c in np_counted]


@pytest.mark.parametrize("group_by", [("k",), ("s",), ("t",), ("s", "d"), ("k", "q"), ("d", "t")])
def test_a_groups_index_becomes_its_columns_keys(group_by):
    """answer.table_partial decodes a group's index into each group column's key (its digit, the column's
    base and step; a VARCHAR's code through its dictionary): every chosen group's keys as a digit at a
    time in Python would make them."""
    from gquery.answer import table_partial
    from gquery.gpu.fused import FusedRun, TableRun

    t = table(3000)
    where = Compare(">", col("q"), Literal(1000, D2))
    plan = plan_fused(query(where, Aggregate("count", None, BIGINT), group_by=tuple(col(c) for c in group_by)),
                      [t], "pinned", 132)
    spec, tp = plan.spec, plan.tables[0]
    rng = np.random.default_rng(len(group_by))
    index = np.zeros(500, dtype=np.int64)
    for name, base, card in zip(group_by, tp.group_bases, spec.group_cards):  # digits a kernel can write
        d = t.columns[name].dictionary
        index = index * card + rng.integers(0, card if d is None else min(card, len(d) - base), 500)
    index = np.unique(index)
    counts = rng.integers(1, 100, len(index))
    run = FusedRun([TableRun(tp, index, counts, [], 0, 0)], None, plan)
    partial = table_partial(plan.query, spec, run.tables[0])
    for i, g in enumerate(index.tolist()):
        digits, rest = [], g
        for card in reversed(spec.group_cards):
            rest, digit = divmod(rest, card)
            digits.append(digit)
        expected = []
        for name, base, step, digit in zip(group_by, tp.group_bases, spec.group_steps, reversed(digits)):
            value = (base + digit) * step
            d = t.columns[name].dictionary
            expected.append(d[value] if d is not None else value)
        assert [python_values(k)[i] if hasattr(k, "tolist") else k[i] for k in partial.keys] == expected


@pytest.mark.parametrize("group_by", [(), ("s",), ("k", "d")])
def test_a_plan_the_zone_maps_rule_out_whole_is_answered_without_the_gpu(group_by):
    """Every frame ruled out (k is never below 1): nothing to read, no GPU job; the aggregates of no row
    (COUNT 0, SUM/MIN/MAX/AVG NULL, or no group at all) as the CPU reference gives them."""
    from gquery.answer import cpu_answer, fused_partial, gpu_finish, gpu_runs
    from gquery.gpu.fused import empty_run
    from gquery.result import finalize

    t = table(5000)
    aggregates = (Aggregate("count", None, BIGINT), total(PRODUCT), Aggregate("min", col("t"), DATE),
                  Aggregate("max", col("p"), D2), Aggregate("avg", col("q"), DOUBLE))
    q = query(Compare("<", col("k"), Literal(1, INTEGER)), *aggregates, group_by=tuple(col(c) for c in group_by))
    plan = plan_fused(q, [t], "pinned", 132)
    assert plan.empty
    assert finalize(q, fused_partial(q, empty_run(plan))) == cpu_answer(q, t).result
    done = gpu_runs(q, t, None, repeat=1, warmup=False, planned=(plan, 0.0))  # no engine: none is needed
    assert done.runs[0].profile.total_ms == 0 and done.runs[0].profile.h2d_bytes == 0
    a = gpu_finish(q, done)
    assert a.result == cpu_answer(q, t).result and "no GPU job" in a.notes[-1]
    some = plan_fused(query(Compare("<", col("k"), Literal(2, INTEGER)), *aggregates), [t], "pinned", 132)
    assert not some.empty


def test_parts_of_one_range_add_their_groups_into_one_table_of_words():
    """A parted table's groups are counted from one base where that takes no more groups than each part's
    own (the kernel then adds every part into one table of accumulators, read back once), or where they are
    hashed; not where the parts' ranges of a dense array lie apart, nor where a VARCHAR group column's codes
    mean other strings in another part."""
    parts = [table(9000, seed) for seed in (1, 2, 3)]
    count = Aggregate("count", None, BIGINT)
    by_key = plan_fused(query(None, count, group_by=(col("k"),)), parts, "pinned", 132)
    assert by_key.shared_groups and len({tp.group_bases for tp in by_key.tables}) == 1
    assert "one table of accumulators" in by_key.describe()
    shifted = Table.from_values({"k": np.arange(9000) + 1_000_000, "q": np.full(9000, 100), "p": np.ones(9000, np.int64),
                                 "d": np.zeros(9000, np.int64), "t": np.full(9000, 9000), "s": np.zeros(9000, np.int64)},
                                SCHEMA, {"s": ("A", "N", "R")})
    far = plan_fused(query(None, count, group_by=(col("k"),)), [parts[0], shifted], "pinned", 132)
    assert not far.shared_groups and far.tables[0].group_bases != far.tables[1].group_bases
    # hashed groups need no dense range: parts far apart share one hash table, counted from the smallest key
    pairs = Query("<test>", (Output("k", col("k")), Output("p", col("p")), Output("n", count)), None,
                  (col("k"), col("p")), ((2, True),), 10)
    hashed = plan_fused(pairs, [parts[0], shifted], "pinned", 132, whole=True)
    assert hashed.spec.hashed and hashed.shared_groups and hashed.word_tables == 1 and hashed.top is not None
    assert len({tp.group_bases for tp in hashed.tables}) == 1 and hashed.spec.group_cards[0] == 2**20  # 1 .. 1,008,999
    parts[1].columns["s"].dictionary = Dictionary(("N", "R", "S"))
    by_string = plan_fused(query(None, count, group_by=(col("s"),)), parts, "pinned", 132)
    assert not by_string.shared_groups
    assert plan_fused(query(None, count, group_by=(col("s"),)), [parts[0], parts[2]], "pinned", 132).shared_groups
    greatest = query(None, Aggregate("max", col("s"), VARCHAR), group_by=(col("k"),))  # of codes: the same strings?
    assert not plan_fused(greatest, parts, "pinned", 132).shared_groups
    assert plan_fused(greatest, [parts[0], parts[2]], "pinned", 132).shared_groups
    ungrouped = plan_fused(query(None, count, total(PRODUCT)), parts, "pinned", 132)  # one group, () its base
    assert ungrouped.shared_groups and ungrouped.word_tables == 1 and "aggregates add into one table" in ungrouped.describe()
    least = query(None, Aggregate("min", col("s"), VARCHAR))  # of codes that mean other strings in part 2: a table a part
    assert not plan_fused(least, parts, "pinned", 132).shared_groups
    assert plan_fused(least, [parts[0], parts[2]], "pinned", 132).shared_groups
    assert not plan_fused(query(None, count), parts[:1], "pinned", 132).shared_groups  # one table: nothing to share


def test_a_sum_the_parts_add_into_one_table_is_bounded_by_all_their_rows():
    """Parts that add into one table of words add up every part's rows: a sum whose product of BIGINTs fits 128
    bits over one part's rows but not over all of theirs is kept in more words (wide), and is not where the parts
    keep a table each."""
    big = 2**62 - 1
    product = Arith("*", col("k"), col("k"), BIGINT)
    parts = [Table.from_values({"k": np.full(4, big), "q": np.full(4, 100), "p": np.ones(4, np.int64), "d": np.zeros(4, np.int64),
                                "t": np.full(4, 9000), "s": np.zeros(4, np.int64)}, SCHEMA, {"s": ("A", "N", "R")})
             for _ in range(3)]
    alone = plan_fused(query(None, total(product, decimal(38, 0))), parts[:1], "pinned", 132)
    assert [a.kind for a in alone.spec.accumulators] == ["sum"]  # 4 rows of (2^62)^2: below 2^127
    together = plan_fused(query(None, total(product, decimal(38, 0))), parts, "pinned", 132)
    assert together.shared_groups and [a.kind for a in together.spec.accumulators] == ["wide"]  # 12 rows: not


def _sliced_rows(where, t):
    """Each row's truth under the predicate as the frame loop tests it with k read by its top byte (a decided
    bucket's first value standing in for the row's own), and as the row's own values give it."""
    from gquery.cpu import _Rows
    from gquery.prune import lower

    names = ("k", "d", "q")
    plan = plan_fused(query(where, total(PRODUCT)), [t], "pinned", 132).choose(scan="sliced")
    tp = plan.tables[0]
    if tp.sliced is None:
        return plan, None, None
    s, enc = tp.sliced, t.columns["k"].get("sliced")
    top = enc.top[:t.rows].astype(np.int64)
    undecided = np.array([(s.undecided >> int(b)) & 1 for b in range(256)], bool)
    stand_in = s.reference + s.bucket * top + np.where(undecided[top], enc.low.astype(np.int64), 0)
    exact = {n: t.columns[n].values() for n in names}
    ranges = t.ranges(names)
    low = lower(where, {}, ranges)
    truth = _Rows(exact, {}, ranges, None, t.rows).truth(low, True)
    as_read = _Rows({**exact, "k": stand_in}, {}, ranges, None, t.rows).truth(low, True)
    return plan, truth, as_read


def test_a_column_read_by_its_top_byte_decides_every_row_as_its_own_value_would():
    """Exact by construction: a bucket's first value stands in for a row's key only where every atom on the
    key has one truth over the whole bucket (prune.decided_buckets); random predicates of comparisons, IN
    lists, NOT, OR and arithmetic on the key, at bucket edges and between them."""
    import random

    t = indexed_table(60_000, seed=11)
    enc = t.columns["k"].get("sliced")
    edges = [enc.reference + b * enc.bucket + d for b in (0, 1, 7, 100, 255) for d in (-1, 0, 1)]
    rng = random.Random(4)

    def atom():
        c = rng.choice(edges + [rng.randint(-5, 10_010) for _ in range(3)])
        kind = rng.randrange(5)
        if kind == 0:
            return Compare(rng.choice(["<", "<=", ">", ">=", "=", "<>"]), col("k"), Literal(c, INTEGER))
        if kind == 1:
            return InList(col("k"), tuple(Literal(rng.choice(edges + [c]), INTEGER) for _ in range(rng.randint(1, 20))),
                          negated=rng.random() < 0.5)
        if kind == 2:  # arithmetic on the key decides no bucket: its rows read their low bits
            return Compare("<", Arith("*", col("k"), Literal(3, INTEGER), BIGINT), Literal(3 * c, INTEGER))
        return Compare(rng.choice(["<", ">="]), col("d"), Literal(rng.randint(0, 11), INTEGER))

    def tree(depth):
        if depth == 0 or rng.random() < 0.3:
            return atom()
        kind = rng.randrange(3)
        if kind == 2:
            return Not(tree(depth - 1))
        return (And if kind == 0 else Or)(tuple(tree(depth - 1) for _ in range(rng.randint(2, 3))))

    checked = decided = 0
    for _ in range(150):
        where = tree(3)
        if "k" not in where.columns():
            continue
        plan, truth, as_read = _sliced_rows(where, t)
        if truth is None:
            continue
        assert np.array_equal(truth, as_read), where
        checked += 1
        decided += bin(plan.tables[0].sliced.undecided).count("1") < 256
    assert checked > 60 and decided > 30


def test_a_dense_range_reads_the_key_by_its_top_byte_and_a_sparse_one_by_index():
    t = indexed_table()
    dense = plan_fused(query(Compare("<", col("k"), Literal(3_000, INTEGER)), total(PRODUCT)), [t], "pinned", 132)
    packed = dense.choose(scan="frames")
    by_top = dense.choose()
    s = by_top.tables[0].sliced
    assert packed.tables[0].sliced is None and s is not None and by_top.tables[0].index is None
    assert by_top.tables[0].stream_bytes < packed.tables[0].stream_bytes  # a byte a row, not 14 bits
    assert bin(s.undecided).count("1") == 1  # only the bucket that holds 3,000 reads low bits
    assert by_top.sliced_kernel == codegen.SlicedKernel(0, 1) and "by its top byte" in by_top.describe()
    assert by_top.to_dict()["by_top_byte"] == ["k"]
    unchosen = plan_fused(query(Compare("<", col("k"), Literal(30, INTEGER)), total(PRODUCT)), [t], "pinned", 132)
    sparse = unchosen.choose()
    assert sparse.tables[0].index is not None
    # the index reads fewer bytes than the top bytes of the tested frames alone: the frames' top-byte plan never cut
    assert unchosen.top_plans is not None and not unchosen.top_plans.made
    # what either plan may launch once chosen, compiled ahead (answer.gpu_plan): packed, by top byte, by index
    from gquery.gpu.fused import plan_builds, possible_builds

    for plan, chosen in ((unchosen, sparse), (dense, by_top), (dense, packed)):
        builds = possible_builds(plan)
        assert len(builds) == 3 and all(b in builds for b in plan_builds(chosen))
    # the key's values are read exactly where an aggregate or a group needs them; and never without mapped memory
    for q in (query(Compare("<", col("k"), Literal(3_000, INTEGER)), total(col("k"))),
              query(Compare("<", col("k"), Literal(3_000, INTEGER)), total(PRODUCT), group_by=(col("k"),))):
        assert plan_fused(q, [t], "pinned", 132).by_top is None
    for mode in ("pageable", "resident"):
        assert plan_fused(query(Compare("<", col("k"), Literal(3_000, INTEGER)), total(PRODUCT)), [t], mode, 132).by_top is None


def test_the_top_byte_plan_left_uncut_only_where_its_bytes_could_not_matter():
    """FusedPlan._indexed_anyway's floor (the tested frames' top bytes, the undecided rows' low bits) is never more
    than the top-byte plan's bytes, and the warm choice without that plan is the one weighed with it: packed or by
    top byte by their bytes, then by index where the index reads fewer."""
    t = indexed_table()
    uncut = 0
    for z in (1, 2, 5, 10, 30, 60, 100, 300, 600, 1_000, 2_000, 3_000, 6_000, 9_990):
        for op in ("<", ">="):
            plan = plan_fused(query(Compare(op, col("k"), Literal(z, INTEGER)), total(PRODUCT)), [t], "pinned", 132)
            chosen = plan.choose()
            if plan.empty:  # (no frame to read: no top-byte plan, no list, nothing weighed)
                assert plan.top_plans is None and chosen is plan, (op, z)
                continue
            uncut += not plan.top_plans.made
            packed, top = plan.tables[0], plan.by_top[0]
            top_bytes = top.stream_bytes + top.zero_copy_bytes
            assert plan.top_plans.floors[0] <= top.frames_floor <= top_bytes
            assert packed.frames_floor <= packed.stream_bytes + packed.zero_copy_bytes
            frames = top if top_bytes < packed.stream_bytes + packed.zero_copy_bytes else packed
            by_index = packed.index_option is not None and packed.index_option.link_bytes < \
                frames.stream_bytes + frames.zero_copy_bytes
            assert chosen.tables[0].scan == ("index" if by_index else "sliced" if frames is top else "frames"), (op, z)
    assert uncut >= 3


def test_a_plan_whose_every_frame_the_zone_maps_rule_out_weighs_and_cuts_nothing():
    """Where the zone maps rule out every frame of every table, the plan is empty: no list or top byte is offered
    (no row for them to find), its choice and what it is worth reading weigh nothing, and no frame is cut to say
    which kernels it launches (none) — a new constant below a key's smallest value, SF 100's l_suppkey < 1, cut ten
    parts' frames for 3 ms to launch nothing."""
    t = indexed_table()
    t.columns["k"].get("sliced")
    below = int(t.columns["k"].zones()[0].min())
    for where in (Compare("<", col("k"), Literal(below, INTEGER)), Compare(">", col("k"), Literal(2**40, INTEGER))):
        plan = plan_fused(query(where, total(PRODUCT)), [t, t], "pinned", 132)
        assert plan.empty and plan.top_plans is None and all(tp.index_option is None for tp in plan.tables)
        assert plan.choose() is plan and plan.choose(runs=3) is plan and plan.worth_reading() == []
        assert fused.plan_builds(plan) == [] and not any(tp.cut.made for tp in plan.tables)
    some = plan_fused(query(Compare("<", col("k"), Literal(below + 1, INTEGER)), total(PRODUCT)), [t], "pinned", 132)
    assert not some.empty and some.top_plans is not None and some.tables[0].index_option is not None


def test_packed_frames_whose_floor_the_top_bytes_beat_are_never_cut_and_the_choice_is_the_one_weighed_exactly():
    """FusedPlan._choose_top cuts the top-byte plan first and the packed frames only where their floor (over the
    runs, what is on disk weighed) does not already lose to it: packed frames never cut are never chosen, and every
    choice, warm or over some runs, in every mode, is the one made with every cut made first."""
    t = table(400_000, seed=5)  # no lists: the frames alone, packed or by top byte
    t.columns["k"].get("sliced")  # its top bytes, derived in memory (a store reads them from disk)
    never_cut = 0
    for z in (1, 2, 5, 10, 30, 100, 300, 1_000, 3_000, 9_000, 9_990):
        for op in ("<", ">="):
            for mode in ("pinned", "pageable", "resident"):
                q = query(Compare(op, col("k"), Literal(z, INTEGER)), total(PRODUCT))
                for runs in (None, 1, 5):
                    lazy = plan_fused(q, [t], mode, 132)
                    chosen = lazy.choose(runs)
                    eager = plan_fused(q, [t], mode, 132)
                    for tp in eager.tables + (eager.by_top or []):  # every cut made before the choice
                        assert tp.frames_floor <= tp.stream_bytes + tp.zero_copy_bytes, (op, z, mode)
                    assert [tp.scan for tp in eager.choose(runs).tables] == [tp.scan for tp in chosen.tables], (op, z, mode, runs)
                    if lazy.top_plans is not None and lazy.top_plans.made and not lazy.tables[0].cut.made:
                        never_cut += 1
                        assert chosen.tables[0].scan == "sliced" and "at least" in chosen.scan_note, (op, z, mode, runs)
    assert never_cut >= 10


def test_frames_whose_floor_the_lists_beat_are_never_cut_and_the_choice_is_the_one_weighed_exactly():
    """TablePlan.frames_floor (the tested frames' bytes of the columns only the predicate reads, at their narrowest
    frame's width) is never more than the frames' bytes as cut, packed or by top byte, in any mode; where every
    table's lists read fewer bytes than it, the frames are never cut; and every choice, warm or over some runs,
    is the one made with every cut made first."""
    near, far = indexed_table(), table(400_000, seed=6, k_from=5_000)
    far.columns["k"].get("indexed")
    never_cut = 0
    for z in (1, 3, 30, 300, 3_000, 5_100, 9_000):
        for op in ("<", ">="):
            for mode in ("pinned", "pageable", "resident"):
                q = query(And((Compare(op, col("k"), Literal(z, INTEGER)), Compare("<", col("d"), Literal(9, INTEGER)))),
                          total(PRODUCT))
                for runs in (None, 1, 5):
                    lazy = plan_fused(q, [near, far], mode, 132)
                    chosen = lazy.choose(runs)
                    never_cut += not lazy.tables[0].cut.made
                    eager = plan_fused(q, [near, far], mode, 132)
                    for tp in eager.tables + (eager.by_top or []):  # every cut made before the choice
                        assert tp.frames_floor <= tp.stream_bytes + tp.zero_copy_bytes, (op, z, mode)
                    assert [tp.scan for tp in eager.choose(runs).tables] == [tp.scan for tp in chosen.tables], (op, z, mode, runs)
    assert never_cut >= 6


def test_a_part_the_zone_maps_rule_out_leaves_the_top_byte_plan_uncut():
    """A parted table whose other part holds no value the predicate can select (no frame to read, packed or by top
    byte): the part that does is scanned by index, and the frames' top-byte plan is never cut (SF 100's ten parts
    as generated, the mission at Z < 30: most parts ruled out)."""
    near, far = indexed_table(), table(400_000, seed=6, k_from=20_000)
    far.columns["k"].get("indexed")
    plan = plan_fused(query(Compare("<", col("k"), Literal(30, INTEGER)), total(PRODUCT)), [near, far], "pinned", 132)
    chosen = plan.choose()
    assert plan.top_plans is not None and not plan.top_plans.made and not plan.tables[1].chunks
    assert chosen.tables[0].scan == "index" and not chosen.tables[1].chunks and chosen.empty is False
    cut = plan_fused(query(Compare("<", col("k"), Literal(30, INTEGER)), total(PRODUCT)), [near, far], "pinned", 132)
    top = cut.by_top  # cut first: the same tables scanned the same way
    assert [tp.index is not None for tp in cut.choose().tables] == [tp.index is not None for tp in chosen.tables]
    assert top[1].stream_bytes + top[1].zero_copy_bytes == 0


def test_the_top_bytes_on_disk_are_read_once_they_pay_for_themselves():
    t = indexed_table()
    plan = plan_fused(query(Compare("<", col("k"), Literal(3_000, INTEGER)), total(PRODUCT)), [t], "pinned", 132)
    column = t.columns["k"]
    held = column.encodings.pop("sliced")
    column.stored, column.on_disk = ("packed", "sliced"), {"sliced": 50 << 20}
    column.load = lambda enc: held
    assert plan.choose(runs=1).tables[0].sliced is None
    assert [(c.name, e) for c, e in plan.choose(runs=1).worth_reading()] == [("k", "sliced")]
    assert plan.choose(runs=10_000).tables[0].sliced is not None


def test_a_hashed_runs_slots_in_any_order_read_back_into_the_cpu_references_rows():
    """A hashed run's read-back (codegen.read_hashed, then fused_partial and finalize) on the CPU: each group's
    words as the kernel leaves them in its slot (row count, 128-bit sums as two words, min and max as one),
    gathered in a hash table's order, not the index's, give the CPU reference's rows, ORDER BY and LIMIT too."""
    from gquery import answer
    from gquery.gpu.fused import FusedRun, TableRun
    from gquery.result import finalize

    t = table(20_000, 5)
    for order_by, limit in (((), None), (((2, True), (0, False)), 7)):
        q = query(Compare("<", col("k"), Literal(7000, INTEGER)), total(PRODUCT), Aggregate("count", None, BIGINT),
                  Aggregate("min", col("t"), DATE), Aggregate("max", col("q"), D2), group_by=(col("p"), col("s")))
        q = Query(q.sql, q.outputs, q.where, q.group_by, order_by, limit)
        plan = plan_fused(q, [t], "pinned", 132).choose(None)
        spec, tp = plan.spec, plan.tables[0]
        assert spec.hashed
        want = answer.cpu_answer(q, t)
        slots = codegen.accumulator_index(q, spec)
        keys, words = [], []
        for (p, s), states in want.partial.groups.items():  # each group's index and words, as the kernel makes them
            code = t.columns["s"].dictionary.index(s)
            keys.append((p // spec.group_steps[0] - tp.group_bases[0]) * spec.group_cards[1] + code - tp.group_bases[1])
            accumulator = [None] * len(spec.accumulators)
            for a, k, state in zip(q.aggregates, slots, states):
                if k is not None:
                    accumulator[k] = state[0]
            row = [states[1][0]]
            for a, value in zip(spec.accumulators, accumulator):
                row += [value % 2**64, (value >> 64) % 2**64] if a.kind == "sum" else [value % 2**64]
            words.append(row)
        order = np.random.default_rng(1).permutation(len(keys))  # a hash table's order
        index, counts, values, _ = codegen.read_hashed(spec, np.array(keys, np.int64)[order],
                                                    np.array(words, np.uint64)[order].reshape(-1))
        run = FusedRun([TableRun(tp, index, counts, values, 0, 0)], None, plan)
        assert finalize(q, answer.fused_partial(q, run)).rows == want.rows


def test_a_wide_keys_words_read_back_as_its_columns_values_and_nulls():
    """A three-word key (NULL flags, then each column's digit counted up from its base modulo 2^64) read back
    as the group columns' values, the type's two ends and a NULL among them: what the GPU's gather hands over."""
    from gquery.answer import table_partial
    from gquery.gpu.fused import TableRun

    plan = plan_fused(query(None, Aggregate("count", None, BIGINT), group_by=(col("p"), col("k"))), [table(p_hi=2**62)],
                      "pinned", 132)
    tp = plan.tables[0]
    base_p, base_k = tp.group_bases
    groups = [(-2**62, 1), (2**62 - 1, 9_999), (0, None), (base_p, base_k)]
    words = [[0 if k is not None else 2, (p - base_p) % 2**64, 0 if k is None else k - base_k] for p, k in groups]
    index = np.array(words, dtype=np.uint64).view(np.int64)  # the digits as the device's words
    counts = np.array([3, 1, 2, 5], dtype=np.int64)
    partial = table_partial(plan.query, plan.spec, TableRun(tp, index, counts, [], 0, 0))
    assert plan.spec.wide_keys and partial.groups == {(p, k): [[n]] for (p, k), n in zip(groups, counts.tolist())}


def test_a_comparisons_classes_are_kept_for_the_next_text_with_the_same_where():
    """fusedplan._compare_classes: a new text whose WHERE is the last one's (another aggregate, or constant in its
    select list) finds its frames classed (the same read-only classes), and its plan is the plan made with nothing
    kept; another constant in WHERE classes its frames anew."""
    from gquery.gpu import fusedplan

    clustered = table(1_000_000, sort_by="k")
    where = Compare("<", col("k"), Literal(3_000, INTEGER))  # (k: 1 to 9,999)
    first = plan_fused(query(where, total(PRODUCT)), [clustered], "pinned", 132)
    again = plan_fused(query(where, total(col("q"))), [clustered], "pinned", 132)
    assert again.tables[0].classes is first.tables[0].classes and not again.tables[0].classes.flags.writeable
    fusedplan._classings.clear()
    fresh = plan_fused(query(where, total(col("q"))), [clustered], "pinned", 132)
    assert (fresh.tables[0].classes == again.tables[0].classes).all()
    assert [dataclasses.astuple(c) for c in fresh.tables[0].chunks] == [dataclasses.astuple(c) for c in again.tables[0].chunks]
    other = plan_fused(query(Compare("<", col("k"), Literal(6_000, INTEGER)), total(col("q"))), [clustered], "pinned", 132)
    assert not (other.tables[0].classes == first.tables[0].classes).all()


def test_a_cut_kept_from_a_comparisons_few_frames_is_found_by_their_lists():
    """A comparison whose frames across its constant are few keeps them as lists (prune.SparseEstimate), no array a
    frame: a plan cuts its chunks from them, a later constant whose lists are the same finds that cut (compared by
    the lists), one whose lists differ cuts its own, each the plan made with nothing kept; and the classes a run
    writes from the lists are those classify gives a frame at a time."""
    from gquery.gpu import fusedplan

    rng = np.random.default_rng(9)
    t = table(1_000_000)
    values = {c: t.columns[c].values() for c in ("q", "p", "d", "t", "s")}
    k = rng.integers(5_000, 10_000, 1_000_000)
    k[rng.choice(1_000_000, 20, replace=False)] = 10  # a few rows below 15 in a few frames; a few more below 25
    k[rng.choice(1_000_000, 20, replace=False)] = 20
    t = Table.from_values({"k": k, **{c: v for c, v in values.items() if c != "s"}, "s": values["s"]}, SCHEMA)
    before = None
    for z in (15, 16, 25, 15):
        q = query(Compare("<", col("k"), Literal(z, INTEGER)), total(PRODUCT))
        kept = plan_fused(q, [t], "pinned", 132)
        tp = kept.tables[0]
        chunks = [dataclasses.astuple(c) for c in tp.chunks]
        assert tp.frames._sparse is not None and "classes" not in tp.frames.__dict__, z  # cut from the lists
        if z == 16:
            assert len(fusedplan._cuts) == before  # 15's lists: found, not cut
        before = len(fusedplan._cuts)
        written = np.full(tp.frame_count, 9, np.int8)
        tp.frames.write_classes(written)
        want = classify(lower(q.where, {}, {"k": (int(k.min()), int(k.max()))}), fusedplan.frame_zones(t, ["k"], t.rows))[0]
        assert written.tolist() == want.tolist() == tp.classes.tolist(), z
        fusedplan._cuts.clear()
        fresh = plan_fused(q, [t], "pinned", 132).tables[0]
        assert chunks == [dataclasses.astuple(c) for c in fresh.chunks], z
        assert (tp.stream_bytes, tp.zero_copy_bytes) == (fresh.stream_bytes, fresh.zero_copy_bytes), z
        before = len(fusedplan._cuts)


def test_a_cut_is_kept_for_the_next_constant_whose_frames_class_alike():
    """fusedplan._kept_cut: a new constant whose frames are classed as the last plan's (every frame tested, as
    generated) finds that plan's pieces and their bytes; one whose classes differ (a clustered column's bound
    moved a frame) cuts its own. Either way its plan is the plan made with nothing kept."""
    from gquery.gpu import fusedplan

    def plans(t, constants):
        out = []
        for z in constants:
            q = query(Compare("<", col("k"), Literal(z, INTEGER)), total(PRODUCT))
            kept = plan_fused(q, [t], "pinned", 132)
            fusedplan._cuts.clear()
            fresh = plan_fused(q, [t], "pinned", 132)
            out.append(kept)
            assert [dataclasses.astuple(c) for c in kept.tables[0].chunks] == \
                [dataclasses.astuple(c) for c in fresh.tables[0].chunks]
            assert (kept.tables[0].stream_bytes, kept.tables[0].zero_copy_bytes) == \
                (fresh.tables[0].stream_bytes, fresh.tables[0].zero_copy_bytes)
        return out

    scattered = table(1_000_000)
    plan_fused(query(Compare("<", col("k"), Literal(5_000, INTEGER)), total(PRODUCT)), [scattered], "pinned", 132).tables[0].chunks
    before = len(fusedplan._cuts)
    a, b = [plan_fused(query(Compare("<", col("k"), Literal(z, INTEGER)), total(PRODUCT)), [scattered], "pinned", 132)
            for z in (5_001, 5_002)]
    a.tables[0].chunks, b.tables[0].chunks
    assert "classes" not in b.tables[0].frames.__dict__  # found from its counts (every frame tested), not its classes
    assert (a.tables[0].classes == b.tables[0].classes).all() and len(fusedplan._cuts) == before  # found, not cut
    plans(scattered, (5_001, 5_002, 30))
    clustered = table(1_000_000, sort_by="k")
    made = plans(clustered, (2_000, 2_001, 20_000, 10**9, 2_000))  # (10**9: every frame passes whole)
    assert not (made[0].tables[0].classes == made[2].tables[0].classes).all()
    assert made[3].tables[0].frames.one_class == ALWAYS


# --- a new constant's plan keeps an earlier text's choices ---------------------------------------------------------
def _atom(rng, names=("k", "q", "t", "d")):
    """A random leaf of a predicate over the test table's integer-coded columns."""
    c = str(rng.choice(names))
    lo, hi = {"k": (1, 10_000), "q": (100, 5_000), "t": (8000, 10_500), "d": (0, 10)}[c]
    kind = rng.integers(0, 10)
    if kind < 6:
        return Compare(str(rng.choice(["<", "<=", ">", ">=", "=", "<>"])), col(c), Literal(int(rng.integers(lo - 5, hi + 5)), BIGINT))
    if kind < 8:
        return InList(col(c), tuple(Literal(int(v), BIGINT) for v in rng.integers(lo, hi + 1, int(rng.integers(1, 5)))),
                      bool(rng.integers(0, 2)))
    if kind < 9:
        return Compare("<", Arith("+", col(c), col("d"), BIGINT), Literal(int(rng.integers(lo, hi)), BIGINT))
    return Literal(bool(rng.integers(0, 2)), BOOLEAN)


def _predicate(rng, depth=0):
    if depth > 2 or rng.random() < 0.4:
        return _atom(rng)
    kind = rng.integers(0, 3)
    if kind == 2:
        return Not(_predicate(rng, depth + 1))
    return (And if kind == 0 else Or)(tuple(_predicate(rng, depth + 1) for _ in range(int(rng.integers(2, 4)))))


@pytest.mark.parametrize("seed", range(6))
def test_every_frame_is_proven_tested_or_passing_only_where_classify_classes_every_frame_so(seed):
    """prune.every_frame_classed says every frame is tested, from each column's values every frame holds
    (Column.common_range), or passes whole, from each column's range, only where classifying every frame's zone
    map classes each so (random predicates of every kind of atom, over tables as generated, of narrow frames and
    clustered), and proves most that are."""
    from gquery.prune import every_frame_classed, frame_zones

    rng = np.random.default_rng(seed)
    tables = [table(200_000, seed), table(200_000, seed + 100, sort_by="t"), table(5_000, seed)]
    proven, classed = {CHECK: 0, ALWAYS: 0}, {CHECK: 0, ALWAYS: 0}
    for _ in range(150):
        where = _predicate(rng)
        for t in tables:
            low = lower(where, {"s": ("A", "N", "R")}, t.ranges(list(where.columns())))
            if isinstance(low, Literal):
                assert not every_frame_classed(low, [{}], CHECK)
                continue
            classes, _ = classify(low, frame_zones(t, low.columns(), t.rows))
            for cls in (CHECK, ALWAYS):
                ranges = [{c: t.columns[c].common_range() if cls == CHECK else t.columns[c].range() for c in low.columns()}]
                if every_frame_classed(low, ranges, cls):
                    proven[cls] += 1
                    assert (classes == cls).all(), (where, cls)
                classed[cls] += bool((classes == cls).all())
    assert proven[CHECK] >= 40 and proven[CHECK] >= classed[CHECK] // 3, (proven, classed)
    assert proven[ALWAYS] >= 10, (proven, classed)  # (a frame passing whole by an OR of parts of its range: unproven)
    assert table(50_000, sort_by="k").columns["k"].common_range() is None  # clustered: no value in every frame


def _kernel_inputs(plan) -> list:
    """What a run of the plan reads of it besides the classes: each table's constants, group bases, top byte's
    buckets, scan and chunks (their frames and where each column's bytes come from), and the LIMIT cut."""
    return [(tp.constants, tp.group_bases, tp.scan, tp.index,
             None if tp.sliced is None else dataclasses.replace(tp.sliced, low_rows=0),
             [(c.first, c.end, c.always, c.streamed, c.zero_copy) for c in tp.chunks] if tp.index is None else None)
            for tp in plan.tables] + [plan.spec, plan.top, plan.hash_slots]


def test_a_new_constant_keeps_the_choices_of_an_earlier_plan_whose_every_frame_it_tests_too():
    """fusedplan._kept_choice: a plan whose every frame is tested, or passes whole, keeps its warm choice for its
    shape; a new constant proven to class every frame so too, selecting about as many rows, plans as that choice with
    its own constants, buckets and LIMIT (what its run reads equal to a plan made afresh), without classing a frame.
    A constant that rules out frames or selects many more rows plans afresh; another scan asked of a kept choice is
    the full plan's."""
    t = indexed_table(1_000_000)
    grouped = [table(1_000_000, 3)]
    shapes = [
        ([t], lambda z: query(Compare("<", col("k"), Literal(z, INTEGER)), total(PRODUCT)), (3_000, 3_001, 3_100, 2_990)),
        ([t], lambda z: query(And((Compare(">=", col("t"), Literal(z, DATE)), Compare("<", col("t"), Literal(z + 365, DATE)),
                                   Compare("<", col("q"), Literal(24, INTEGER)))), total(PRODUCT)), (9_000, 9_001, 9_030)),
        (grouped, lambda z: dataclasses.replace(query(Compare(">", col("p"), Literal(z, D2)), total(col("q")),
                                                      group_by=(col("k"),)), order_by=((1, False),), limit=z % 7 + 3),
         (-10**6, -10**6 + 1, -10**6 + 5)),
        # every frame passing whole: past the largest key, and a grouped LIMIT with no WHERE
        ([t], lambda z: query(Compare("<", col("k"), Literal(z, INTEGER)), total(PRODUCT)), (20_000, 20_001, 10**9)),
        (grouped, lambda z: dataclasses.replace(query(None, total(col("q")), group_by=(col("k"),)), order_by=((1, False),),
                                                limit=z), (3, 4, 9)),
    ]
    for tables, make, constants in shapes:
        choices: dict = {}
        first = plan_fused(make(constants[0]), tables, "pinned", 132, whole=True, choices=choices)
        assert first.kept_from is None and {tp.frames.one_class for tp in first.tables} in ({CHECK}, {ALWAYS})
        first.choose()
        assert len(choices) == 1  # kept: its warm choice, every frame tested
        for z in constants[1:]:
            kept = plan_fused(make(z), tables, "pinned", 132, whole=True, choices=choices)
            fresh = plan_fused(make(z), tables, "pinned", 132, whole=True)
            assert kept.kept_from == first.query.sql and kept.choose() is kept
            assert kept.tables[0].frames is first.tables[0].frames  # the earlier plan's frames: none classed for it
            assert _kernel_inputs(kept) == _kernel_inputs(fresh.choose()), z
            assert "earlier text of this shape" in kept.describe()
            for scan in ("frames", "sliced", "index"):  # another scan: the full plan's choice
                assert _kernel_inputs(kept.choose(scan=scan)) == _kernel_inputs(fresh.choose(scan=scan)), scan
    choices = {}
    mission = lambda z: query(Compare("<", col("k"), Literal(z, INTEGER)), total(PRODUCT))  # noqa: E731
    plan_fused(mission(3_000), [t], "pinned", 132, choices=choices).choose()
    for z in (5, 6_000, 10**6):  # frames ruled out, twice the rows, every frame passing whole: planned afresh
        again = plan_fused(mission(z), [t], "pinned", 132, choices=choices)
        assert again.kept_from is None and _kernel_inputs(again.choose()) == _kernel_inputs(plan_fused(mission(z), [t], "pinned", 132).choose())
    clustered = table(1_000_000, sort_by="k")
    choices = {}
    plan_fused(mission(3_000), [clustered], "pinned", 132, choices=choices).choose()
    # frames ruled out: kept for its own predicate alone (below), not for a new constant's
    assert plan_fused(mission(3_001), [clustered], "pinned", 132, choices=choices).kept_from is None


def test_a_text_whose_predicate_lowers_as_an_earlier_texts_keeps_its_choices_whatever_the_classes():
    """A new constant in a select item or LIMIT leaves the predicate as an earlier text's lowered: that plan's choices
    are kept whatever its frames' classes (ruled out, tested and passing whole over a clustered table; tested and
    passing as generated), its frames not classed again, what its run reads equal to a plan made afresh. A new
    constant in WHERE plans afresh."""
    clustered, grouped = [table(1_000_000, 4, sort_by="k")], [table(1_000_000, 5, sort_by="t")]

    def mission(z, c):  # SUM(q * (p - c)) WHERE k < z
        scaled = Arith("*", col("q"), Arith("-", col("p"), Literal(c, INTEGER), decimal(16, 2)), decimal(18, 4))
        return query(Compare("<", col("k"), Literal(z, INTEGER)), total(scaled))

    def grouped_by_k(limit, c):  # SUM(q * (1 - d)) GROUP BY k WHERE t <= 9_000 ORDER BY 2 DESC LIMIT limit
        charge = Arith("*", col("q"), Arith("-", Literal(c, INTEGER), col("d"), decimal(16, 2)), decimal(18, 4))
        return dataclasses.replace(query(Compare("<=", col("t"), Literal(9_000, DATE)), total(charge), group_by=(col("k"),)),
                                   order_by=((1, True),), limit=limit)

    for tables, make, texts in [(clustered, mission, [(3_000, 1), (3_000, 2), (3_000, 7)]),
                                (grouped, grouped_by_k, [(10, 1), (10, 3), (25, 3), (4, 2)])]:
        choices: dict = {}
        first = plan_fused(make(*texts[0]), tables, "pinned", 132, whole=True, choices=choices)
        assert len({int(c) for c in np.unique(first.tables[0].frames.classes)}) >= 2  # of several classes
        first.choose()
        for text in texts[1:]:
            kept = plan_fused(make(*text), tables, "pinned", 132, whole=True, choices=choices)
            fresh = plan_fused(make(*text), tables, "pinned", 132, whole=True)
            assert kept.kept_from == first.query.sql and kept.choose() is kept, text
            assert kept.tables[0].frames is first.tables[0].frames  # the earlier plan's frames: none classed again
            assert _kernel_inputs(kept) == _kernel_inputs(fresh.choose()), text
            assert "predicate lowered as by the plan of an earlier text" in kept.describe()
            for scan in ("frames", "sliced"):  # another scan: the full plan's choice
                assert _kernel_inputs(kept.choose(scan=scan)) == _kernel_inputs(fresh.choose(scan=scan)), scan
        moved = make(texts[0][0] + 1, texts[0][1]) if make is mission else None
        if moved is not None:  # a new constant in WHERE: planned afresh
            again = plan_fused(moved, tables, "pinned", 132, whole=True, choices=choices)
            assert again.kept_from is None and _kernel_inputs(again.choose()) == _kernel_inputs(
                plan_fused(moved, tables, "pinned", 132, whole=True).choose())


def test_a_new_constant_in_an_and_term_that_tests_every_frame_keeps_the_choices_of_a_plan_of_several_classes():
    """Q6's shape over a table clustered by its date: the dates rule frames out and the quantity's bound tests every
    frame of the rest, so a new bound (each AND term that differs proven to test every frame, before and now) classes
    every frame as the earlier plan did: its choices kept, its frames not classed again, what its run reads equal to a
    plan made afresh. A new date (frames ruled out elsewhere) or a bound no frame passes (no frame tested) plans
    afresh."""
    tables = [table(1_000_000, 6, sort_by="t")]

    def q6(day, bound):  # SUM(q * p) WHERE t >= day AND t < day + 365 AND q < bound
        return query(And((Compare(">=", col("t"), Literal(day, DATE)), Compare("<", col("t"), Literal(day + 365, DATE)),
                          Compare("<", col("q"), Literal(bound, INTEGER)))), total(PRODUCT))

    choices: dict = {}
    first = plan_fused(q6(9_000, 24), tables, "pinned", 132, whole=True, choices=choices)
    assert {int(c) for c in np.unique(first.tables[0].frames.classes)} == {NEVER, CHECK}
    first.choose()
    for bound in (26, 28, 22):  # (selecting within KEPT_SHARE of the first bound's rows)
        kept = plan_fused(q6(9_000, bound), tables, "pinned", 132, whole=True, choices=choices)
        fresh = plan_fused(q6(9_000, bound), tables, "pinned", 132, whole=True)
        assert kept.kept_from == first.query.sql and kept.choose() is kept, bound
        assert kept.tables[0].frames is first.tables[0].frames
        assert np.array_equal(kept.tables[0].frames.classes, fresh.tables[0].frames.classes)
        assert _kernel_inputs(kept) == _kernel_inputs(fresh.choose()), bound
        assert "each AND term that differs proven to test every frame" in kept.describe()
    for text in (q6(9_001, 24), q6(9_000, 1)):  # other frames ruled out; no frame tested
        again = plan_fused(text, tables, "pinned", 132, whole=True, choices=choices)
        assert again.kept_from is None and _kernel_inputs(again.choose()) == _kernel_inputs(
            plan_fused(text, tables, "pinned", 132, whole=True).choose())
