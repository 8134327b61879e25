"""A PEP 249 (DB-API 2.0) connection over an opened table, for the tools and habits that speak it:

    import gquery
    con = gquery.connect("trips.parquet")                 # any path gquery.open takes; name=, backend=
    cur = con.cursor()
    cur.execute("SELECT city, SUM(fare) FROM trips WHERE km < ? GROUP BY city ORDER BY 1", (10,))
    cur.description, cur.fetchone(), cur.fetchall()
    con.close()

Parameters are qmark style: each `?` outside a string or a quoted name takes the next parameter as
an exact SQL literal (int, Decimal, str, datetime.date, datetime.datetime, bool, None); a float is
refused, since its text would be another number than the double (pass a Decimal). Every error is
one of this module's exceptions with gquery's one-line message: ProgrammingError for SQL the engines
do not answer or a name the data lacks, InterfaceError for a closed connection or cursor, and
NotSupportedError for what a read-only engine of one table does not do.
"""

from __future__ import annotations

import datetime
import time

from gquery import parameters as parameters_
from gquery.errors import GqueryError, TableClosed

apilevel = "2.0"
threadsafety = 2  # threads may share the module and connections (a table answers any thread), not cursors
paramstyle = "qmark"

# PEP 249's constructors: the values a parameter takes (a Binary or a Time is refused in one line, as no column the
# engines hold is one)
Date, Time, Timestamp, Binary = datetime.date, datetime.time, datetime.datetime, bytes


