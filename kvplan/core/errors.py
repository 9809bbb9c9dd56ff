"""The one user-facing error type, and the exit codes the CLI maps it to.

Everything a user can get wrong (a bad flag, an unknown model, a gated repo, a malformed
config) is raised as a KvplanError carrying a one-line message and an exit code. The CLI
catches it once and prints `Error: <message>` on stderr; KVPLAN_DEBUG=1 shows the traceback.
"""

from __future__ import annotations

import errno

# Exit codes (documented in README.md):
EXIT_OK = 0
EXIT_ERROR = 1  # a runtime failure that is not the user's input (e.g. validation mismatch)
EXIT_USAGE = 2  # bad input: flags, values, names (also Typer's own usage errors)
EXIT_NOT_FOUND = 3  # a model, GPU, file, repo or revision that does not exist
EXIT_ACCESS = 4  # gated or private repo, bad token
EXIT_NETWORK = 5  # the Hub could not be reached (timeout, offline without cache)
EXIT_DOES_NOT_FIT = 6  # `fit --gpus/--tp` given and the asked workload does not fit (opt-in)


class KvplanError(Exception):
    """A problem the user can act on, with a one-line message and an exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


def path_error(exc: OSError) -> KvplanError | None:
    """An OSError about a path the user gave (a name too long, a loop, no permission) as one line, else None.

    Such errors come from the user's own file names, not from a bug, so they get `Error: ...` like any
    other bad input rather than `internal error`.
    """
    if exc.filename is None:
        return None
    name = exc.filename if isinstance(exc.filename, str) else repr(exc.filename)
    shown = name if len(name) <= 80 else name[:60] + "..." + name[-17:]
    code = EXIT_NOT_FOUND if exc.errno == errno.ENOENT else (
        EXIT_ERROR if exc.errno in (errno.EIO, errno.ENOSPC) else EXIT_USAGE)
    return KvplanError(f"{shown}: {exc.strerror or exc}", code)
