"""Request traces from files: CSV or JSONL, kvplan's own columns or a public production trace.

Formats (auto-detected from the header or the first record's keys, or named with `fmt`):

* kvplan  - CSV or JSONL with `arrival` (seconds), `input_tokens`, `output_tokens`, optional
            `prefix_id` and `prefix_tokens` (requests with the same prefix_id share that many
            leading prompt tokens);
* azure   - the Azure LLM inference traces 2023/2024 (Azure/AzurePublicDataset):
            CSV `TIMESTAMP,ContextTokens,GeneratedTokens`, timestamps as `2023-11-16 18:15:46.6805900`;
* burstgpt - BurstGPT (HPMLL/BurstGPT): CSV `Timestamp,Model,Request tokens,Response tokens,
            Total tokens,Log Type`, timestamps in seconds; failed requests (0 response tokens) are
            dropped and counted;
* mooncake - Mooncake traces (kvcache-ai/Mooncake): JSONL `timestamp` (ms), `input_length`,
            `output_length`, `hash_ids` (one id per 512-token block of the prompt; equal leading
            ids mean a shared prefix, which becomes prefix segments here);
* bailian - the Qwen Bailian traces (alibaba-edu/qwen-bailian-usagetraces-anon, README@03a51e31): JSONL
            `chat_id`, `parent_chat_id`, `timestamp` (seconds), `input_length`, `output_length`, `type`,
            `turn`, `hash_ids` (one salted hash per 16-token block). As for Mooncake, a block's segment is
            named by every id up to it, so a block is shared only after the same leading blocks.

Arrivals are made relative to the first one and sorted. Parsing is linear and capped (file
size, line length, request count); every problem is a one-line KvplanError naming the line.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import select
import stat
from datetime import datetime

from kvplan.core.capped import open_nonblocking
from kvplan.core.collector import collector_paused
from kvplan.core.errors import EXIT_NOT_FOUND, EXIT_USAGE, KvplanError, arg
from kvplan.simulator.workload import MAX_REQUESTS, SimRequest

MAX_FILE_BYTES = 4 * 2**30
FIFO_WAIT_S = 30.0  # a FIFO's or pipe's writer: its first bytes (or close) awaited this long
MAX_LINE = 1 << 20  # characters in one line (a Mooncake record lists its block ids)
MAX_TOKENS = 1 << 24
MOONCAKE_BLOCK = 512  # tokens per hash id in the Mooncake traces (their README)
BAILIAN_BLOCK = 16  # tokens per hash id in the Qwen Bailian traces (their README)
FORMATS = ("auto", "kvplan", "azure", "burstgpt", "mooncake", "bailian")
_BAILIAN_KEYS = {"chat_id", "timestamp", "input_length", "output_length", "hash_ids"}


def hash_block_tokens(fmt: str | None) -> int | None:
    """Tokens per hash id of a trace format (its blocks), or None for a format without hash ids."""
    return {"mooncake": MOONCAKE_BLOCK, "bailian": BAILIAN_BLOCK}.get(fmt or "")

_KVPLAN_KEYS = {"arrival", "input_tokens", "output_tokens"}
_ID_TYPES = frozenset((int, str))  # a hash id as JSON gives it


def _fail(path, line, message) -> KvplanError:
    return KvplanError(f"{path}: line {line}: {message}", EXIT_USAGE)


def _float(value) -> float:
    """float(value); a JSON integer past a float's range (10**400) as the infinity its digits give as text, so it
    meets the range checks rather than an OverflowError."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _int(value, what, path, line) -> int:
    if isinstance(value, bool):  # JSON true is no token count (float(True) would read it as 1)
        raise _fail(path, line, f"{what} {str(value).lower()} is not a number")
    try:
        f = _float(value)
    except (TypeError, ValueError):
        raise _fail(path, line, f"{what} {str(value)[:40]!r} is not a number") from None
    if not math.isfinite(f) or f < 0 or f != int(f) or f > MAX_TOKENS:
        raise _fail(path, line,
                    f"{what} must be a whole number of tokens between 0 and {MAX_TOKENS:,}, got {str(value)[:40]}")
    return int(f)


