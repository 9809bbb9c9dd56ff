"""Plans as rows for files (CSV and JSON), and the atomic write every kvplan file goes through.

One row per plan: the keys of kvplan.report.text.plan_to_dict (the same numbers `fit --json` prints),
plus rank and prices. The CSV carries exactly those values (bytes as integers, floats at full
precision) and adds a GiB column beside each memory figure people read, so a spreadsheet and a
script agree. `atomic_write` is the one writer of every kvplan file (reports, catalog entries): it
writes a temporary file next to the target and renames it over the target only once it is
complete, so an interrupted or failed run leaves the old file or none. It writes what a symlink
names, never the link, and writes straight into a FIFO or device (/dev/null, /dev/stdout).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Iterator

from kvplan.core.errors import EXIT_ERROR, EXIT_USAGE, KvplanError

GIB = 2**30

# Columns added to plan_to_dict's keys for a sweep or a cost ranking.
PRICE_KEYS = ("price_per_gpu_hour", "cost_per_hour", "cost_per_concurrent_user_hour")

# A GiB column (bytes / 2^30, rounded to 3 decimals) follows each of these byte columns in the CSV.
GIB_BESIDE = {
    "usable_memory_bytes_per_gpu": "usable_memory_gib_per_gpu",
    "budget_bytes_per_gpu": "budget_gib_per_gpu",
    "weight_bytes": "weight_gib",
    "weight_bytes_per_gpu": "weight_gib_per_gpu",
    "overhead_bytes_per_gpu": "overhead_gib_per_gpu",
    "kv_bytes_per_sequence": "kv_gib_per_sequence",
    "kv_bytes_per_sequence_per_gpu": "kv_gib_per_sequence_per_gpu",
    "kv_memory_bytes_per_gpu": "kv_memory_gib_per_gpu",
    "kv_used_bytes_per_gpu": "kv_used_gib_per_gpu",
    "free_bytes_per_gpu": "free_gib_per_gpu",
}

# Spreadsheets run a cell that starts with one of these as a formula (CSV injection). Text cells
# (model names come from users' configs) that start so are prefixed with an apostrophe, which
# spreadsheets show as text; numbers are never touched (a negative free memory stays a number).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def plan_row(plan, model, price: float | None = None, rank: int | None = None) -> dict:
    """plan_to_dict(plan, model) with rank first and the price columns at the end.

    cost_per_hour = price per GPU-hour x GPUs; cost_per_concurrent_user_hour = that / max
    concurrency at the plan's context (null when the deployment holds no sequence at all).
    """
    from kvplan.report.text import plan_to_dict

    row = plan_to_dict(plan, model, nested=False, rank=rank)  # `fit --json` has layer_kinds, a table row not
    info = getattr(model, "speculative", None)  # nor the drafter's report: its --speculative spelling instead
    row["speculative"] = info.flag() if info is not None else None
    cost = None if price is None else price * plan.deployment.gpus
    row["price_per_gpu_hour"] = price
    row["cost_per_hour"] = cost
    row["cost_per_concurrent_user_hour"] = (cost / plan.max_concurrency
                                            if cost is not None and plan.max_concurrency > 0 else None)
    return row


def csv_columns(keys: Iterable[str]) -> list[str]:
    """The CSV header for rows with these keys: each key, then its GiB column where there is one."""
    out = []
    for k in keys:
        out.append(k)
        if k in GIB_BESIDE:
            out.append(GIB_BESIDE[k])
    return out


# The keys of plan_row (with a rank), in order: the documented columns of `kvplan sweep --csv/--json`.
ROW_KEYS = (
    "rank", "model", "gpu", "gpus", "tp", "pp", "dp", "ep", "dcp", "context", "batch", "weight_dtype", "kv_dtype", "block_size",
    "gpu_memory_utilization", "usable_memory_bytes_per_gpu", "budget_bytes_per_gpu", "weight_bytes",
    "weight_bytes_per_gpu", "overhead_bytes_per_gpu", "overhead_is_estimate", "kv_bytes_per_token",
    "kv_bytes_per_token_per_gpu", "kv_bytes_per_sequence", "kv_bytes_per_sequence_per_gpu",
    "state_bytes_per_sequence", "state_bytes_per_sequence_per_gpu", "kv_memory_bytes_per_gpu", "kv_used_bytes_per_gpu", "free_bytes_per_gpu", "kv_cache_tokens",
    "max_concurrency", "max_context", "max_context_limited_by", "fits", "decode_step_seconds",
    "decode_tokens_per_second", "decode_tokens_per_second_per_request", "speculative", "warnings", *PRICE_KEYS,
)
CSV_COLUMNS = tuple(csv_columns(ROW_KEYS))


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return value  # csv writes repr(): floats round-trip exactly
    if isinstance(value, (list, tuple)):
        value = " | ".join(map(str, value))
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def write_csv(rows: list[dict], stream, columns: Iterable[str] | None = None) -> None:
    """Rows as CSV (RFC 4180, CRLF line ends, UTF-8): a header line, then one line per row.

    Integers and floats are written as Python prints them (exact, round-trip); true/false for
    booleans; an empty cell for null; lists joined with " | ".
    """
    if columns is None:
        columns = csv_columns(rows[0].keys()) if rows else CSV_COLUMNS
    columns = list(columns)
    source = {gib: key for key, gib in GIB_BESIDE.items()}
    plan = [(source.get(c, c), c in source) for c in columns]
    writer = csv.writer(stream, lineterminator="\r\n")
    writer.writerow(columns)
    number = (int, float)
    writer.writerows(
        [round(row[k] / GIB, 3) if gib else (v if type(v) in number else _cell(v))
         for k, gib in plan for v in (row[k],)]
        for row in rows)


def json_document(head: dict, rows: list[dict], key: str = "plans") -> str:
    """`head` with `key: rows` last, one row per line (compact rows keep 100k plans fast and diffable)."""
    head_text = json.dumps(head, ensure_ascii=False, allow_nan=False, indent=1)
    lines = ",\n".join(json.dumps(r, ensure_ascii=False, allow_nan=False) for r in rows)
    body = f'{json.dumps(key)}: [\n{lines}\n]' if rows else f'{json.dumps(key)}: []'
    inner = head_text[:-1].rstrip()
    sep = ",\n " if head else ""
    return inner + sep + body + "\n}\n"


def json_text(data) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


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
    target, magic = _follow(Path(path))
    try:
        st = None if magic else os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise write_error(path, exc) from None
    if magic or (st is not None and not stat.S_ISREG(st.st_mode)):
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise write_error(path, IsADirectoryError(errno.EISDIR, "is a directory"))
        with _direct(path if magic else target, newline, encoding) as stream:
            yield stream
        return
    folder = target.parent
    if not folder.is_dir():
        raise KvplanError(f"cannot write {path}: folder {folder} does not exist", EXIT_USAGE)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise write_error(path, exc) from None
    try:
        if st is not None:
            with contextlib.suppress(OSError):  # only root may give a file away; keep what we can
                os.fchown(fd, st.st_uid, st.st_gid)
        os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o777 if st is not None else 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding=encoding, newline=newline) as stream:
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


@contextlib.contextmanager
def _direct(path, newline, encoding) -> Iterator:
    """Write into a file that is not a regular one (FIFO, device, an fd's magic link), no temp file."""
    try:
        stream = open(path, "w", encoding=encoding, newline=newline)
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
