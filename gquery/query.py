"""The query as data: a selection+aggregate over one table, typed as DuckDB types it.

    SELECT <group columns and aggregates> FROM lineitem [WHERE <predicate>] [GROUP BY <columns>]
           [ORDER BY <outputs>] [LIMIT n]

Every value an engine computes is an exact integer: a DECIMAL(w, s) value is its unscaled integer
(1.50 at scale 2 is 150), a DATE is its days since 1970-01-01, a TIMESTAMP (only ever a folded
constant, such as DATE '1998-12-01' - INTERVAL '90' DAY) its microseconds, a VARCHAR column's value
its code in the column's sorted dictionary. Each node carries the SQL type DuckDB gives it, so an
engine knows the scale of every intermediate and the type of every output, and never rounds.

sql.py builds a Query from SQL text (sqlglot stays there); the planner, the kernels' code generator
and the CPU reference read only these nodes. `bounds` gives each expression's exact range from its
columns' ranges: what decides whether 64-bit arithmetic is exact for it.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property

from gquery.errors import GqueryError

MAX_DECIMAL_WIDTH = 38  # DuckDB's DECIMAL(38): a 128-bit integer
INT64_DECIMAL_WIDTH = 18  # the widest DECIMAL that DuckDB keeps in 64 bits
EPOCH = datetime.date(1970, 1, 1)
DAY_MICROS = 86_400_000_000


def hash_once(cls):
    """A frozen tree's hash computed once an object: a query's hash walks its whole tree, and the
    caches a call looks in (parsed texts, plans, kernels) hash it each time. Not pickled: another
    process hashes strings with another seed."""
    computed = cls.__hash__

    def __hash__(self):
        found = self.__dict__.get("_hash")
        if found is None:
            found = self.__dict__["_hash"] = computed(self)  # the dict, not setattr: the class is frozen
        return found

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    cls.__hash__, cls.__getstate__ = __hash__, __getstate__
    return cls


# --- types ----------------------------------------------------------------------------------------
INTEGER_TYPES = {"TINYINT": 8, "SMALLINT": 16, "INTEGER": 32, "BIGINT": 64, "HUGEINT": 128,
                 "UTINYINT": 8, "USMALLINT": 16, "UINTEGER": 32}  # bits
UNSIGNED_TYPES = frozenset({"UTINYINT", "USMALLINT", "UINTEGER"})  # Arrow's uint8 .. uint32, as DuckDB types them
INTEGER_DECIMAL_WIDTH = {"TINYINT": 3, "SMALLINT": 5, "INTEGER": 10, "BIGINT": 19, "HUGEINT": 38,
                         "UTINYINT": 3, "USMALLINT": 5, "UINTEGER": 10}


@hash_once
@dataclass(frozen=True)
class SqlType:
    """A SQL type as DuckDB names it: an integer type, DECIMAL(width, scale), DATE, TIMESTAMP,
    VARCHAR, BOOLEAN or DOUBLE (what AVG returns)."""

    name: str
    width: int = 0  # DECIMAL only
    scale: int = 0  # DECIMAL only

    def __post_init__(self):
        known = {*INTEGER_TYPES, "DECIMAL", "DATE", "TIMESTAMP", "VARCHAR", "BOOLEAN", "DOUBLE"}
        if self.name not in known:
            raise ValueError(f"unknown SQL type {self.name}")
        if self.name == "DECIMAL" and not (1 <= self.width <= MAX_DECIMAL_WIDTH and 0 <= self.scale <= self.width):
            raise ValueError(f"DECIMAL({self.width},{self.scale}) is not a DECIMAL DuckDB has")

    @property
    def is_integer(self) -> bool:
        return self.name in INTEGER_TYPES

    @property
    def is_decimal(self) -> bool:
        return self.name == "DECIMAL"

    @property
    def is_numeric(self) -> bool:
        return self.is_integer or self.is_decimal

    @property
    def is_unsigned(self) -> bool:
        return self.name in UNSIGNED_TYPES

    @property
    def integer_range(self) -> tuple[int, int]:
        """The least and greatest value of an integer type."""
        bits = INTEGER_TYPES[self.name]
        return (0, 2**bits - 1) if self.is_unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)

    @property
    def is_temporal(self) -> bool:
        return self.name in ("DATE", "TIMESTAMP")

    def as_decimal(self) -> "SqlType":
        """The DECIMAL an integer type widens to when it meets a DECIMAL (DuckDB's rule)."""
        if self.is_decimal:
            return self
        return SqlType("DECIMAL", INTEGER_DECIMAL_WIDTH[self.name], 0)

    def __str__(self) -> str:
        return f"DECIMAL({self.width},{self.scale})" if self.is_decimal else self.name


def decimal(width: int, scale: int) -> SqlType:
    return SqlType("DECIMAL", min(width, MAX_DECIMAL_WIDTH), scale)


INTEGER, BIGINT, HUGEINT = SqlType("INTEGER"), SqlType("BIGINT"), SqlType("HUGEINT")
DATE, TIMESTAMP, VARCHAR, BOOLEAN, DOUBLE = (SqlType(n) for n in ("DATE", "TIMESTAMP", "VARCHAR", "BOOLEAN", "DOUBLE"))


def sql_type_of(name: str) -> SqlType:
    """The SqlType DuckDB names so ('DECIMAL(38,2)', 'BIGINT', ...); ValueError for one gquery does not hold."""
    m = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", name)
    return SqlType("DECIMAL", int(m[1]), int(m[2])) if m else SqlType(name)


def integer_literal_type(value: int) -> SqlType:
    """INTEGER, BIGINT or HUGEINT: the narrowest that holds an integer literal."""
    if -(2**31) <= value < 2**31:
        return INTEGER
    if -(2**63) <= value < 2**63:
        return BIGINT
    if -(2**127) <= value < 2**127:
        return HUGEINT
    raise ValueError(f"integer literal {value} is wider than 128 bits")


def arithmetic_type(op: str, left: SqlType, right: SqlType) -> SqlType:
    """The type DuckDB gives `left op right` for op in + - * over numeric types (its binder's rules:
    integers keep the wider integer type; with a DECIMAL, integers widen to DECIMAL(3/5/10/19/38, 0);
    + and - take the larger scale and one more digit; * adds widths and scales, capped at 18 digits
    where both sides fit 64 bits and the scale allows it, and at 38)."""
    if left.name == "DATE" and right.is_integer and op in ("+", "-") or right.name == "DATE" and left.is_integer and op == "+":
        return DATE  # days
    if left.name == right.name == "DATE" and op == "-":
        return BIGINT  # days between
    if not (left.is_numeric and right.is_numeric):
        raise TypeError(f"{left} {op} {right} is not arithmetic on numbers")
    if left.is_integer and right.is_integer:
        return common_integer_type(left, right)
    a, b = left.as_decimal(), right.as_decimal()
    if op in ("+", "-"):
        scale = max(a.scale, b.scale)
        return decimal(max(a.width - a.scale, b.width - b.scale) + scale + 1, scale)
    if op != "*":
        raise ValueError(f"unknown arithmetic operator {op}")
    width, scale = a.width + b.width, a.scale + b.scale
    if scale > MAX_DECIMAL_WIDTH:
        raise TypeError(f"{left} * {right} needs a scale of {scale}, more than DECIMAL(38) holds")
    if width > INT64_DECIMAL_WIDTH and max(a.width, b.width) <= INT64_DECIMAL_WIDTH and scale < INT64_DECIMAL_WIDTH:
        width = INT64_DECIMAL_WIDTH
    return decimal(width, scale)


def common_integer_type(left: SqlType, right: SqlType) -> SqlType:
    """The integer type DuckDB computes `left op right` in: the wider of two alike in sign (the left on a tie); a
    signed type wider than the unsigned one beside it, else BIGINT (an unsigned type of up to 32 bits; DuckDB 2.0
    takes BIGINT even for TINYINT and UTINYINT) or HUGEINT."""
    if left.is_unsigned == right.is_unsigned:
        return left if INTEGER_TYPES[left.name] >= INTEGER_TYPES[right.name] else right
    signed, unsigned = (right, left) if left.is_unsigned else (left, right)
    if INTEGER_TYPES[signed.name] > INTEGER_TYPES[unsigned.name]:
        return signed
    return BIGINT if INTEGER_TYPES[unsigned.name] <= 32 else HUGEINT


def aggregate_type(func: str, arg: SqlType | None) -> SqlType:
    """SUM of a DECIMAL is DECIMAL(38, its scale), of an integer HUGEINT; COUNT is BIGINT; AVG is
    DOUBLE; MIN and MAX keep their argument's type."""
    if func == "count":
        return BIGINT
    if arg is None:
        raise TypeError(f"{func.upper()}(*) is not an aggregate")
    if func == "sum":
        if arg.is_decimal:
            return decimal(MAX_DECIMAL_WIDTH, arg.scale)
        if arg.is_integer:
            return HUGEINT
        raise TypeError(f"SUM of {arg}")
    if func == "avg":
        if not arg.is_numeric:
            raise TypeError(f"AVG of {arg}")
        return DOUBLE
    if func in ("min", "max"):
        return arg
    raise ValueError(f"unknown aggregate {func}")


# --- expressions -------------------------------------------------------------------------------------
class Expr:
    """A typed expression node. Frozen dataclasses: equal trees compare and hash equal."""

    type: SqlType

    def children(self) -> tuple["Expr", ...]:
        return ()

    def walk(self):
        """This node and every node below it, each before its children, left to right: from a stack (generators nested a
        level a node passed each node up through every level above it: a chain of 1,000 minuses, 0.2 s a walk)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children()))

    def columns(self) -> tuple[str, ...]:
        """The columns read, each once, in the order first met (found once a node: a plan asks often)."""
        found = self.__dict__.get("_columns")
        if found is None:
            seen: dict[str, None] = {}
            for node in self.walk():
                if isinstance(node, Column):
                    seen.setdefault(node.name)
            found = self.__dict__["_columns"] = tuple(seen)  # the dict, not setattr: the class is frozen
        return found


@hash_once
@dataclass(frozen=True)
class Column(Expr):
    name: str
    type: SqlType

    def __str__(self) -> str:
        return self.name


@hash_once
@dataclass(frozen=True)
class Literal(Expr):
    """A constant: an unscaled integer (numeric types), days (DATE), microseconds (TIMESTAMP), a
    string (VARCHAR) or a bool (BOOLEAN)."""

    value: int | str | bool
    type: SqlType

    def __str__(self) -> str:
        return render(self.value, self.type)


@hash_once
@dataclass(frozen=True)
class Arith(Expr):
    """left op right, op in + - *, at this node's type: + and - align both sides to its scale."""

    op: str
    left: Expr
    right: Expr
    type: SqlType

    def children(self):
        return self.left, self.right

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@hash_once
@dataclass(frozen=True)
class Negate(Expr):
    arg: Expr
    type: SqlType

    def children(self):
        return (self.arg,)

    def __str__(self) -> str:
        return f"-{self.arg}"


@hash_once
@dataclass(frozen=True)
class Cast(Expr):
    """A cast that changes no value: to a DECIMAL of at least the argument's scale (the value is
    multiplied by the power of ten between them), or between integer types."""

    arg: Expr
    type: SqlType

    def children(self):
        return (self.arg,)

    def __str__(self) -> str:
        return f"CAST({self.arg} AS {self.type})"


COMPARISONS = ("<", "<=", ">", ">=", "=", "<>")
FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "<>": "<>"}


