"""Errors a user can act on. The CLI prints them as one line, never as a traceback."""


class GqueryError(Exception):
    """Bad data, a missing file, a failed tool: printed as 'gquery: error: ...', exit code 1."""

    exit_code = 1


class UsageError(GqueryError):
    """A bad argument: exit code 2, like any command-line usage error."""

    exit_code = 2


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised so that cleanup runs as for Ctrl-C: 'gquery: terminated', exit code 143."""

    exit_code = 128 + 15
