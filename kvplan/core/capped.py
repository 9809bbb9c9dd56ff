"""A user's file read whole only where it is a regular file within a size cap (`read_capped`).

A size checked with stat() before reading says nothing of a device or a FIFO: /dev/zero and /dev/urandom report 0
bytes and never end, and a FIFO blocks the open until a writer comes. So the file is opened without blocking, asked
on the open descriptor what it is, and read at most one byte past the cap.
"""

from __future__ import annotations

import os
import stat

from kvplan.core.errors import EXIT_USAGE, KvplanError


def open_nonblocking(path: str | os.PathLike) -> tuple[int, os.stat_result]:
    """A descriptor of `path` opened read-only without waiting (a FIFO no writer holds would block open() for ever),
    and what fstat says of it on that descriptor; a missing or unreadable path raises the OSError open gives."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        return fd, os.fstat(fd)
    except OSError:
        os.close(fd)
        raise


def read_capped(path: str | os.PathLike, max_bytes: int, where: str, kind: str = "", hint: str = "") -> bytes:
    """The bytes of the file at `path`. `where` names it in the one-line refusal of anything but a regular file and of
    one past `max_bytes` ("...; not `kind`" where given: a hostile or wrong file; then " (`hint`)", what to do); a
    missing or unreadable one raises the OSError open gives."""
    fd, st = open_nonblocking(path)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise KvplanError(f"{where} is not a regular file (a device, a FIFO or a folder)", EXIT_USAGE)
    with os.fdopen(fd, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise KvplanError(f"{where}: larger than {max_bytes // 2**20} MiB" + (f"; not {kind}" if kind else "")
                          + (f" ({hint})" if hint else ""), EXIT_USAGE)
    return data