@hash_once
@dataclass(frozen=True)
class Compare(Expr):
    """left op right over numbers (compared at the larger scale), dates, a VARCHAR column and a string
    constant (compared by the column's sorted dictionary), or two VARCHAR columns (as strings, by bytes)."""

    op: str
    left: Expr
    right: Expr
    type: SqlType = BOOLEAN

    def children(self):
        return self.left, self.right

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@hash_once
@dataclass(frozen=True)
class Recode(Expr):
    """A VARCHAR column's code as its string's rank in an order another column's codes share: table[code].
    Never parsed: the planner lowers a comparison of two VARCHAR columns, whose codes index other
    dictionaries, to one of ranks (prune._columns_compare), equal strings of equal rank."""

    arg: Column
    table: tuple[int, ...]
    type: SqlType = BIGINT

    def children(self):
        return (self.arg,)

    def __str__(self) -> str:
        return f"rank({self.arg})"


@hash_once
@dataclass(frozen=True)
class InList(Expr):
    arg: Expr
    values: tuple[Literal, ...]
    negated: bool = False
    type: SqlType = BOOLEAN

    def children(self):
        return (self.arg, *self.values)

    def __str__(self) -> str:
        return f"{self.arg} {'NOT ' * self.negated}IN ({', '.join(map(str, self.values))})"


