"""Errors a user can act on. The CLI prints them as one line, never as a traceback."""

import functools
import sys
import threading


class GqueryError(Exception):
    """Bad data, a missing file, a failed tool: printed as 'gquery: error: ...', exit code 1."""

    exit_code = 1


class TableClosed(GqueryError):
    """A query of a table closed since it was opened (the DB-API's InterfaceError: a closed connection)."""


class UsageError(GqueryError):
    """A bad argument: exit code 2, like any command-line usage error."""

    exit_code = 2


# Expressions are trees, walked recursively by the SQL parser, the binder, the planner, the code generator
# and the CPU reference: an AND of 16,000 comparisons, a SUM of 6,600 terms and 850 nested parentheses answer
# within it (measured), where the interpreter's default of 1,000 frames stopped at 45 parentheses and a
# 500-term SUM. Python calling Python costs no C stack from 3.11.
RECURSION_LIMIT = 20_000
_deep = threading.Lock()
_deep_users = [0, 0]  # calls inside deep_expressions, and the limit before the first


def deep_expressions(fn):
    """`fn` with the interpreter's recursion limit raised to RECURSION_LIMIT while it runs (restored when the
    last such call returns), and a tree deeper still refused in one line, never a RecursionError."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with _deep:
            if _deep_users[0] == 0:
                _deep_users[1] = sys.getrecursionlimit()
                sys.setrecursionlimit(max(RECURSION_LIMIT, _deep_users[1]))
            _deep_users[0] += 1
        try:
            return fn(*args, **kwargs)
        except RecursionError:
            raise GqueryError(f"the query nests its expressions deeper than gquery walks them ({RECURSION_LIMIT:,} "
                              "frames of recursion: about 850 nested parentheses, 600 of NOT (...), 6,600 unary minuses, or 6,600 terms added in one "
                              "chain); "
                              "DuckDB's own limit is 1,000 levels") from None
        finally:
            with _deep:
                _deep_users[0] -= 1
                if _deep_users[0] == 0:
                    sys.setrecursionlimit(_deep_users[1])

    return run



class Stopped(BaseException):
    """A signal stopped the work (Ctrl-C, SIGTERM), raised so that cleanup runs: a running
    tpchgen-cli is killed and temporary files removed. Not a KeyboardInterrupt, which typer turns
    into a silent exit 130."""

    MESSAGES = {2: ("interrupted", 130), 15: ("terminated", 143)}  # SIGINT, SIGTERM: 128 + the signal

    def __init__(self, signum: int):
        super().__init__(signum)
        self.message, self.exit_code = self.MESSAGES[signum]
