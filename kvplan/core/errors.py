"""The one user-facing error type, its exit codes, and how messages name the inputs they blame.

Everything a user can get wrong (a bad value, an unknown model, a gated repo, a malformed config)
is raised as a KvplanError: a one-line message, an exit code and, where one input is at fault, which
input (`param`), the value given and what would do (`allowed`). The core names an input only through
`arg(name)`, by its Python API keyword (`tp`, `context`, `engine_opts`); a front end says what to call
it instead (`inputs_named`: the CLI's flags, kvplan.cli._common.flag), so no flag is spelled below the CLI.
The CLI catches the error once and prints `Error: <message>` on stderr; KVPLAN_DEBUG=1 shows the traceback.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator
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
    """A problem the user can act on: a one-line message and an exit code.

    Where one input is to blame the error says which, as data a program can act on without reading
    the words: `param` (the Python API's keyword: 'tp', 'context', 'engine_opts'), `value` (what was
    given) and `allowed` (a (low, high) range, or the values accepted), each None when it does not apply.
    """

    def __init__(self, message: str, exit_code: int = EXIT_USAGE, *, param: str | None = None, value: Any = None,
                 allowed: Any = None):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.param = param
        self.value = value
        self.allowed = allowed

    def __str__(self) -> str:
        return self.message


def _keyword(name: str) -> str:
    return name


_namer: Callable[[str], str] = _keyword


def arg(name: str) -> str:
    """The words a message uses for the input `name` (a Python API keyword: 'tp', 'context').

    The keyword itself, unless a front end has said otherwise for what runs inside `inputs_named`
    (the CLI: '--tp', '--ctx'). Notes, warnings and labels that point at an input use it too.
    """
    return _namer(name)


def input_names() -> Callable[[str], str]:
    """The naming in effect (for a child process to word its messages as its parent does)."""
    return _namer


@contextmanager
def inputs_named(namer: Callable[[str], str]) -> Iterator[None]:
    """Within the block, messages call each input `namer(name)` (the CLI installs its flags here for
    the command it runs). A process-wide setting, not a context variable: the Hub's worker threads
    word their errors the same way."""
    global _namer
    saved, _namer = _namer, namer
    try:
        yield
    finally:
        _namer = saved


def out_of_range(param: str, value: Any, low: Any, high: Any, *, thousands: bool = True) -> KvplanError:
    """'`param` must be between LOW and HIGH, got VALUE' (a usage error), with its data."""
    bounds = f"{low:,} and {high:,}" if thousands else f"{low} and {high}"
    return KvplanError(f"{arg(param)} must be between {bounds}, got {value}", EXIT_USAGE,
                       param=param, value=value, allowed=(low, high))


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