@hash_once
@dataclass(frozen=True)
class And(Expr):
    args: tuple[Expr, ...]
    type: SqlType = BOOLEAN

    def children(self):
        return self.args

    def __str__(self) -> str:
        return "(" + " AND ".join(map(str, self.args)) + ")"


@hash_once
@dataclass(frozen=True)
class Or(Expr):
    args: tuple[Expr, ...]
    type: SqlType = BOOLEAN

    def children(self):
        return self.args

    def __str__(self) -> str:
        return "(" + " OR ".join(map(str, self.args)) + ")"


@hash_once
@dataclass(frozen=True)
class Not(Expr):
    arg: Expr
    type: SqlType = BOOLEAN

    def children(self):
        return (self.arg,)

    def __str__(self) -> str:
        return f"NOT {self.arg}"


@hash_once
@dataclass(frozen=True)
class IsNull(Expr):
    """column IS NULL: true where the column holds NULL, else false (never unknown). An expression of the class
    is NULL where any column it reads is (its arithmetic and casts carry NULL through), so the binder makes
    `e IS NULL` an OR of these."""

    arg: Column
    type: SqlType = BOOLEAN

    def children(self):
        return (self.arg,)

    def __str__(self) -> str:
        return f"{self.arg} IS NULL"


AGGREGATES = ("sum", "count", "avg", "min", "max")


