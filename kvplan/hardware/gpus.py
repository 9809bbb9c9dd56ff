"""The GPU catalog: load, validate and look up the hardware profiles kvplan plans against.

Profiles are YAML files, one per GPU (schema: kvplan/hardware/profiles/README.md). The bundled ones
ship inside the package (kvplan/hardware/profiles/, beside this module); users add or override profiles
with extra directories (`--hw-profiles DIR`). Every problem in a profile is a KvplanError with a
one-line message naming the file and the field.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping, NoReturn, Sequence

from kvplan.core.errors import EXIT_NOT_FOUND, EXIT_USAGE, KvplanError, arg
from kvplan.hardware.facts import FACT_FIELDS, parse_capability, read_facts, read_interconnect

CONFIDENCE_LEVELS = ("high", "medium", "low")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
USABLE_SOURCE_PREFIXES = ("measured:", "estimate:")
PROFILE_SUFFIXES = (".yaml", ".yml")
_REQUIRED = ("key", "name", "vendor", "memory_marketed", "memory_marketed_bytes", "memory_usable_bytes",
             "memory_usable_source", "bandwidth_bytes_per_s", "source", "confidence")
_OPTIONAL = ("aliases", "dense_flops", "interconnect", "tdp_w", "price_per_hour", "notes", "memory_usable_above_torch",
             "memory_unified",
             *FACT_FIELDS)
_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")
MAX_YAML_BYTES = 1 << 20  # a profile or prices file is a few kB; as for config.json (hub.MAX_CONFIG_BYTES)
MAX_YAML_NODES = 10_000  # values in one document, aliases expanded: real files have under a hundred


@dataclass(frozen=True)
class GPU:
    """One accelerator as kvplan sees it. Byte and FLOP figures are exact integers."""

    key: str
    name: str
    vendor: str
    aliases: tuple[str, ...]
    memory_marketed: str
    memory_marketed_bytes: int
    memory_usable_bytes: int  # what the allocator sees in total; plan with this one
    memory_usable_source: str  # "measured: ..." or "estimate: ..."
    bandwidth_bytes_per_s: int
    dense_flops: Mapping[str, int] = field(hash=False)  # read-only; precision -> FLOP/s (dense)
    interconnect_type: str | None
    interconnect_bytes_per_s: int | None  # per direction
    tdp_w: int | None
    price_per_hour: float | None
    source: str
    confidence: str
    notes: str
    path: str  # the file this profile came from
    # True when memory_usable_bytes is a tool's device total (nvidia-smi, NVML, OpenCL) where no torch total
    # was found: torch and vLLM see less (0.46-1.05 GiB on the GPUs where both were measured)
    memory_usable_above_torch: bool = False
    # True where the CPU, the OS and the GPU share one memory pool (GB10, MI300A): what the OS and other processes
    # hold at run time comes out of the same bytes (kvplan/hardware/profiles/README.md, Memory)
    memory_unified: bool = False
    # Hardware facts engines read (never the key or the name). None: the profile does not say (an old user
    # profile); an engine rule that needs a missing fact states what it assumed (a plan warning).
    architecture: str | None = None  # "ampere", "hopper", "blackwell", "cdna3", "gaudi2", ...
    compute_capability: str | None = None  # NVIDIA "9.0"; AMD the gfx target, "gfx942"
    memory_kind: str | None = None  # "HBM3", "GDDR6X", ... (one of facts.MEMORY_KINDS)
    fp8: bool | None = None  # FP8 tensor (matrix) math
    fp4: bool | None = None  # FP4 tensor math (NVFP4 / MXFP4)
    device_name: str | None = None  # as torch.cuda.get_device_name / nvidia-smi print it
    interconnect_kind: str | None = None  # one of facts.INTERCONNECT_KINDS
    interconnect_domain: int | None = None  # GPUs one GPU reaches over that fabric (8 HGX, 72 NVL72, 1 PCIe)
    pcie_gen: int | None = None  # the host link
    pcie_lanes: int | None = None

    @property
    def capability(self) -> tuple[int, int] | None:
        """(major, minor) as torch.cuda.get_device_capability reports it: "9.0" -> (9, 0); on ROCm the gfx
        target's major and minor, "gfx942" -> (9, 4), "gfx90a" -> (9, 0). None when the profile gives none."""
        return parse_capability(self.compute_capability)

    @property
    def usable_is_estimate(self) -> bool:
        return self.memory_usable_source.startswith("estimate:")

    @classmethod
    def of_memory(cls, key: str, name: str, usable_bytes: int, source: str) -> GPU:
        """A GPU known only by its memory (a log's total, an assumed size): no bandwidth, no price, no
        hardware facts (its callers state what the engine rules assume instead)."""
        return cls(key, name, "unknown", (), "", usable_bytes, usable_bytes, source, 1, MappingProxyType({}),
                   None, None, None, None, source, "low", "", "")


