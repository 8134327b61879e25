"""A query's shape → the source of one fused kernel, composed from the tile primitives of
cuda/fused.cuh, so the kernel body reads like the plan: decide a frame's rows by its predicate
columns, then decode the value columns of the rows that passed and accumulate.

The source depends only on the shape: which columns, the predicate's and aggregates' expression
trees, their types and scales, the number of groups. Every constant (Z, dates, bounds, a string's
code in a part's dictionary, the 1 of 1 - l_discount) is a kernel argument, so a new constant never
recompiles; the compile cache is keyed by the source text (gpu/kernels.py).

Arithmetic is exact by construction: each node is computed in 64 bits where its range (from the
columns' zone maps and the constants, query.bounds) proves every value fits, else in 128 bits; a
value that could pass 2^127 is refused here (the CPU answers). A sum whose rows could together pass
2^127 is kept as two 128-bit sums, of its values' low 64 bits and of their high bits.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass, replace

import numpy as np

from gquery.errors import GqueryError
from gquery.query import (And, Arith, Cast, Column, Compare, Expr, InList, IsNull, Literal, Negate, Not, Or, Query,
                          Recode, bounds, hash_once, scale_of)
from gquery.result import python_values

I64_LIMIT = 2**63
I128_LIMIT = 2**127
MAX_GROUPS = 1024  # groups a block accumulates in shared memory
SHARED_ACC_BYTES = 40 << 10  # what the groups' accumulators may take of a block's shared memory
# Past those, a query's groups accumulate in device memory (each warp's rows of one group added by one
# lane's atomics, as in shared memory), up to this many bytes of accumulator words over all its tables
# (they are copied in, initial, and back with the answer): past it the CPU answers
GLOBAL_ACC_BYTES = 256 << 20
# Past that, a group's words are found by its key in a hash table in device memory (hashed): a key is the dense
# index, one word, where it stays below HASH_KEY_LIMIT; past it (a BIGINT key's whole range, two wide columns) the
# key is three words, its NULL flags and each column's digit (wide_keys); the table (twice the slots of the groups a
# run can select) may take up to HASH_ACC_BYTES over all its tables, else the CPU answers
HASH_KEY_LIMIT = 2**62
HASH_ACC_BYTES = 16 << 30
HASH_PROBES = 4096  # slots a key probes at most: past them its rows are counted, and the run refused
IN_INLINE = 16  # an IN list this long or shorter is tested value by value; longer, searched in a sorted set
FEW_WORDS = 1 << 14  # a table of groups' words this small is read back by one copy, its words views of it
TINY_WORDS = 256  # and this small as Python integers: a NumPy call costs more than a few words (a total's three)


class NotOnGpu(GqueryError):
    """A query of the class that the fused kernel does not run (the message says why): the CPU answers."""


VALUE_WORDS = {"sum": 2, "wide": 4, "min": 1, "max": 1, "count": 0}  # an accumulator's value words, by its kind


@dataclass(frozen=True)
class Accumulator:
    """One running aggregate of a group: 'sum' (a 128-bit sum: 2 words), 'wide' (two: 4 words),
    'min' or 'max' (one signed 64-bit word), 'count' (no value word). `code` is its argument, in the
    kernel's terms. `valid`: where its argument reads a column with NULLs, the C test that a row's
    argument is not NULL (ok<slot> of each such column); it then takes those rows only, and counts
    them in one word more, after its value's."""

    kind: str
    code: str
    ctype: str
    valid: str = ""

    @property
    def value_words(self) -> int:
        return VALUE_WORDS[self.kind]

    @functools.cached_property  # read a group at a time, a word at a time: found once
    def words(self) -> int:
        return self.value_words + bool(self.valid)


@hash_once  # a dict key of every run's lookups (kernels, images, accumulators)
@dataclass(frozen=True)
class KernelSpec:
    """The shape of a fused kernel: everything its source depends on."""

    columns: tuple[str, ...]  # kernel column slots, predicate columns first
    predicate_slots: tuple[int, ...]
    value_slots: tuple[int, ...]
    predicate: str  # C boolean expression of v<slot> and k<constant>; "" for no predicate
    constants: int
    set_slots: tuple[int, ...]  # constants that are arrays (a long IN list's set, a rank table): a pointer, a length
    accumulators: tuple[Accumulator, ...]
    group_slots: tuple[int, ...]  # group columns' slots (0 to 2)
    group_cards: tuple[int, ...]  # values a group column may take in a part: the groups are their product
    group_steps: tuple[int, ...] = ()  # what every value of a group column is a multiple of (its common factor)
    hashed: bool = False  # groups too many for a dense array: a group's words are found by its index in a hash table
    wide_keys: bool = False  # hashed, the index past HASH_KEY_LIMIT: a key of three words (hash_slot_wide in fused.cuh)
    nullable: tuple[int, ...] = ()  # slots of columns with NULLs: each a bit a row, n<slot> (ok<slot> at a row)
    comment: str = ""

    @functools.cached_property  # (cached properties: a frozen dataclass's fields never change)
    def groups(self) -> int:
        g = 1
        for c in self.group_cards:
            g *= c
        return g

    @property
    def key_words(self) -> int:
        """Words of a hashed slot's key: the index, or a wide key's state (its NULL flags) and two digits."""
        return 3 if self.wide_keys else 1

    @functools.cached_property
    def words(self) -> int:
        """Accumulator words a group: its row count, then each accumulator's."""
        return 1 + sum(a.words for a in self.accumulators)

    @functools.cached_property
    def in_shared(self) -> bool:
        """A block's groups fit its shared memory (else they accumulate in device memory)."""
        return not self.hashed and self.groups <= MAX_GROUPS and self.groups * self.words * 8 <= SHARED_ACC_BYTES


