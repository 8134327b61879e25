"""Parameters bound into SQL text as exact literals, qmark style: each `?` outside a string literal, a
quoted name or a comment takes the next parameter (int, Decimal, str, datetime.date, datetime.datetime,
bool, None). A float is refused: its text would be another number than the double. Used by prepared
statements (api: table.prepare) and the DB-API (dbapi)."""

from __future__ import annotations

import datetime
import re
from decimal import Decimal

from gquery.errors import GqueryError
from gquery.query import DOUBLE, MAX_DECIMAL_WIDTH, SqlType, integer_literal_type


class ParameterError(GqueryError):
    """A parameter that has no exact SQL literal, or a count that does not match the text's `?`."""


def bind(sql: str, parameters) -> str:
    """The text with each `?` (outside string literals, quoted names and comments) replaced by the next
    parameter as an exact SQL literal; the count must match."""
    return bound_spans(sql, parameters)[0]


def bound_spans(sql: str, parameters) -> tuple[str, list[tuple[int, int]]]:
    """bind's text, and where each parameter's literal lies in it: (start, length)."""
    params = sequence(parameters)
    text, spans = _marked(sql, lambda k: literal(params[k]) if k < len(params) else None)
    if len(spans) != len(params):
        raise ParameterError(f"{len(params)} parameter(s) given for {len(spans)} ?")
    return text, spans


def numbered(sql: str) -> tuple[str, list[tuple[int, int]]]:
    """The text with its k-th `?` written `$k` (numbered placeholders, which keep their numbers in a parsed
    tree whatever order its nodes are walked in), and where each lies: (start, length). Spaced: `$1-$2`
    would read as the start of a dollar-quoted string."""
    return _marked(sql, lambda k: f" ${k + 1} ")


def sequence(parameters) -> list:
    """The parameters as a list: a list or tuple (qmark style), or None for none; anything else refused."""
    params = [] if parameters is None else list(parameters) if isinstance(parameters, (list, tuple)) else None
    if params is None:
        raise ParameterError(f"parameters must be a sequence (qmark style), got {type(parameters).__name__}")
    return params


def _marked(sql: str, each) -> tuple[str, list[tuple[int, int]]]:
    """The text with each `?` outside string literals, quoted names and comments replaced by each(k), k
    counting from 0 (each gives None past the parameters it has), and each replacement's (start, length)."""
    if not isinstance(sql, str):
        raise ParameterError(f"SQL must be text, not {type(sql).__name__}")
    out, used, i, n, at, spans = [], 0, 0, len(sql), 0, []
    while i < n:
        c = sql[i]
        j = _passed(sql, i) if c in "'\"-/$" else None
        if j is not None:  # a string, a quoted name or a comment: as it is
            out.append(sql[i:j])
            at += j - i
            i = j
        elif c in "?$" and sql[i + 1:i + 2].isdigit() and (c == "?" or not i or not (sql[i - 1].isalnum() or sql[i - 1] == "_")):
            raise ParameterError(f"a numbered parameter ({c}{re.match(r'[0-9]+', sql[i + 1:])[0]}) is not taken: write ? "
                                 "for each parameter, in the order they are given")
        elif c == "?":
            text = each(used)
            if text is None:
                raise ParameterError(f"the SQL has more ? than the {used} parameter(s) given")
            out.append(text)
            spans.append((at, len(text)))
            at += len(text)
            used += 1
            i += 1
        else:
            out.append(c)
            at += 1
            i += 1
    return "".join(out), spans


_DOLLAR = re.compile(r"\$([A-Za-z_]\w*)?\$")


def _passed(sql: str, i: int) -> int | None:
    """Where a string literal, quoted name or comment starting at i ends (one past it), or None where none starts
    there: '...' and "..." with '' and "" within, E'...' with backslash escapes, $tag$...$tag$, -- to the line's
    end, /* ... */ (nested, as DuckDB's lexer nests them). Unclosed: to the text's end."""
    n, c = len(sql), sql[i]
    if c in "'\"":
        escaped = c == "'" and i and sql[i - 1] in "eE" and (i < 2 or not (sql[i - 2].isalnum() or sql[i - 2] == "_"))
        j = i + 1
        while j < n:
            if escaped and sql[j] == "\\":
                j += 2
            elif sql[j] == c and (j + 1 >= n or sql[j + 1] != c):
                return j + 1
            else:
                j += 2 if sql[j] == c else 1
        return n
    if sql.startswith("--", i):  # (to the line's end: a newline or a carriage return, as DuckDB's lexer ends it)
        ends = [j for j in (sql.find("\n", i), sql.find("\r", i)) if j >= 0]
        return min(ends) if ends else n
    if sql.startswith("/*", i):
        depth, j = 1, i + 2
        while j < n and depth:
            if sql.startswith("/*", j):
                depth, j = depth + 1, j + 2
            elif sql.startswith("*/", j):
                depth, j = depth - 1, j + 2
            else:
                j += 1
        return j
    m = _DOLLAR.match(sql, i) if c == "$" and (not i or not (sql[i - 1].isalnum() or sql[i - 1] == "_")) else None
    if m is not None:
        j = sql.find(m.group(), m.end())
        return n if j < 0 else j + len(m.group())
    return None