def DateFromTicks(ticks: float) -> datetime.date:  # noqa: N802 (PEP 249's names)
    return Date(*time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> datetime.time:  # noqa: N802
    return Time(*time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> datetime.datetime:  # noqa: N802
    return Timestamp(*time.localtime(ticks)[:6])


class _TypeObject:
    """PEP 249's type object: equal to each type code (description's second field, the SQL type as DuckDB names it,
    'DECIMAL(15,2)' say) of its kind."""

    def __init__(self, *names: str, prefixes: tuple = ()):
        self.names, self.prefixes = frozenset(names), prefixes

    def __eq__(self, other) -> bool:
        return isinstance(other, str) and (other in self.names or other.startswith(self.prefixes))

    def __hash__(self) -> int:
        return hash(self.names)


STRING = _TypeObject("VARCHAR")
NUMBER = _TypeObject("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                     "UBIGINT", "DOUBLE", "FLOAT", prefixes=("DECIMAL",))
DATETIME = _TypeObject("DATE", "TIMESTAMP", "TIME")
BINARY = _TypeObject("BLOB")
ROWID = _TypeObject()  # (a table of the class has no row id column)


class Error(GqueryError):
    """PEP 249's base of its errors; a GqueryError, so one except clause catches gquery's errors."""


class Warning(Exception):  # noqa: A001 (PEP 249's name)
    pass


class InterfaceError(Error):
    pass


class DatabaseError(Error):
    pass


class DataError(DatabaseError):
    pass


class OperationalError(DatabaseError):
    pass


class IntegrityError(DatabaseError):
    pass


class InternalError(DatabaseError):
    pass


class ProgrammingError(DatabaseError):
    pass


class NotSupportedError(DatabaseError):
    pass


def connect(data, name: str | None = None, **options) -> "Connection":
    """A connection to the table at `data` (see gquery.open); `options` go to each query (backend,
    mode, check, ...) as table.sql takes them."""
    from gquery import api

    unknown = set(options) - set(api.sql_options())
    if unknown:  # said now, not at the first execute
        raise ProgrammingError(f"unknown option(s) {', '.join(sorted(unknown))}: a query takes "
                               f"{', '.join(api.sql_options())}")
    for option, allowed in (("backend", api.BACKENDS), ("mode", api.MODES)):
        if option in options and options[option] not in allowed:  # (a typo said now too)
            raise ProgrammingError(f"{option} must be one of {', '.join(allowed)}, got {options[option]!r}")
    try:
        return Connection(api.open(data, name=name), options)
    except GqueryError as e:
        raise OperationalError(str(e)) from None


STATEMENTS_KEPT = 256  # prepared texts a connection keeps


class Connection:
    Error, Warning, InterfaceError, DatabaseError, DataError = Error, Warning, InterfaceError, DatabaseError, DataError
    OperationalError, IntegrityError, InternalError = OperationalError, IntegrityError, InternalError
    ProgrammingError, NotSupportedError = ProgrammingError, NotSupportedError

    def __init__(self, table, options: dict):
        self.table, self.options, self.closed = table, dict(options), False
        self._statements: dict = {}  # text with ? → its prepared statement (parsed once: api.Prepared)

    def _statement(self, sql: str):
        """The text's prepared statement, kept while the connection is open (at most STATEMENTS_KEPT)."""
        found = self._statements.get(sql)
        if found is None:
            found = self.table.prepare(sql)
            if len(self._statements) < STATEMENTS_KEPT:
                self._statements[sql] = found
        return found

    def cursor(self) -> "Cursor":
        self._live()
        return Cursor(self)

    def execute(self, sql: str, parameters=None) -> "Cursor":
        """A cursor that executed `sql` (a shortcut many drivers offer)."""
        return self.cursor().execute(sql, parameters)

    def commit(self) -> None:
        self._live()  # nothing to commit: queries only read

    def rollback(self) -> None:
        self._live()  # (a closed connection says so first, as commit does)
        raise NotSupportedError("gquery only reads: there is no transaction to roll back")

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.table.close()

    def _live(self) -> None:
        if self.closed:
            raise InterfaceError("this connection is closed")

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Cursor:
    arraysize = 1

    def __init__(self, connection: Connection):
        self.connection = connection
        self.description = None
        self.rowcount = -1
        self.answer = None  # the last query's gquery.answer.Answer: its check, profile, explain()
        self._rows: list[tuple] = []
        self._at = 0
        self._closed = False

    def execute(self, sql: str, parameters=None) -> "Cursor":
        self._live()
        c = self.connection
        # the last result is gone whether or not this one comes (PEP 249: a failed execute leaves no result set)
        self.answer, self._rows, self._at, self.rowcount, self.description = None, [], 0, -1, None
        try:  # with parameters, the text is parsed once and each execute binds into it (checking them)
            params = parameters_.sequence(parameters)
            answer = c._statement(sql).run(*params, **c.options) if params else c.table.sql(bind(sql, params), **c.options)
        except GqueryError as e:  # (a table closed under the connection: the connection's own InterfaceError)
            raise (InterfaceError if isinstance(e, TableClosed) else ProgrammingError)(str(e)) from None
        self.answer, self._rows, self._at = answer, answer.fetchall(), 0
        self.rowcount = len(self._rows)
        self.description = [(name, str(t), None, None, t.width or None, t.scale if t.is_decimal else None, None)
                            for name, t in answer.result.columns]
        return self

    def executemany(self, sql: str, seq_of_parameters) -> None:
        raise NotSupportedError("executemany: gquery answers queries, and a query's rows come from fetch*")

    def fetchone(self):
        self._answered()
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchmany(self, size: int | None = None) -> list[tuple]:
        self._answered()
        size = self.arraysize if size is None else size
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ProgrammingError(f"fetchmany takes a number of rows, got {size!r}")
        rows = self._rows[self._at:self._at + size]
        self._at += len(rows)
        return rows

    def fetchall(self) -> list[tuple]:
        self._answered()
        rows = self._rows[self._at:]
        self._at = len(self._rows)
        return rows

    def fetch_arrow_table(self):
        """The last answer as a pyarrow.Table (as DuckDB's cursor offers)."""
        self._answered()
        return self.answer.arrow()

    def setinputsizes(self, sizes) -> None:
        pass

    def setoutputsize(self, size, column=None) -> None:
        pass

    def close(self) -> None:
        self._closed = True

    def __iter__(self):
        return iter(self.fetchone, None)

    def __enter__(self) -> "Cursor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _live(self) -> None:
        if self._closed:
            raise InterfaceError("this cursor is closed")
        self.connection._live()

    def _answered(self) -> None:
        self._live()
        if self.answer is None:
            raise ProgrammingError("no query has been executed on this cursor")


def bind(sql: str, parameters) -> str:
    """The text with each `?` replaced by the next parameter as an exact SQL literal (gquery.parameters)."""
    try:
        return parameters_.bind(sql, parameters)
    except GqueryError as e:
        raise ProgrammingError(str(e)) from None


def literal(value) -> str:
    """A Python value as the SQL literal that means exactly it (gquery.parameters)."""
    try:
        return parameters_.literal(value)
    except GqueryError as e:
        raise ProgrammingError(str(e)) from None