@hash_once
@dataclass(frozen=True)
class Aggregate(Expr):
    """func(arg); COUNT(*) has no argument. Its type is its output's (aggregate_type)."""

    func: str
    arg: Expr | None
    type: SqlType

    def children(self):
        return () if self.arg is None else (self.arg,)

    def __str__(self) -> str:
        return f"{self.func.upper()}({'*' if self.arg is None else self.arg})"


# --- the query -----------------------------------------------------------------------------------------
@hash_once
@dataclass(frozen=True)
class Output:
    """One column of the result: a group column or an aggregate, and the name it goes by."""

    name: str
    expr: Column | Aggregate


@hash_once
@dataclass(frozen=True)
class Query:
    sql: str  # the text it came from: what DuckDB is asked too
    outputs: tuple[Output, ...]
    where: Expr | None = None
    group_by: tuple[Column, ...] = ()
    order_by: tuple[tuple[int, bool], ...] = ()  # (index into outputs, descending)
    limit: int | None = None
    table: str = "lineitem"
    notes: tuple[str, ...] = field(default=(), compare=False)  # what the binder folded or rewrote
    nulls_first: tuple[int, ...] = ()  # the places in order_by whose NULLs come first (DuckDB's default: last)
    # every cast and date plus days the binder made, those it folded away too (NOT (CAST(x AS UTINYINT) = 1 OR k IN
    # (NULL, 2)) is never true, but DuckDB casts each row's x): checked against the table's values all the same
    computed: tuple["Expr", ...] = field(default=(), compare=False, repr=False)

    @cached_property
    def aggregates(self) -> tuple[Aggregate, ...]:
        """The distinct aggregates the outputs name, in order: what an engine accumulates (asked
        dozens of times a call: found once)."""
        seen: dict[Aggregate, None] = {}
        for o in self.outputs:
            if isinstance(o.expr, Aggregate):
                seen.setdefault(o.expr)
        return tuple(seen)

    def columns(self) -> tuple[str, ...]:
        """Every column the query reads, each once."""
        return self._column_lists[0]

    def predicate_columns(self) -> tuple[str, ...]:
        return () if self.where is None else self.where.columns()

    def value_columns(self) -> tuple[str, ...]:
        """Columns the aggregates and groups read (what a selected row needs beyond the predicate)."""
        return self._column_lists[1]

    @cached_property
    def _column_lists(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(columns, value_columns): found once a query (a plan asks for them a dozen times)."""
        seen: dict[str, None] = {}
        for e in self._exprs():
            for c in e.columns():
                seen.setdefault(c)
        values: dict[str, None] = {}
        for c in self.group_by:
            values.setdefault(c.name)
        for a in self.aggregates:
            for c in a.columns():
                values.setdefault(c)
        return tuple(seen), tuple(values)

    @cached_property
    def narrowing_casts(self) -> tuple["Cast", ...]:
        """The casts whose type cannot hold every value their argument's type can (CAST(i AS TINYINT) of an INTEGER,
        a DECIMAL(15,2) to DECIMAL(9,2)): a value past the type is DuckDB's conversion error, so each is checked against
        the table's values (check_casts); found once a query."""
        return tuple(dict.fromkeys(node for e in (*self._exprs(), *self.computed) for node in e.walk()
                                   if isinstance(node, Cast) and not _holds(node.type, node.arg.type)))

    @cached_property
    def date_shifts(self) -> tuple["Arith", ...]:
        """The dates plus or minus days (date_shifted): DuckDB keeps an infinite date infinite and raises where a
        finite one lands past its dates, so each is checked against the table's finite dates (check_dates) and
        computed so (cpu.py; the fused kernel leaves a table holding infinite dates to the CPU); found once a
        query."""
        return tuple(dict.fromkeys(node for e in (*self._exprs(), *self.computed) for node in e.walk()
                                   if isinstance(node, Arith) and node.type.name == "DATE"))

    def _exprs(self):
        if self.where is not None:
            yield self.where
        yield from self.group_by
        for o in self.outputs:
            yield o.expr

    def describe(self) -> str:
        parts = [f"SELECT {', '.join(f'{o.expr} AS {o.name}' for o in self.outputs)} FROM {self.table}"]
        if self.where is not None:
            parts.append(f"WHERE {self.where}")
        if self.group_by:
            parts.append(f"GROUP BY {', '.join(map(str, self.group_by))}")
        if self.order_by:
            parts.append("ORDER BY " + ", ".join(f"{self.outputs[i].name}{' DESC' * d}{' NULLS FIRST' * (k in self.nulls_first)}"
                                                 for k, (i, d) in enumerate(self.order_by)))
        if self.limit is not None:
            parts.append(f"LIMIT {self.limit}")
        return " ".join(parts)