def _seconds(value, path, line, scale=1.0) -> float:
    if isinstance(value, bool):
        raise _fail(path, line, f"arrival {str(value).lower()} is not a number of seconds")
    try:
        f = _float(value) * scale
    except (TypeError, ValueError):
        raise _fail(path, line, f"arrival {str(value)[:40]!r} is not a number of seconds") from None
    if not math.isfinite(f):
        raise _fail(path, line, f"arrival {str(value)[:40]!r} is not finite")
    return f


def _azure_time(value, path, line) -> float:
    text = str(value).strip()
    head, _, frac = text.partition(".")
    try:
        stamp = datetime.strptime(head, "%Y-%m-%d %H:%M:%S")
    except ValueError:
        raise _fail(path, line, f"TIMESTAMP {text[:40]!r} is not like 2023-11-16 18:15:46.6805900") from None
    if frac and not frac.isdigit():
        raise _fail(path, line, f"TIMESTAMP {text[:40]!r} has a bad fraction of a second")
    # Ordinal seconds (exact), plus the fraction at whatever precision it has (the 2023 files use 7 digits).
    return (stamp.toordinal() * 86400.0 + stamp.hour * 3600 + stamp.minute * 60 + stamp.second
            + (float("0." + frac) if frac else 0.0))


def _rows_csv(stream, path):
    reader = csv.DictReader(stream)
    if not reader.fieldnames:
        raise KvplanError(f"{path}: empty trace", EXIT_USAGE)
    return [f.strip() if f else f for f in reader.fieldnames], reader


def _detect_csv(fields) -> str:
    f = set(fields)
    if {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} <= f:
        return "azure"
    if {"Timestamp", "Request tokens", "Response tokens"} <= f:
        return "burstgpt"
    if _KVPLAN_KEYS <= f:
        return "kvplan"
    raise KvplanError(f"unrecognised trace columns {', '.join(fields)[:120]}; expected "
                      "arrival,input_tokens,output_tokens (or the Azure, BurstGPT or Mooncake layouts)", EXIT_USAGE)


def _detect_json(record: dict) -> str:
    if _BAILIAN_KEYS <= record.keys():
        return "bailian"
    if {"timestamp", "input_length", "output_length"} <= record.keys():
        return "mooncake"
    if _KVPLAN_KEYS <= record.keys():
        return "kvplan"
    raise KvplanError(f"unrecognised trace record keys {', '.join(record)[:120]}; expected arrival, input_tokens, "
                      "output_tokens (or the Mooncake layout)", EXIT_USAGE)


def _hash_prefix(ids, path, line, block: int = MOONCAKE_BLOCK, names: dict | None = None) -> tuple:
    """A record's hash ids as prefix segments. A block's segment is named by every id up to it: a number given
    to each (parent's name, id) the first time `names`, shared over a file, sees it (a short name a dict hashes
    at once; 0 is the root). `names` keeps the segment (name, block) itself: one tuple for all the requests that
    hold the block (a third fewer objects in Mooncake's conversation trace), not one per request."""
    names = {} if names is None else names
    if not isinstance(ids, list) or len(ids) > MAX_TOKENS // block:
        raise _fail(path, line, "hash_ids must be a list of block ids")
    if not _ID_TYPES.issuperset(map(type, ids)):  # JSON's own types: a bool or a float is refused
        raise _fail(path, line, "hash_ids must hold integers")
    out, key, get = [], 0, names.get
    for h in ids:
        seg = get((key, h))
        if seg is None:
            seg = names[key, h] = (len(names) + 1, block)
        key = seg[0]
        out.append(seg)
    return tuple(out)


