"""Errors a user can act on. The CLI prints them as one line, never as a traceback."""


class GqueryError(Exception):
    """Bad data, a missing file, a failed tool: printed as 'gquery: error: ...', exit code 1."""

    exit_code = 1


class UsageError(GqueryError):
    """A bad argument: exit code 2, like any command-line usage error."""

    exit_code = 2



class Stopped(BaseException):
    """A signal stopped the work (Ctrl-C, SIGTERM), raised so that cleanup runs: a running
    tpchgen-cli is killed and temporary files removed. Not a KeyboardInterrupt, which typer turns
    into a silent exit 130."""

    MESSAGES = {2: ("interrupted", 130), 15: ("terminated", 143)}  # SIGINT, SIGTERM: 128 + the signal

    def __init__(self, signum: int):
        super().__init__(signum)
        self.message, self.exit_code = self.MESSAGES[signum]