# --- exact values ---------------------------------------------------------------------------------------
def render(value, t: SqlType) -> str:
    """A constant as SQL would write it."""
    if t.is_decimal:
        return str(to_python(value, t))
    if t.name == "DATE":
        return f"DATE '{to_python(value, t)}'"
    if t.name == "TIMESTAMP":
        return f"TIMESTAMP '{to_python(value, t)}'"
    if t.name == "VARCHAR":
        return "'" + str(value).replace("'", "''") + "'"
    return str(value)


def to_python(value, t: SqlType):
    """An engine's exact value as DuckDB's Python client gives it: Decimal with the type's scale,
    int, datetime.date, datetime.datetime, str, bool, float; None for NULL."""
    if value is None:
        return None
    if t.is_decimal:
        return Decimal(f"{int(value)}E-{t.scale}") if t.scale else Decimal(int(value))
    if t.is_integer:
        return int(value)
    if t.name == "DATE":
        return _date(int(value))
    if t.name == "TIMESTAMP":
        days, micros = divmod(int(value), DAY_MICROS)
        day = _date(days)
        if isinstance(day, datetime.date):
            return datetime.datetime.combine(day, datetime.time()) + datetime.timedelta(microseconds=micros)
        seconds, fraction = divmod(micros, 1_000_000)
        text = f"{day} {seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        return text + (f".{fraction:06d}".rstrip("0") if fraction else "")
    if t.name == "DOUBLE":
        return float(value)
    return value


def python_column(values: list, t: SqlType) -> list:
    """to_python over a column of engine values, the common types without a call a value."""
    whole = hasattr(values, "tolist")  # a NumPy array of int64: no NULL among its values
    if whole:  # its Python ints at once (NumPy scalars are slow one by one)
        values = values.tolist()
    if t.name == "DATE":  # a dict lookup a row, in C: each day's value made once (_DayValues)
        return list(map(_DAY_VALUES.__getitem__, values))
    if t.is_decimal and t.scale:
        e = f"E-{t.scale}"
        return [None if v is None else Decimal(f"{int(v)}{e}") for v in values]
    if t.is_integer:  # Python ints already (an int64 array's, or taken from one): kept, not made again one by one
        if whole or set(map(type, values)) == {int}:
            return values if whole else list(values)
        return [None if v is None else int(v) for v in values]
    return [to_python(v, t) for v in values]


