"""SQL text → Query: the selection+aggregate class over lineitem, typed as DuckDB 2.0 types it.

    SELECT <group columns, aggregates of arithmetic> FROM lineitem [AS alias] [WHERE <predicate>]
    [GROUP BY <at most 2 columns>] [ORDER BY <outputs>] [LIMIT n]

sqlglot (duckdb dialect) parses the text; this module walks its tree once into query.py's nodes and
refuses everything else in one line naming the construct (OutOfClass). Subtrees without columns are
folded here to one exact Literal of DuckDB's type (dates and intervals included), so engines only
ever see columns, integer constants, + - * and comparisons. Output names are DuckDB's default
column names, rendered from the tree as written (DuckDB names the expression before folding it).
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import importlib.metadata
import re
import threading
from dataclasses import dataclass, field, replace

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from gquery.errors import GqueryError, UsageError
from gquery.keywords import BARE_LABEL_REFUSED, COLUMN_REFUSED, KEYWORDS, TABLE_ALIAS_REFUSED
from gquery.query import (BOOLEAN, DATE, DAY_MICROS, DOUBLE, EPOCH, FLIPPED, INTEGER_TYPES, MAX_DECIMAL_WIDTH,
                          TIMESTAMP, VARCHAR, Aggregate, And, Arith, Cast, Column, Compare, Expr, InList, IsNull, Literal,
                          Negate, Not, Or, Output, Query, SqlType, aggregate_type, arithmetic_type, decimal,
                          integer_literal_type, scale_of)
from gquery.schema import Schema, folded

TABLE = "lineitem"
PARAMETER = "gquery_parameter"  # a placed literal's meta key: a prepared statement's parameter, not a literal written
UNARY_PLUS = "gquery_unary_plus"  # a node's meta key: the unary pluses written before it (sqlglot's parser drops them)
TYPE_WRITTEN = "gquery_type_written"  # a type's meta key: its text as written (sqlglot's parser normalizes int8 to BIGINT)
MAX_GROUP_COLUMNS = 2
CLASS = "is outside the selection+aggregate class"


class OutOfClass(GqueryError):
    """A query gquery's engines do not answer: the message names the construct, in one line."""


class UnknownName(GqueryError):
    """A column or table the table does not have: the user's typo, said in one line with the names
    there are, never a reason to ask DuckDB (which would only load the table to say the same)."""


class SqlSyntaxError(OutOfClass):
    """Text sqlglot cannot parse (DuckDB may still read it: `--backend auto` asks it)."""


NAMED = {
    "mission": "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < {z}",
    "q1": """select
    l_returnflag,
    l_linestatus,
    sum(l_quantity) as sum_qty,
    sum(l_extendedprice) as sum_base_price,
    sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
    sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,
    avg(l_quantity) as avg_qty,
    avg(l_extendedprice) as avg_price,
    avg(l_discount) as avg_disc,
    count(*) as count_order
from
    lineitem
where
    l_shipdate <= date '1998-12-01' - interval '90' day
group by
    l_returnflag,
    l_linestatus
order by
    l_returnflag,
    l_linestatus""",
    "q6": """select
    sum(l_extendedprice * l_discount) as revenue
from
    lineitem
where
    l_shipdate >= date '1994-01-01'
    and l_shipdate < date '1994-01-01' + interval '1' year
    and l_discount between 0.06 - 0.01 and 0.06 + 0.01
    and l_quantity < 24""",
}


def named_sql(name: str, z: int | None = None, table: str = TABLE) -> str:
    """The text of a named query: the mission (needs Z), TPC-H Q1 or Q6 with validation parameters;
    over `table` where the data is called otherwise than lineitem."""
    text = _named_sql(name, z)
    if table == TABLE:
        return text
    from gquery.sources import quoted

    return re.sub(rf"(?i)\bfrom(\s+){TABLE}\b", lambda m: f"{m[0][:4]}{m[1]}{quoted(table)}", text, count=1)


def _named_sql(name: str, z: int | None = None) -> str:
    if name not in NAMED:
        raise GqueryError(f"no named query {name!r}: the names are {', '.join(NAMED)}")
    if name == "mission":
        if z is None:
            raise UsageError("the mission query needs Z (l_suppkey < Z)")
        if isinstance(z, bool) or not isinstance(z, int):
            raise GqueryError(f"Z must be an integer, not {z!r}")
        return NAMED[name].format(z=z)
    return NAMED[name]


def parse(text: str, schema: Schema, table: str = TABLE) -> Query:
    """The Query that `text` asks of the table called `table`, or OutOfClass naming what it asks beyond
    the class (UnknownName for a table or column the data does not have)."""
    if not isinstance(text, str):
        raise GqueryError(f"SQL must be text, not {type(text).__name__}")
    return _Binder(text, schema, table).query(_one_statement(text))


@dataclass(frozen=True)
class Template:
    """A prepared statement's text parsed once, its `?` as numbered placeholders, and where each lies in
    the text parsed (parameters.numbered)."""

    tree: exp.Expression
    spans: tuple[tuple[int, int], ...]


def template(text: str) -> Template | None:
    """The Template of a prepared text; None where it parses only as written (it is then parsed at each run). A `$`
    of the text's own is in a string, a quoted name or a comment, or refused (a numbered parameter $1, a named one
    $x): the placeholders $k of the marked text are its `?` alone."""
    from gquery.parameters import numbered

    marked, spans = numbered(text)
    try:  # (a `$` last in the text, a comment's, made sqlglot's tokenizer read the first $k as a tag: a space after it)
        tree = _one_statement(marked + " " if marked.endswith("$") else marked)
    except GqueryError:
        return None
    for hole in tree.find_all(exp.Placeholder):  # ($k: the k-th `?`, numbered)
        if not str(hole.this).isdigit():
            from gquery.parameters import ParameterError

            written = re.search(r"[:@$]" + re.escape(str(hole.this)) + r"\b", text)
            raise ParameterError(f"a named parameter ({written[0] if written else hole.this}) is not taken: write ? for "
                                 "each parameter, in the order they are given")
    return Template(tree, tuple(spans))


NO_PARAMETER = {exp.Alias: "an alias", exp.TableAlias: "a table alias", exp.Interval: "an INTERVAL's count",
                exp.DataTypeParam: "a type's width or scale", exp.Is: "IS"}  # where DuckDB's grammar takes no `?`


def check_parameters(t: Template) -> None:
    """SqlSyntaxError where a prepared statement's `?` stands where DuckDB's grammar takes no parameter (an alias, a
    table alias, INTERVAL ? DAY, DECIMAL(?, 2), IS ?): DuckDB refuses such a text when it is prepared; its value
    bound as a literal would have been answered."""
    for hole in t.tree.find_all(exp.Placeholder):
        where = NO_PARAMETER.get(type(hole.parent))
        if isinstance(hole.parent, exp.Is) and hole.parent.this is hole:  # `? IS NULL`: DuckDB's, a value tested
            continue
        if where is not None:
            raise SqlSyntaxError(f'syntax error at or near "?": DuckDB takes no parameter as {where}')


def parse_template(t: Template, text: str, spans: list[tuple[int, int]], schema: Schema, table: str = TABLE,
                   every_literal: bool = False, types: tuple = ()) -> Query:
    """The Query of `text`, the template's text with its parameters bound as literals lying at `spans` in it
    (parameters.bound_spans), from the tree parsed once: each placeholder $k becomes the k-th literal's own
    parse, placed where it lies in `text` (the binder reads a number as written there: DuckDB types 1.50 by
    its digits), and every other node's place moved there too, but where `every_literal` of the text is a
    placeholder (a shape's template: shape_of), when no other node's place is read. parse(text)'s Query,
    without parsing the whole text again; but where the placeholders are a prepared statement's (not
    `every_literal`), an integer among them is typed as DuckDB types an integer parameter, by its value alone (a
    TINYINT plus the parameter 1 is an INTEGER, as DuckDB's con.execute(text, [1]) types it; the literal 1 there
    would be a TINYINT: _narrowed). `types`: each parameter's type where DuckDB types it otherwise than its literal
    (parameters.parameter_type: Decimal('100') is a DECIMAL(3,0), not the INTEGER 100), else None."""
    literals = [text[start:start + length] for start, length in spans]
    bound = t.tree.copy()
    holes = list(bound.find_all(exp.Placeholder))
    if not every_literal:  # a prepared statement's own numbers lie after parameters bound longer or shorter
        shifts = [(start, length - was) for (start, was), (_, length) in zip(t.spans, spans)]

        def moved(at: int) -> int:
            return at + sum(d for start, d in shifts if start < at)

        for node in bound.walk():
            _moved_meta(node, moved)
    _fill(holes, literals, spans, parameters=not every_literal)
    binder = _Binder(text, schema, table)
    binder.prepared = not every_literal
    binder.parameter_types = {k: t for k, t in enumerate(types, 1) if t is not None}
    return binder.query(bound)


def _fill(holes: list, literals: list[str], spans, parameters: bool = False) -> None:
    """Each placeholder $k of a tree replaced by the k-th literal's own parse, placed where it lies in the text;
    marked a parameter's (`parameters`: a prepared statement's, which _narrowed leaves as it is typed)."""
    for hole in holes:
        node = _placed_literal(literals, spans, int(hole.this) - 1)
        if parameters:
            node.meta[PARAMETER] = int(hole.this)  # (its number: DuckDB names it $k in a column's name)
        _in_hole(hole, node)


def _in_hole(hole: exp.Placeholder, node: exp.Expression) -> None:
    """A placeholder of a parsed tree replaced by a literal's node, which takes the unary pluses written before it."""
    pluses = _pluses(hole)
    if pluses:
        node.meta[UNARY_PLUS] = pluses
    _swapped(hole, node)


def _swapped(old: exp.Expression, new: exp.Expression) -> exp.Expression:
    """old's place in its parent given to new, as old.replace(new) does, in a step: where old is one of a list
    (an IN list's constants), sqlglot's replace sets the parent of each of the list's nodes again (an IN list of
    4,000 constants took 15 s to bind)."""
    parent, key, index = old.parent, old.arg_key, old.index
    held = parent.args.get(key) if parent is not None else None
    if index is None or not isinstance(held, list) or not hasattr(parent, "_hash"):
        return old.replace(new)
    node = parent
    while node is not None and node._hash is not None:  # (as Expr.set: a hash cached above is stale)
        node._hash, node = None, node.parent
    held[index] = new
    new.parent, new.arg_key, new.index = parent, key, index
    old.parent = old.arg_key = old.index = None
    return new


def _placed_literal(literals: list[str], spans, k: int) -> exp.Expression:
    """The k-th literal's own parse, placed where it lies in the text (the binder reads a number as written)."""
    node = _literal_node(literals[k])
    offset = spans[k][0] - len("SELECT ")
    for part in node.walk():
        _moved_meta(part, lambda at: at + offset)
    return node


# --- a new text of a shape parsed before ---------------------------------------------------------------------
# A text's literals, as sqlglot reads them: a typed literal or an interval whole, a string, a number; names,
# quoted names and comments are passed over (a number inside a name is the name's)
_QUOTED = r"""(?ix)
    (?P<literal> \b(?:date|timestamp)\s*'(?:[^']|'')*'
      | \binterval\s+(?:'(?:[^']|'')*'|\d+)(?:\s+(?:year|month|day|hour|minute|second|week)s?\b)?
      | '(?:[^']|'')*'
      | (?<![\w.$])(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?(?![\w.]) )
  | "(?:[^"]|"")*" | --[^\n\r]* | /\*.*?\*/"""
_TOKENS = re.compile(_QUOTED + r" | [a-z_][\w$]*", re.S)
# the same without names: each literal's start is guarded (a word boundary, or no name character before it), so a
# literal is found alike whether the names around it are passed as tokens or as text between them
# (first its start's character looked at: the engine skips the other characters 2-3x sooner, TPC-H Q1's text 60 -> 20 us)
_LITERALS_AND_QUOTED = re.compile(r"(?=[dti'\d.\"\-/])(?:" + _QUOTED.removeprefix("(?ix)") + ")", re.S | re.I | re.X)
SHAPES_KEPT = 4096  # shapes a table keeps: texts of generated shapes must not grow it without bound


# a whitespace run that holds a newline, matched whole from its first character alone (a match tried from within a run
# scanned the rest of it: 100,000 spaces took 12 s)
_NEWLINE_RUN = re.compile(r"(?<!\s)[^\S\n\r]*[\n\r]\s*")  # (a carriage return ends a -- comment too)
_SPACE_RUN = re.compile(r"[^\S\n\r]+")  # one that holds none


def _spaced(gap: str) -> str:
    """Text between tokens, its whitespace runs as one space (one newline where the run holds one: it ends
    a -- comment): two texts that differ only so are one token sequence, one parse tree."""
    if gap in ("", " ", ", ", " (", ") ", ")"):  # most gaps of a text, spaced already
        return gap
    return _SPACE_RUN.sub(" ", _NEWLINE_RUN.sub("\n", gap))  # (plain replacements: no Python call a run)


def shape_of(text: str) -> tuple[str, list[tuple[int, int]]] | None:
    """The text's shape (each literal written `?`, whitespace between tokens made one space, none at either
    end) and where each literal lies in it: (start, length); None where the text has a `?` or `$` of its own
    (a prepared statement's, a dollar-quoted string)."""
    if not isinstance(text, str) or "?" in text or "$" in text:
        return None
    parts, spans, at = [], [], 0
    for m in _LITERALS_AND_QUOTED.finditer(text):  # quoted names and comments as written; the text between, spaced
        parts += [_spaced(text[at:m.start()]), "?" if m.group("literal") is not None else m.group()]
        if m.group("literal") is not None:
            spans.append((m.start(), m.end() - m.start()))
        at = m.end()
    return ("".join(parts) + _spaced(text[at:])).strip(), spans


