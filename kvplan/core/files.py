"""The one writer of every kvplan file (reports, catalog entries): atomic, symlink-following, one-line errors.

`atomic_write` writes a temporary file next to the target and renames it over the target only once
it is complete, so an interrupted or failed run leaves the old file or none. It writes what a
symlink names, never the link, and writes straight into a FIFO or device (/dev/null, /dev/stdout).
An OSError is a KvplanError naming the path (`write_error`).
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import io
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from kvplan.core.errors import EXIT_ERROR, EXIT_USAGE, KvplanError
from kvplan.core.markup import readable

# A name that came from a path with bytes that are not UTF-8 (a model folder) reaches Python as lone
# surrogates; a file kvplan writes is UTF-8 text, so such a byte is written as \xNN, as the terminal shows
# it (kvplan.core.markup.plain), and any other unencodable character as a backslash escape (issue 25:
# `sweep -o x.csv` of such a folder was an internal error).
UNDECODABLE = "kvplan-path-bytes"


def _path_bytes(exc: UnicodeError):
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return readable(exc.object[exc.start:exc.end]), exc.end


codecs.register_error(UNDECODABLE, _path_bytes)


# errnos that mean the path itself is wrong (a file where a folder should be, a name too long, a
# symlink loop): the user's input, exit 2. Anything else (permissions, a full or read-only disk) is 1.
_BAD_PATH_ERRNOS = {errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENOENT, errno.ENAMETOOLONG, errno.ELOOP,
                    errno.EINVAL}


def write_error(path, exc: OSError) -> KvplanError:
    """A one-line KvplanError for an OSError met writing `path`: exit 2 for a bad path, 1 otherwise."""
    code = EXIT_USAGE if exc.errno in _BAD_PATH_ERRNOS else EXIT_ERROR
    return KvplanError(f"cannot write {path}: {exc.strerror or exc}", code)


def _follow(path: Path) -> tuple[Path, bool]:
    """The path a write to `path` lands on, symlinks followed; and whether the chain passes through /proc.

    /proc/self/fd/N (and /dev/stdout, which links there) are magic links: the name they read as
    ("pipe:[123]", or a file an fd holds open) is not a path a rename could target, so they are
    written in place. A dangling link yields its missing target, which a write creates.
    """
    p = Path(os.path.abspath(path))
    for _ in range(40):  # the kernel's own limit on links in a chain
        p = Path(os.path.realpath(p.parent)) / p.name
        if p.parts[1:2] == ("proc",):
            return p, True
        try:  # a name too long for the filesystem, a folder we may not search: one line, naming the path
            if not p.is_symlink():
                return p, False
            p = p.parent / os.readlink(p)  # an absolute link replaces the whole path
        except OSError as exc:
            raise write_error(path, exc) from None
    raise write_error(path, OSError(errno.ELOOP, os.strerror(errno.ELOOP)))


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, *, newline: str | None = None, encoding: str = "utf-8") -> Iterator:
    """Open a text stream whose content replaces `path` only if the block completes.

    Symlinks are followed: the file a link names is written, never the link. A regular file (or a
    missing one) is written to a temporary file in the target's folder (so the rename is atomic on
    one filesystem), flushed and fsynced, given the old file's permission bits (a new file gets
    0o666 & ~umask, as open() would), then renamed over the target; the temporary file is removed
    when anything raises, including KeyboardInterrupt. Anything else (a FIFO, /dev/null,
    /dev/stdout) cannot be replaced and is written straight into. A failure to write is a
    KvplanError naming the path.
    """
    target, magic, st = _landing(path)
    if magic or (st is not None and not stat.S_ISREG(st.st_mode)):
        with _direct(path if magic else target, newline, encoding) as stream:
            yield stream
        return
    fd, tmp = _temp_beside(path, target)
    try:
        if st is not None:
            with contextlib.suppress(OSError):  # only root may give a file away; keep what we can
                os.fchown(fd, st.st_uid, st.st_gid)
        os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o777 if st is not None else 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding=encoding, newline=newline, errors=UNDECODABLE) as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise write_error(path, exc) from None
        raise


def check_writable(path: str | os.PathLike) -> None:
    """Refuse, before any work, a `path` that `atomic_writer` could not write: its folder missing, or one kvplan may
    not create a file in (read-only, not ours, /proc). A temporary file is made there and removed at once, as the
    write itself will; a FIFO or device already there is written in place and not probed (opening a FIFO waits)."""
    target, magic, st = _landing(path, probe_magic=True)
    if magic or (st is not None and not stat.S_ISREG(st.st_mode)):
        return
    fd, tmp = _temp_beside(path, target)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def _landing(path, probe_magic: bool = False) -> tuple[Path, bool, os.stat_result | None]:
    """(target, magic, st): the file a write to `path` lands on (`_follow`), whether that is an fd's magic link, and
    its stat (None: no file there yet, or a magic link not probed); a folder there refused. `probe_magic`: stat a
    magic link too, refusing a missing one (/proc takes no new file: only an fd's link that is there already)."""
    target, magic = _follow(Path(path))
    try:
        st = os.stat(target) if probe_magic or not magic else None
    except FileNotFoundError as exc:
        if magic:
            raise write_error(path, exc) from None
        st = None
    except OSError as exc:
        raise write_error(path, exc) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise write_error(path, IsADirectoryError(errno.EISDIR, "is a directory"))
    return target, magic, st


def _temp_beside(path, target: Path) -> tuple[int, str]:
    """A new temporary file in `target`'s folder (fd, name), where a rename over `target` is atomic."""
    if not target.parent.is_dir():
        raise KvplanError(f"cannot write {path}: folder {target.parent} does not exist", EXIT_USAGE)
    try:
        return tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise write_error(path, exc) from None


@contextlib.contextmanager
def _direct(path, newline, encoding) -> Iterator:
    """Write into a file that is not a regular one (FIFO, device, an fd's magic link), no temp file."""
    try:
        stream = open(path, "w", encoding=encoding, newline=newline, errors=UNDECODABLE)
    except OSError as exc:
        raise write_error(path, exc) from None
    try:
        with stream:
            yield stream
    except OSError as exc:  # raised by a write or by the flush on close (/dev/full: no space left)
        raise write_error(path, exc) from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, content: str | Callable[[io.TextIOBase], None], *,
                 newline: str | None = None) -> None:
    """Write `content` (a string, or a function that writes to a stream) to `path` atomically."""
    with atomic_writer(path, newline=newline) as stream:
        if callable(content):
            content(stream)
        else:
            stream.write(content)


def atomic_write_all(items) -> None:
    """Write every (path, content, newline) of a command's outputs, or none: each is written and flushed to its
    temporary file first (a full disk or /dev/full fails here, before any rename), and the files are renamed over
    their targets only once all are written; a failure removes every temporary file."""
    with contextlib.ExitStack() as stack:
        for path, content, newline in items:
            stream = stack.enter_context(atomic_writer(path, newline=newline))
            content(stream) if callable(content) else stream.write(content)
            stream.flush()