class _DayValues(dict):
    """A day count's client value (to_python's: a datetime.date, DuckDB's text past Python's years, None for
    NULL), made the first time the day is asked for: a column of dates is then a dict lookup a row (TPC-H's
    2,526 days made rows 0.4 ms sooner than by a date made a row). Dates are immutable: rows share them."""

    def __missing__(self, days):
        if len(self) >= DAYS_KEPT:  # many distinct days: memory bounded, the next ones made again
            self.clear()
        made = self[days] = to_python(days, DATE)
        return made


DAYS_KEPT = 1 << 16  # 179 years of days, about 7 MB of dates and keys
_DAY_VALUES = _DayValues()


PYTHON_DAYS = ((datetime.date.min - EPOCH).days, (datetime.date.max - EPOCH).days)  # 0001-01-01 .. 9999-12-31
DATE_INFINITY = 2**31 - 1  # DuckDB's 'infinity' date; its client gives it as 9999-12-31 (and -infinity as 0001-01-01)
LAST_FINITE_DAY = DATE_INFINITY - 1  # DuckDB's finite dates are the days -LAST_FINITE_DAY .. LAST_FINITE_DAY


def date_shifted(shift: "Arith") -> "Expr":
    """The DATE side of a date plus or minus days (Query.date_shifts: DATE + INTEGER, INTEGER + DATE, DATE - INTEGER)."""
    return shift.left if shift.left.type.name == "DATE" else shift.right


def _date(days: int):
    """A day count as DuckDB's client gives it: a datetime.date where Python has one, else DuckDB's own text
    ('0902-02-05 (BC)', '10000-01-01'), so a date of any year compares equal to DuckDB's."""
    if abs(days) == DATE_INFINITY:
        return datetime.date.max if days > 0 else datetime.date.min
    if PYTHON_DAYS[0] <= days <= PYTHON_DAYS[1]:
        return EPOCH + datetime.timedelta(days=days)
    year, month, day = _civil(days)
    return f"{1 - year:04d}-{month:02d}-{day:02d} (BC)" if year <= 0 else f"{year:04d}-{month:02d}-{day:02d}"