@dataclass(frozen=True)
class _Shape:
    """A shape's Template; the Query of its first text and that text's literals; and the clause each literal
    lies in (WHERE, LIMIT, a select item, or None: any other). The binder reads WHERE, LIMIT and each select
    item apart from the rest (WHERE reads no more of the select list than its column aliases; an item, the
    GROUP BY columns, which read the items only by a position or ALL), so a later text whose literals differ
    from the first's only there has those parts bound again (ORDER BY too, which matches outputs) and the
    first Query's other parts kept."""

    template: Template
    query: Query
    literals: tuple[str, ...]
    clauses: tuple  # "where", "limit", ("select", k) for the k-th select item's, or None
    # WHERE's top-level AND terms, each with the placeholders in it (_where_terms); and each term bound for the
    # literals it held, with the notes binding it made: a new constant rebinds the term it lies in, not all of WHERE
    where_terms: tuple = ()
    bound_terms: dict = field(default_factory=dict, compare=False, hash=False)
    # held while a text's literals stand in the template's tree (_rebound) or the tree is copied (parse_template)
    lock: threading.Lock = field(default_factory=threading.Lock, compare=False, hash=False, repr=False)
    # a clause's node (by id: the tree lives as long as the shape) → its placeholders, found once (_rebound's filled:
    # they are put back after each text, so the same nodes stand there for the next)
    holes: dict = field(default_factory=dict, compare=False, hash=False, repr=False)


def parse_shaped(text: str, schema: Schema, table: str, shapes: dict) -> Query:
    """parse(text)'s Query, from the Template of its shape where a text of that shape was parsed before
    (`shapes`: a table's, shape → _Shape, or None where the shape cannot serve): a new text of a known
    shape has its WHERE, LIMIT and select items bound again where only their literals differ from the shape's
    first text (_Shape), else binds its literals into the tree parsed once, as a prepared statement's run does (a
    third of a parse). A shape is kept only where its first text's Query from the template, and from its
    clauses bound again, equals parse's; a text the template cannot bind is parsed, so its answer and its
    errors are parse's."""
    found = shape_of(text)
    if found is None:
        return parse(text, schema, table)
    shape, spans = found
    literals = tuple(text[start:start + length] for start, length in spans)
    kept = shapes.get(shape, ...)
    if kept is ...:  # the first text of this shape: parsed, and its template tried against it
        query = parse(text, schema, table)
        try:
            t = template(shape)
            # (its `?` those of shape_of's literals each: a literal the parser takes for a comment's, in a comment
            # nested in another, took no placeholder, and every later literal went to the place before its own)
            same = t is not None and len(t.spans) == len(spans) and \
                parse_template(t, text, spans, schema, table, every_literal=True) == query
            kept = _Shape(t, query, literals, _clauses(t), _where_terms(t)) if same else None
            if kept is not None and (_folded_away(query) or not _same_notes(
                    _rebound(kept, text, spans, schema, table, every=True), query)):
                kept = _Shape(t, query, literals, (None,) * len(literals))  # its clauses are not bound again
        except Exception:  # noqa: BLE001 (a template that cannot bind this text serves no text of its shape)
            kept = None
        if len(shapes) < SHAPES_KEPT:
            shapes[shape] = kept
        return query
    if kept is not None:
        try:
            with kept.lock:  # (the template's tree holds another text's literals while _rebound binds them)
                rebound = _rebound(kept, text, spans, schema, table)
                return rebound if rebound is not None else parse_template(kept.template, text, spans, schema, table,
                                                                          every_literal=True)
        except Exception:  # noqa: BLE001 (parse says what is wrong with this text, in its own words)
            pass
    return parse(text, schema, table)


def _same_notes(a: Query | None, b: Query) -> bool:
    return a is not None and a == b and a.notes == b.notes


def _where_terms(t: Template) -> tuple:
    """WHERE's top-level AND terms, left to right, parentheses passed over (as _predicate joins them), each with the
    indices of the placeholders in it."""
    where = t.tree.args.get("where")
    terms, stack = [], [where.this] if where is not None else []
    while stack:  # (a loop, not recursion: WHERE may AND thousands of terms)
        node = _unparenthesized(stack.pop())
        if isinstance(node, exp.And):
            stack += [node.expression, node.this]
        else:
            terms.append((node, tuple(int(hole.this) - 1 for hole in node.find_all(exp.Placeholder))))
    return tuple(terms)


TERMS_KEPT = 1024  # WHERE terms a shape keeps bound (for the literals they held)


def _where_rebound(shape: _Shape, binder: "_Binder", literals: list[str], filled) -> Expr | None:
    """The WHERE of a text of the shape: each top-level AND term bound for its literals once (kept on the shape
    with the notes it made), the terms joined as _predicate joins them (AND flattened, TRUE and FALSE folded).
    `filled`: a template node with the text's literals while it binds (_rebound's)."""
    terms, notes, computed = [], [], []
    for k, (term, holes) in enumerate(shape.where_terms):
        key = (k, tuple(literals[h] for h in holes))
        found = shape.bound_terms.get(key)
        if found is None:
            before, made = len(binder.notes), len(binder.computed)
            with filled(term) as node:
                found = (binder._predicate(node), tuple(binder.notes[before:]), tuple(binder.computed[made:]))
            if len(shape.bound_terms) >= TERMS_KEPT:
                shape.bound_terms.clear()
            shape.bound_terms[key] = found
        terms.append(found[0])
        notes += found[1]
        computed += found[2]
    binder.notes[:] = notes
    binder.computed[:] = computed
    return binder._kept_rows(_conjunction(And, terms))


def _clauses(t: Template) -> tuple:
    """The clause each of a template's placeholders lies in (_Shape.clauses)."""
    found: list = [None] * len(t.spans)
    group = t.tree.args.get("group")
    grouped_by_items = group is not None and (group.args.get("all") or any(group.find_all(exp.Placeholder)))
    parts = [("where", t.tree.args.get("where")), ("limit", t.tree.args.get("limit"))]
    if not grouped_by_items:  # (GROUP BY 1 or ALL: an item's literals may change the groups, which every item reads)
        parts += [(("select", k), item) for k, item in enumerate(t.tree.expressions)]
    for clause, node in parts:
        for hole in node.find_all(exp.Placeholder) if node is not None else ():
            found[int(hole.this) - 1] = clause
    return tuple(found)


def _rebound(shape: _Shape, text: str, spans: list[tuple[int, int]], schema: Schema, table: str,
             every: bool = False) -> Query | None:
    """The Query of a text of the shape whose literals differ from its first text's only in WHERE, LIMIT and
    select items: the first Query with those parts bound again (`every`: each that holds a literal, whatever
    differs); None where another literal differs."""
    literals = [text[start:start + length] for start, length in spans]
    changed = {clause for clause, new, old in zip(shape.clauses, literals, shape.literals)
               if (every and clause is not None) or new != old}
    if None in changed:
        return None
    binder = _Binder(text, schema, table)
    tree = shape.template.tree
    binder.scope(tree)

    @contextlib.contextmanager
    def filled(node: exp.Expression):
        """The template's node with this text's literals in its placeholders' places while it binds, put back after
        (the binder only reads it; the caller holds the shape's lock): a copy of Q1's select item took a third of
        its new constant's parse."""
        holes = shape.holes.get(id(node))
        if holes is None:
            holes = shape.holes[id(node)] = list(node.find_all(exp.Placeholder))
        placed = []
        try:
            for hole in holes:
                literal = _placed_literal(literals, spans, int(hole.this) - 1)
                _in_hole(hole, literal)
                placed.append((hole, literal))
            yield placed[0][1] if isinstance(node, exp.Placeholder) else node  # (itself a placeholder: its literal)
        finally:
            for hole, literal in reversed(placed):
                _swapped(literal, hole)

    first = shape.query
    where, limit, notes, outputs, order_by = first.where, first.limit, first.notes, first.outputs, first.order_by
    if "where" in changed:
        where = _where_rebound(shape, binder, literals, filled)
        notes = tuple(dict.fromkeys(binder.notes))
    if "limit" in changed:
        with filled(tree.args["limit"]) as node:
            limit = binder._limit(node)
    items = sorted(clause[1] for clause in changed if isinstance(clause, tuple))
    if items:
        outputs = list(outputs)
        for k in items:
            with filled(tree.expressions[k]) as item:
                binder._check_select_item(_unaliased(item))
                outputs[k] = binder._output(item, first.group_by)
        outputs = tuple(outputs)
        if tree.args.get("order") is not None:  # its keys matched against the outputs again
            with filled(tree.args["order"]) as node:
                order_by = binder._order_by(node, tree.expressions, outputs)
    return replace(first, sql=_statement_text(text), where=where, limit=limit, notes=notes, outputs=outputs,
                   order_by=order_by, computed=tuple(dict.fromkeys(binder.computed)))  # (the clauses bound again made;
    # the others' are in the first's expressions kept: a shape whose first text folded one away is not bound so)


def _folded_away(query: Query) -> bool:
    """Whether a cast or date shift the binder made (Query.computed) is in none of the query's expressions: folded
    away, so a text of its shape is bound whole (_rebound keeps the first's other clauses, not what they dropped)."""
    if not query.computed:
        return False
    live = {node for e in query._exprs() for node in e.walk()}
    return any(made not in live for made in query.computed)


def _moved_meta(node: exp.Expression, moved) -> None:
    meta = node.meta
    for key in ("start", "end"):
        if meta.get(key) is not None:
            meta[key] = moved(meta[key])


@functools.lru_cache(maxsize=4096)
def _literal_tree(literal: str) -> exp.Expression:
    """A literal's own parse (SELECT <literal>): kept, copied for each use."""
    return _one_statement(f"SELECT {literal}").expressions[0]


_PLAIN_LITERAL = re.compile(r"(\d+(?:\.\d+)?)|'([^']*)'", re.ASCII)


# a typed literal whose quoted part is digits alone (an interval's count) or a date or time: the tokenizer takes that
# part as it is written, so the literal's tree is another of its form and length with that one string changed
_TYPED_LITERAL = re.compile(r"(?i)(interval\s*')(\d+)('\s*[a-z]+)|((?:date|timestamp)\s*')([\d:. -]+)(')", re.ASCII)
_TYPED_KEPT = 256  # forms kept: (prefix, length, suffix) → their tree and the path to its one string
_typed_forms: dict = {}


def _literal_node(literal: str) -> exp.Expression:
    """_literal_tree's node of its own: for digits (with a point) or a string without a quote inside, the node
    sqlglot's parser makes (tests/test_sql.py checks they are equal), made without parsing; a new constant is
    most often one. A typed literal (INTERVAL '90' DAY, DATE '1998-09-02') is its form's tree, parsed once a form,
    with its own quoted part."""
    m = _PLAIN_LITERAL.fullmatch(literal)
    if m is None:
        typed = _TYPED_LITERAL.fullmatch(literal)
        return _literal_tree(literal).copy() if typed is None else _typed_node(literal, typed)
    node = exp.Literal(this=m[1] if m[1] is not None else m[2], is_string=m[1] is None)
    node.meta.update(line=1, col=len("SELECT ") + len(literal), start=len("SELECT "), end=len("SELECT ") + len(literal) - 1)
    return node


def _typed_node(literal: str, m: re.Match) -> exp.Expression:
    """A typed literal's tree: the first literal of its form (prefix, length of its quoted part, suffix) parsed, its
    one string node found where it holds that part as written; a later one's tree that tree copied, the string set.
    A form whose parse holds the part otherwise (not once, not as written) is parsed each time."""
    prefix, inner, suffix = (m[1], m[2], m[3]) if m[1] is not None else (m[4], m[5], m[6])
    key = (prefix, len(inner), suffix)
    form = _typed_forms.get(key)
    if form is None:
        tree = _literal_tree(literal)
        strings = [node for node in tree.walk() if isinstance(node, exp.Literal) and node.is_string]
        path = None
        if len(strings) == 1 and strings[0].this == inner:
            path, node = [], strings[0]
            while node is not tree:  # (arg key, index in a list or None) from the root down
                parent = node.parent
                value = parent.args[node.arg_key]
                path.append((node.arg_key, value.index(node) if isinstance(value, list) else None))
                node = parent
            path.reverse()
        form = (tree, path)
        if len(_typed_forms) < _TYPED_KEPT:
            _typed_forms[key] = form
    tree, path = form
    if path is None:
        return _literal_tree(literal).copy()
    out = tree.copy()
    node = out
    for arg, index in path:
        node = node.args[arg] if index is None else node.args[arg][index]
    node.set("this", inner)
    return out


FILES_IN_FROM = re.compile(r"""(?ix) \b(from \s+) (?: read_parquet \s* \( \s* '((?:[^']|'')+)' \s* \) | '((?:[^']|'')+\.parquet)' )""")


def files_in_from(text: str):
    """Where the text reads files itself, as DuckDB lets it (FROM read_parquet('trips/*.parquet') or
    FROM 'trips.parquet'): (the path or glob, a function of a table's name giving the text that reads
    that table instead); else None."""
    m = FILES_IN_FROM.search(text) if isinstance(text, str) else None
    if m is None:
        return None
    from gquery.sources import quoted

    path = (m[2] or m[3]).replace("''", "'")
    return path, lambda table: text[:m.start()] + m[1] + quoted(table) + text[m.end():]


def check_table(text: str, table: str) -> None:
    """UnknownName where the text's FROM names a table other than `table`: said before any data is read
    or any store built for it. Anything else about the text is parse's to judge."""
    try:
        statement = _one_statement(text)
    except GqueryError:
        return
    from_ = statement.args.get("from_") if isinstance(statement, exp.Select) else None
    named = from_.this if from_ is not None else None
    if isinstance(named, exp.Table) and isinstance(named.this, exp.Identifier) and not named.args.get("db"):
        _require_table(named, table)


DEFAULT_SCHEMA = "main"  # DuckDB's schema of a table named alone: main.lineitem is lineitem


def _other_schema(node: exp.Table | exp.Column) -> bool:
    """Whether a table or column is qualified by a catalog, or a schema other than DEFAULT_SCHEMA."""
    return bool(node.args.get("catalog")) or bool(node.args.get("db")) and folded(node.db) != DEFAULT_SCHEMA


def _require_table(node: exp.Table, table: str) -> None:
    if folded(node.name) != folded(table):
        raise UnknownName(f"unknown table {_printed(node.name)}: the data is the table {table}")


def _printed(name: str) -> str:
    """A name as a message shows it: a character that prints nothing (a NUL, a control) escaped, as DuckDB shows it."""
    return name if name.isprintable() else "".join(c if c.isprintable() else c.encode("unicode_escape").decode()
                                                   for c in name)


