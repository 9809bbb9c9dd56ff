"""Validation records on disk: one JSON or CSV file that gathers runs from several machines.

A results file is a list of run records (JSON: an array; CSV: one row per run, lists and the
per-check table JSON-encoded in their cells). Writing appends to the file when it exists, so a
script on a target GPU, or several machines' files concatenated, build one report. An existing
file is only ever appended to when it already is a results file (its runs, or its CSV header,
carry RESULT_KEYS): a foreign file is refused, never merged into. `check_output` says all that
before a run starts, so a decode is never thrown away for a bad --output. Writes go through
kvplan.core.files.atomic_write, kvplan's one writer, to the symlink's target when --output is a link
(the link stays); a pipe or device is refused. An interrupted write leaves the old file whole.
No torch here.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from kvplan.core import files

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg

FORMATS = (".json", ".csv")

# Keys every run record has (both backends); a results file's runs / CSV header carry them all.
RESULT_KEYS = ("model", "layers", "batch", "ctx", "kv_dtype", "predicted_kv_bytes", "measured_kv_bytes", "checks", "ok")


def _bad_output(path: Path, problem: str) -> KvplanError:
    """'--output PATH: <problem>': the results file asked for, refused before the run."""
    return KvplanError(f"{arg('output')} {path}: {problem}", EXIT_USAGE, param="output", value=str(path))


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise _bad_output(path, "use a .json or .csv file name")
    return suffix


def check_output(path: Path) -> None:
    """Refuse an --output the run could not be appended to, before the run: wrong suffix, missing
    or read-only folder, a folder, pipe or device in its place, a read-only file, or an existing
    file that is not a results file."""
    path = Path(path)
    _format(path)
    real = Path(os.path.realpath(path))  # a symlink is written through, so its target's folder counts
    folder = real.parent
    if not folder.is_dir():
        raise _bad_output(path, f"no such directory {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise _bad_output(path, f"directory {folder} is not writable")
    read_results(path)  # refuses a directory, a pipe or device, and a file that holds no runs
    if real.exists() and not os.access(real, os.W_OK):
        raise _bad_output(path, "the existing file is not writable")


def read_results(path: Path) -> list[dict]:
    """The records in an existing results file ([] when it does not exist).

    A symlink is followed. A pipe or device is refused, not read (reading a pipe would wait for
    a writer) and never replaced: a results file is read back and appended to, so it must be a file.
    """
    path = Path(path)
    fmt = _format(path)
    if not path.exists():
        return []
    if path.is_dir():
        raise _bad_output(path, "is a directory")
    if not path.is_file():
        raise _bad_output(path, "is not a regular file (a results file is read back and appended to)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _bad_output(path, f"cannot read the existing file ({exc})") from None
    if not text.strip():
        return []
    if fmt == ".json":
        try:
            data = json.loads(text)
        except ValueError:
            raise _bad_output(path, "exists and is not a results file (invalid JSON)") from None
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise _bad_output(path, "exists and is not a results file (expected a JSON array of runs)")
        for i, record in enumerate(data):
            _require_keys(path, record.keys(), f"run {i + 1} lacks")
        return data
    try:
        reader = csv.DictReader(io.StringIO(text))
        _require_keys(path, reader.fieldnames or (), "its CSV header lacks")
        rows = list(reader)
    except csv.Error as exc:
        raise _bad_output(path, f"exists and is not a results file (bad CSV: {exc})") from None
    if any(None in row for row in rows):
        raise _bad_output(path, "exists and is not a results file (a row has more cells than the header)")
    return [{k: _from_cell(v) for k, v in row.items()} for row in rows]


def _require_keys(path: Path, keys, what: str) -> None:
    missing = [k for k in RESULT_KEYS if k not in keys]
    if missing:
        raise _bad_output(path, f"exists and is not a results file ({what} {', '.join(missing)})")


def _cell(value):
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return "" if value is None else value


def _from_cell(text: str | None):
    if text is None or text == "":
        return None
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            return text
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


def write_results(path: Path, record: dict) -> int:
    """Append `record` to the results file at `path`; returns how many runs the file now holds."""
    path = Path(path)
    check_output(path)  # again: the file may have changed during the run
    fmt = _format(path)
    records = [*read_results(path), record]
    path = Path(os.path.realpath(path))  # a symlink stays a link: its target file is what is replaced
    if fmt == ".json":
        files.atomic_write(path, json.dumps(records, indent=1) + "\n")
        return len(records)
    columns = list(dict.fromkeys(k for r in records for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in records:
        writer.writerow({k: _cell(r.get(k)) for k in columns})
    files.atomic_write(path, buf.getvalue(), newline="")
    return len(records)
