"""A user's file read whole only where it is a regular file within a size cap (`read_capped`).

A size checked with stat() before reading says nothing of a device or a FIFO: /dev/zero and /dev/urandom report 0
bytes and never end, and a FIFO blocks the open until a writer comes. So the file is opened without blocking, asked
on the open descriptor what it is, and read at most one byte past the cap.
"""

from __future__ import annotations

import os
import stat

from kvplan.core.errors import EXIT_USAGE, KvplanError


def read_capped(path: str | os.PathLike, max_bytes: int, where: str, kind: str = "") -> bytes:
    """The bytes of the file at `path`. `where` names it in the one-line refusal of anything but a regular file and of
    one past `max_bytes` ("...; not `kind`" where given: a hostile or wrong file); a missing or unreadable one raises
    the OSError open gives."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise KvplanError(f"{where} is not a regular file (a device, a FIFO or a folder)", EXIT_USAGE)
    with os.fdopen(fd, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise KvplanError(f"{where}: larger than {max_bytes // 2**20} MiB" + (f"; not {kind}" if kind else ""),
                          EXIT_USAGE)
    return data