def constant(text: str) -> Literal:
    """The Literal a constant SQL expression folds to, typed as DuckDB types it (what parse puts in
    a query for it): DATE '1994-01-01' + INTERVAL 1 YEAR is TIMESTAMP '1995-01-01 00:00:00'."""
    wrapped = f"SELECT {text}"
    statement = _one_statement(wrapped)
    if len(statement.expressions) != 1:
        raise OutOfClass(f"{text!r} is not one expression")
    value = _Binder(wrapped, Schema({}, {}))._value(statement.expressions[0])
    if not isinstance(value, Literal):
        raise OutOfClass(f"{text!r} is not a constant")
    return value


def check_syntax(text: str) -> None:
    """SqlSyntaxError (one line) unless the text is one SELECT that sqlglot parses; a prepared statement's
    `?` parse as placeholders."""
    _one_statement(text)


def _unary_plus(parser) -> exp.Expression | None:
    """A unary plus's operand, marked (UNARY_PLUS): to DuckDB `+x` is the function +(x), named so in a column's name
    and no literal (TINYINT + +1 is an INTEGER, where TINYINT + 1 is a TINYINT); sqlglot's parser drops the plus."""
    node = parser._parse_unary()
    if node is not None:
        node.meta[UNARY_PLUS] = node.meta.get(UNARY_PLUS, 0) + 1
    return node


@functools.cache
def _unary_parsers(parser_type) -> dict:
    return {**parser_type.UNARY_PARSERS, TokenType.PLUS: _unary_plus}


def _types_written(parser):
    """The parser's _parse_types, each type it parses marked with its text as written (TYPE_WRITTEN): DuckDB prints a
    cast's type in a column's name as written where it is no SQL keyword (CAST(x AS int8), not BIGINT)."""
    parse_types = parser._parse_types

    def parse(*args, **kwargs):
        first = parser._index
        node = parse_types(*args, **kwargs)
        if isinstance(node, exp.DataType) and parser._index > first and parser.sql:
            node.meta[TYPE_WRITTEN] = parser.sql[parser._tokens[first].start:parser._prev.end + 1]
        return node

    return parse


def _pluses(node: exp.Expression) -> int:
    """The unary pluses written before a node (_unary_plus)."""
    return node.meta.get(UNARY_PLUS, 0)


_SQLGLOT_NODE = re.compile(r"Required keyword: '(\w+)' missing for <class '[\w.]+\.(\w+)'>")


def _one_statement(text: str) -> exp.Expression:
    dialect = sqlglot.Dialect.get_or_raise("duckdb")
    try:
        tokens = _names_retyped(dialect.tokenize(text))
        parser = dialect.parser()
        parser.UNARY_PARSERS = _unary_parsers(type(parser))
        parser.NO_PAREN_FUNCTION_PARSERS = _NO_PAREN_FUNCTIONS
        parser._parse_types = _types_written(parser)
        statements = [s for s in parser.parse(tokens, text) if s is not None]
    except sqlglot.errors.SqlglotError as e:  # (sqlglot names its own classes where a node lacks a part: `k < ??`)
        said = _SQLGLOT_NODE.sub(lambda m: f"{m[2].upper()} lacks an operand", _first_line(e))
        raise SqlSyntaxError(_duckdb_refusal(text) or f"syntax error: {said}") from None
    _check_tokens(tokens)
    _check_dollar_tags(tokens, text)
    for statement in statements:
        _check_aliases(statement, tokens)
    if not statements:
        raise SqlSyntaxError("no SQL statement")
    if len(statements) > 1:
        raise OutOfClass(f"more than one statement {CLASS}")
    statement = statements[0]
    if isinstance(statement, exp.SetOperation):
        raise OutOfClass(f"{statement.key.upper()} {CLASS}")
    if not isinstance(statement, exp.Select):  # (sqlglot reads `SELEC x` as an alias: DuckDB's parser says what is)
        refused = _duckdb_refusal(text)
        if refused:
            raise SqlSyntaxError(refused)
        kind = statement.key.upper()
        raise OutOfClass(f"{'an' if kind[0] in 'AEIOU' else 'a'} {kind} statement {CLASS}")
    return statement


# words DuckDB's parser takes as a column's name (its unreserved keywords) that sqlglot's tokenizer makes keywords of:
# in a SELECT they name a column wherever they stand after its first word (DROP, INSERT: statements of their own)...
_NAMES_ANYWHERE = {TokenType.ALTER, TokenType.DROP, TokenType.FORCE, TokenType.GRANT, TokenType.INSERT,
                   TokenType.INSTALL, TokenType.LOCK, TokenType.REVOKE, TokenType.ROLLBACK}
# ...or where no "(" (MAP also "{" or "[") follows: GROUP BY ROLLUP (a, b), MAP {...}, (VALUES (1), (2))
_NAMES_UNCALLED = {TokenType.CUBE: {TokenType.L_PAREN}, TokenType.ROLLUP: {TokenType.L_PAREN},
                   TokenType.VALUES: {TokenType.L_PAREN},
                   TokenType.MAP: {TokenType.L_PAREN, TokenType.L_BRACE, TokenType.L_BRACKET}}
# ...or where "<" follows (DuckDB has no type written LIST<...>): WHERE range < 3
_NAMES_COMPARED = sqlglot.parser.Parser.NESTED_TYPE_TOKENS
# where an operand begins: a BETWEEN there (NOT before it or not) is a column's name, elsewhere the operator
_OPERAND_STARTS = {TokenType.SELECT, TokenType.WHERE, TokenType.GROUP_BY, TokenType.ORDER_BY, TokenType.L_PAREN,
                   TokenType.COMMA, TokenType.AND, TokenType.OR, TokenType.LT, TokenType.LTE, TokenType.GT,
                   TokenType.GTE, TokenType.EQ, TokenType.NEQ, TokenType.PLUS, TokenType.DASH, TokenType.STAR,
                   TokenType.ALIAS, TokenType.DOT}
# no IF without parentheses (IF c THEN a ELSE b END is another dialect's): `WHERE if > 1` reads a column named if
_NO_PAREN_FUNCTIONS = {k: v for k, v in sqlglot.parser.Parser.NO_PAREN_FUNCTION_PARSERS.items() if k != "IF"}

# ...and the functions written without parentheses, where DuckDB binds a column of their name first (its column
# current_date; the function where the table has none: refused, _column)
_NAMED_FUNCTIONS = {TokenType.CURRENT_DATE, TokenType.CURRENT_TIME, TokenType.CURRENT_TIMESTAMP, TokenType.LOCALTIME,
                    TokenType.LOCALTIMESTAMP, TokenType.CURRENT_USER, TokenType.SESSION_USER, TokenType.CURRENT_CATALOG}
# their words, and those of the functions sqlglot reads as a column's name already: with no column of its name, a
# function (_column)
NAMED_FUNCTIONS = {t.name.lower() for t in _NAMED_FUNCTIONS} | {"user", "current_schema", "current_role"}
_MAYBE_NAMES = frozenset({*_NAMES_ANYWHERE, *_NAMES_UNCALLED, *_NAMES_COMPARED, *_NAMED_FUNCTIONS, TokenType.BETWEEN,
                          TokenType.INTERVAL})
# what may follow INTERVAL as its amount (a sign: INTERVAL -1 DAY, _check_tokens says which); after anything else,
# interval is a column's name
_AMOUNT_STARTS = {TokenType.NUMBER, TokenType.STRING, TokenType.L_PAREN, TokenType.VAR, TokenType.IDENTIFIER,
                  TokenType.PARAMETER, TokenType.PLACEHOLDER, TokenType.DASH, TokenType.PLUS, TokenType.HEREDOC_STRING}
_LABEL_BEFORE = {TokenType.ALIAS, TokenType.DOT, TokenType.FROM}  # a name's place, whatever word stands there
_TYPES = sqlglot.parser.Parser.TYPE_TOKENS
_NOT_KEYWORDS = {TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING, TokenType.NUMBER, TokenType.STAR,
                 TokenType.L_PAREN, TokenType.PARAMETER, TokenType.PLACEHOLDER}


def _names_retyped(tokens: list) -> list:
    """The tokens with those of DuckDB's unreserved keywords that stand as a column's name made names (VAR), as
    DuckDB's grammar reads them (SELECT map, drop FROM t WHERE between > 1): sqlglot's tokenizer makes each a keyword
    of its own, and its parser then refuses the text or reads another."""
    depth = 0  # the parentheses open before tokens[k - 1]: a FROM of the query's own is outside them
    for k in range(1, len(tokens)):
        token, kind = tokens[k], tokens[k].token_type
        prior = tokens[k - 1].token_type
        depth += (prior == TokenType.L_PAREN) - (prior == TokenType.R_PAREN)
        if prior in _LABEL_BEFORE and kind not in _NOT_KEYWORDS and token.text.isidentifier() \
                and not (prior == TokenType.ALIAS and kind in _TYPES) \
                and not (prior == TokenType.FROM and (token.text.lower() in TABLE_ALIAS_REFUSED or depth > 0
                                                      or k > 1 and tokens[k - 2].token_type == TokenType.DISTINCT)):
            token.token_type = TokenType.VAR  # AS from, t.select, FROM between: DuckDB's names (any word after AS, but
            continue  # CAST(x AS INTEGER)'s type, or a point; its col_name keywords after the query's FROM, not
            # IS DISTINCT FROM's nor EXTRACT(year FROM ...)'s)
        if kind not in _MAYBE_NAMES:
            continue  # (most tokens: two looks each)
        if kind in _NAMES_ANYWHERE and tokens[k - 1].token_type != TokenType.SEMICOLON:
            token.token_type = TokenType.VAR
        elif kind in _NAMES_UNCALLED and (k + 1 == len(tokens) or tokens[k + 1].token_type not in _NAMES_UNCALLED[kind]):
            token.token_type = TokenType.VAR
        elif kind in _NAMES_COMPARED and k + 1 < len(tokens) and tokens[k + 1].token_type == TokenType.LT:
            token.token_type = TokenType.VAR
        elif kind in _NAMED_FUNCTIONS and (k + 1 == len(tokens) or tokens[k + 1].token_type != TokenType.L_PAREN):
            token.token_type = TokenType.VAR
        elif kind == TokenType.INTERVAL and (k + 1 == len(tokens) or tokens[k + 1].token_type not in _AMOUNT_STARTS):
            token.token_type = TokenType.VAR  # interval * 2, interval > DATE '...': a column named interval
        elif kind == TokenType.BETWEEN:
            before = k - 1 - (tokens[k - 1].token_type == TokenType.NOT and k > 1)
            if tokens[before].token_type in _OPERAND_STARTS:
                token.token_type = TokenType.VAR
    return tokens


@functools.lru_cache(maxsize=64)
def _duckdb_refusal(text: str) -> str | None:
    """DuckDB's parser's one line where it refuses a text sqlglot could not read as a SELECT (`SELEC x`, a quote
    left open: sqlglot said "a ALIAS statement", "Error tokenizing"), else None. Asked only for a text refused."""
    import duckdb

    try:
        duckdb.extract_statements(text)
    except duckdb.ParserException as e:
        said = _first_line(e).removeprefix("Parser Error: ")
        return said if said.startswith("syntax error") else f"syntax error: {said}"
    except duckdb.Error:
        return None
    return None


# sqlglot's parser takes some texts DuckDB's refuses: those are refused here as DuckDB's parser refuses them (with
# --backend auto, DuckDB is then asked, and says so itself)
_CLAUSES = {TokenType.FROM, TokenType.WHERE, TokenType.GROUP_BY, TokenType.ORDER_BY, TokenType.LIMIT, TokenType.HAVING,
            TokenType.SEMICOLON}
_ENDS = _CLAUSES | {TokenType.R_PAREN}  # what a clause's or AS's first word cannot be (a comma: an empty item)
_NEED_MORE = {TokenType.GROUP_BY, TokenType.ORDER_BY, TokenType.WHERE, TokenType.LIMIT, TokenType.ALIAS}
_DIRECTIONS = {TokenType.ASC, TokenType.DESC}
_LOOKED_AT = {TokenType.COMMA, TokenType.DOT, TokenType.BETWEEN, TokenType.IDENTIFIER, TokenType.INTERVAL, TokenType.ALL,
              *_NEED_MORE, *_DIRECTIONS}
_SIGNS = {TokenType.DASH, TokenType.PLUS}


def _check_tokens(tokens: list) -> None:
    """SqlSyntaxError where the tokens are not DuckDB's SQL though sqlglot parses them: parentheses that do not pair
    up, an empty list item (a comma after a comma, a parenthesis, SELECT, SELECT ALL or BY: a trailing one is DuckDB's
    too), a clause or AS with nothing after it (GROUP BY at the end, GROUP BY ORDER BY 1, FROM t AS), two directions
    or two NULLS orders on one ORDER BY item, an empty quoted name, a BETWEEN without its AND, a point apart from the
    digits after it (. 5), a sign after INTERVAL (INTERVAL -1 DAY: DuckDB's amount is a number, a string, a name or
    parenthesized)."""
    depth = 0
    for k, (token, depth) in enumerate(_nested(tokens)):
        kind = token.token_type
        if depth < 0:
            raise SqlSyntaxError('syntax error at or near ")": it closes no "("')
        if kind not in _LOOKED_AT and not (kind == TokenType.VAR and len(token.text) == 5):
            continue  # (most tokens: one look each, the parse of a new text is on the user's clock)
        before = tokens[k - 1] if k else None
        after = tokens[k + 1] if k + 1 < len(tokens) else None
        if kind == TokenType.COMMA and k and (before.token_type in (
                TokenType.COMMA, TokenType.L_PAREN, TokenType.SELECT, TokenType.GROUP_BY, TokenType.ORDER_BY) or (
                before.token_type == TokenType.ALL and k > 1 and tokens[k - 2].token_type == TokenType.SELECT)):
            raise SqlSyntaxError('syntax error at or near ",": a list item is missing')
        elif kind == TokenType.DOT and after is not None and after.token_type == TokenType.NUMBER \
                and after.start > token.end + 1:
            raise SqlSyntaxError(f'syntax error at or near "{after.text}": a point apart from its digits')
        elif kind == TokenType.BETWEEN and not _has_and(tokens, k + 1):
            raise SqlSyntaxError("syntax error: BETWEEN without its AND")
        elif kind in _NEED_MORE and (after is None or after.token_type in _ENDS):
            near = token.text.split()[-1] if after is None else after.text.split()[0]
            raise SqlSyntaxError(f'syntax error at or near "{near}": {token.text.upper()} with nothing after it')
        elif kind in _DIRECTIONS and before is not None and before.token_type in _DIRECTIONS:
            raise SqlSyntaxError(f'syntax error at or near "{token.text}": an ORDER BY item of two directions')
        elif kind == TokenType.VAR and token.text.upper() == "NULLS" and k > 1 and tokens[k - 2].text.upper() == "NULLS" \
                and before.text.upper() in ("FIRST", "LAST"):
            raise SqlSyntaxError(f'syntax error at or near "{token.text}": an ORDER BY item of two NULLS orders')
        elif kind == TokenType.INTERVAL and after is not None and after.token_type in _SIGNS:
            unit = _after_term(tokens, k + 2)  # INTERVAL -1 DAY, -(1) YEAR: DuckDB says so at the unit
            if unit is not None and unit.token_type not in _ENDS and unit.text.upper().removesuffix("S") in UNITS:
                raise SqlSyntaxError(f'syntax error at or near "{unit.text}": an INTERVAL\'s amount is a number, a '
                                     'string, a name or parenthesized (INTERVAL (-1) DAY)')
            raise refuse(f'the name {token.text} before "{after.text}", which sqlglot reads as an INTERVAL\'s sign '
                         f'(write "{token.text}")')  # (DuckDB reads a column named interval there)
        elif kind == TokenType.INTERVAL and after is not None and after.token_type == TokenType.STRING \
                and not _INTERVAL_COUNT.fullmatch(after.text) and interval_parts(after.text) is None:
            raise refuse(f"the interval '{after.text}' ({INTERVALS_READ})")  # (read whole: sqlglot keeps its first part)
        elif kind == TokenType.ALL and before is not None and before.token_type in _SIGNS:  # (ORDER BY +ALL)
            raise SqlSyntaxError(f'syntax error at or near "{token.text}": a sign before ALL')
        elif kind == TokenType.IDENTIFIER and token.text == "":
            raise SqlSyntaxError('zero-length delimited identifier: a quoted name holds at least one character')
    if depth:
        raise SqlSyntaxError('syntax error at end of input: a "(" is never closed')


