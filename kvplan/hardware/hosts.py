"""Host profiles: the server around the GPUs, as the offload tiers see it (DRAM, links, NVMe, NIC).

One YAML file per server in kvplan/hardware/hosts/ (schema: hosts/README.md), or a file the user
names with `--host FILE`. Every figure is an integer (bytes, bytes/s, one direction); every
problem is a one-line KvplanError naming the file and the field. Code reads fields, never a
server's name: the CPU tier's link is `host_link.per_gpu_bytes_per_s`, whatever the link is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvplan.core.capped import read_capped
from kvplan.core.errors import EXIT_NOT_FOUND, EXIT_USAGE, KvplanError
from kvplan.hardware.profile_check import CONFIDENCE_LEVELS, ProfileChecker
from kvplan.hardware.yaml_strict import MAX_YAML_BYTES, load_yaml_strict, show

_REQUIRED = ("key", "name", "dram_bytes", "gpus", "host_link", "source", "confidence")
_OPTIONAL = ("aliases", "ram_reserve_bytes", "dev_shm_bytes", "nvme", "nic", "notes", "estimates")
_FIGURES = ("dram_bytes", "ram_reserve_bytes", "dev_shm_bytes", "host_link.per_gpu_bytes_per_s", "nvme.capacity_bytes",
            "nvme.read_bytes_per_s", "nvme.write_bytes_per_s", "nic.bytes_per_s")
_LINK = ("type", "per_gpu_bytes_per_s")
_NVME = ("capacity_bytes", "read_bytes_per_s", "write_bytes_per_s")
_NIC = ("type", "bytes_per_s")
_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")
DEFAULT_RAM_RESERVE = 10 * 2**30  # SGLang's HICACHE_HOST_MEMORY_RESERVE_BYTES, the one engine that states one
_BUNDLED_DIR = Path(__file__).parent / "hosts"


@dataclass(frozen=True)
class Host:
    """One server: its DRAM, what one GPU's link to it carries, and its NVMe and NIC (None: absent)."""

    key: str
    name: str
    aliases: tuple[str, ...]
    dram_bytes: int
    gpus: int  # GPUs in the server (the link figure is per GPU)
    link_type: str
    link_bytes_per_s: int  # host -> one GPU, one direction
    ram_reserve_bytes: int  # DRAM kept for the OS and the engine's own processes
    dev_shm_bytes: int  # /dev/shm (vLLM's CPU tier is a shared mapping there)
    nvme_capacity_bytes: int | None
    nvme_read_bytes_per_s: int | None
    nvme_write_bytes_per_s: int | None
    nic_type: str | None
    nic_bytes_per_s: int | None  # the server's network, all ports, one direction
    source: str
    confidence: str
    notes: str
    path: str
    estimates: tuple[tuple[str, str], ...] = ()  # (field, the rule it was estimated by): figures no cited page gives

    @property
    def ram_for_kv_bytes(self) -> int:
        """DRAM the host tiers may take: all of it less the reserve."""
        return max(0, self.dram_bytes - self.ram_reserve_bytes)

    def reload_bytes_per_s(self, tier: str, gpus: int) -> float | None:
        """One GPU's share of the path a tier reloads through (one direction): the host link for cpu; the
        NVMe read rate (disk) or the NIC (remote) shared by the replica's `gpus`, capped by the host
        link. None where the profile lists no such device."""
        if tier == "cpu":
            return float(self.link_bytes_per_s)
        shared = self.nvme_read_bytes_per_s if tier == "disk" else self.nic_bytes_per_s
        if shared is None:
            return None
        return float(min(self.link_bytes_per_s, shared / max(1, gpus)))