def literal(value) -> str:
    """A Python value as the SQL literal that means exactly it."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):  # a negative one in parentheses: after a minus, -5 would begin a comment (--5)
        value = int.__index__(value)  # (its value: an int subclass's own __str__, an IntEnum's name, is not read)
        if value.bit_length() > 13_000:  # (about 3,900 digits: Python writes at most 4,300; DuckDB's widest holds 39)
            raise ParameterError(f"an integer parameter of {value.bit_length():,} bits: DuckDB's widest integer, HUGEINT, "
                                 "holds 128")
        return str(value) if value >= 0 else f"({value})"
    if isinstance(value, Decimal):
        value = Decimal(value)  # (a subclass's value alone)
        if not value.is_finite():
            raise ParameterError(f"a parameter {value} has no SQL literal")
        return format(value, "f") if not value.is_signed() else f"({format(value, 'f')})"
    if isinstance(value, float):  # 0.1 is no decimal: binding its text would ask another query than the double
        raise ParameterError(f"a float parameter ({value!r}): gquery's constants are exact, pass a Decimal or an int")
    if isinstance(value, datetime.datetime):  # (a subclass's value alone, as Python's own type writes it)
        if getattr(value, "nanosecond", 0):  # (pandas' Timestamp: nanoseconds no datetime's text holds)
            raise ParameterError(f"a timestamp parameter with nanoseconds ({value}): DuckDB's TIMESTAMP holds "
                                 "microseconds")
        return f"TIMESTAMP '{datetime.datetime.isoformat(value, sep=' ')}'"
    if isinstance(value, datetime.date):
        return f"DATE '{datetime.date.isoformat(value)}'"
    if isinstance(value, str):
        value = str.__str__(value)  # (a subclass's value alone)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:  # (a lone surrogate: DuckDB raises, it cannot encode the string)
            raise ParameterError(f"a string parameter that is not UTF-8 ({e.reason} at {e.start}): DuckDB cannot "
                                 "encode it") from None
        return "'" + value.replace("'", "''") + "'"
    kind = type(value)  # (NumPy's bool is named bool too: its module said, numpy.bool is not Python's)
    named = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__.split('.')[0]}.{kind.__name__}"
    raise ParameterError(f"a parameter of type {named} has no SQL literal (pass a Python int, Decimal, str, date, "
                         "datetime, bool or None)")


def parameter_type(value) -> SqlType | None:
    """The type DuckDB's prepared statement gives a parameter where it is not its literal's (DuckDB types a
    parameter by its Python value, not by the text bind() writes): an int INTEGER, BIGINT or HUGEINT by its value
    alone (-2^31 is an INTEGER, the literal -2147483648 a BIGINT), a Decimal DECIMAL(width, scale) from its digits
    and exponent (Decimal('100') is a DECIMAL(3,0), Decimal('0.5') a DECIMAL(1,1)), or DOUBLE past 38 digits, which
    gquery's exact constants refuse. From 2^63 to 2^64 - 1 DuckDB's UBIGINT, which gquery has not: refused in one line
    (as a HUGEINT its sums and products were typed otherwise than DuckDB types them, and its overflows answered). None
    for the others (a string, a date, a bool, NULL: typed as their literals)."""
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        return None
    if isinstance(value, int):
        if 2**63 <= value < 2**64:
            raise ParameterError(f"an integer parameter {int(value)} is DuckDB's UBIGINT, a type gquery does not hold: "
                                 "pass it as a Decimal (DuckDB types its digits: DECIMAL(19,0) or (20,0))")
        try:
            return integer_literal_type(value)
        except ValueError:  # past HUGEINT: its literal is refused
            return None
    if not value.is_finite():
        return None  # (literal() refuses it)
    _, digits, exponent = value.as_tuple()
    if exponent >= 0:  # DuckDB's PyDecimal: the digits and the zeros the exponent adds, no scale
        width, scale = len(digits) + exponent, 0
    else:  # a scale past the digits takes a leading zero more (0.05 is DECIMAL(3,2); 0.5 DECIMAL(1,1))
        scale = -exponent
        width = scale + 1 if scale > len(digits) else len(digits)
    return DOUBLE if width > MAX_DECIMAL_WIDTH else SqlType("DECIMAL", width, scale)