_DOLLAR_TAG = re.compile(r"\$(?:(?:[A-Za-z_]|[^\x00-\x7f])(?:[A-Za-z0-9_]|[^\x00-\x7f])*)?\$")  # (DuckDB's: PostgreSQL's)


def _check_dollar_tags(tokens: list, text: str) -> None:
    """SqlSyntaxError for a dollar-quoted string whose tag DuckDB's lexer does not take ($1a$...$1a$, $a-b$...$a-b$),
    where sqlglot's takes any."""
    for token in tokens:
        if token.token_type == TokenType.HEREDOC_STRING and not _DOLLAR_TAG.match(text, token.start):
            opening = text[token.start:text.index("$", token.start + 1) + 1]
            raise SqlSyntaxError(f'syntax error at or near "{opening}": a dollar quote\'s tag is a name (letters, '
                                 'digits and underscores, not first a digit)')


def _after_term(tokens: list, k: int):
    """The token after the term at k (a number or name, or a parenthesized group), None at the end."""
    end = k
    if k < len(tokens) and tokens[k].token_type == TokenType.L_PAREN:
        end = next((k + j for j, (_, depth) in enumerate(_nested(tokens[k:])) if depth == 0), len(tokens))
    return tokens[end + 1] if end + 1 < len(tokens) else None


def _nested(tokens: list):
    """Each token with the parentheses' depth after it: one more after a "(", one less after a ")" (below 0: a ")"
    that closes none)."""
    depth = 0
    for token in tokens:
        depth += (token.token_type == TokenType.L_PAREN) - (token.token_type == TokenType.R_PAREN)
        yield token, depth


def _has_and(tokens: list, at: int) -> bool:
    """Whether an AND follows at the depth `at` begins, before that depth's list, clause or expression ends."""
    for token, depth in _nested(tokens[at:]):
        kind = token.token_type
        if depth < 0 or depth == 0 and (kind in _CLAUSES or kind in (TokenType.COMMA, TokenType.OR)):
            return False
        if depth == 0 and kind == TokenType.AND:
            return True
    return False


def _check_aliases(statement: exp.Expression, tokens: list) -> None:
    """SqlSyntaxError for a keyword DuckDB's parser refuses as an alias where sqlglot's takes it (SUM(x) day, FROM t
    all), as a table's name (FROM group) or as an ORDER BY's name (ORDER BY desc), written unquoted, and for BETWEEN
    SYMMETRIC, which DuckDB's parser does not have; a dollar-quoted string ($$it's$$, sqlglot's RawString) made the
    VARCHAR constant DuckDB reads. One walk of the tree."""
    after_as = {tokens[k].start for k in range(1, len(tokens)) if tokens[k - 1].token_type == TokenType.ALIAS}
    raw = []
    for node in statement.find_all(exp.Table, exp.Ordered, exp.Column, exp.Alias, exp.TableAlias, exp.Between,
                                   exp.RawString):
        if isinstance(node, (exp.Table, exp.Ordered, exp.Column)):
            _check_name_place(node)
        elif isinstance(node, exp.Between):
            if node.args.get("symmetric"):  # (ASYMMETRIC, BETWEEN's own meaning, is DuckDB's too)
                raise SqlSyntaxError("syntax error at or near SYMMETRIC: DuckDB's BETWEEN has no SYMMETRIC")
        elif isinstance(node, exp.RawString):
            raw.append(node)
        else:
            _check_alias(node, after_as)
    for node in raw:
        node.replace(exp.Literal.string(node.this))


def _check_name_place(node: exp.Expression) -> None:
    """A table's name, its qualifier of a column, or a name in ORDER BY (_column's check sees no ORDER BY alias),
    written unquoted as a keyword DuckDB's parser refuses there."""
    if isinstance(node, exp.Table):  # (main.group names a table: DuckDB takes any word after the point)
        named, refused, what = None if node.args.get("db") else node.this, TABLE_ALIAS_REFUSED, "a table's name"
    elif isinstance(node, exp.Column):  # group.x
        named, refused, what = None if node.args.get("db") else node.args.get("table"), TABLE_ALIAS_REFUSED, \
            "a table's name"
    else:
        column = node.this
        named = column.this if isinstance(column, exp.Column) and not column.args.get("table") else None
        refused, what = COLUMN_REFUSED, "a name in ORDER BY"
    if isinstance(named, exp.Identifier) and not named.args.get("quoted") and named.name.lower() in refused:
        raise SqlSyntaxError(f'syntax error at or near "{named.name}": a keyword DuckDB does not take as {what} '
                             f'unquoted (write "{named.name}")')
    if isinstance(node, exp.Ordered) and isinstance(named, exp.Identifier):
        _check_default(named)


def _check_alias(node: exp.Expression, after_as: set) -> None:
    """An alias (a select item's, bare or after AS, or a table's) DuckDB's parser refuses, or a bare export_state."""
    name = node.args.get("alias") if isinstance(node, exp.Alias) else node.this
    if not isinstance(name, exp.Identifier) or name.args.get("quoted"):
        return
    word = name.name.lower()
    refused = TABLE_ALIAS_REFUSED if isinstance(node, exp.TableAlias) else \
        BARE_LABEL_REFUSED if name.meta.get("start") not in after_as else ()
    if word in refused:
        raise SqlSyntaxError(f'syntax error at or near "{name.name}": a keyword DuckDB does not take as this alias')
    if word == "export_state" and isinstance(node, exp.Alias) and name.meta.get("start") not in after_as:
        raise refuse(f"an aggregate's EXPORT_STATE ({_short(node.this)} {name.name}: DuckDB exports the "
                     "aggregate's state, no alias)")


def _check_default(word: exp.Identifier) -> None:
    """OutOfClass for DEFAULT written unquoted as a name: DuckDB reads it as DEFAULT, which its binder refuses in a
    query ("WHERE clause cannot contain DEFAULT clause"), not as a column named default."""
    if not word.args.get("quoted") and word.name.lower() == "default":
        raise refuse(f'DEFAULT, which DuckDB reads unquoted as no column ({word.name}): its binder refuses it in a query; '
                     f'write "{word.name}" for the column')


def _first_line(e: Exception) -> str:
    # sqlglot underlines the offending token with ANSI escapes on the lines after the first
    return re.sub(r"\x1b\[[0-9;]*m", "", str(e)).splitlines()[0] if str(e) else type(e).__name__


def refuse(what: str) -> OutOfClass:
    return OutOfClass(f"{what} {CLASS}")


# --- what sqlglot nodes outside the class are called ------------------------------------------------
CONSTRUCTS = [
    (exp.Subquery, "a subquery"), (exp.Select, "a subquery"), (exp.Exists, "EXISTS"), (exp.Window, "a window function"),
    (exp.Div, "division"), (exp.IntDiv, "integer division"), (exp.Mod, "the operator %"),
    (exp.Pow, "exponentiation"), (exp.DPipe, "the operator ||"), (exp.Like, "LIKE"), (exp.ILike, "ILIKE"),
    (exp.SimilarTo, "SIMILAR TO"), (exp.Glob, "GLOB"), (exp.Is, "an IS test (IS NULL, IS TRUE)"), (exp.Case, "a CASE expression"),
    (exp.If, "IF"), (exp.Null, "NULL"), (exp.Placeholder, "a parameter"), (exp.Parameter, "a parameter"),
    (exp.Tuple, "a row value"), (exp.Collate, "COLLATE"), (exp.NullSafeEQ, "IS NOT DISTINCT FROM"),
    (exp.NullSafeNEQ, "IS DISTINCT FROM"), (exp.Filter, "an aggregate FILTER"), (exp.Distinct, "DISTINCT"),
    (exp.Star, "SELECT *"), (exp.TryCast, "TRY_CAST"), (exp.Interval, "an INTERVAL outside date arithmetic"),
    (exp.ByteString, "an escape string (E'...': DuckDB reads its backslashes as escapes)"),
    (exp.Binary, "the operator"), (exp.Unary, "the operator"),
]
CLAUSES = {"with_": "a WITH clause", "distinct": "DISTINCT", "joins": "a join", "laterals": "a lateral join",
           "having": "HAVING", "qualify": "QUALIFY", "windows": "a WINDOW clause", "offset": "OFFSET",
           "sample": "a sample", "into": "SELECT INTO", "prewhere": "PREWHERE", "connect": "CONNECT BY"}
HANDLED_CLAUSES = {"expressions", "from_", "where", "group", "order", "limit", "kind"}
_INTERVAL_COUNT = re.compile(r"\s*[-+]?[\d.]+\s*", re.ASCII)  # INTERVAL '90' DAY's string: a count, its unit after it (a fraction said later)
_INTERVAL_PART = re.compile(r"\s*(-?\d+)\s*([a-zA-Z]+)", re.ASCII)  # (ASCII digits and spaces: DuckDB's)
ASCII_SPACE = " \t\n\r\x0b\x0c"  # the spaces DuckDB reads around a date's or an interval's fields (not U+00A0)
INTERVALS_READ = "gquery reads n DAY|WEEK|MONTH|QUARTER|YEAR|HOUR|MINUTE|SECOND, one or more in a string"


def interval_parts(text: str) -> list[tuple[str, str]] | None:
    """An interval string's (count, unit) parts ('2 days -3 hours'), each unit one of UNITS (or its plural); None
    where the string is anything more (a time of day, `ago`, an abbreviation, '+1 day' DuckDB refuses): sqlglot's
    parser keeps the first part of a string alone, INTERVAL '1 day 00:00:01' read as 1 DAY."""
    parts, at = [], 0
    while (m := _INTERVAL_PART.match(text, at)) is not None:
        unit = m[2].upper()
        if (unit[:-1] if unit.endswith("S") else unit) not in UNITS:
            return None
        parts.append((m[1], m[2]))
        at = m.end()
    return parts if parts and not text[at:].strip(ASCII_SPACE) else None


NEGATED_WIDER = {"TINYINT": "SMALLINT", "SMALLINT": "INTEGER", "INTEGER": "BIGINT", "BIGINT": "HUGEINT"}
UNITS = {"DAY": (0, 1, 0), "WEEK": (0, 7, 0), "MONTH": (1, 0, 0), "QUARTER": (3, 0, 0), "YEAR": (12, 0, 0),
         "HOUR": (0, 0, 3_600_000_000), "MINUTE": (0, 0, 60_000_000), "SECOND": (0, 0, 1_000_000)}
CAST_TYPES = {exp.DataType.Type.TINYINT: "TINYINT", exp.DataType.Type.SMALLINT: "SMALLINT",
              exp.DataType.Type.INT: "INTEGER", exp.DataType.Type.BIGINT: "BIGINT", exp.DataType.Type.INT128: "HUGEINT",
              exp.DataType.Type.UTINYINT: "UTINYINT", exp.DataType.Type.USMALLINT: "USMALLINT",
              exp.DataType.Type.UINT: "UINTEGER",
              exp.DataType.Type.DATE: "DATE", exp.DataType.Type.TIMESTAMP: "TIMESTAMP",
              exp.DataType.Type.TIMESTAMPNTZ: "TIMESTAMP"}
