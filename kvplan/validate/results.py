"""Validation records on disk: one JSON or CSV file that gathers runs from several machines.

A results file is a list of run records (JSON: an array; CSV: one row per run, lists and the
per-check table JSON-encoded in their cells). Writing appends to the file when it exists, so a
script on a target GPU, or several machines' files concatenated, build one report. Files are
replaced atomically (temp file + os.replace): an interrupted write leaves the old file whole.
No torch here.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path

from kvplan.errors import EXIT_USAGE, KvplanError

FORMATS = (".json", ".csv")


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise KvplanError(f"--output {path}: use a .json or .csv file name", EXIT_USAGE)
    return suffix


def read_results(path: Path) -> list[dict]:
    """The records in an existing results file ([] when it does not exist)."""
    fmt = _format(path)
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KvplanError(f"--output {path}: cannot read the existing file ({exc})", EXIT_USAGE) from None
    if not text.strip():
        return []
    if fmt == ".json":
        try:
            data = json.loads(text)
        except ValueError:
            raise KvplanError(f"--output {path}: exists and is not a results file (invalid JSON)", EXIT_USAGE) from None
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise KvplanError(f"--output {path}: exists and is not a results file (expected a JSON array of runs)", EXIT_USAGE)
        return data
    rows = list(csv.DictReader(io.StringIO(text)))
    return [{k: _from_cell(v) for k, v in row.items()} for row in rows]


def _cell(value):
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return "" if value is None else value


def _from_cell(text: str):
    if text == "":
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
    fmt = _format(path)
    records = [*read_results(path), record]
    if fmt == ".json":
        text = json.dumps(records, indent=1) + "\n"
    else:
        columns = list(dict.fromkeys(k for r in records for k in r))
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for r in records:
            writer.writerow({k: _cell(r.get(k)) for k in columns})
        text = buf.getvalue()
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise KvplanError(f"--output {path}: no such directory {directory}", EXIT_USAGE)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(records)
