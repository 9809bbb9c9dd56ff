"""Link profiles: the fabric that moves a request's KV from a prefill GPU to a decode GPU (`--link`).

One YAML file per link in `links/` (NVLink, InfiniBand, RoCE, PCIe): the bytes per second one GPU
sends or receives in one direction, and the fixed latency of one transfer, each with its source.
A user's own link is a YAML file with the same fields, given by path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvplan.core.capped import read_capped
from kvplan.core.errors import EXIT_NOT_FOUND, EXIT_USAGE, KvplanError
from kvplan.hardware.profile_check import CONFIDENCE_LEVELS, norm_name as _norm
from kvplan.hardware.yaml_strict import MAX_YAML_BYTES, load_yaml_strict

_BUNDLED_DIR = Path(__file__).parent / "links"
_REQUIRED = ("key", "name", "per_gpu_bytes_per_s", "latency_s", "source", "confidence")
_OPTIONAL = ("aliases", "estimates", "notes")
_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")
DEFAULT_LINK = "ib-400g"


@dataclass(frozen=True)
class Link:
    key: str
    name: str
    per_gpu_bytes_per_s: int  # one direction, one GPU
    latency_s: float  # fixed cost of one transfer
    source: str
    confidence: str
    aliases: tuple = ()
    estimates: tuple = ()  # ((field, the rule it was estimated by), ...)

    def seconds(self, nbytes: int) -> float:
        """Seconds to move `nbytes` through one GPU's share of the link: latency + bytes / bandwidth."""
        return self.latency_s + nbytes / self.per_gpu_bytes_per_s


def _fail(where: str, message: str):
    raise KvplanError(f"link profile {where}: {message}", EXIT_USAGE)


def _build(where: str, d: Any) -> Link:
    if not isinstance(d, dict):
        _fail(where, "must be a mapping of fields")
    for name in d:
        if name not in _REQUIRED + _OPTIONAL:
            _fail(where, f"unknown field {str(name)[:40]!r} (allowed: {', '.join(_REQUIRED + _OPTIONAL)})")
    for name in _REQUIRED:
        if name not in d:
            _fail(where, f"missing required field '{name}'")
    texts = {n: d[n] for n in ("key", "name", "source")}
    for n, v in texts.items():
        if not isinstance(v, str) or not v.strip():
            _fail(where, f"field '{n}' must be a non-empty string")
    if not _KEY_RE.match(d["key"]):
        _fail(where, "field 'key' must be a lowercase id (letters, digits, '.', '+', '-')")
    bw, lat = d["per_gpu_bytes_per_s"], d["latency_s"]
    if not (isinstance(bw, int) and not isinstance(bw, bool) and 0 < bw <= 10**15):
        _fail(where, "field 'per_gpu_bytes_per_s' must be a positive integer (bytes per second, at most 1e15)")
    if isinstance(lat, bool) or not isinstance(lat, (int, float)) or not 0 <= lat <= 1:
        _fail(where, "field 'latency_s' must be a number of seconds in [0, 1]")
    if d["confidence"] not in CONFIDENCE_LEVELS:
        _fail(where, f"field 'confidence' must be one of {', '.join(CONFIDENCE_LEVELS)}")
    aliases = d.get("aliases") or []
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        _fail(where, "field 'aliases' must be a list of strings")
    est = d.get("estimates") or {}
    if not isinstance(est, dict) or not all(k in ("per_gpu_bytes_per_s", "latency_s") and isinstance(v, str)
                                            for k, v in est.items()):
        _fail(where, "field 'estimates' must map per_gpu_bytes_per_s or latency_s to the rule each was estimated by")
    return Link(d["key"], d["name"].strip(), bw, float(lat), d["source"].strip(), d["confidence"],
                tuple(a.strip() for a in aliases), tuple(est.items()))


def load_link_file(path: str | Path) -> Link:
    """A link profile from a file, checked; a one-line error for a missing, huge or malformed one."""
    p = Path(path).expanduser()
    try:
        text = read_capped(p, MAX_YAML_BYTES, f"link profile {p}").decode("utf-8")
    except FileNotFoundError:
        raise KvplanError(f"link profile {path} not found", EXIT_NOT_FOUND) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KvplanError(f"link profile {path}: cannot read: {exc}", EXIT_USAGE) from None
    return _build(str(p), load_yaml_strict(text, f"link profile {p}"))


@lru_cache(maxsize=1)
def bundled_links() -> dict[str, Link]:
    """The bundled link profiles by key."""
    return {link.key: link for link in map(load_link_file, sorted(_BUNDLED_DIR.glob("*.yaml")))}


def find_link(name: str) -> Link:
    """`--link NAME|FILE`: a bundled link by key or alias, else a YAML file at that path."""
    query = _norm(name)
    for link in bundled_links().values():
        if query in {_norm(n) for n in (link.key, *link.aliases)}:
            return link
    if name.endswith((".yaml", ".yml")) or "/" in name:
        return load_link_file(name)
    raise KvplanError(f"unknown link {name[:80]!r}; bundled: {', '.join(bundled_links())} (or give a YAML file)",
                      EXIT_NOT_FOUND)