UNSIGNED_ALIASES = {"UINT8": "UTINYINT", "UINT16": "USMALLINT", "UINT32": "UINTEGER"}  # (sqlglot's user-defined types)
AGGREGATE_NODES = {exp.Sum: "sum", exp.Count: "count", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
ARITHMETIC = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}
COMPARE_NODES = {exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=", exp.EQ: "=", exp.NEQ: "<>"}
TRUE, FALSE = Literal(True, BOOLEAN), Literal(False, BOOLEAN)
UNKNOWN = Literal(None, BOOLEAN)  # SQL's third truth value: a comparison with NULL (never left in a Query)
FIRST_DAY, LAST_DAY = (datetime.date(1, 1, 1) - EPOCH).days, (datetime.date(9999, 12, 31) - EPOCH).days
NUMBER = re.compile(r"(?=[0-9_]*\.?[0-9])[0-9_]*\.?[0-9_]*([eE][-+]?[0-9]+)?")


def construct(node: exp.Expression) -> str:
    """What a node outside the class is called in a message."""
    for kind, name in CONSTRUCTS:
        if isinstance(node, kind):
            if name == "the operator":
                return f"the operator {node.key.upper()} ({_short(node)})"
            return name
    if isinstance(node, exp.AggFunc):
        return f"the aggregate {_function_name(node)}"
    if isinstance(node, exp.Func):
        return f"the function {_function_name(node)}"
    return f"{node.key.upper()} ({_short(node)})"


def _function_name(node: exp.Func) -> str:
    return (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).upper()


def _short(node: exp.Expression) -> str:
    text = node.sql("duckdb")
    return text if len(text) <= 40 else text[:37] + "..."


def _unparenthesized(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


# --- exact constants ----------------------------------------------------------------------------------
def fits(value: int, t: SqlType) -> bool:
    """Whether a folded constant is a value of its type (DuckDB raises where it is not)."""
    if t.is_integer:
        lo, hi = t.integer_range
        return lo <= value <= hi
    if t.is_decimal:
        return abs(value) < 10 ** t.width
    return True


def number_literal(text: str, negative: bool) -> Literal:
    """A numeric literal typed as DuckDB's parser types it: an integer by its value, a decimal as
    DECIMAL(every digit written, leading zeros included; the digits after the point)."""
    digits = text.replace("_", "")
    if "e" in digits.lower():
        raise refuse(f"a floating-point literal ({text})")
    if "." in digits:
        whole, fraction = digits.split(".")
        width = len(whole) + len(fraction)
        if width > MAX_DECIMAL_WIDTH:
            raise refuse(f"a decimal literal of more than {MAX_DECIMAL_WIDTH} digits ({_cut(text)}: DuckDB reads it as DOUBLE)")
        value = int(whole + fraction or "0")
        return Literal(-value if negative else value, SqlType("DECIMAL", width, len(fraction)))
    value = _integer(digits, "an integer literal")
    value = -value if negative else value
    if value == -(2**31) and _integer_minimum_is_bigint():
        return Literal(value, SqlType("BIGINT"))
    try:
        return Literal(value, integer_literal_type(value))
    except ValueError:
        raise refuse(f"an integer literal wider than HUGEINT ({_cut('-' * negative + text)})") from None


def _cut(text: str) -> str:
    """A literal's text as an error line shows it: at most 40 characters."""
    return text if len(text) <= 40 else text[:37] + "..."


MAX_DIGITS = 4000  # digits of an integer read (Python reads at most 4,300 from text; DuckDB's widest holds 39)


def _integer(digits: str, what: str) -> int:
    """The integer of a literal's digits (a sign before them taken), refused in one line past MAX_DIGITS (none of
    DuckDB's integer types holds so many; Python's int() would raise past 4,300)."""
    if len(digits) > MAX_DIGITS:
        raise refuse(f"{what} of {len(digits):,} digits (DuckDB's widest integer, HUGEINT, holds 39)")
    return int(digits)


@functools.cache
def _integer_minimum_is_bigint() -> bool:
    """Whether the DuckDB installed types the literal -2147483648 as BIGINT (2.0.1 does; 2.0.0 typed it
    INTEGER): gquery's types are those of the DuckDB beside it, which checks them."""
    try:
        version = tuple(int(p) for p in re.findall(r"\d+", importlib.metadata.version("duckdb"))[:3])
    except importlib.metadata.PackageNotFoundError:
        return True
    return version >= (2, 0, 1)


_TIMESTAMP = re.compile(r"\s*(\d{1,4}-\d{1,2}-\d{1,2})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?)?\s*", re.ASCII)


def date_days(text: str) -> int:
    """DATE 'yyyy-mm-dd' (also with / or a space between the fields, or a time of day after it) as days since
    1970-01-01."""
    m = re.fullmatch(r"\s*(\d{1,4})([-/ ])(\d{1,2})\2(\d{1,2})\s*", text, re.ASCII)  # (not '١٩٩٥-٠١-٠١': DuckDB's digits)
    if not m:
        timed = _TIMESTAMP.fullmatch(text)
        if timed is None or timed[2] is None:
            raise refuse(f"the date string '{text}' (gquery reads a date as yyyy-mm-dd, or with a time of day "
                         "hh:mm:ss.ffffff, in ASCII digits)")
        return timestamp_micros(text) // DAY_MICROS  # DuckDB's date of a time of day is its day ('1995-01-01 12:00'::DATE)
    try:
        day = datetime.date(int(m[1]), int(m[3]), int(m[4]))
    except ValueError:
        raise OutOfClass(f"'{text}' is not a date") from None
    return (day - EPOCH).days


def timestamp_micros(text: str) -> int:
    """TIMESTAMP 'yyyy-mm-dd[ hh:mm[:ss[.ffffff]]]' as microseconds since 1970-01-01."""
    m = _TIMESTAMP.fullmatch(text)
    if m and m[2] is None and text[-1:] in ASCII_SPACE:  # (DuckDB takes '1995-06-01 12:00 ' and ' 1995-06-01', not this)
        m = None
    if not m:
        raise refuse(f"the timestamp string '{text}' (gquery reads yyyy-mm-dd hh:mm:ss.ffffff)")
    hours, minutes, seconds = int(m[2] or 0), int(m[3] or 0), int(m[4] or 0)
    if hours > 23 or minutes > 59 or seconds > 59:
        raise OutOfClass(f"'{text}' is not a timestamp")
    micros = int((m[5] or "").ljust(6, "0"))
    return date_days(m[1]) * DAY_MICROS + ((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micros


def temporal_literal(value: int, t: SqlType) -> Literal:
    """A DATE (days) or TIMESTAMP (microseconds) constant, within the years Python's dates hold."""
    days = value if t.name == "DATE" else value // DAY_MICROS
    if not FIRST_DAY <= days <= LAST_DAY:
        raise refuse("a date outside the years 1 to 9999")
    return Literal(value, t)


def add_interval(micros: int, months: int, days: int, interval_micros: int) -> int:
    """A timestamp plus an interval as DuckDB adds them: months first, the day clamped to the new
    month's last day (DATE '1994-01-31' + INTERVAL 1 MONTH is 1994-02-28), then days, then micros."""
    days_since, time_of_day = divmod(micros, DAY_MICROS)
    day = EPOCH + datetime.timedelta(days=days_since)
    if months:
        month0 = day.year * 12 + day.month - 1 + months
        year, month = divmod(month0, 12)
        if not 1 <= year <= 9999:
            raise refuse("a date outside the years 1 to 9999")
        import calendar  # (here: a month's interval is rare, its module's import is not free)

        day = datetime.date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))
    return ((day - EPOCH).days + days) * DAY_MICROS + time_of_day + interval_micros


@dataclass(frozen=True)
class _Interval:
    """An INTERVAL constant as DuckDB holds one: months, days and microseconds apart."""

    months: int = 0
    days: int = 0
    micros: int = 0

    def __post_init__(self) -> None:  # (each sum, difference and negation too: DuckDB's overflow of its fields)
        if not (-2**31 <= self.months < 2**31 and -2**31 <= self.days < 2**31 and -2**63 <= self.micros < 2**63):
            raise refuse("an interval past DuckDB's, whose months and days are 32-bit and microseconds 64-bit "
                         "(DuckDB raises out of range)")

    def scaled(self, sign: int) -> "_Interval":
        return _Interval(sign * self.months, sign * self.days, sign * self.micros)

    def __add__(self, other: "_Interval") -> "_Interval":
        return _Interval(self.months + other.months, self.days + other.days, self.micros + other.micros)


def _statement_text(text: str) -> str:
    """The text as a Query keeps it: what DuckDB is asked."""
    return text.strip().rstrip(";").rstrip()


# --- the binder ------------------------------------------------------------------------------------------
class _Binder:
    """Walks one SELECT's tree into a Query, against lineitem's schema."""

    def __init__(self, text: str, schema: Schema, table: str = TABLE):
        self.text = text
        self.schema = schema
        self.table = table
        self.columns = {folded(name): name for name in (*schema.types, *schema.left_out)}
        self.alias: str | None = None  # the table's alias in FROM, where it has one: it hides the table's own name
        self.aliases: dict[str, exp.Expression] = {}  # select-list alias → its expression
        self.notes: list[str] = []
        self.computed: list[Expr] = []  # every Cast and DATE arithmetic made (Query.computed), folded away or not
        self.parameter_types: dict[int, SqlType] = {}  # a prepared statement's parameter number → its type
        self.prepared = False  # binding a prepared statement's run: its parameters are marked (PARAMETER)
        self.plus_written = "+" in text  # the text may hold a unary plus (_unary_plus): its operand's type is checked
        self.intervals_written = "interval" in text.lower()  # the text may hold an INTERVAL (_interval)
        self._intervals: dict[int, tuple] = {}  # id(node) → (node, its _interval): each node's found once
        self._signed: dict[int, tuple] = {}  # id(node) → (node, its _Signs): each node's found once

    # -- the statement --
    def query(self, select: exp.Select) -> Query:
        for key, value in select.args.items():
            if value and key not in HANDLED_CLAUSES:
                raise refuse(CLAUSES.get(key, f"the clause {key.upper()}"))
        for nested in select.find_all(exp.Exists, exp.Subquery, exp.Select):
            if nested is not select:
                raise refuse(construct(nested))
        self.scope(select)
        items = select.expressions
        for item in items:
            self._check_select_item(_unaliased(item))
        if not any(_aggregates_in(_unaliased(i)) for i in items):
            raise refuse("a query without an aggregate")
        where = self._where(select.args.get("where"))
        group_by = self._group_by(select.args.get("group"), items)
        outputs = tuple(self._output(item, group_by) for item in items)
        order_by = self._order_by(select.args.get("order"), items, outputs)
        limit = self._limit(select.args.get("limit"))
        sql = _statement_text(self.text)
        written = select.args["order"].expressions if order_by else ()  # (ORDER BY ALL: one written, every output ordered)
        nulls_first = tuple(k for k in range(len(order_by)) if written[min(k, len(written) - 1)].args.get("nulls_first"))
        query = Query(sql, outputs, where, group_by, order_by, limit, self.table, tuple(dict.fromkeys(self.notes)),
                      nulls_first, tuple(dict.fromkeys(self.computed)))
        if not self.schema.types and not query.columns():  # COUNT(*) alone: the engines count a column's rows
            left = ", ".join(f"{name}: {why}" for name, why in self.schema.left_out.items())
            raise refuse(f"a query of a table whose every column the engines leave out ({left or 'it has none'})")
        return query

    def scope(self, select: exp.Select) -> None:
        """The names the clauses may use: the table's (and its alias), and the select list's aliases."""
        self._bind_from(select.args.get("from_"))
        for item in select.expressions:  # (of items of one alias the last, as DuckDB binds the name)
            if isinstance(item, exp.Alias):
                self.aliases[folded(item.alias)] = item.this

    def _bind_from(self, from_: exp.From | None) -> None:
        if from_ is None:
            raise refuse(f"a query without FROM {self.table}")
        table = from_.this
        if isinstance(table, exp.Subquery):
            raise refuse("a subquery")
        if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
            raise refuse(f"reading {_short(table)} (a table function)")
        if _other_schema(table):
            raise refuse(f"a table of another schema ({_short(table)})")
        _require_table(table, self.table)
        for key, value in table.args.items():
            if value and key not in ("this", "alias", "db"):  # (db: main, DEFAULT_SCHEMA, above)
                raise refuse(f"{key.upper()} on the table")
        alias = table.args.get("alias")
        if alias is not None:
            if alias.columns:
                raise refuse("column aliases on the table")
            self.alias = alias.name

    def _check_select_item(self, node: exp.Expression) -> None:
        """Name what a select item holds beyond a group column or one aggregate of values."""
        for bad in node.find_all(exp.Star, exp.Window):
            if not (isinstance(bad, exp.Star) and isinstance(bad.parent, exp.Count)):
                raise refuse(construct(bad))
        inner = _unparenthesized(node)
        if isinstance(inner, exp.Filter):
            raise refuse("an aggregate FILTER")
        aggregates = _aggregates_in(inner)
        if isinstance(inner, exp.AggFunc) and len(aggregates) > 1:
            raise refuse(f"a nested aggregate ({_short(aggregates[1])})")
        if aggregates and not isinstance(inner, exp.AggFunc):
            raise refuse(f"arithmetic over aggregates ({_short(inner)})")

    def _where(self, where: exp.Where | None) -> Expr | None:
        if where is None:
            return None
        aggregates = _aggregates_in(where.this)
        if aggregates:
            raise refuse(f"an aggregate in WHERE ({_short(aggregates[0])})")
        return self._kept_rows(self._predicate(where.this))

    def _kept_rows(self, predicate: Expr) -> Expr | None:
        """WHERE's bound predicate as the rows it keeps: where it compares with NULL, the rows where the whole is
        true (_holds_true, said in a note); None where it keeps every row."""
        if _mentions(predicate, UNKNOWN):
            predicate = _holds_true(predicate)
            shown = str(predicate).upper() if predicate in (TRUE, FALSE) else str(predicate)
            self.notes.append("NULL in WHERE: a comparison with it is neither true nor false, and WHERE keeps "
                              f"the rows where the whole is true: {shown}")
        return None if predicate == TRUE else predicate

    def _group_by(self, group: exp.Group | None, items: list[exp.Expression]) -> tuple[Column, ...]:
        if group is None:
            return ()
        self._no_parameter(group, "GROUP BY")
        for key, value in group.args.items():
            if value and key not in ("expressions", "all"):
                raise refuse(f"GROUP BY {key.upper().replace('_', ' ')}")
        if group.args.get("all"):
            nodes = [_unaliased(i) for i in items if not _aggregates_in(_unaliased(i))]
        else:
            nodes = [self._group_item(g, items) for g in group.expressions]
        columns: dict[str, Column] = {}
        for node in nodes:
            column = self._value(node)
            if not isinstance(column, Column) or self._signs(node).plus:  # (+x is the function +(x) to DuckDB)
                raise refuse(f"GROUP BY an expression ({_short(node)})")
            columns.setdefault(column.name, column)
        if len(columns) > MAX_GROUP_COLUMNS:
            raise refuse(f"GROUP BY more than {MAX_GROUP_COLUMNS} columns")
        return tuple(columns.values())

    def _no_parameter(self, clause: exp.Expression, name: str) -> None:
        """A prepared statement's parameter in GROUP BY or ORDER BY refused, as DuckDB refuses it: its value bound as
        a literal would be read as a select item's position."""
        if self.prepared and any(node.meta.get(PARAMETER) is not None for node in clause.walk()):
            raise refuse(f"a parameter in {name} (DuckDB refuses one too)")

    def _group_item(self, node: exp.Expression, items: list[exp.Expression]) -> exp.Expression:
        plus = self._signs(node).plus
        node = _unparenthesized(node)
        if isinstance(node, (exp.Rollup, exp.Cube, exp.GroupingSets)):
            raise refuse(f"GROUP BY {node.key.upper().replace('_', ' ')}")
        if isinstance(node, exp.Literal) and not node.is_string and plus:  # +1: DuckDB's function of a constant, no
            raise refuse(f"GROUP BY a constant ((+{node.this}): no select item's position)")  # position (it refuses so)
        if isinstance(node, exp.Literal) and not node.is_string:
            picked = _unaliased(items[_position(node, items, "GROUP BY")])
            if _aggregates_in(picked):
                raise refuse(f"GROUP BY an aggregate ({_short(picked)})")
            return picked
        return node

    def _output(self, item: exp.Expression, group_by: tuple[Column, ...]) -> Output:
        node = _unaliased(item)
        name = item.alias if isinstance(item, exp.Alias) else None
        inner = _unparenthesized(node)
        if isinstance(inner, exp.AggFunc):
            aggregate = self._aggregate(inner)  # (first: one it refuses may have no argument to name)
            return Output(name or self._name(node), aggregate)
        value = self._value(inner)
        if isinstance(value, Literal):
            raise refuse(f"a constant in the SELECT list ({_short(inner)})")
        if not isinstance(value, Column):
            raise refuse(f"an expression outside an aggregate ({_short(inner)})")
        if value not in group_by:
            raise refuse(f"a column outside GROUP BY ({value.name})")
        return Output(name or (self._name(node) if self._signs(node).plus else value.name), value)  # +x: DuckDB's (+(x))

    def _order_by(self, order: exp.Order | None, items, outputs) -> tuple[tuple[int, bool], ...]:
        if order is None:
            return ()
        self._no_parameter(order, "ORDER BY")
        first = order.expressions[0].this if len(order.expressions) == 1 else None
        if isinstance(first, exp.Var) and first.name.upper() == "ALL":  # DuckDB's ORDER BY ALL: every output, left to right
            if "all" in self.columns:  # (sqlglot reads "all" quoted as ALL: a column of that name is not ordered by)
                raise refuse('ORDER BY ALL over a table with a column named "all"')
            return tuple((i, bool(order.expressions[0].args.get("desc"))) for i in range(len(outputs)))
        keys = []
        for ordered in order.expressions:
            node = _unparenthesized(ordered.this)
            if isinstance(node, exp.Literal) and not node.is_string and self._signs(ordered.this).plus:
                raise refuse(f"ORDER BY a constant ((+{node.this}): no select item's position; DuckDB orders by no "
                             "value there)")
            keys.append((self._order_index(node, items, outputs), bool(ordered.args.get("desc"))))
        return tuple(keys)

    def _order_index(self, node: exp.Expression, items, outputs) -> int:
        if isinstance(node, exp.Literal) and not node.is_string:
            return _position(node, items, "ORDER BY")
        if isinstance(node, exp.Column) and not node.table:
            for i in reversed(range(len(items))):  # an alias names an output before a column does (the last of
                item = items[i]  # items of one alias, as DuckDB binds it)
                if isinstance(item, exp.Alias) and folded(item.alias) == folded(node.name):
                    return i
        if isinstance(node, exp.AggFunc):
            wanted = self._aggregate(node)
        elif _aggregates_in(node):
            raise refuse(f"ORDER BY an expression over aggregates ({_short(node)})")
        else:
            wanted = self._value(node)
        for i, output in enumerate(outputs):
            if output.expr == wanted:
                return i
        raise refuse(f"ORDER BY something not in the SELECT list ({_short(node)})")

    def _limit(self, limit: exp.Expression | None) -> int | None:
        if limit is None:
            return None
        options = limit.args.get("limit_options")  # sqlglot's: LIMIT 50% or 25 PERCENT, WITH TIES, FETCH ... PERCENT
        if options is not None and options.args.get("with_ties"):
            raise SqlSyntaxError('syntax error at or near "WITH": DuckDB has no WITH TIES')
        if options is not None and options.args.get("percent"):
            if isinstance(limit, exp.Fetch):
                raise SqlSyntaxError('syntax error at or near "PERCENT": DuckDB\'s FETCH takes rows, not a percent')
            raise refuse(f"LIMIT of a percent of the rows ({_short(limit)})")
        if isinstance(limit, exp.Fetch):
            count = limit.args.get("count")
        else:
            count = limit.expression
        node = _unparenthesized(count) if count is not None else None
        if isinstance(node, exp.Literal) and not node.is_string and node.this.replace("_", "").isdigit():
            value = _integer(node.this.replace("_", ""), "a LIMIT")
        elif isinstance(node, exp.Null):  # LIMIT NULL: no limit, as DuckDB reads it
            return None
        else:  # a constant expression: -0, 1 + 1, CAST(2 AS TINYINT), as DuckDB folds it
            folded = self._value(node) if node is not None and not _aggregates_in(node) else None
            if not (isinstance(folded, Literal) and folded.value is not None and folded.type.is_integer):
                raise refuse(f"LIMIT other than a non-negative integer ({_short(limit)})")
            if folded.value < 0:
                raise refuse(f"a negative LIMIT ({_short(limit)}: DuckDB's binder refuses it)")
            value = folded.value
        if value >= 2**63:
            raise refuse(f"LIMIT past BIGINT ({value}: DuckDB raises a conversion error)")
        return value

    # -- aggregates --
    def _aggregate(self, node: exp.Expression) -> Aggregate:
        func = AGGREGATE_NODES.get(type(node))
        if func is None:
            raise refuse(construct(node))
        arg = node.this
        if isinstance(arg, exp.Distinct):
            raise refuse(f"DISTINCT in an aggregate ({_short(node)})")
        if node.expressions or any(v for k, v in node.args.items() if k not in ("this", "big_int")):
            raise refuse(f"{func.upper()} of more than one argument ({_short(node)})")
        if arg is None and func != "count":
            raise refuse(f"{func.upper()}() without an argument (DuckDB has no such function)")
        if arg is None or isinstance(arg, exp.Star):
            if func != "count":
                raise refuse(f"{func.upper()}(*)")
            return Aggregate("count", None, aggregate_type("count", None))
        value = self._value(arg)
        if func == "count":  # kept, though it counts every row: DuckDB's AVG depends on which COUNTs there are
            return Aggregate("count", value, aggregate_type("count", value.type))
        if value.type.name == "VARCHAR" and func in ("min", "max") and isinstance(value, Column):
            return Aggregate(func, value, aggregate_type(func, value.type))  # by its codes: a part's dictionary is sorted
        if value.type.name == "VARCHAR" or (value.type.name == "DATE" and func in ("sum", "avg")):
            raise refuse(f"{func.upper()} of a {value.type} ({_short(node)})")
        if not (value.type.is_numeric or value.type.name == "DATE"):
            raise refuse(f"{func.upper()} of a {value.type} ({_short(node)})")
        return Aggregate(func, value, aggregate_type(func, value.type))

    # -- values --
    def _value(self, node: exp.Expression) -> Expr:
        """A value expression, constant subtrees folded into one Literal of their DuckDB type; a prepared
        statement's parameter typed as DuckDB types it (parameter_types)."""
        typed = self.parameter_types.get(self._signs(node).parameter) if self.parameter_types else None
        if typed is not None:  # (-? too: the parameter's type, negated)
            value = _as_parameter(self._written_value(node), typed, node)
        else:
            value = self._written_value(node)
        if self.plus_written and not value.type.is_numeric and self._signs(node).plus:
            raise refuse(f"a unary plus of a {value.type} ({_short(node)}: DuckDB has +(x) for numbers only)")
        return value

    def _written_value(self, node: exp.Expression) -> Expr:
        node = _unparenthesized(node)
        if isinstance(node, exp.Column):
            return self._column(node)
        if isinstance(node, exp.Literal):
            return self._literal(node, False)
        if isinstance(node, exp.Boolean):
            return Literal(bool(node.this), BOOLEAN)
        if isinstance(node, exp.Neg):
            literal = self._signed_literal(node)
            if literal is not None:
                return literal
            return self._negate(self._value(node.this), node)
        if type(node) in ARITHMETIC:
            return self._arithmetic(node)
        if isinstance(node, exp.Cast) and not isinstance(node, exp.TryCast):
            return self._cast(node)
        if isinstance(node, exp.AggFunc):
            raise refuse(f"an aggregate inside an expression ({_short(node)})")
        if isinstance(node, (*COMPARE_NODES, exp.And, exp.Or, exp.Not, exp.In, exp.Between)):  # (a comparison is the
            # class's where a predicate stands: here it is an operand, compared, tested or added)
            raise refuse(f"a predicate as a value, compared or tested ({_short(node)}: a BOOLEAN)")
        raise refuse(construct(node))

    def _column(self, node: exp.Column, aliases: bool = True) -> Column:
        """A column of lineitem, or (unqualified, where no column has the name) a select-list
        alias of one, as DuckDB resolves names in WHERE and GROUP BY."""
        if isinstance(node.this, exp.Star):
            raise refuse("SELECT *")
        word = node.this
        if not node.table and not word.args.get("quoted") and folded(word.name) in COLUMN_REFUSED:
            raise SqlSyntaxError(f'syntax error at or near "{word.name}": a keyword DuckDB does not take as a name '
                                 f'unquoted (write "{word.name}")')
        if not node.table:
            _check_default(word)
        if _other_schema(node):
            raise refuse(f"a column of another schema ({_short(node)})")
        qualifier = folded(node.table)
        # (an alias hides the name, as in DuckDB; main.t.x names the table, never its alias)
        if qualifier and qualifier != folded(self.alias or self.table) or node.args.get("db") and self.alias:
            called = f"calls the table {self.table} {self.alias}" if self.alias else f"reads {self.table}"
            shown = f"{node.db}.{node.table}" if node.args.get("db") else node.table
            raise UnknownName(f"unknown table {shown} in {_short(node)} (the query {called})")
        name = self.columns.get(folded(node.name))
        if name is None:
            alias = self.aliases.get(folded(node.name)) if aliases and not qualifier else None
            if alias is None and folded(node.name) in NAMED_FUNCTIONS:  # (no column of its name: DuckDB's function,
                raise refuse(f"the function {node.name.upper()}")  # quoted or not)
            if alias is None:
                raise UnknownName(f"unknown column {node.name}; the table has {', '.join(self.columns.values())}")
            if not isinstance(_unparenthesized(alias), exp.Column):
                raise refuse(f"a reference to the select item {node.name} ({_short(alias)}) outside ORDER BY")
            return self._column(_unparenthesized(alias), aliases=False)
        try:
            return Column(name, self.schema.type_of(name))
        except KeyError as e:
            raise OutOfClass(e.args[0]) from None

    def _literal(self, node: exp.Literal, negative: bool) -> Literal:
        if node.is_string:
            if negative:
                raise refuse(f"negating a string ({_short(node)})")
            return Literal(node.this, VARCHAR)
        return number_literal(self._number_text(node), negative)

    def _number_text(self, node: exp.Literal) -> str:
        """The literal as written: DuckDB types 001.50 by its digits, which sqlglot keeps only in
        the source text (it rewrites .5 as 0.5 and drops the position)."""
        start, end = node.meta.get("start"), node.meta.get("end")
        if start is None or end is None:
            return node.this[1:] if node.this.startswith("0.") else node.this
        written = self.text[start:end + 1]
        return written if NUMBER.fullmatch(written) else node.this

    def _signed_literal(self, node: exp.Neg) -> Literal | None:
        """-(-(1.50)) is the constant 1.50 to DuckDB's parser, typed after the sign is applied
        (-9223372036854775808 is a BIGINT); not where a unary plus stands below the minus (-(+9223372036854775808) is
        the HUGEINT 9223372036854775808 negated: +(x) is a function's value to DuckDB, no literal)."""
        signs = self._signs(node)
        if isinstance(signs.inner, exp.Literal) and not signs.inner.is_string and not self._signs(node.this).plus:
            return self._literal(signs.inner, signs.negations % 2 == 1)
        return None

    def _signs(self, node: exp.Expression) -> "_Signs":
        """What the parentheses and unary minuses from a node down hold (_Signs). Found once a node, from the
        bottom up: each level of a chain of 1,000 minuses asked it of the whole chain below (0.8 s)."""
        found = self._signed.get(id(node))
        if found is not None:
            return found[1]
        chain = []
        while found is None and isinstance(node, (exp.Paren, exp.Neg)):
            chain.append(node)
            node = node.this
            found = self._signed.get(id(node))
        if found is None:  # (the node kept beside its answer: its id is no other node's while the binder lives)
            found = self._signed[id(node)] = (node, _Signs(node, 0, _pluses(node) > 0, node.meta.get(PARAMETER)))
        below = found[1]
        for n in reversed(chain):
            number = n.meta.get(PARAMETER)
            below = _Signs(below.inner, below.negations + isinstance(n, exp.Neg), below.plus or _pluses(n) > 0,
                           below.parameter if number is None else number)
            self._signed[id(n)] = (n, below)
        return below

    def _negate(self, arg: Expr, node: exp.Expression) -> Expr:
        if not arg.type.is_numeric:
            raise refuse(f"negating a {arg.type} ({_short(node)})")
        if isinstance(arg, Literal):  # a constant at its type's least value: negated in the next wider type, as DuckDB
            # folds it (-CAST(-128 AS TINYINT) is the SMALLINT 128; a column's -128 negated DuckDB raises for)
            wider = NEGATED_WIDER.get(arg.type.name) if not fits(-arg.value, arg.type) else None
            return self._constant(-arg.value, SqlType(wider) if wider else arg.type, node)
        return Negate(arg, arg.type)

    def _arithmetic(self, node: exp.Binary) -> Expr:
        op = ARITHMETIC[type(node)]
        interval = self._interval(node.expression)
        if interval is not None and op in "+-":
            return self._shift(self._value(node.this), interval.scaled(1 if op == "+" else -1), node)
        interval = self._interval(node.this)
        if interval is not None and op == "+":
            return self._shift(self._value(node.expression), interval, node)
        if interval is not None:
            raise refuse(f"INTERVAL arithmetic other than a date plus or minus an interval ({_short(node)})")
        left, right = self._value(node.this), self._value(node.expression)
        left, right = _narrowed(left, self._signs(node.this), right), _narrowed(right, self._signs(node.expression), left)
        for side in (left, right):
            if side.type.name in ("VARCHAR", "BOOLEAN", "TIMESTAMP"):
                raise refuse(f"arithmetic on a {side.type} ({_short(node)})")
        date_side = next((s for s in (left, right) if s.type.name == "DATE"), None)
        other = right if date_side is left else left
        if date_side is not None and other.type.is_integer and INTEGER_TYPES[other.type.name] + other.type.is_unsigned > 32:
            raise refuse(f"a date plus a {other.type} (DuckDB adds INTEGER days only) ({_short(node)})")
        try:
            t = arithmetic_type(op, left.type, right.type)
        except (TypeError, ValueError) as e:
            raise refuse(f"{e} ({_short(node)})") from None
        if isinstance(left, Literal) and isinstance(right, Literal):
            if t.name == "DATE":
                return temporal_literal(_fold(op, left, right, t), DATE)
            return self._constant(_fold(op, left, right, t), t, node)
        made = Arith(op, left, right, t)
        if t.name == "DATE":
            self.computed.append(made)
        return made

    def _constant(self, value: int, t: SqlType, node: exp.Expression) -> Literal:
        if not fits(value, t):
            raise OutOfClass(f"the constant {_short(node)} overflows {t}, its type (DuckDB raises an out-of-range error "
                             "where it computes it so)")
        return Literal(value, t)

    def _interval(self, node: exp.Expression) -> _Interval | None:
        """The constant an INTERVAL expression stands for, or None where node is not one. Found once a node: each
        level of a chain of + asks of both its sides (a SUM of 4,000 terms walked its chain 4,000 times: 53 s)."""
        if not self.intervals_written:
            return None
        found = self._intervals.get(id(node))
        if found is None:  # (the node kept beside its answer: its id is no other node's while the binder lives)
            found = self._intervals[id(node)] = (node, self._interval_of(node))
        return found[1]

    def _interval_of(self, node: exp.Expression) -> _Interval | None:
        node = _unparenthesized(node)
        if isinstance(node, exp.Interval):
            return self._interval_literal(node)
        if isinstance(node, exp.Neg):
            inner = self._interval(node.this)
            return None if inner is None else inner.scaled(-1)
        if isinstance(node, (exp.Add, exp.Sub)):
            left, right = self._interval(node.this), self._interval(node.expression)
            if left is not None and right is not None:
                return left + right.scaled(1 if isinstance(node, exp.Add) else -1)
        return None

    def _interval_literal(self, node: exp.Interval) -> _Interval:
        unit = node.args.get("unit")
        if isinstance(unit, exp.IntervalSpan):  # INTERVAL '1' HOUR TO MINUTE: sqlglot read its first unit alone
            raise SqlSyntaxError(f"{unit.this.name.upper()} TO {unit.expression.name.upper()} is not supported (DuckDB's "
                                 "parser takes no interval of a span of units)")
        if unit is not None and isinstance(node.this, exp.Binary):  # INTERVAL 1 + 1 DAY: no DuckDB syntax
            raise SqlSyntaxError(f'syntax error at or near "{unit.name}": an INTERVAL\'s amount of more than one term is '
                                 'parenthesized (INTERVAL (1 + 1) DAY)')
        amount = _unparenthesized(node.this)
        if unit is None:
            parts = interval_parts(amount.this) if isinstance(amount, exp.Literal) and amount.is_string else None
            if parts is None:
                raise refuse(f"the interval {_short(node)} ({INTERVALS_READ})")
            total = _Interval()
            for n, u in parts:
                total = total + self._interval_unit(_integer(n, "an interval"), u, node)
            return total
        if isinstance(amount, exp.Literal):
            text = amount.this.strip(ASCII_SPACE)
        else:
            value = self._value(amount)
            if not (isinstance(value, Literal) and value.type.is_integer):
                raise refuse(f"an interval of a non-integer amount ({_short(node)})")
            text = str(value.value)
        if not re.fullmatch(r"[-+]?\d+", text, re.ASCII):
            raise refuse(f"an interval of a fractional or non-numeric amount ({_short(node)})")
        # (sqlglot reads INTERVAL 5 SECOND and INTERVAL '5 seconds' alike, as INTERVAL '5' SECOND(S): either)
        seconds = "either" if isinstance(amount, exp.Literal) else "double"
        return self._interval_unit(_integer(text, "an interval"), unit.name, node, seconds)

    def _interval_unit(self, n: int, unit: str, node: exp.Expression, seconds: str = "exact") -> _Interval:
        """n of the unit. `seconds`: "double" for INTERVAL n SECOND, whose seconds DuckDB counts as a double
        (to_seconds: 1,000,000,000,001 seconds are 1,000,000,000,000,999,936 microseconds), "exact" for a string's
        part ('1 day 5 seconds'), "either" where the text may have been either: refused where the two differ."""
        key = unit.upper()
        key = key[:-1] if key.endswith("S") else key
        if key not in UNITS:
            raise refuse(f"an interval in {unit} ({_short(node)})")
        months, days, micros = UNITS[key]
        if key == "SECOND" and seconds != "exact":
            counted = float(n) * micros
            double = int(counted) if -2.0**63 <= counted < 2.0**63 else 2**63  # (past 64 bits: refused, as DuckDB)
            if seconds == "either" and double != n * micros:
                raise refuse(f"an interval of {n:,} seconds, past 2^59 microseconds ({_short(node)}): DuckDB counts "
                             "INTERVAL n SECOND as a double, INTERVAL 'n seconds' exactly")
            return _Interval(0, 0, double)
        return _Interval(n * months, n * days, n * micros)

    def _shift(self, base: Expr, interval: _Interval, node: exp.Expression) -> Literal:
        """DATE or TIMESTAMP constant ± INTERVAL: a TIMESTAMP constant, as DuckDB computes it."""
        if not isinstance(base, Literal):
            raise refuse(f"an INTERVAL added to a column ({_short(node)})")
        if base.type.name == "DATE":
            micros = base.value * DAY_MICROS
        elif base.type.name == "TIMESTAMP":
            micros = base.value
        else:
            raise refuse(f"an INTERVAL added to a {base.type} ({_short(node)})")
        return temporal_literal(add_interval(micros, interval.months, interval.days, interval.micros), TIMESTAMP)

    def _cast(self, node: exp.Cast) -> Expr:
        target = self._cast_type(node)
        inner = _unparenthesized(node.this)
        if isinstance(inner, exp.Literal) and inner.is_string:
            if target.name == "DATE":
                return temporal_literal(date_days(inner.this), DATE)
            if target.name == "TIMESTAMP":
                return temporal_literal(timestamp_micros(inner.this), TIMESTAMP)
            raise refuse(f"a CAST of a string to {target} ({_short(node)})")
        arg = self._value(inner)
        if target.is_temporal or arg.type.is_temporal:
            if arg.type == target:
                return arg
            if target.name == "TIMESTAMP" and isinstance(arg, Literal) and arg.type.name == "DATE":
                return Literal(arg.value * DAY_MICROS, TIMESTAMP)
            raise refuse(f"a CAST from {arg.type} to {target} ({_short(node)})")
        if not arg.type.is_numeric:
            raise refuse(f"a CAST from {arg.type} to {target} ({_short(node)})")
        if scale_of(target) < scale_of(arg.type):
            raise refuse(f"a CAST that rounds ({_short(node)}: scale {scale_of(arg.type)} to {scale_of(target)})")
        if isinstance(arg, Literal):
            return self._constant(arg.value * 10 ** (scale_of(target) - scale_of(arg.type)), target, node)
        made = Cast(arg, target)
        self.computed.append(made)
        return made

    def _cast_type(self, node: exp.Cast) -> SqlType:
        to = node.to
        if to.this == exp.DataType.Type.DECIMAL:
            if not all(isinstance(p.this, exp.Literal) and p.this.this.isdigit() for p in to.expressions):
                raise refuse(f"a CAST to {to.sql('duckdb')} (a DECIMAL's width and scale are integers)")
            params = [int(p.this.this) for p in to.expressions]
            width, scale = {0: (18, 3), 1: (*params, 0), 2: tuple(params)}.get(len(params), (0, 0))
            if not (1 <= width <= MAX_DECIMAL_WIDTH and 0 <= scale <= width):
                raise refuse(f"a CAST to DECIMAL({width},{scale})")
            return decimal(width, scale)
        if to.this in CAST_TYPES and not to.expressions:
            return SqlType(CAST_TYPES[to.this])
        if to.this == exp.DataType.Type.USERDEFINED and str(to.args.get("kind")).upper() in UNSIGNED_ALIASES:
            return SqlType(UNSIGNED_ALIASES[str(to.args.get("kind")).upper()])
        raise refuse(f"a CAST to {to.sql('duckdb')}")

    # -- predicates --
    def _predicate(self, node: exp.Expression) -> Expr:
        """A boolean expression, constant parts folded away (a constant predicate is TRUE or FALSE)."""
        if self.plus_written and self._signs(node).plus:
            raise refuse(f"a unary plus of a BOOLEAN ({_short(node)}: DuckDB has +(x) for numbers only)")
        node = _unparenthesized(node)
        if isinstance(node, (exp.And, exp.Or)):
            kind = And if isinstance(node, exp.And) else Or
            return _conjunction(kind, [self._predicate(term) for term in _chained(node)])
        if isinstance(node, exp.Not):
            return _negation(self._predicate(node.this))
        if isinstance(node, exp.Null):
            return UNKNOWN
        if isinstance(node, exp.Is) and _is_null_literal(node.expression):
            return self._is_null(node.this)
        if type(node) in COMPARE_NODES:
            return self._compare_or_unknown(COMPARE_NODES[type(node)], node.this, node.expression, node)
        if isinstance(node, exp.Between):
            low = self._compare_or_unknown(">=", node.this, node.args["low"], node)
            return _conjunction(And, [low, self._compare_or_unknown("<=", node.this, node.args["high"], node)])
        if isinstance(node, exp.In):
            return self._in(node)
        if isinstance(node, exp.Boolean):
            return TRUE if node.this else FALSE
        if isinstance(node, (exp.Column, exp.Literal, exp.Neg, exp.Cast)) or type(node) in ARITHMETIC:
            value = self._value(node)
            raise refuse(f"a predicate that is not a comparison ({_short(node)}: {value.type})")
        raise refuse(construct(node))

    def _is_null(self, node: exp.Expression) -> Expr:
        """x IS NULL: TRUE for NULL itself; for an expression, true where any column it reads holds NULL (its
        arithmetic and casts carry NULL through, and nothing of the class makes one): an OR of IsNull, each
        FALSE wherever its column holds no NULL. A constant expression is never NULL: FALSE."""
        if _is_null_literal(node):
            return TRUE
        value = self._value(node)  # in the class, or refused as it is
        return _conjunction(Or, [IsNull(c) for c in dict.fromkeys(n for n in value.walk() if isinstance(n, Column))])

    def _compare_or_unknown(self, op: str, left: exp.Expression, right: exp.Expression, node: exp.Expression) -> Expr:
        """A comparison; with NULL on either side, UNKNOWN (the other side still bound: a name must exist)."""
        nulls = [_is_null_literal(side) for side in (left, right)]
        if any(nulls):
            for side, null in zip((left, right), nulls):
                if not null:
                    self._value(side)
            return UNKNOWN
        return self._compare(op, self._value(left), self._value(right), node)

    def _compare(self, op: str, left: Expr, right: Expr, node: exp.Expression) -> Expr:
        if isinstance(left, Literal) and not isinstance(right, Literal):
            op, left, right = FLIPPED[op], right, left  # the column side on the left
        a, b = left.type, right.type
        if a.name == "BOOLEAN" or b.name == "BOOLEAN":
            raise refuse(f"comparing a BOOLEAN ({_short(node)})")
        if a.name == "VARCHAR" or b.name == "VARCHAR":
            return self._compare_string(op, left, right, node)
        if a.is_temporal or b.is_temporal:
            return self._compare_date(op, left, right, node)
        if isinstance(left, Literal) and isinstance(right, Literal):
            return TRUE if _holds(op, *_aligned(left, right)) else FALSE
        return Compare(op, left, right)

    def _compare_string(self, op: str, left: Expr, right: Expr, node: exp.Expression) -> Expr:
        a, b = left.type, right.type
        if a.name == "VARCHAR" and b.name == "VARCHAR":
            if isinstance(left, Column) and isinstance(right, (Literal, Column)):
                return Compare(op, left, right)  # two columns: as strings (each part's dictionaries merged)
            if isinstance(left, Literal) and isinstance(right, Literal):
                return TRUE if _holds(op, left.value, right.value) else FALSE
            raise refuse(f"comparing two VARCHAR expressions ({_short(node)})")
        if a.name == "DATE" and isinstance(right, Literal):
            return self._compare_date(op, left, Literal(date_days(right.value), DATE), node)
        if isinstance(right, Literal) and isinstance(left, Literal) and a.name == "VARCHAR" and b.name == "DATE":
            return self._compare_date(op, Literal(date_days(left.value), DATE), right, node)
        raise refuse(f"comparing {a} with {b} ({_short(node)})")

    def _compare_date(self, op: str, left: Expr, right: Expr, node: exp.Expression) -> Expr:
        a, b = left.type, right.type
        if a.name == "DATE" and b.name == "DATE":
            if isinstance(left, Literal) and isinstance(right, Literal):
                return TRUE if _holds(op, left.value, right.value) else FALSE
            return Compare(op, left, right)
        if {a.name, b.name} <= {"DATE", "TIMESTAMP"} and isinstance(right, Literal):
            micros_right = right.value * DAY_MICROS if b.name == "DATE" else right.value
            if isinstance(left, Literal):
                micros_left = left.value * DAY_MICROS if a.name == "DATE" else left.value
                return TRUE if _holds(op, micros_left, micros_right) else FALSE
            return self._date_at_midnight(op, left, micros_right)
        raise refuse(f"comparing {a} with {b} ({_short(node)})")

    def _date_at_midnight(self, op: str, date: Expr, micros: int) -> Expr:
        """date op TIMESTAMP: DuckDB compares the date at midnight; exactly the same rows as
        comparing the date with the timestamp's day, rounded the way op needs."""
        day, rest = divmod(micros, DAY_MICROS)
        after = day + (rest > 0)  # the first day whose midnight is not before the timestamp
        if op in ("=", "<>") and rest:  # never equal: FALSE, or TRUE, wherever the date is not NULL
            known = Compare("=", date, date)  # true where the date holds a value, unknown where NULL
            rewritten = _negation(known) if op == "=" else known
        else:
            rewritten = Compare(op, date, Literal(after if op in ("<", ">=") else day, DATE))
        shown = str(rewritten).upper() if rewritten in (TRUE, FALSE) else str(rewritten)
        self.notes.append(f"{date} {op} {Literal(micros, TIMESTAMP)} compares the date at midnight: rewritten as {shown}")
        return rewritten

    def _in(self, node: exp.In) -> Expr:
        if node.args.get("query") is not None:
            raise refuse("a subquery")
        for key, value in node.args.items():
            if value and key not in ("this", "expressions"):
                raise refuse(f"IN {key.upper()} ({_short(node)})")
        if not node.expressions:
            raise refuse("an empty IN list")
        rest = [v for v in node.expressions if not _is_null_literal(v)]
        if _is_null_literal(node.this):
            for v in rest:
                self._value(v)
            return UNKNOWN
        arg = self._value(node.this)
        if len(rest) < len(node.expressions):  # x IN (a, NULL) is x IN (a) OR NULL: true where x is a, else unknown
            return _conjunction(Or, [self._in_values(arg, rest, node), UNKNOWN]) if rest else UNKNOWN
        return self._in_values(arg, node.expressions, node)

    def _in_values(self, arg: Expr, expressions: list, node: exp.In) -> Expr:
        matches = [self._compare("=", arg, self._value(v), node) for v in expressions]
        if TRUE in matches:
            return TRUE
        values, others = [], []
        for m in matches:
            if m == FALSE or m == _negation(Compare("=", arg, arg)):
                continue  # a constant that equals nothing (another constant, a timestamp past midnight)
            if isinstance(m, Compare) and m.left == arg and isinstance(m.right, Literal):
                values.append(m.right)
            else:  # a value that is not a constant (a column): x IN (a, b) is x = a OR x = b, NULLs alike
                others.append(m)
        terms = ([InList(arg, tuple(dict.fromkeys(values)))] if values else []) + others
        if terms:
            return _conjunction(Or, terms)
        # none equals any: FALSE wherever the argument is not NULL (unknown where it is: NOT IN keeps no NULL)
        return FALSE if isinstance(arg, Literal) else _negation(Compare("=", arg, arg))

    # -- names --
    def _name(self, node: exp.Expression) -> str:
        """DuckDB's default name of a select item: its expression printed as DuckDB prints it (a prepared statement's
        parameter as $k, a unary plus as the function +(x))."""
        name = self._written_name(node)
        for _ in range(_pluses(node)):
            name = f"(+({name}))"
        return name

    def _written_name(self, node: exp.Expression) -> str:
        if any(_pluses(n) for n in _chain(node, exp.Paren)[1:]):  # (+x), (+?): the plus inside the parentheses
            return self._name(node.this)
        parameter = _parameter_under(node, exp.Paren)
        if parameter is not None:
            return f"${parameter}"
        node = _unparenthesized(node)
        if isinstance(node, exp.Column):
            return ".".join(_printed_identifier(part.name) for part in node.parts)
        if isinstance(node, exp.Literal):
            return "'" + node.this.replace("'", "''") + "'" if node.is_string else self._number_text(node)
        if isinstance(node, exp.Neg):  # (-($k)) as DuckDB prints it, and -(-(x)) too; -(-(1)) a signed number
            signs = self._signs(node)
            inner = signs.inner
            if signs.parameter is None and isinstance(inner, exp.Literal) and not inner.is_string \
                    and not self._signs(node.this).plus:
                return "-" * (signs.negations % 2) + self._number_text(inner)
            return f"(-({self._name(node.this)}))"
        if type(node) in ARITHMETIC:
            return f"({self._name(node.this)} {ARITHMETIC[type(node)]} {self._name(node.expression)})"
        if isinstance(node, exp.Cast):
            return f"CAST({self._name(node.this)} AS {_type_name(node.to)})"
        if isinstance(node, exp.Boolean):
            return "true" if node.this else "false"
        if type(node) in AGGREGATE_NODES:
            func = AGGREGATE_NODES[type(node)]
            if func == "count" and (node.this is None or isinstance(node.this, exp.Star)):
                return "count_star()"
            return f"{func}({self._name(node.this)})"
        return node.sql("duckdb")


def _as_parameter(literal: Expr, t: SqlType, node: exp.Expression) -> Expr:
    """A parameter's literal as the value of the type DuckDB gives the parameter (a DECIMAL's scale is the literal's
    or more: bind() writes a Decimal's digits as they are, 1E+2 as 100)."""
    if t == DOUBLE:
        raise refuse(f"a Decimal parameter that DuckDB binds as a DOUBLE (more than {MAX_DECIMAL_WIDTH} digits: "
                     f"{_short(node)}; gquery's constants are exact)")
    if not isinstance(literal, Literal):
        return literal
    if t.is_integer:  # each minus before the parameter negates it in its type, widened where the value leaves it
        negations = 0
        for n in _chain(node, (exp.Paren, exp.Neg)):
            if n.meta.get(PARAMETER) is not None:
                break
            negations += isinstance(n, exp.Neg)
        value = literal.value * (-1) ** negations  # the parameter's own
        for _ in range(negations):  # (DuckDB: -? of the INTEGER -2^31 is a BIGINT, of the BIGINT -2^63 a HUGEINT)
            value = -value
            if not fits(value, t):
                try:
                    t = integer_literal_type(value)
                except ValueError:
                    raise refuse(f"the constant {_short(node)} overflows {t} (DuckDB raises an out-of-range "
                                 "error)") from None
    if literal.type == t:
        return literal
    return Literal(literal.value * 10 ** (scale_of(t) - scale_of(literal.type)), t)



@dataclass(frozen=True)
class _Signs:
    """The parentheses and unary minuses from a node down (_Binder._signs): the first node of another kind, the
    minuses among them, whether a unary plus is written on one of them or on that node (-(+1) is no literal to DuckDB,
    but a function's value), and the number of the prepared statement's parameter the first marked one is, or None."""

    inner: exp.Expression
    negations: int
    plus: bool
    parameter: int | None


def _chain(node: exp.Expression, through) -> list[exp.Expression]:
    """The node and the nodes of the types `through` (parentheses, signs) down from it, to the first of another."""
    out = [node]
    while isinstance(node, through):
        node = node.this
        out.append(node)
    return out


def _parameter_under(node: exp.Expression, through) -> int | None:
    """The number of the prepared statement's parameter a node is, nodes of the types `through` (parentheses,
    signs) about it; None where it is none."""
    while True:
        number = node.meta.get(PARAMETER)
        if number is not None or not isinstance(node, through):
            return number
        node = node.this


_PLAIN_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _printed_identifier(name: str) -> str:
    """A name as DuckDB prints it inside an expression's name: as it is, but quoted where it is a keyword (of any
    case) or holds another character than a letter, digit or underscore, or starts with a digit, or with an
    underscore and a digit (_1, which DuckDB quotes, __1 not)."""
    if _PLAIN_IDENTIFIER.fullmatch(name) and name.lower() not in KEYWORDS and not re.match(r"_[0-9]", name):
        return name
    return '"' + name.replace('"', '""') + '"'


# the SQL keyword types of DuckDB's grammar (PostgreSQL's), which it prints by their own names; any other type name
# (int8, TinyInt, Date, HUGEINT) it prints as written
KEYWORD_TYPES = {"int": "INTEGER", "integer": "INTEGER", "bigint": "BIGINT", "smallint": "SMALLINT", "real": "FLOAT",
                 "float": "FLOAT", "double precision": "DOUBLE", "boolean": "BOOLEAN", "timestamp": "TIMESTAMP",
                 "varchar": "VARCHAR"}
DECIMAL_NAMES = ("decimal", "numeric", "dec")


def _type_name(to: exp.DataType) -> str:
    """A cast's type as DuckDB prints it in a column name: a keyword type by its name (NUMERIC(10,2) as
    DECIMAL(10, 2)), any other as written; by sqlglot's type where the text is not known."""
    written = to.meta.get(TYPE_WRITTEN)
    if written is not None:
        name, paren, args = written.partition("(")
        key = " ".join(name.split()).lower()
        written_args = [a.strip() for a in args.rsplit(")", 1)[0].split(",") if a.strip()]  # (DECIMAL(18,): (18))
        listed = f"({', '.join(written_args)})" if paren else ""
        if name.strip().startswith('"'):  # a quoted name is no keyword: as written, its quotes off ("numeric"(4,2):
            return name.strip()[1:-1].replace('""', '"') + listed  # numeric(4, 2), "INTEGER": INTEGER)
        if key in DECIMAL_NAMES:
            return "DECIMAL" + listed
        if key in KEYWORD_TYPES and not paren:
            return KEYWORD_TYPES[key]
        if not paren:
            return name.strip()
    if to.this == exp.DataType.Type.DECIMAL:
        params = ", ".join(p.this.this for p in to.expressions)
        return f"DECIMAL({params})" if params else "DECIMAL"
    if to.this == exp.DataType.Type.USERDEFINED and to.args.get("kind"):
        return str(to.args["kind"])  # (as written: DuckDB prints an alias it has no other name for so)
    return CAST_TYPES.get(to.this, to.sql("duckdb"))


def _unaliased(item: exp.Expression) -> exp.Expression:
    return item.this if isinstance(item, exp.Alias) else item


def _aggregates_in(node: exp.Expression) -> list[exp.Expression]:
    return [n for n in node.walk() if isinstance(n, exp.AggFunc)]


def _position(node: exp.Literal, items: list[exp.Expression], clause: str) -> int:
    """The select item a 1-based position names, as an index."""
    text = node.this.replace("_", "")
    if not text.isdigit() or not 1 <= int(text) <= len(items):
        raise OutOfClass(f"{clause} position {node.this} is not in the select list (1 to {len(items)})")
    return int(text) - 1


def _narrowed(side: Expr, written: _Signs, other: Expr) -> Expr:
    """An integer literal as written (`written`: the signs and parentheses about it) beside an integer typed otherwise, in that
    type where its value fits it: DuckDB's parser types such a literal INTEGER_LITERAL, which its binder casts to
    the other side's type (TINYINT + 1 is a TINYINT; + 128, whose value does not fit, an INTEGER; 1 + 1 + TINYINT,
    whose left side is a sum, an INTEGER). A prepared statement's parameter is not one: DuckDB types it by its
    value alone."""
    if not (isinstance(side, Literal) and side.type.is_integer and other.type.is_integer and side.type != other.type) \
            or written.parameter is not None or written.plus:
        return side
    if isinstance(written.inner, exp.Literal) and not written.inner.is_string and fits(side.value, other.type):
        return Literal(side.value, other.type)
    return side


def _fold(op: str, left: Literal, right: Literal, t: SqlType) -> int:
    """left op right on exact values at the result type's scale."""
    if op == "*":
        return left.value * right.value
    s = scale_of(t)
    a = left.value * 10 ** (s - scale_of(left.type))
    b = right.value * 10 ** (s - scale_of(right.type))
    return a + b if op == "+" else a - b


def _aligned(left: Literal, right: Literal) -> tuple[int, int]:
    s = max(scale_of(left.type), scale_of(right.type))
    return left.value * 10 ** (s - scale_of(left.type)), right.value * 10 ** (s - scale_of(right.type))


def _holds(op: str, a, b) -> bool:
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "=": a == b, "<>": a != b}[op]


def _chained(node: exp.Expression) -> list[exp.Expression]:
    """The terms of a chain of one connective (a AND b AND (c AND d)), left to right: sqlglot nests a chain of n
    terms n deep, and binding it a level at a time rebuilt each level's flattened terms (16,000 ANDs took 2 minutes)."""
    kind, terms, todo = type(node), [], [node]
    while todo:
        n = _unparenthesized(todo.pop())
        if type(n) is kind:
            todo += [n.expression, n.this]  # (popped this first: the terms stay in the order written)
        else:
            terms.append(n)
    return terms


def _conjunction(kind: type, args: list[Expr]) -> Expr:
    """AND or OR of args, flattened, with TRUE and FALSE folded away."""
    absorbing, neutral = (FALSE, TRUE) if kind is And else (TRUE, FALSE)
    flat: list[Expr] = []
    for a in args:
        flat.extend(a.args if isinstance(a, kind) else (a,))
    truths = [a for a in flat if type(a) is Literal]  # (only a literal can be TRUE or FALSE: no tree is compared)
    if absorbing in truths:
        return absorbing
    kept = [a for a in flat if type(a) is not Literal or a != neutral]
    if not kept:
        return neutral
    return kept[0] if len(kept) == 1 else kind(tuple(kept))


def _is_null_literal(node: exp.Expression) -> bool:
    return isinstance(_unparenthesized(node), exp.Null)


def _mentions(e: Expr, part: Expr) -> bool:
    return any(node == part for node in e.walk())


def _holds_true(p: Expr) -> Expr:
    """The rows where p is TRUE, as a predicate of two truth values: p's unknowns (comparisons with NULL)
    rewritten with SQL's three-valued logic. With T and F the rows where a predicate is true and false:
    T(unknown) = F(unknown) = FALSE, T(NOT p) = F(p), T(p AND q) = T(p) AND T(q), T(p OR q) = T(p) OR T(q),
    F(p AND q) = F(p) OR F(q), F(p OR q) = F(p) AND F(q); a comparison of values (never NULL in the class)
    is its own T, and its negation its F."""
    return _truth(p, True)


def _truth(p: Expr, value: bool) -> Expr:
    if p == UNKNOWN:
        return FALSE
    if p in (TRUE, FALSE):
        return TRUE if (p == TRUE) == value else FALSE
    if isinstance(p, Not):
        return _truth(p.arg, not value)
    if isinstance(p, (And, Or)):
        inner = And if (isinstance(p, And) == value) else Or  # T(AND) and F(OR) are ANDs
        return _conjunction(inner, [_truth(a, value) for a in p.args])
    return p if value else _negation(p)


def _negation(arg: Expr) -> Expr:
    if arg in (TRUE, FALSE):
        return FALSE if arg == TRUE else TRUE
    if isinstance(arg, InList):
        return replace(arg, negated=not arg.negated)
    return arg.arg if isinstance(arg, Not) else Not(arg)