def _record(fmt, rec, path, line, names: dict | None = None):
    """(arrival seconds, prompt, output, prefix) from one parsed row, or None to drop it."""
    if fmt == "azure":
        return (_azure_time(rec.get("TIMESTAMP"), path, line),
                _int(rec.get("ContextTokens"), "ContextTokens", path, line),
                _int(rec.get("GeneratedTokens"), "GeneratedTokens", path, line), ())
    if fmt == "burstgpt":
        return (_seconds(rec.get("Timestamp"), path, line),
                _int(rec.get("Request tokens"), "Request tokens", path, line),
                _int(rec.get("Response tokens"), "Response tokens", path, line), ())
    if fmt in ("mooncake", "bailian"):
        block = hash_block_tokens(fmt)
        prompt = _int(rec.get("input_length"), "input_length", path, line)
        prefix = _hash_prefix(rec.get("hash_ids", []), path, line, block, names)
        # The last block id covers a partial block: share only whole blocks strictly inside the prompt.
        prefix = prefix[: max(0, min(len(prefix), (prompt - 1) // block))]
        return (_seconds(rec.get("timestamp"), path, line, 1e-3 if fmt == "mooncake" else 1.0), prompt,
                _int(rec.get("output_length"), "output_length", path, line), prefix)
    prompt = _int(rec.get("input_tokens"), "input_tokens", path, line)
    prefix = ()
    pid = rec.get("prefix_id")
    if pid not in (None, ""):
        if isinstance(pid, bool) or not isinstance(pid, (str, int)):  # a list or a mapping names no prefix
            raise _fail(path, line, f"prefix_id must be a string or an integer, got {str(pid)[:40]}")
        n = _int(rec.get("prefix_tokens"), "prefix_tokens", path, line)
        if n >= prompt:
            raise _fail(path, line, f"prefix_tokens ({n}) must be less than input_tokens ({prompt})")
        if n:
            prefix = ((f"p:{str(pid)[:200]}", n),)
    return (_seconds(rec.get("arrival"), path, line), prompt,
            _int(rec.get("output_tokens"), "output_tokens", path, line), prefix)


def _open_text(path: str):
    """The trace as a text stream and its size, opened without waiting (kvplan.core.capped.open_nonblocking: a FIFO
    no writer holds would block open() for ever). A FIFO or pipe is then waited on up to FIFO_WAIT_S for its writer's
    first bytes or close (`mkfifo p; (sleep 1; cat t.jsonl > p) &` is read whole; one whose writer opened and closed
    it is an empty trace; one nothing reaches in time is refused, never waited on for ever), and read blocking to EOF
    (`--trace <(xzcat t.jsonl.xz)` streams)."""
    fd, st = open_nonblocking(path)
    if stat.S_ISDIR(st.st_mode):  # open() refuses a folder; os.open does not
        os.close(fd)
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    # Linux reports a FIFO readable only once a writer opened it since this open (fs/pipe.c pipe_poll: no EPOLLHUP
    # before w_counter moves), so select waits for the writer rather than seeing the empty FIFO's end of file
    first = b""
    if stat.S_ISFIFO(st.st_mode) and not select.select([fd], [], [], FIFO_WAIT_S)[0]:
        try:  # a writer holding the pipe with nothing written yet (a slow `<(sort …)`) answers EAGAIN: read on
            first = os.read(fd, 1 << 16)
        except BlockingIOError:
            pass
        else:
            if not first:  # end of file: no writer ever opened it
                os.close(fd)
                raise KvplanError(f"trace {path}: nothing came through the pipe in {FIFO_WAIT_S:g} s (no writer "
                                  "opened it); start its writer first, or give a file", EXIT_USAGE)
    os.set_blocking(fd, True)
    raw = open(fd, "rb", buffering=0)
    return io.TextIOWrapper(io.BufferedReader(_Prefixed(first, raw) if first else raw), encoding="utf-8-sig",
                            newline=""), st.st_size


class _Prefixed(io.RawIOBase):
    """A pipe's stream with the bytes already read from it (`first`) put back in front."""

    def __init__(self, first: bytes, raw):
        self._first, self._raw = first, raw

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        if self._first:
            n = min(len(buf), len(self._first))
            buf[:n], self._first = self._first[:n], self._first[n:]
            return n
        return self._raw.readinto(buf)

    def close(self) -> None:
        self._raw.close()
        super().close()


def load_trace(path: str, fmt: str = "auto", max_requests: int = MAX_REQUESTS) -> tuple[list[SimRequest], dict]:
    """Requests from a trace file, sorted by arrival, and a summary (format, dropped rows)."""
    fmt = fmt.strip().lower()
    if fmt not in FORMATS:
        raise KvplanError(f"{arg('trace_format')} must be one of {', '.join(FORMATS)}, got {fmt!r}", EXIT_USAGE,
                          param="trace_format", value=fmt, allowed=tuple(FORMATS))
    try:
        stream, size = _open_text(path)
    except FileNotFoundError:
        raise KvplanError(f"trace {path} not found", EXIT_NOT_FOUND) from None
    except OSError as exc:
        raise KvplanError(f"cannot read trace {path}: {exc.strerror or exc}", EXIT_USAGE) from None
    if size > MAX_FILE_BYTES:
        stream.close()
        raise KvplanError(f"trace {path} is {size / 2**30:.1f} GiB; the limit is {MAX_FILE_BYTES / 2**30:.0f} GiB",
                          EXIT_USAGE)
    with stream, collector_paused():  # a row per request and a tuple per block, no cycles: nothing to collect
        try:
            rows, fmt = _parse(stream, path, fmt, max_requests)
        except UnicodeDecodeError:
            raise KvplanError(f"trace {path} is not UTF-8 text", EXIT_USAGE) from None
        except csv.Error as exc:
            raise KvplanError(f"trace {path}: malformed CSV: {exc}", EXIT_USAGE) from None
    dropped = sum(1 for r in rows if r[1] == 0 or r[2] == 0)
    rows = [r for r in rows if r[1] > 0 and r[2] > 0]
    if not rows:
        raise KvplanError(f"trace {path} holds no request with input and output tokens", EXIT_USAGE)
    rows.sort(key=lambda r: r[0])
    t0 = rows[0][0]
    reqs = [SimRequest(i, r[0] - t0, r[1], r[2], r[3]) for i, r in enumerate(rows)]
    return reqs, {"format": fmt, "requests": len(reqs), "dropped_zero_length": dropped}


def _lines(stream, path):
    read = 0  # a pipe has no size to check before reading: its characters are counted against the file cap
    for n, line in enumerate(iter(lambda: stream.readline(MAX_LINE + 1), ""), 1):
        if len(line) > MAX_LINE:
            raise _fail(path, n, f"longer than {MAX_LINE:,} characters")
        read += len(line)
        if read > MAX_FILE_BYTES:
            raise KvplanError(f"trace {path} runs past {MAX_FILE_BYTES / 2**30:.0f} GiB, the limit", EXIT_USAGE)
        yield n, line


def _first_char(stream) -> str:
    """The first character past leading blanks, the stream left where it was: read and rewound in a file; peeked in
    the read buffer of a pipe, which cannot rewind (a first 8 KiB of blanks reads as none)."""
    if not stream.seekable():
        return stream.buffer.peek(8192)[:8192].decode("utf-8", "replace").lstrip(" \t\r\n\ufeff")[:1]
    first = stream.read(1)
    while first and first in " \t\r\n":
        first = stream.read(1)
    stream.seek(0)
    return first


def _parse(stream, path, fmt, max_requests):
    first = _first_char(stream)
    rows, names = [], {}
    if first in ("{", "["):
        if first == "[":
            raise KvplanError(f"trace {path}: give JSON Lines (one object per line), not a JSON array", EXIT_USAGE)
        for n, line in _lines(stream, path):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):
                raise _fail(path, n, "not a JSON object") from None
            if not isinstance(rec, dict):
                raise _fail(path, n, "not a JSON object")
            if fmt == "auto":
                fmt = _detect_json(rec)
            rows.append(_record(fmt, rec, path, n, names))
            if len(rows) > max_requests:
                raise KvplanError(f"trace {path} has more than {max_requests:,} requests", EXIT_USAGE)
        return rows, fmt
    # The line-length cap applies before the csv module sees a line.
    fields, reader = _rows_csv((line for _, line in _lines(stream, path)), path)
    reader.fieldnames = fields
    if fmt == "auto":
        fmt = _detect_csv(fields)
    for n, rec in enumerate(reader, 2):
        rows.append(_record(fmt, rec, path, n, names))
        if len(rows) > max_requests:
            raise KvplanError(f"trace {path} has more than {max_requests:,} requests", EXIT_USAGE)
    return rows, fmt