def _civil(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian (year, month, day) of a day count from 1970-01-01, for any integer (year 0 is
    1 BC): H. Hinnant's days_from_civil inverted, in eras of 400 years."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, doy - (153 * mp + 2) // 5 + 1


def rescale(value: int, from_scale: int, to_scale: int) -> int:
    """An unscaled value at another scale, exactly (to_scale >= from_scale)."""
    if to_scale < from_scale:
        raise ValueError("rescaling down would round")
    return value * 10 ** (to_scale - from_scale)


def scale_of(t: SqlType) -> int:
    return t.scale if t.is_decimal else 0


# --- exact ranges ------------------------------------------------------------------------------------------
def value_range(t: SqlType) -> tuple[int, int]:
    """The least and greatest unscaled value of a numeric type: an integer type's, or a DECIMAL(w, s)'s ±(10^w - 1)."""
    return (-(10**t.width - 1), 10**t.width - 1) if t.is_decimal else t.integer_range


def _within(lo: int, hi: int, source: SqlType, target: SqlType) -> bool:
    """Whether the unscaled values lo..hi of `source` are values of `target` (a cast never rounds: sql's binder
    refuses one that would)."""
    k = 10 ** (scale_of(target) - scale_of(source))
    least, most = value_range(target)
    return least <= lo * k and hi * k <= most


def _holds(target: SqlType, source: SqlType) -> bool:
    """Whether every value of `source` is one of `target`."""
    return _within(*value_range(source), source, target)


def check_casts(query: "Query", ranges: dict[str, tuple[int, int]]) -> None:
    """Raise where a cast that may not hold its argument's values (Query.narrowing_casts) meets one it cannot among
    the values the table's columns hold (`ranges`, their exact least and greatest): DuckDB raises a conversion error
    where it casts such a value, and a value past its type is no answer. Where a column lies within the type, the
    query is answered; where it does not, it is refused, whichever rows the query selects."""
    for cast in query.narrowing_casts:
        lo, hi = bounds(cast.arg, ranges)
        if not _within(lo, hi, cast.arg.type, cast.type):
            past = lo if _within(hi, hi, cast.arg.type, cast.type) else hi
            shown = Decimal(past).scaleb(-scale_of(cast.arg.type)) if cast.arg.type.is_decimal else past
            raise GqueryError(f"{cast}: this table holds values of {cast.arg} past {cast.type} ({shown}); DuckDB "
                              "raises a conversion error where it casts one")


def check_dates(query: "Query", ranges: dict[str, tuple[int, int]]) -> None:
    """Raise where a date plus or minus days (Query.date_shifts) may land past DuckDB's finite dates among the values the
    table's columns hold (`ranges`: a DATE column's least and greatest finite day, Column.finite_range; an infinite
    date stays infinite, as DuckDB keeps it): DuckDB raises 'Date out of range' where it computes such a day, and a day
    past them is no date of its type (the day 2^31 - 1 is its infinity). Where every day lies within, the query is
    answered; where one may not, it is refused, whichever rows the query selects (as check_casts refuses a cast)."""
    for shift in query.date_shifts:
        if any(ranges[c] is None for c in shift.columns()):  # no row, or every date infinite: every one stays so
            continue
        lo, hi = bounds(shift, ranges)
        if lo < -LAST_FINITE_DAY or hi > LAST_FINITE_DAY:
            past = lo if lo < -LAST_FINITE_DAY else hi
            raise GqueryError(f"{shift}: this table's values put it past DuckDB's dates (day {past:,}, beyond "
                              f"{'-' if past < 0 else ''}{LAST_FINITE_DAY:,}); DuckDB raises 'Date out of range' where it "
                              "computes such a date")


def bounds(e: Expr, ranges: dict[str, tuple[int, int]], found: dict | None = None) -> tuple[int, int]:
    """The exact range [lo, hi] of e's unscaled values when each column c lies in ranges[c]:
    interval arithmetic on Python integers, so a product's range is never rounded. `found`: a caller's memo of the
    nodes' ranges (id → (node, range)), where it asks of every node of a tree: each subtree is then found once (a
    SUM of 4,000 terms asked its chain's ranges again at every term: minutes). One frame a level: a chain of terms
    is walked as deep as the binder walks it."""
    if found is not None:
        known = found.get(id(e))
        if known is not None:
            return known[1]
    if isinstance(e, Column):
        made = ranges[e.name]
    elif isinstance(e, Literal):
        v = int(e.value)
        made = v, v
    elif isinstance(e, Recode):
        made = (min(e.table), max(e.table)) if e.table else (0, 0)
    elif isinstance(e, Negate):
        lo, hi = bounds(e.arg, ranges, found)
        made = -hi, -lo
    elif isinstance(e, Cast):
        lo, hi = bounds(e.arg, ranges, found)
        k = 10 ** (scale_of(e.type) - scale_of(e.arg.type))
        made = lo * k, hi * k
    elif isinstance(e, Arith):
        (a, b), (c, d) = bounds(e.left, ranges, found), bounds(e.right, ranges, found)
        if e.op == "*":
            products = (a * c, a * d, b * c, b * d)
            made = min(products), max(products)
        else:
            s = scale_of(e.type)
            kl, kr = 10 ** (s - scale_of(e.left.type)), 10 ** (s - scale_of(e.right.type))
            made = (a * kl + c * kr, b * kl + d * kr) if e.op == "+" else (a * kl - d * kr, b * kl - c * kr)
    else:
        raise TypeError(f"no numeric range for {type(e).__name__}")
    if found is not None:  # (the node kept beside its range: its id is no other node's while the memo lives)
        found[id(e)] = (e, made)
    return made


def magnitude(e: Expr, ranges: dict[str, tuple[int, int]]) -> int:
    """The largest |value| e can take: the bits its arithmetic needs."""
    lo, hi = bounds(e, ranges)
    return max(abs(lo), abs(hi))