def _norm(name: str) -> str:
    """Lookup form of a name: lowercase, with '-', '_' and whitespace removed."""
    return re.sub(r"[\s_-]+", "", name.strip().lower())


def show(value: Any) -> str:
    """A value as a one-line error quotes it: its repr on one line, at most 60 characters."""
    text = repr(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."


class ProfileChecker:
    """Validates one parsed profile file (a GPU's here, a host's in kvplan.hardware.hosts); every failure is
    one line naming the file (`what` and its path) and the field."""

    what = "hw profile"

    def __init__(self, path: str, data: Any):
        self.path = path
        if not isinstance(data, dict):
            self.fail(f"must be a mapping of fields, got {type(data).__name__} {show(data)}")
        self.data = data

    def fail(self, message: str) -> NoReturn:
        raise KvplanError(f"{self.what} {self.path}: {message}", EXIT_USAGE)

    def bad(self, name: str, want: str, value: Any) -> NoReturn:
        self.fail(f"field '{name}' must be {want}, got {show(value)}")

    def text(self, name: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            self.bad(name, "a non-empty string", value)
        return value.strip()

    def known_fields(self, required: tuple[str, ...], optional: tuple[str, ...]) -> None:
        """Every field one the file kind knows, and every required one given."""
        for name in self.data:
            if name not in required and name not in optional:
                self.fail(f"unknown field {show(name)} (allowed: {', '.join(required + optional)})")
        for name in required:
            if name not in self.data:
                self.fail(f"missing required field '{name}'")


class _Checker(ProfileChecker):
    """A GPU profile's fields (kvplan/hardware/profiles/README.md)."""

    def flag(self, name: str, value: Any) -> bool:
        if not isinstance(value, bool):
            self.bad(name, "true or false", value)
        return value

    def pos_int(self, name: str, value: Any, nullable: bool = False) -> int | None:
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            self.bad(name, "a positive integer" + (" or null" if nullable else ""), value)
        return value

    def build(self) -> GPU:
        d = self.data
        self.known_fields(_REQUIRED, _OPTIONAL)
        key = self.text("key", d["key"])
        if not _KEY_RE.match(key):
            self.bad("key", "a lowercase id of letters, digits, '.', '+' or '-' (like 'h100-sxm')", key)
        aliases = d.get("aliases") or []
        if not isinstance(aliases, list):
            self.bad("aliases", "a list of strings", aliases)
        for alias in aliases:
            if not isinstance(alias, str) or not _norm(alias):
                self.bad("aliases", "a list of strings (quote numbers like \"4090\")", alias)
        marketed = self.pos_int("memory_marketed_bytes", d["memory_marketed_bytes"])
        usable = self.pos_int("memory_usable_bytes", d["memory_usable_bytes"])
        if usable > marketed:
            self.fail(f"field 'memory_usable_bytes' ({usable}) exceeds 'memory_marketed_bytes' ({marketed})")
        usable_source = self.text("memory_usable_source", d["memory_usable_source"])
        if not usable_source.startswith(USABLE_SOURCE_PREFIXES):
            self.bad("memory_usable_source", "a string starting with 'measured:' or 'estimate:'", usable_source)
        flops = d.get("dense_flops") or {}
        if not isinstance(flops, dict):
            self.bad("dense_flops", f"a mapping of precision ({', '.join(PRECISIONS)}) to FLOP/s", flops)
        for precision, value in flops.items():
            if precision not in PRECISIONS:
                self.fail(f"field 'dense_flops' has unknown precision {show(precision)} "
                          f"(allowed: {', '.join(PRECISIONS)})")
            self.pos_int(f"dense_flops.{precision}", value)
        fabric = read_interconnect(self, d.get("interconnect"), d.get("vendor"))
        facts = read_facts(self, d, flops)
        price = d.get("price_per_hour")
        if price is not None and (isinstance(price, bool) or not isinstance(price, (int, float))
                                  or not 0 < price < float("inf")):
            self.bad("price_per_hour", "a positive number or null", price)
        confidence = d["confidence"]
        if confidence not in CONFIDENCE_LEVELS:
            self.bad("confidence", "one of " + ", ".join(CONFIDENCE_LEVELS), confidence)
        notes = d.get("notes")
        return GPU(
            key=key, name=self.text("name", d["name"]), vendor=self.text("vendor", d["vendor"]),
            aliases=tuple(a.strip() for a in aliases),
            memory_marketed=self.text("memory_marketed", d["memory_marketed"]),
            memory_marketed_bytes=marketed, memory_usable_bytes=usable, memory_usable_source=usable_source,
            bandwidth_bytes_per_s=self.pos_int("bandwidth_bytes_per_s", d["bandwidth_bytes_per_s"]),
            dense_flops=MappingProxyType(dict(flops)),
            tdp_w=self.pos_int("tdp_w", d.get("tdp_w"), nullable=True),
            price_per_hour=None if price is None else float(price),
            source=self.text("source", d["source"]), confidence=confidence,
            notes="" if notes is None else self.text("notes", notes), path=self.path,
            memory_usable_above_torch=self.flag("memory_usable_above_torch", d.get("memory_usable_above_torch", False)),
            memory_unified=self.flag("memory_unified", d.get("memory_unified", False)),
            **fabric, **facts,
        )


class _DuplicateKey(Exception):
    """A mapping in a YAML file names one key twice."""


@lru_cache(maxsize=1)
def _strict_loader():
    """A safe YAML loader that refuses a mapping naming one key twice (PyYAML keeps the last one)."""
    import yaml  # deferred: keeps `import kvplan.hardware.gpus` cheap

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class StrictLoader(base):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen: dict = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue  # `<<: *base` may override; only keys written out count
                    key = self.construct_object(key_node, deep=True)
                    try:
                        first = seen.setdefault(key, key_node)
                    except TypeError:  # an unhashable key: the base class reports it
                        continue
                    if first is not key_node:
                        raise _DuplicateKey(f"key {show(key)} is given twice (lines {first.start_mark.line + 1} "
                                            f"and {key_node.start_mark.line + 1})")
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def _count_nodes(root, where: str) -> None:
    """Refuse a document of more than MAX_YAML_NODES nodes, aliases counted as what they expand to.

    Anchors and aliases let a few hundred bytes stand for billions of values (a "billion laughs"
    document), and an alias inside its own anchor makes a cycle; the walk stops at the limit.
    """
    seen, stack = 0, [root]
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_YAML_NODES:
            raise KvplanError(f"{where}: more than {MAX_YAML_NODES:,} values (counting what aliases repeat); "
                              "not a kvplan file", EXIT_USAGE)
        value = node.value
        if isinstance(value, list):
            for item in value:
                stack.extend(item if isinstance(item, tuple) else (item,))


def load_yaml_strict(text: str, where: str) -> Any:
    """Parse YAML safely; a syntax error or a key given twice in one mapping is a one-line KvplanError.

    `where` starts the message ("prices file p.yaml", "hw profile x.yaml"); the line and column
    of the problem follow. Shared by the GPU profiles and the prices file. Hostile documents fail
    fast: more than MAX_YAML_BYTES of text, or more than MAX_YAML_NODES values once aliases are expanded.
    """
    import yaml

    if len(text) > MAX_YAML_BYTES:
        raise KvplanError(f"{where}: larger than {MAX_YAML_BYTES // 2**20} MiB; not a kvplan file", EXIT_USAGE)
    loader = _strict_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _count_nodes(node, where)
        return loader.construct_document(node)
    except _DuplicateKey as exc:
        raise KvplanError(f"{where}: {exc}", EXIT_USAGE) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise KvplanError(f"{where}: invalid YAML{at}: {problem}", EXIT_USAGE) from None
    except RecursionError:  # nesting deeper than the parser's stack: no real profile or prices file
        raise KvplanError(f"{where}: nested too deeply; not a kvplan file", EXIT_USAGE) from None
    finally:
        loader.dispose()


def _parse(text: str, path: str) -> GPU:
    return _Checker(path, load_yaml_strict(text, f"hw profile {path}")).build()


def _profile_files(files: Iterable[Any]) -> list[Any]:
    """The profile files among `files` (Paths or importlib Traversables), sorted by name."""
    return sorted((f for f in files if f.name.endswith(PROFILE_SUFFIXES) and f.is_file()), key=lambda f: f.name)


def _read_profile(f: Any) -> str:
    path = str(f)
    try:
        if isinstance(f, Path) and f.stat().st_size > MAX_YAML_BYTES:
            raise KvplanError(f"hw profile {path}: larger than {MAX_YAML_BYTES // 2**20} MiB; not a GPU profile",
                              EXIT_USAGE)
        return f.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KvplanError(f"hw profile {path}: cannot read: {exc}", EXIT_USAGE) from None


def _load_files(files: Iterable[Any], parse_file=None) -> list[GPU]:
    """Parse the profile files of one directory, sorted by name (`parse_file(f)`: a cached parse)."""
    gpus: dict[str, GPU] = {}
    for f in _profile_files(files):
        gpu = parse_file(f) if parse_file else _parse(_read_profile(f), str(f))
        if gpu.key in gpus:
            raise KvplanError(f"hw profile {f}: field 'key' {gpu.key!r} is already defined by "
                              f"{gpus[gpu.key].path}", EXIT_USAGE)
        gpus[gpu.key] = gpu
    return list(gpus.values())


# The package's own directory, not importlib.resources: that import (tempfile, zipfile, ...) costs
# every `fit` a few ms, and kvplan is never run from a zip.
_BUNDLED_DIR = Path(__file__).parent / "profiles"


@lru_cache(maxsize=None)
def _bundled_profile(f: Path) -> GPU:
    return _parse(_read_profile(f), str(f))


@lru_cache(maxsize=1)
def _bundled() -> tuple[GPU, ...]:
    return tuple(_load_files(_BUNDLED_DIR.iterdir(), _bundled_profile))


def _names_written(text: str) -> Iterable[str]:
    """The names on a profile's `key:` line and one-line `aliases: [...]`, read as text (a hint, not YAML)."""
    for line in text.splitlines():
        if line.startswith("key:"):
            yield line[4:].split("#")[0].strip().strip("'\"")
        elif line.startswith("aliases:"):
            flow = line[8:].split("#")[0].strip()
            if flow.startswith("[") and flow.endswith("]"):
                yield from (a.strip().strip("'\"") for a in flow[1:-1].split(","))


@lru_cache(maxsize=1)
def _bundled_hints() -> dict[str, Path]:
    """Lookup name -> the bundled file whose text names it: where find_gpu looks first, so that a
    lookup parses one profile instead of all of them (parsing is most of `find_gpu`'s time)."""
    hints: dict[str, Path] = {}
    for f in _profile_files(_BUNDLED_DIR.iterdir()):
        for name in _names_written(_read_profile(f)):
            hints.setdefault(_norm(name), f)
    return hints


def _bundled_lookup(query: str) -> GPU | None:
    """The bundled GPU named `query` (normalised), from the one file a hint points at once that file
    is parsed in full (the same strict loader) and its key or aliases confirm the name; else None,
    and the whole catalog decides. That is the catalog's own answer: bundled names never clash
    (tests/test_hardware.py loads them all)."""
    f = _bundled_hints().get(query)
    if f is None:
        return None
    gpu = _bundled_profile(f)
    return gpu if query in {_norm(n) for n in (gpu.key, *gpu.aliases)} else None


def _user_dir(directory: str | Path) -> list[GPU]:
    d = Path(directory).expanduser()
    if not d.is_dir():
        what = "is not a directory" if d.exists() else "does not exist"
        raise KvplanError(f"hw profiles directory '{directory}' {what}", EXIT_NOT_FOUND)
    return _load_files(d.iterdir())


def _catalog(extra_dirs: Sequence[str | Path]) -> tuple[dict[str, GPU], dict[str, tuple[str, GPU]]]:
    """All profiles in load order (a later source replaces an earlier key) and the lookup index."""
    if isinstance(extra_dirs, (str, Path)):
        extra_dirs = [extra_dirs]
    gpus: dict[str, GPU] = {}
    for group in [list(_bundled())] + [_user_dir(d) for d in extra_dirs]:
        for gpu in group:
            gpus.pop(gpu.key, None)  # re-insert so the dict order is the load order
            gpus[gpu.key] = gpu
    index: dict[str, tuple[str, GPU]] = {}  # norm(name) -> (name as written, GPU)
    for gpu in gpus.values():
        for fieldname, name in [("key", gpu.key)] + [("aliases", a) for a in gpu.aliases]:
            first = index.setdefault(_norm(name), (name, gpu))[1]
            if first.key != gpu.key:  # blame the profile loaded later: a user file over a bundled one
                raise KvplanError(f"hw profile {gpu.path}: field '{fieldname}' name {name!r} clashes with "
                                  f"GPU '{first.key}' ({first.path})", EXIT_USAGE)
    return gpus, index


def load_gpus(extra_dirs: Sequence[str | Path] = ()) -> dict[str, GPU]:
    """Every known GPU by key: the bundled catalog plus profiles in extra_dirs (which may override keys)."""
    return dict(_catalog(extra_dirs)[0])


def gpu_by_device_name(name: str | None, extra_dirs: Sequence[str | Path] = ()) -> GPU | None:
    """The profile whose `device_name` is exactly `name` as torch or nvidia-smi prints it (case aside), or None:
    never a guess from a similar name."""
    name = (name or "").lower()
    return next((g for g in load_gpus(extra_dirs).values() if name and g.device_name and g.device_name.lower() == name),
                None)


def find_gpu(name: str, extra_dirs: Sequence[str | Path] = ()) -> GPU:
    """The GPU whose key or alias matches name (case-insensitive; '-', '_' and spaces are ignored)."""
    if isinstance(extra_dirs, (list, tuple)) and not extra_dirs:  # bundled only: parse the one file
        hit = _bundled_lookup(_norm(name))
        if hit is not None:
            return hit
    gpus, index = _catalog(extra_dirs)
    hit = index.get(_norm(name))
    if hit is not None:
        return hit[1]

    query = _norm(name)
    best: dict[str, tuple[float, str]] = {}  # GPU key -> (best score, shortest matching name)
    for norm, (shown, gpu) in index.items():
        # Similarity, nudged towards names with the same first letter ('h1000' -> h100, h200).
        score = difflib.SequenceMatcher(None, query, norm).ratio() + (0.1 if norm[:1] == query[:1] else 0.0)
        if score >= 0.6:
            old_score, old_shown = best.get(gpu.key, (0.0, shown))
            best[gpu.key] = (max(score, old_score), min(shown, old_shown, key=len))
    ranked = sorted(best.values(), key=lambda item: -item[0])
    suggestions = [shown for _, shown in ranked[:3]]
    if suggestions:
        hint = "did you mean: " + ", ".join(suggestions) + "?"
    else:
        hint = f"no close match among {len(gpus)} known GPUs (add your own with {arg('hw_profiles')} DIR)"
    raise KvplanError(f"unknown GPU {name!r}; {hint}", EXIT_NOT_FOUND, param="gpu", value=name)