class _Emitter:
    """Walks expression trees into C, numbering constants as it meets them: the same walk over a
    part's lowered tree gives that part's constants in the same order."""

    def __init__(self, slots: dict[str, int], ranges: dict[str, tuple[int, int]], nullable=frozenset()):
        self.slots, self.ranges, self.nullable = slots, ranges, nullable
        self.bounds: dict = {}  # each node's range, found once (query.bounds)
        self.values: list = []  # ints, and tuples for sets
        self.set_slots: list[int] = []

    def known(self, e: Expr) -> str:
        """The C test that e is not NULL at a row (every column with NULLs it reads holds a value); "" for always."""
        return " && ".join(f"ok{self.slots[c]}" for c in dict.fromkeys(e.columns()) if c in self.nullable)

    def truth(self, e: Expr, value: bool = True) -> str:
        """C for the rows where predicate e is `value` (TRUE or FALSE) by SQL's three truth values, as
        cpu._Rows.truth decides them: a comparison or IN neither where a column it reads is NULL, NOT swaps,
        AND and OR by Kleene's rules, IS NULL true or false. Constants are numbered in `boolean`'s order."""
        if isinstance(e, Not):
            return self.truth(e.arg, not value)
        if isinstance(e, (And, Or)):
            joint = " && " if isinstance(e, And) == value else " || "
            return "(" + joint.join(self.truth(a, value) for a in e.args) + ")"
        if isinstance(e, IsNull):
            held = self.known(e.arg) or "true"
            return f"(!({held}))" if value else f"({held})"
        if isinstance(e, Literal):
            return "true" if bool(e.value) == value else "false"
        atom = self.boolean(e)
        known = self.known(e)
        test = atom if value else f"(!{atom})"
        return f"({known} && {test})" if known else test

    def const(self, v: int) -> str:
        if not -I64_LIMIT <= v < I64_LIMIT:
            raise NotOnGpu(f"the constant {v} does not fit 64 bits")
        self.values.append(v)
        return f"k{len(self.values) - 1}"

    def const_set(self, values) -> str:
        """A long IN list's constants as one sorted set in memory (a kernel's parameters hold 4 KB at most)."""
        out = sorted({int(v) for v in values})
        if out and not (-I64_LIMIT <= out[0] and out[-1] < I64_LIMIT):
            raise NotOnGpu("an IN list's constant does not fit 64 bits")
        self.values.append(tuple(out))
        self.set_slots.append(len(self.values) - 1)
        return f"k{len(self.values) - 1}"

    def const_table(self, values) -> str:
        """A table of constants looked up by a column's code (a Recode's ranks), in memory as a set is."""
        out = tuple(int(v) for v in values)
        self.values.append(out)
        self.set_slots.append(len(self.values) - 1)
        return f"k{len(self.values) - 1}"

    def wide(self, e: Expr) -> bool:
        lo, hi = bounds(e, self.ranges, self.bounds)
        if max(-lo, hi) >= I128_LIMIT:
            raise NotOnGpu(f"{e} may pass 128 bits")
        return max(-lo, hi) >= I64_LIMIT

    def number(self, e: Expr) -> tuple[str, str]:
        """(C expression, C type) of a numeric node's unscaled value."""
        if isinstance(e, Column):
            return f"v{self.slots[e.name]}", "long long"
        if isinstance(e, Literal):
            return self.const(int(e.value)), "long long"
        if isinstance(e, Recode):  # a code's rank: the table holds one a code of the part's dictionary
            code, _ = self.number(e.arg)
            return f"{self.const_table(e.table)}[{code}]", "long long"
        ctype = "i128" if self.wide(e) else "long long"
        if isinstance(e, Negate):
            code, _ = self.number(e.arg)
            return f"(-({ctype}){code})", ctype
        if isinstance(e, Cast):
            code, _ = self.number(e.arg)
            return _scaled(code, scale_of(e.type) - scale_of(e.arg.type), ctype), ctype
        if isinstance(e, Arith):
            left, _ = self.number(e.left)
            right, _ = self.number(e.right)
            if e.op != "*":
                s = scale_of(e.type)
                left, right = _scaled(left, s - scale_of(e.left.type), ctype), _scaled(right, s - scale_of(e.right.type), ctype)
            return f"(({ctype}){left} {e.op} ({ctype}){right})", ctype
        raise NotOnGpu(f"{type(e).__name__} is not arithmetic the fused kernel computes")

    def boolean(self, e: Expr) -> str:
        if isinstance(e, Literal):
            return "true" if e.value else "false"
        if isinstance(e, And):
            return "(" + " && ".join(self.boolean(a) for a in e.args) + ")"
        if isinstance(e, Or):
            return "(" + " || ".join(self.boolean(a) for a in e.args) + ")"
        if isinstance(e, Not):
            return f"(!{self.boolean(e.arg)})"
        if isinstance(e, InList):
            x, _ = self.number(e.arg)
            if len(e.values) > IN_INLINE:  # searched in a sorted set in memory
                k = self.const_set(v.value for v in e.values)
                test = f"in_set({x}, {k}, {k}n)"
            else:
                test = "(" + " || ".join(f"{x} == {self.const(int(v.value))}" for v in e.values) + ")"
            return f"(!{test})" if e.negated else test
        if isinstance(e, Compare):
            op = "!=" if e.op == "<>" else "==" if e.op == "=" else e.op
            s = max(scale_of(e.left.type), scale_of(e.right.type))
            lb, rb = bounds(e.left, self.ranges, self.bounds), bounds(e.right, self.ranges, self.bounds)
            kl, kr = 10 ** (s - scale_of(e.left.type)), 10 ** (s - scale_of(e.right.type))
            reach = max(abs(lb[0]) * kl, abs(lb[1]) * kl, abs(rb[0]) * kr, abs(rb[1]) * kr)
            if reach >= I128_LIMIT:
                raise NotOnGpu(f"{e} compares values that may pass 128 bits")
            ctype = "i128" if reach >= I64_LIMIT else "long long"
            left, _ = self.number(e.left)
            right, _ = self.number(e.right)
            return f"({_scaled(left, s - scale_of(e.left.type), ctype)} {op} {_scaled(right, s - scale_of(e.right.type), ctype)})"
        raise NotOnGpu(f"{type(e).__name__} is not a predicate the fused kernel tests")