class _Checker(ProfileChecker):
    """A host profile's fields (kvplan/hardware/hosts/README.md)."""

    what = "host profile"

    def pos_int(self, name: str, value: Any, limit: int = 2**60) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= limit:
            self.fail(f"field '{name}' must be a positive integer (at most {limit:.0e}), got {show(value)}")
        return value

    def section(self, name: str, fields: tuple[str, ...]) -> dict | None:
        value = self.data.get(name)
        if value is None:
            return None
        if not isinstance(value, dict) or set(value) - set(fields) or set(fields) - set(value):
            self.fail(f"field '{name}' must be null or a mapping with exactly {', '.join(fields)}")
        return value

    def build(self) -> Host:
        d = self.data
        self.known_fields(_REQUIRED, _OPTIONAL)
        key = self.text("key", d["key"])
        if not _KEY_RE.match(key):
            self.fail(f"field 'key' must be a lowercase id (letters, digits, '.', '+', '-'), got {show(key)}")
        aliases = d.get("aliases") or []
        if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
            self.fail("field 'aliases' must be a list of strings")
        dram = self.pos_int("dram_bytes", d["dram_bytes"])
        link = self.section("host_link", _LINK)
        if link is None:
            self.fail("field 'host_link' must be a mapping with type and per_gpu_bytes_per_s")
        nvme, nic = self.section("nvme", _NVME), self.section("nic", _NIC)
        reserve = d.get("ram_reserve_bytes", DEFAULT_RAM_RESERVE)
        if not (isinstance(reserve, int) and not isinstance(reserve, bool) and 0 <= reserve < dram):
            self.fail(f"field 'ram_reserve_bytes' must be an integer in [0, dram_bytes), got {show(reserve)}")
        shm = self.pos_int("dev_shm_bytes", d["dev_shm_bytes"]) if "dev_shm_bytes" in d else dram // 2
        if shm > dram:
            self.fail(f"field 'dev_shm_bytes' ({shm}) exceeds 'dram_bytes' ({dram})")
        if d["confidence"] not in CONFIDENCE_LEVELS:
            self.fail(f"field 'confidence' must be one of {', '.join(CONFIDENCE_LEVELS)}, got {show(d['confidence'])}")
        notes = d.get("notes")
        estimates = d.get("estimates") or {}
        if not isinstance(estimates, dict) or not all(k in _FIGURES and isinstance(v, str) and v.strip()
                                                      for k, v in estimates.items()):
            self.fail(f"field 'estimates' must map figures ({', '.join(_FIGURES)}) to the rule each was estimated by")
        return Host(
            key=key, name=self.text("name", d["name"]), aliases=tuple(a.strip() for a in aliases), dram_bytes=dram,
            gpus=self.pos_int("gpus", d["gpus"], 1024), link_type=self.text("host_link.type", link["type"]),
            link_bytes_per_s=self.pos_int("host_link.per_gpu_bytes_per_s", link["per_gpu_bytes_per_s"]),
            ram_reserve_bytes=reserve, dev_shm_bytes=shm,
            nvme_capacity_bytes=self.pos_int("nvme.capacity_bytes", nvme["capacity_bytes"]) if nvme else None,
            nvme_read_bytes_per_s=self.pos_int("nvme.read_bytes_per_s", nvme["read_bytes_per_s"]) if nvme else None,
            nvme_write_bytes_per_s=self.pos_int("nvme.write_bytes_per_s", nvme["write_bytes_per_s"]) if nvme else None,
            nic_type=self.text("nic.type", nic["type"]) if nic else None,
            nic_bytes_per_s=self.pos_int("nic.bytes_per_s", nic["bytes_per_s"]) if nic else None,
            source=self.text("source", d["source"]), confidence=d["confidence"],
            notes="" if notes is None else self.text("notes", notes), path=self.path,
            estimates=tuple((k, v.strip()) for k, v in estimates.items()))


def _norm(name: str) -> str:
    return re.sub(r"[\s_-]+", "", name.strip().lower())


def load_host_file(path: str | Path) -> Host:
    """A host profile from a file, checked; a one-line error for a missing, huge or malformed file."""
    p = Path(path).expanduser()
    try:
        text = read_capped(p, MAX_YAML_BYTES, f"host profile {p}", "a host profile").decode("utf-8")
    except FileNotFoundError:
        raise KvplanError(f"host profile {path} not found", EXIT_NOT_FOUND) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KvplanError(f"host profile {path}: cannot read: {exc}", EXIT_USAGE) from None
    return _Checker(str(p), load_yaml_strict(text, f"host profile {p}")).build()


@lru_cache(maxsize=1)
def bundled_hosts() -> dict[str, Host]:
    """The bundled host profiles by key (names unique under the lookup's comparison; tested)."""
    hosts: dict[str, Host] = {}
    for f in sorted(_BUNDLED_DIR.glob("*.yaml")):
        host = load_host_file(f)
        if host.key in hosts:
            raise KvplanError(f"host profile {f}: key {host.key!r} is already defined", EXIT_USAGE)
        hosts[host.key] = host
    return hosts


def find_host(name: str) -> Host:
    """`--host NAME|FILE`: a bundled host by key or alias, else a YAML file at that path."""
    query = _norm(name)
    for host in bundled_hosts().values():
        if query in {_norm(n) for n in (host.key, *host.aliases)}:
            return host
    if Path(name).expanduser().is_file() or name.endswith((".yaml", ".yml")) or "/" in name:
        return load_host_file(name)
    raise KvplanError(f"unknown host {name!r}; bundled: {', '.join(bundled_hosts())} (or give a YAML file)",
                      EXIT_NOT_FOUND)