def _scaled(code: str, k: int, ctype: str) -> str:
    """code times 10^k in ctype. 10^19 and past are no long long: multiplied in 128 bits, as a product of long long
    powers, then held in ctype (the node's range says the product fits it: a column of zeros cast to DECIMAL(38,20))."""
    if not k:
        return f"(({ctype}){code})"
    if 10**k < I64_LIMIT:
        return f"(({ctype}){code} * {10**k}LL)"
    powers = " * ".join(f"(i128){10**p}LL" for p in [18] * (k // 18) + [k % 18] * (k % 18 > 0))
    return f"(({ctype})((i128){code} * {powers}))"


def kernel_spec(query: Query, lowered: Expr | None, ranges: dict[str, tuple[int, int]], rows: int,
                group_cards: tuple[int, ...], group_steps: tuple[int, ...] = (), tables: int = 1,
                nullable=frozenset()) -> tuple[KernelSpec, list[int]]:
    """The kernel's shape for a query, and one part's constants. `lowered`: the part's predicate
    (prune.lower); `ranges`: every column's range over all parts (so every part gets the same
    shape); `rows`: the most rows a part has (what a sum may add up to); `group_cards`: values each
    group column may take within a part, in multiples of its `group_steps` (1 where not given);
    `tables`: how many tables' accumulator words a run keeps; `nullable`: the columns with NULLs in
    any part (the predicate then has three truth values, and an aggregate over one takes the rows
    where its argument is not NULL; a group column with NULLs is not the kernel's)."""
    predicate_columns = [] if lowered is None else list(lowered.columns())
    value_columns = [c for c in query.value_columns() if c not in predicate_columns]
    columns = tuple(predicate_columns + value_columns)
    slots = {c: i for i, c in enumerate(columns)}
    nullable = frozenset(c for c in nullable if c in slots)
    em = _Emitter(slots, ranges, nullable)
    predicate = "" if lowered is None else em.truth(lowered) if nullable & set(predicate_columns) else em.boolean(lowered)
    accumulators, seen = [], {}
    for a in query.aggregates:
        if a.arg is None or (a.func == "count" and not em.known(a.arg)):
            continue  # COUNT(*), or of a value never NULL: the group's rows
        kind = "sum" if a.func in ("sum", "avg") else a.func
        key = (kind, a.arg)
        if key in seen:
            continue
        if kind == "count":
            seen[key] = len(accumulators)
            accumulators.append(Accumulator("count", "1", "long long", em.known(a.arg)))
            continue
        code, ctype = em.number(a.arg)
        lo, hi = bounds(a.arg, ranges, em.bounds)
        if kind in ("min", "max") and ctype != "long long":
            raise NotOnGpu(f"{a} takes values past 64 bits")
        if kind == "sum" and max(-lo, hi) * max(rows, 1) >= I128_LIMIT:
            kind = "wide"
        seen[key] = len(accumulators)
        accumulators.append(Accumulator(kind, code, ctype, em.known(a.arg)))
    group_slots = tuple(slots[c.name] for c in query.group_by)
    spec = KernelSpec(columns, tuple(range(len(predicate_columns))),
                      tuple(slots[c] for c in query.value_columns()), predicate, len(em.values), tuple(em.set_slots),
                      tuple(accumulators),
                      group_slots, tuple(group_cards), tuple(group_steps) or (1,) * len(group_slots),
                      nullable=tuple(sorted(slots[c] for c in nullable)), comment=_shape(query))
    if group_slots and spec.groups * spec.words * 8 * tables > GLOBAL_ACC_BYTES:  # too large a dense array: hashed
        spec = replace(spec, hashed=True, wide_keys=spec.groups >= HASH_KEY_LIMIT)
    return spec, em.values


def hash_slots(spec: KernelSpec, rows: int, tables: int) -> int:
    """The slots of a hashed spec's table: a power of two twice the groups a run can select (no more than the rows
    it can select, nor than the groups the key's range holds), so that every key finds a slot; fewer where the
    tables (and one more for the read-back) would take more than HASH_ACC_BYTES of device memory: then a run
    whose groups overflow its table is refused (gpu.fused), and the CPU answers. NotOnGpu below 1,024 slots."""
    def fits(slots: int) -> bool:
        return slots * (spec.words + spec.key_words) * 8 * (tables + 1) <= HASH_ACC_BYTES

    bound = max(1, min(spec.groups, rows))
    slots = 1 << (2 * bound - 1).bit_length()
    while not fits(slots) and slots > 1024:
        slots >>= 1
    if not fits(slots):
        raise NotOnGpu(f"up to {bound:,} groups of {spec.words} accumulator words in {tables} table(s): a hash table of "
                       f"{slots:,} slots takes more than "
                       f"{f'{HASH_ACC_BYTES / 2**30:g} GB' if HASH_ACC_BYTES >= 2**30 else f'{HASH_ACC_BYTES / 2**20:g} MB'} "
                       f"of device memory")
    return slots


# ORDER BY ... LIMIT k over hashed groups: the slots' best ORDER BY keys are taken in 2^bits partitions (by the
# group's index), at least TOP_PARTITIONS_PER_ROW a row kept and TOP_MIN_BITS bits; past TOP_MAX_BITS no cut
TOP_PARTITIONS_PER_ROW = 64
TOP_MIN_BITS, TOP_MAX_BITS = 12, 20
TOP_MIN_GROUPS = 1 << 16  # a dense array of fewer groups is copied back whole (a few MB at most)


@dataclass(frozen=True)
class TopCut:
    """ORDER BY's first key as the slot kernels read it from a filled slot (of a hash table, or of a dense array of
    at least TOP_MIN_GROUPS groups), and the LIMIT: a run reads back only the groups that can be among the first
    `limit` rows (gpu.fused). On the GPU each of 2^bits partitions of the groups
    keeps its greatest key (`order_key` in fused.cuh: ASC flipped, a 128-bit sum saturated to 64 bits, so that a
    greater value's key is never less); the limit-th greatest of those, T, has at least `limit` groups at or above
    it, each ordered before any group whose key is below T. So every group the rows can keep has a key of at least
    T, and only those cross the link; finalize orders them by every ORDER BY column, ties as ever."""

    limit: int
    word: int  # the slot's word holding the key: 0 the rows (COUNT), an accumulator's first word; -1 the index
    wide: bool  # a signed 128-bit sum in words word and word + 1
    shift: int  # a group column's digit of the index: (index >> shift) & mask
    mask: int
    ascending: bool
    key: str  # the ORDER BY column, for --explain

    @property
    def bits(self) -> int:
        return max(TOP_MIN_BITS, (TOP_PARTITIONS_PER_ROW * self.limit - 1).bit_length())

    def args(self) -> list[int]:
        """order_key's arguments after the slot: word, wide, shift, mask, ascending."""
        return [self.word, int(self.wide), self.shift, self.mask, int(self.ascending)]


NO_TOP_ARGS = [0, 0, 0, 0, 0]  # order_key's arguments where every filled slot is read back (threshold 0)


def top_cut(query: Query, spec: KernelSpec) -> TopCut | None:
    """The cut of a spec's groups (hashed, or dense and many: slot_kernels) before read-back where the query keeps
    the first LIMIT rows ordered by an aggregate that one slot word holds (COUNT, SUM, MIN, MAX; not AVG, nor a
    sum kept as two) or by a group column of integers, decimals or dates (its digit of the index orders as its
    values; not where the key is wide); None otherwise."""
    if not slot_kernels(spec) or not query.order_by or not query.limit:
        return None
    at, descending = query.order_by[0]
    expr = query.outputs[at].expr
    if expr in query.aggregates:
        a = expr
        k = accumulator_index(query, spec)[query.aggregates.index(a)]
        if a.func == "avg":
            return None
        if k is None:
            word, wide = 0, False
        else:
            x = spec.accumulators[k]
            if x.kind == "wide" or (x.valid and x.kind != "count") or a.type.name in ("VARCHAR", "DOUBLE"):
                return None  # a sum kept as two; a value NULL where no row had one (ordered last)
            word, wide = 1 + sum(x.words for x in spec.accumulators[:k]), spec.accumulators[k].kind == "sum"
        cut = TopCut(query.limit, word, wide, 0, 0, not descending, str(a))
    elif expr in query.group_by and expr.type.name not in ("VARCHAR", "DOUBLE") and not spec.wide_keys and \
            null_digit(spec, query.group_by.index(expr)) is None:  # a NULL key is ordered last either way
        j = query.group_by.index(expr)
        shift = sum(card.bit_length() - 1 for card in spec.group_cards[j + 1:])  # the cards are powers of two
        cut = TopCut(query.limit, -1, False, shift, spec.group_cards[j] - 1, not descending, expr.name)
    else:
        return None
    return cut if cut.bits <= TOP_MAX_BITS else None


def _shape(query: Query) -> str:
    """What the kernel computes, without the constants its source must not depend on."""
    aggs = ", ".join(f"{a.func.upper()}({'*' if a.arg is None else ','.join(a.arg.columns()) or 'constant'})"
                     for a in query.aggregates)
    group = f" GROUP BY {', '.join(c.name for c in query.group_by)}" if query.group_by else ""
    where = f" WHERE <predicate on {', '.join(query.predicate_columns())}>" if query.where is not None else ""
    return f"{aggs}{where}{group}"


@functools.lru_cache(maxsize=4096)
def accumulator_index(query: Query, spec: KernelSpec) -> tuple[int | None, ...]:
    """For each of query.aggregates, the index of its accumulator in spec (None: COUNT of the rows); found once
    a (query, spec): every run of a repeated text reads its accumulators by it."""
    nullable = {spec.columns[i] for i in spec.nullable}
    out, k, seen = [], 0, {}
    for a in query.aggregates:
        if a.arg is None or (a.func == "count" and not nullable & set(a.arg.columns())):
            out.append(None)
            continue
        kind = "sum" if a.func in ("sum", "avg") else a.func
        if (kind, a.arg) not in seen:
            seen[(kind, a.arg)] = k
            k += 1
        out.append(seen[(kind, a.arg)])
    return tuple(out)


# a sliced or listed column's low bits, by their bytes
LOW_TYPES = {1: "unsigned char", 2: "unsigned short", 4: "unsigned", 8: "unsigned long long"}
# Entries a lane of the list loop takes at once where a query has no groups: their rows, then their values,
# read in place together (the reads wait on the link, not on each other)
LIST_UNROLL = 4


def list_unroll(spec: KernelSpec) -> int:
    """Entries a lane of the list loop takes a step: LIST_UNROLL without groups, else one (the warp adds
    its entries to their groups together, a step at a time)."""
    return LIST_UNROLL if spec.groups == 1 else 1


@dataclass(frozen=True)
class SlicedKernel:
    """What the frame loop's source depends on where a predicate column is read by its top byte (the
    sliced encoding): its slot, and the bytes of a row's low bits (0: the bucket is the value)."""

    slot: int
    low_bytes: int


def _column_params(spec: KernelSpec, sliced: SlicedKernel | None = None) -> list[str]:
    """Each column's words, frame metadata, word base and common factor, and a column with NULLs its validity
    from the chunk's first frame (32 words a frame, a bit a row); a sliced column: its top bytes, low bits,
    reference, bucket and 256-bit mask of undecided buckets); the constants; the group bases."""
    params = [f"const unsigned* __restrict__ w{i}, const longlong2* __restrict__ m{i}, long long b{i}, long long f{i}"
              + (f", const unsigned* __restrict__ n{i}" if i in spec.nullable else "")
              if sliced is None or i != sliced.slot else
              f"const unsigned char* __restrict__ top{i}, const {LOW_TYPES.get(sliced.low_bytes, 'unsigned char')}* "
              f"__restrict__ low{i}, long long r{i}, long long z{i}, u64 u{i}_0, u64 u{i}_1, u64 u{i}_2, u64 u{i}_3"
              for i in range(len(spec.columns))]
    params += [f"const long long* __restrict__ k{j}, long long k{j}n" if j in spec.set_slots else f"long long k{j}"
               for j in range(spec.constants)]
    return params + [f"long long g{j}" for j in range(len(spec.group_slots))]


def _header(spec: KernelSpec, name: str, params: list[str], block_threads: int, note: str = "") -> list[str]:
    init = ", ".join(f"{w}ull" for w in _group_initial(spec))
    return [f"// {spec.comment}{note}", f"// columns: {', '.join(f'v{i} = {c}' for i, c in enumerate(spec.columns))}",
            '#include "fused.cuh"', "",
            *([f"#define GROUPS {spec.groups}"] if spec.in_shared else []), f"#define WORDS {spec.words}",
            f"__constant__ u64 INITIAL[WORDS] = {{{init}}};  // a group's words before any row", "",
            f'extern "C" __global__ void __launch_bounds__({block_threads})',
            f"{name}(" + ",\n      ".join(params) + ") {"]


def _prologue(spec: KernelSpec) -> list[str]:
    if spec.in_shared:
        body = ["    FUSED_BEGIN(GROUPS, WORDS, INITIAL);"]
    else:  # the table's words in device memory, set to INITIAL before the kernel: no block-wide merge at the end
        body = ["    FUSED_BEGIN_IN_DEVICE_MEMORY(acc);"]
    return body + ([f"    {_register(a, k)}" for k, a in enumerate(spec.accumulators)] if spec.groups == 1 else [])


def source(spec: KernelSpec, block_threads: int, sliced: SlicedKernel | None = None) -> str:
    """The kernel's CUDA source: a warp a frame, over the frames the plan's chunk covers (`sliced`: one
    predicate column read by its top byte a row, sliced_value, instead of its packed frames)."""
    if sliced is not None and sliced.slot in spec.value_slots:
        raise ValueError("a sliced column stands in for a predicate column only (its values are not read exactly)")
    if sliced is not None and spec.nullable:
        raise ValueError("a query over a column with NULLs reads every column by its frames")
    params = _column_params(spec, sliced) + ["const signed char* __restrict__ classes", "long long frames", "long long rows",
                                     "u64* __restrict__ acc", "long long in_place", "u64* __restrict__ counters"] + _hash_params(spec)
    lines = _header(spec, "fused", params, block_threads,
                    f" (predicate column {spec.columns[sliced.slot]} by its top byte)" if sliced else "")
    body = _prologue(spec)
    body += ["    for (long long f = first_frame(); f < frames; f += frame_stride()) {",
             "        const int cls = classes ? classes[f] : ALWAYS;",
             "        if (cls == NEVER) continue;",
             "        const unsigned valid = frame_rows(f, rows);",
             "        unsigned mask = cls == ALWAYS ? lanes_below(valid) : 0u;"]
    if spec.predicate:
        body += ["        if (cls == CHECK) {"]
        packed = [i for i in spec.predicate_slots if sliced is None or i != sliced.slot]
        body += [f"            const Frame p{i} = frame_of(w{i}, m{i}, b{i}, f);" for i in packed]
        body += ["#pragma unroll 4",
                 "            for (int j = 0; j < 32; ++j) {",
                 "                const unsigned s = 32 * j + lane_id();"]
        body += [f"                const long long v{i} = value_at(p{i}, s, f{i});" if i in packed else
                 f"                const long long v{i} = sliced_value(top{i}, low{i}, r{i}, z{i}, u{i}_0, u{i}_1, u{i}_2, "
                 f"u{i}_3, f * FRAME_ROWS + s, s < valid);" for i in spec.predicate_slots]
        body += [f"                const bool ok{i} = {_known_at(i, 'j', 'lane_id()')};" for i in spec.predicate_slots
                 if i in spec.nullable]
        body += [f"                mask |= (unsigned)(s < valid && {spec.predicate}) << j;",
                 "            }",
                 "        }"]
    body += ["        if (!__any_sync(FULL_MASK, mask)) continue;  // late materialization: no value byte for a frame that selects nothing",
             "        frames_read += 1;"]
    body += [f"        const Frame q{i} = frame_of(w{i}, m{i}, b{i}, f);" for i in spec.value_slots]
    if spec.groups == 1:  # each lane its selected rows, into its registers
        body += ["        for (unsigned left = mask; left; left &= left - 1) {",
                 "            const unsigned s = 32 * (__ffs(left) - 1) + lane_id();"]
        body += [f"            const long long v{i} = value_at(q{i}, s, f{i});" for i in spec.value_slots]
        body += [f"            const bool ok{i} = {_known_at(i, 's >> 5', 's & 31')};" for i in _counted_slots(spec)]
        body += ["            rows_selected += 1;"]
        body += [f"            {_accumulate(a, k)}" for k, a in enumerate(spec.accumulators)]
        body += ["        }", "    }"]
    else:  # the warp a slot at a time: the lanes of one group add up together, one atomic a group
        body += _grouped_slot(spec)
        body += ["    }"]
    return "\n".join(lines + body + _epilogue(spec, "count_in_place(in_place, rows_selected, frames_read);")
                     + _slot_kernels(spec)) + "\n"


@dataclass(frozen=True)
class IndexKernel:
    """What the list loop's source depends on besides the query's shape: the slot of the column whose
    bucket lists it walks, and the bytes of a listed row's low bits (0: the bucket is the value)."""

    slot: int
    low_bytes: int


def list_source(spec: KernelSpec, index: IndexKernel, block_threads: int) -> str:
    """The kernel's CUDA source over a column's bucket lists (an index scan): a lane an entry of the
    buckets the plan chose, the indexed column's value from its bucket and low bits (read in list order),
    every other column read in place at the entry's row, the whole predicate tested, then accumulated as
    the frame loop does. The row ids are 32-bit (a table of up to 2^32 rows)."""
    if spec.nullable:
        raise ValueError("a query over a column with NULLs reads every column by its frames")
    k = index.slot
    params = _column_params(spec) + [
        "const unsigned* __restrict__ ids", f"const {LOW_TYPES.get(index.low_bytes, 'unsigned char')}* __restrict__ lows",
        "const long long* __restrict__ starts", "int buckets", "long long first_value", "long long bucket",
        "long long entries", "u64* __restrict__ acc", "long long in_place", "u64* __restrict__ counters"] + _hash_params(spec)
    lines = _header(spec, "fused_list", params, block_threads, f" (index scan on {spec.columns[k]})")
    body = ["    __shared__ long long bucket_start[MAX_BUCKETS + 1];  // entries from the first, a bucket each",
            "    for (int b = threadIdx.x; b <= buckets; b += blockDim.x) bucket_start[b] = starts[b];"]
    body += _prologue(spec)  # its __syncthreads also publishes bucket_start
    others = [i for i in spec.predicate_slots if i != k]
    values = [i for i in spec.value_slots if i not in spec.predicate_slots and i != k]
    low = f" + (long long){'__ldg(lows + e)' if index.low_bytes else '0'}"
    unroll = list_unroll(spec)
    at_once = spec.groups == 1  # the entries' values are read after every entry's predicate: no frame needed here

    def entry(pad: str, e: str) -> list[str]:
        """One entry's row, the indexed value, the other predicate columns read in place, and `sel`."""
        out = [f"{pad}const long long e = {e};",
               f"{pad}const bool listed = e < entries;",
               f"{pad}const long long row = listed ? (long long)__ldg(ids + e) : 0;",
               f"{pad}const long long v{k} = listed ? first_value + bucket * bucket_of(bucket_start, buckets, e)"
               f"{low if index.low_bytes else ''} : 0;"]
        if others or not at_once:  # the row's frame and slot, for the columns read in place here
            out += [f"{pad}const long long f = row >> 10;  // its frame, and its slot in it",
                    f"{pad}const unsigned s = (unsigned)(row & (FRAME_ROWS - 1));"]
        out += [f"{pad}const long long v{i} = listed ? value_at(frame_of(w{i}, m{i}, 0, f), s, f{i}) : 0;" for i in others]
        out += [f"{pad}reads += listed ? {len(others)} : 0;"] if others else []
        return out + [f"{pad}const bool sel = listed && {spec.predicate or 'true'};"]

    body += ["    u64 reads = 0;  // sectors read in place: each column's word at a row (its frames' metadata in device memory)",
             f"    for (long long w = first_frame(); {32 * unroll} * w < entries; w += frame_stride()) {{  // a warp "
             f"{32 * unroll} entries"]
    if spec.groups == 1:  # each lane `unroll` entries at once: their reads in flight together, then added up
        pad = " " * 12
        kept = [i for i in spec.value_slots if i == k or i in others]  # predicate columns an aggregate reads too
        body += [f"        long long row_[{unroll}];", f"        bool sel_[{unroll}];"]
        body += [f"        long long x{i}_[{unroll}];" for i in kept]
        body += ["#pragma unroll", f"        for (int u = 0; u < {unroll}; ++u) {{"]
        body += entry(pad, f"32 * ({unroll} * w + u) + lane_id()")
        body += [f"{pad}row_[u] = row;", f"{pad}sel_[u] = sel;"] + [f"{pad}x{i}_[u] = v{i};" for i in kept]
        body += ["        }"]
        body += [f"        long long x{i}_[{unroll}];" for i in values]
        if values:
            body += ["#pragma unroll", f"        for (int u = 0; u < {unroll}; ++u) {{  // every selected entry's values at once",
                     f"{pad}const long long f = row_[u] >> 10;",
                     f"{pad}const unsigned s = (unsigned)(row_[u] & (FRAME_ROWS - 1));"]
            body += [f"{pad}x{i}_[u] = sel_[u] ? value_at(frame_of(w{i}, m{i}, 0, f), s, f{i}) : 0;" for i in values]
            body += ["        }"]
        body += ["#pragma unroll", f"        for (int u = 0; u < {unroll}; ++u) {{", f"{pad}if (!sel_[u]) continue;"]
        body += [f"{pad}const long long v{i} = x{i}_[u];" for i in kept + values]
        body += [f"{pad}reads += {len(values)};" if values else "", f"{pad}rows_selected += 1;"]
        body += [f"{pad}{_accumulate(a, j)}" for j, a in enumerate(spec.accumulators)]
        body += ["        }"]
    else:
        body += entry(" " * 8, "32 * w + lane_id()")
        body += ["        const unsigned selected = __ballot_sync(FULL_MASK, sel);",
                 "        if (selected) {  // the warp's selected entries added to their groups together"]
        body += [f"            const long long v{i} = sel ? value_at(frame_of(w{i}, m{i}, 0, f), s, f{i}) : 0;" for i in values]
        body += [f"            reads += sel ? {len(values)} : 0;" if values else ""]
        body += _grouped_add(spec)
        body += ["        }"]
    body = [b for b in body if b]
    body += ["    }"]
    # the list loop reads no frame whole: frames_read stays 0 (counted, so the compiler sees it used)
    return "\n".join(lines + body + _epilogue(spec, "count_in_place(in_place, reads, frames_read);")
                     + _slot_kernels(spec)) + "\n"


def _epilogue(spec: KernelSpec, count: str) -> list[str]:
    """A query without groups adds its registers to the block's words; then the block's words are added to the
    table's (groups in device memory were added there already), and the in-place reads counted."""
    body = []
    if spec.groups == 1:
        body += ["    atomicAdd(group_acc, rows_selected);"]
        offset = 1
        for k, a in enumerate(spec.accumulators):
            body += [f"    {_flush_register(a, k, offset)}"]
            offset += a.words
    body += [f"    {count}"]
    if not spec.in_shared:
        return body + ["    __syncthreads();", "    flush_in_place(counters);", "}"]
    body += ["    __syncthreads();  // every warp's rows are in the block's words: add them to the table's",
             "    for (int group = threadIdx.x; group < GROUPS; group += blockDim.x) {",
             "        const u64* const from = group_acc + group * WORDS;",
             "        u64* const to = acc + (long long)group * WORDS;",
             "        if (from[0] == 0) continue;",
             "        atomicAdd(to, from[0]);"]
    offset = 1
    for a in spec.accumulators:
        if a.kind in ("sum", "wide"):
            body += [f"        atomic_add_128(to + {o}, from_words(from[{o}], from[{o + 1}]));"
                     for o in range(offset, offset + a.value_words, 2)]
        elif a.kind in ("min", "max"):
            body += [f"        atomic{'Min' if a.kind == 'min' else 'Max'}((long long*)(to + {offset}), (long long)from[{offset}]);"]
        if a.valid:  # the rows it took
            body += [f"        atomicAdd(to + {offset + a.value_words}, from[{offset + a.value_words}]);"]
        offset += a.words
    return body + ["    }", "    flush_in_place(counters);", "}"]


def _register(a: Accumulator, k: int) -> str:
    counted = f" u64 c{k} = 0;  // the rows whose argument is not NULL" if a.valid else ""
    if a.kind == "sum":
        return f"i128 a{k} = 0;{counted}"
    if a.kind == "wide":
        return f"i128 a{k} = 0, h{k} = 0;  // the values' low 64 bits, and their high bits" + (f"\n   {counted}" if a.valid else "")
    if a.kind == "count":
        return counted.strip()
    return f"long long a{k} = {'I64_MAX' if a.kind == 'min' else 'I64_MIN'};{counted}"


def _accumulate(a: Accumulator, k: int) -> str:
    if a.kind == "sum":
        add = f"a{k} += (i128){a.code};"
    elif a.kind == "wide":
        add = f"{{ const i128 x = (i128){a.code}; a{k} += (i128)(u64)x; h{k} += (i128)(long long)(x >> 64); }}"
    elif a.kind == "count":
        add = ""
    else:
        add = f"a{k} = {'min' if a.kind == 'min' else 'max'}(a{k}, (long long){a.code});"
    return f"if ({a.valid}) {{ {add + ' ' if add else ''}c{k} += 1; }}" if a.valid else add


def _grouped_slot(spec: KernelSpec) -> list[str]:
    """Slot 32 j + lane of every lane at once: each lane's row (where selected) decoded, its group and
    its contributions computed (identities where not selected); then for each group among the warp's
    rows, its lanes' contributions summed by shuffles and added by one lane with one atomic each.
    Rows of one group in a row (clustered data) cost one atomic a warp, not 32 on one address."""
    out = ["        for (int j = 0; j < 32; ++j) {",
           "            const bool sel = mask >> j & 1;",
           "            const unsigned selected = __ballot_sync(FULL_MASK, sel);",
           "            if (!selected) continue;",
           "            const unsigned s = 32 * j + lane_id();"]
    out += [f"            const long long v{i} = sel ? value_at(q{i}, s, f{i}) : 0;" for i in spec.value_slots]
    out += [f"            const bool ok{i} = {_known_at(i, 'j', 'lane_id()')};" for i in _counted_slots(spec)]
    return out + _grouped_add(spec) + ["        }"]


def _known_at(slot: int, word: str, bit: str) -> str:
    """C for whether the column in `slot` holds a value at a frame's row (bit `bit` of its validity's word `word`)."""
    return f"(__ldg(n{slot} + 32 * f + ({word})) >> ({bit}) & 1u) != 0"


def _counted_slots(spec: KernelSpec) -> list[int]:
    """The slots with NULLs an aggregate's argument or a group reads: their validity is read at each selected row."""
    named = " && ".join(a.valid for a in spec.accumulators if a.valid)
    return [i for i in spec.nullable if f"ok{i}" in named.split(" && ") or i in spec.group_slots]


def null_digit(spec: KernelSpec, j: int) -> int | None:
    """The digit of group column j that stands for NULL (its last), where the column has NULLs; else None."""
    return spec.group_cards[j] - 1 if spec.group_slots[j] in spec.nullable else None


def _grouped_add(spec: KernelSpec) -> list[str]:
    """A warp's selected rows (`sel`, their values v<slot> decoded) added to their groups: each lane's group
    and contributions (identities where not selected); then for each group among the warp's rows, its
    lanes' contributions summed by shuffles and added by one lane with one atomic each."""
    if spec.wide_keys:  # the key's NULL flags and digits; a warp's lanes of one group found by all three
        flags, digits = _wide_key(spec)
        out = [f"            const long long g = sel ? {flags} : -1;"]
        out += [f"            const u64 d{j} = sel ? {d} : 0;" for j, d in enumerate(digits)]
        match = ["const long long group = __shfl_sync(FULL_MASK, g, __ffs(todo) - 1);",
                 "const u64 group0 = __shfl_sync(FULL_MASK, d0, __ffs(todo) - 1);",
                 "const u64 group1 = __shfl_sync(FULL_MASK, d1, __ffs(todo) - 1);",
                 "const bool mine = sel && g == group && d0 == group0 && d1 == group1;"]
    else:
        out = [f"            const long long g = sel ? (long long)({_group_index(spec)}) : -1;"]
        match = ["const long long group = __shfl_sync(FULL_MASK, g, __ffs(todo) - 1);",
                 "const bool mine = sel && g == group;"]
    out.append("            rows_selected += sel;")
    for k, a in enumerate(spec.accumulators):
        taken = f"o{k}" if a.valid else "sel"  # a row it takes: selected, and its argument not NULL
        if a.valid:
            out.append(f"            const bool o{k} = sel && {a.valid};")
        if a.kind == "sum":
            out.append(f"            const i128 x{k} = {taken} ? (i128){a.code} : (i128)0;")
        elif a.kind == "wide":
            out.append(f"            const i128 w{k} = {taken} ? (i128){a.code} : (i128)0;")
            out.append(f"            const i128 x{k} = (i128)(u64)w{k}, y{k} = (i128)(long long)(w{k} >> 64);")
        elif a.kind in ("min", "max"):
            identity = "I64_MAX" if a.kind == "min" else "I64_MIN"
            out.append(f"            const long long x{k} = {taken} ? (long long){a.code} : {identity};")
    out += ["            for (unsigned todo = selected; todo;) {", *(f"                {m}" for m in match),
            "                const unsigned same = __ballot_sync(FULL_MASK, mine);",
            "                todo &= ~same;"]
    for k, a in enumerate(spec.accumulators):
        if a.kind in ("sum", "wide"):
            out.append(f"                const i128 t{k} = warp_sum(mine ? x{k} : (i128)0);")
            if a.kind == "wide":
                out.append(f"                const i128 u{k} = warp_sum(mine ? y{k} : (i128)0);")
        elif a.kind in ("min", "max"):
            identity = "I64_MAX" if a.kind == "min" else "I64_MIN"
            out.append(f"                const long long t{k} = warp_{a.kind}(mine ? x{k} : {identity});")
        if a.valid:
            out.append(f"                const unsigned c{k} = __popc(__ballot_sync(FULL_MASK, mine && o{k}));")
    if spec.hashed:  # the group's slot found by its index; the rows of a key without one (the table too small) counted
        find = (f"hash_slot_wide(keys, hash_mask, group, group0, group1, {HASH_PROBES}LL)" if spec.wide_keys
                else f"hash_slot(keys, hash_mask, group, {HASH_PROBES}LL)")
        out += [f"                const long long slot = lane_id() == 0 ? {find} : 0;",
                "                if (slot < 0) atomicAdd(counters + 2, (u64)__popc(same));  // the host refuses the run",
                "                if (lane_id() == 0 && slot >= 0) {  // warp_sum leaves the total in lane 0",
                "                    u64* const to = group_acc + slot * WORDS;"]
    else:
        out += ["                if (lane_id() == 0) {  // warp_sum leaves the total in lane 0",
                "                    u64* const to = group_acc + group * WORDS;"]
    out += ["                    atomicAdd(to, (u64)__popc(same));"]
    offset = 1
    for k, a in enumerate(spec.accumulators):
        if a.kind == "sum":
            out.append(f"                    atomic_add_128(to + {offset}, t{k});")
        elif a.kind == "wide":
            out.append(f"                    atomic_add_128(to + {offset}, t{k}); atomic_add_128(to + {offset + 2}, u{k});")
        elif a.kind in ("min", "max"):
            out.append(f"                    atomic{'Min' if a.kind == 'min' else 'Max'}((long long*)(to + {offset}), t{k});")
        if a.valid:
            out.append(f"                    if (c{k}) atomicAdd(to + {offset + a.value_words}, (u64)c{k});")
        offset += a.words
    out += ["                }", "            }"]
    return out


def _hash_params(spec: KernelSpec) -> list[str]:
    """A hashed spec's table of keys, a slot each (EMPTY_KEY where none; a wide key's three words), and its slots
    less one."""
    return ["long long* __restrict__ keys", "long long hash_mask"] if spec.hashed else []


def slot_kernels(spec: KernelSpec) -> bool:
    """The source carries the slot kernels (_slot_kernels): a hash table's, or a dense array's of many groups."""
    return spec.hashed or (bool(spec.group_slots) and spec.groups >= TOP_MIN_GROUPS)


def _slot_kernels(spec: KernelSpec) -> list[str]:
    """The kernels beside the scan over a table of groups' words (slot_kernels): one sets every slot's words to a
    group's INITIAL words before a run (and a hashed slot's key to EMPTY_KEY): megabytes of words set at the device's
    bandwidth, not copied over PCIe from a host image each run; then, for a hash table or a dense array
    (a slot's key its index where the group selected a row), one keeps each partition's greatest ORDER BY key
    (TopCut), and one gathers the filled slots whose key reaches a threshold (0: every one), keys and words in no
    order, adding up every filled slot's rows."""
    if not slot_kernels(spec):
        return []
    stride = "for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < slots; i += (long long)gridDim.x * blockDim.x)"
    order = "int word, int wide, int shift, long long mask, int ascending"
    n = spec.key_words  # a slot's key words: its state first (EMPTY_KEY where empty)
    slot_key = f"keys[i * {n}]" if spec.hashed else "acc[i * WORDS] ? i : EMPTY_KEY"  # dense: `keys` is not read
    partition = "top_partition_wide(keys + i * 3, bits)" if spec.wide_keys else "top_partition(key, bits)"
    key = "order_key(key, acc + i * WORDS, word, wide, shift, mask, ascending)"
    copy_key = (f"for (int w = 0; w < {n}; ++w) out_keys[at * {n} + w] = keys[i * {n} + w];" if spec.wide_keys
                else "out_keys[at] = key;")
    empty = ([f"        keys[i * {n}] = EMPTY_KEY;" if spec.wide_keys else "        keys[i] = EMPTY_KEY;"] if spec.hashed
             else [])  # dense: no keys
    init = ["", 'extern "C" __global__ void fused_init(u64* __restrict__ acc, long long* __restrict__ keys, long long slots) {',
            f"    {stride} {{", *empty,
            "        for (int w = 0; w < WORDS; ++w) acc[i * WORDS + w] = INITIAL[w];",
            "    }", "}"]
    return init + ["",
            'extern "C" __global__ void fused_slots_best(const long long* __restrict__ keys, const u64* __restrict__ acc, '
            "long long slots,",
            f"                                            u64* __restrict__ best, int bits, {order}) {{",
            f"    {stride} {{",
            f"        const long long key = {slot_key};",
            "        if (key == EMPTY_KEY) continue;",
            f"        u64* const mine = best + {partition};",
            f"        const u64 k = {key};",
            "        if (k > *(volatile u64*)mine) atomicMax((unsigned long long*)mine, (unsigned long long)k);",
            "    }", "}", "",
            'extern "C" __global__ void fused_slots_gather(const long long* __restrict__ keys, const u64* __restrict__ acc, '
            "long long slots,",
            "                                              long long* __restrict__ out_keys, u64* __restrict__ out_words, "
            "u64* __restrict__ filled, long long room,",
            f"                                              {order}, u64 threshold, u64* __restrict__ rows) {{",
            "    u64 mine = 0;  // this thread's filled slots' rows",
            f"    {stride} {{",
            f"        const long long key = {slot_key};",
            "        if (key == EMPTY_KEY) continue;",
            "        mine += acc[i * WORDS];",
            f"        if (threshold && {key} < threshold) continue;  // not among the rows LIMIT keeps",
            "        const u64 at = atomicAdd(filled, (u64)1);",
            "        if (at >= (u64)room) continue;  // counted, not written: the host refuses the run",
            f"        {copy_key}",
            "        for (int w = 0; w < WORDS; ++w) out_words[at * WORDS + w] = acc[i * WORDS + w];",
            "    }",
            "    if (mine) atomicAdd((unsigned long long*)rows, (unsigned long long)mine);",
            "}"]


def _flush_register(a: Accumulator, k: int, offset: int) -> str:
    counted = f" atomicAdd(group_acc + {offset + a.value_words}, c{k});" if a.valid else ""
    if a.kind == "sum":
        return f"atomic_add_128(group_acc + {offset}, a{k});{counted}"
    if a.kind == "wide":
        return f"atomic_add_128(group_acc + {offset}, a{k}); atomic_add_128(group_acc + {offset + 2}, h{k});{counted}"
    if a.kind == "count":
        return counted.strip()
    return f"atomic{'Min' if a.kind == 'min' else 'Max'}((long long*)(group_acc + {offset}), a{k});{counted}"


def _wide_key(spec: KernelSpec) -> tuple[str, list[str]]:
    """A wide key's C expressions: its NULL flags (bit j: group column j is NULL), and each column's digit as an
    unsigned word, (v_j / step_j) - g_j wrapped to 64 bits (a BIGINT's whole range is 2^64 values), 0 where NULL;
    the second 0 where one column groups."""
    flags, digits = [], []
    for j, (s, step) in enumerate(zip(spec.group_slots, spec.group_steps)):
        digit = f"((u64)(v{s} / {step}LL) - (u64)g{j})" if step != 1 else f"((u64)v{s} - (u64)g{j})"
        if s in spec.nullable:
            flags.append(f"(ok{s} ? 0LL : {1 << j}LL)")
            digit = f"(ok{s} ? {digit} : 0ull)"
        digits.append(digit)
    return " | ".join(flags) if flags else "0LL", (digits + ["0ull"])[:2]


def _group_index(spec: KernelSpec) -> str:
    """(v_a / step_a - g0) * card_b + (v_b / step_b - g1): the group's index from its columns' values (each a
    multiple of its step, so the division is exact) and a part's bases; a NULL key the column's last digit,
    card - 1 (null_digit: its cards leave it past every value's)."""
    terms = [f"(v{s} / {step}LL - g{j})" if step != 1 else f"(v{s} - g{j})"
             for j, (s, step) in enumerate(zip(spec.group_slots, spec.group_steps))]
    terms = [f"(ok{s} ? {t} : {spec.group_cards[j] - 1}LL)" if s in spec.nullable else t
             for j, (s, t) in enumerate(zip(spec.group_slots, terms))]
    if len(terms) == 1:
        return terms[0]
    return f"{terms[0]} * {spec.group_cards[1]}LL + {terms[1]}"


def _group_initial(spec: KernelSpec) -> list[int]:
    """A group's accumulator words before any row: zero counts and sums, min at INT64_MAX, max at INT64_MIN."""
    words = [0]
    for a in spec.accumulators:
        if a.kind in ("min", "max"):
            words.append((2**63 - 1) if a.kind == "min" else 2**63)  # as uint64 bit patterns
        else:
            words += [0] * a.value_words
        words += [0] * bool(a.valid)  # the rows it took
    return words


def initial_words(spec: KernelSpec) -> np.ndarray:
    """Every group's accumulator words before any row (uint64)."""
    return np.tile(np.array(_group_initial(spec), dtype=np.uint64), spec.groups)


def selected_groups(spec: KernelSpec, words) -> np.ndarray:
    """The indices of the groups that selected a row, from the accumulator words (each group's first is its
    row count): what read_group is asked for, found without a Python loop over up to millions of groups."""
    return np.flatnonzero(np.asarray(words[:spec.groups * spec.words])[::spec.words])


def read_groups(spec: KernelSpec, words) -> tuple[np.ndarray, np.ndarray, list[np.ndarray | list[int]], list]:
    """Every group that selected a row at once: (their indices, their row counts, each accumulator's exact
    values), as read_group reads one, without a Python loop over the groups: each accumulator's values an
    int64 array where every one fits 64 bits (a 128-bit sum whose high word is the sign of its low one),
    else a list of Python integers. 100,000 groups in milliseconds; a table of TINY_WORDS, Python integers."""
    n = spec.groups * spec.words
    if n <= TINY_WORDS:  # the whole table's few words as Python integers, its groups found among them
        flat = words[:n].tolist()
        index = [g for g in range(0, n, spec.words) if flat[g]]
        return (np.array([g // spec.words for g in index], dtype=np.int64),
                *_read_tiny(spec, [flat[g:g + spec.words] for g in index]))
    table = np.asarray(words[:n], dtype=np.uint64).reshape(spec.groups, spec.words)
    selected = table[:, 0] != 0
    index = np.flatnonzero(selected)
    return (index, *_read_table(spec, table, None if len(index) == spec.groups else selected))


def read_hashed(spec: KernelSpec, keys: np.ndarray, words: np.ndarray) -> tuple[np.ndarray, np.ndarray, list, list]:
    """read_groups of a hashed run: the slots it filled (each group's index, or a wide key's three words, and its
    words, gathered in no order), in that order (finalize orders the groups, and a parted table's are added by
    key, result.ColumnarPartial)."""
    return (keys, *_read_table(spec, np.asarray(words, dtype=np.uint64).reshape(-1, spec.words), None))


def _read_table(spec: KernelSpec, table: np.ndarray, selected: np.ndarray | None) -> tuple[np.ndarray, list, list]:
    """(row counts, each accumulator's values, each accumulator's rows where it counts them: those whose argument
    was not NULL, else None) of a table of groups' words, of its `selected` rows (None: all). A 'count'
    accumulator's values are its rows."""
    if table.size <= TINY_WORDS:
        return _read_tiny(spec, (table if selected is None else table[selected]).tolist())
    few, fits = table.size <= FEW_WORDS, {}
    if few:  # a few groups' words copied at once, and every sum's test at once: a NumPy call a word costs more
        chosen = table.copy() if selected is None else table[selected]
        if any(a.kind in ("sum", "wide") for a in spec.accumulators):  # fits[k]: each group's word k + 1 is its
            signed = chosen.view(np.int64)  # word k's sign, so that a sum starting at word k is that word's int64
            fits = (signed[:, 1:] == signed[:, :-1] >> 63).all(axis=0).tolist()

    def word(j: int) -> np.ndarray:
        """Word j of each chosen group, a column of its own: copied either way (the words are a scratch
        buffer the GPU's next run writes), by a mask a column (a third of a row gather's time)."""
        if few:
            return chosen[:, j]
        return table[:, j].copy() if selected is None else table[:, j][selected]

    rows = word(0).view(np.int64)  # a count of rows is below 2^63
    values, counted, k = [], [], 1
    for a in spec.accumulators:
        counted.append(word(k + a.value_words).view(np.int64) if a.valid else None)
        if a.kind == "count":
            values.append(counted[-1])
        elif a.kind in ("min", "max"):
            values.append(word(k).view(np.int64))
        else:
            low = word(k)
            if fits[k] if few else not table[:, k + 1].any() and (len(low) == 0 or low.view(np.int64).min() >= 0):
                values.append(low.view(np.int64))  # every high word its low word's sign: the sums themselves
            elif few:  # (fits[k] is _signed_128s' test, found false: its Python integers)
                values.append(_python_128s(low, word(k + 1)))
            else:
                values.append(_signed_128s(low, word(k + 1)))
            if a.kind == "wide":  # the values' low 64 bits summed, and their high bits
                high = _signed_128s(word(k + 2), word(k + 3))
                values[-1] = [lo + (hi << 64) for lo, hi in zip(python_values(values[-1]), python_values(high))]
        k += a.words
    return rows, values, counted


def _signed_128s(lo: np.ndarray, hi: np.ndarray) -> np.ndarray | list[int]:
    """Signed 128-bit integers from their two words: an int64 array where each is its low word's int64,
    else Python integers."""
    low = lo.view(np.int64)
    if np.array_equal(hi.view(np.int64), low >> 63):  # the high word is the low one's sign: 0 or -1
        return low
    return _python_128s(lo, hi)


def _python_128s(lo: np.ndarray, hi: np.ndarray) -> list[int]:
    """Signed 128-bit integers from their two words, as Python integers."""
    return [_signed_128(a, b) for a, b in zip(lo.tolist(), hi.tolist())]


def read_group(spec: KernelSpec, words, g: int) -> tuple[int, list]:
    """(rows, each accumulator's exact value) of group g from the accumulator words (uint64)."""
    rows, values, _ = _group_values(spec, [int(w) for w in words[g * spec.words:(g + 1) * spec.words]])
    return rows, values


def _group_values(spec: KernelSpec, words: list[int]) -> tuple[int, list[int], list[int | None]]:
    """(rows, each accumulator's exact value, each accumulator's rows taken where it counts them, else None) of
    one group's words as Python integers."""
    values, counted, k = [], [], 1
    for a in spec.accumulators:
        counted.append(words[k + a.value_words] if a.valid else None)
        if a.kind == "sum":
            values.append(_signed_128(words[k], words[k + 1]))
        elif a.kind == "wide":
            values.append(_signed_128(words[k], words[k + 1]) + (_signed_128(words[k + 2], words[k + 3]) << 64))
        elif a.kind == "count":
            values.append(words[k])
        else:
            v = words[k]
            values.append(v - 2**64 if v >= 2**63 else v)
        k += a.words
    return words[0], values, counted


def _read_tiny(spec: KernelSpec, groups: list[list[int]]) -> tuple[np.ndarray, list, list]:
    """_read_table of a few groups' words given as Python integers, a group at a time (_group_values): each
    accumulator's values Python integers, its rows and rows taken int64 arrays, as _read_table's."""
    read = [_group_values(spec, words) for words in groups]
    rows = np.array([r for r, _, _ in read], dtype=np.int64)
    values = [[v[j] for _, v, _ in read] for j in range(len(spec.accumulators))]
    counted = [np.array([c[j] for _, _, c in read], dtype=np.int64) if a.valid else None
               for j, a in enumerate(spec.accumulators)]
    return rows, [counted[j] if a.kind == "count" else values[j] for j, a in enumerate(spec.accumulators)], counted


def _signed_128(lo, hi) -> int:
    total = (int(hi) << 64) | int(lo)
    return total - (1 << 128) if total >= 1 << 127 else total
