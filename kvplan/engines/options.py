"""An engine's settings given as `--engine-opt KEY=VALUE` (the API's `engine_opts`): parsed, each name checked
against the engine's `option_names`, and each value read as an integer, a fraction or a flag, with one-line errors.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.flags import bad_opt, opt_bool  # noqa: F401  (opt_bool: the engines read it from here)
from kvplan.core.units import gib, parse_bytes
from kvplan.hardware.facts import unified
from kvplan.planning.plan import PlanWarning


def parse_engine_opts(items, *, once: bool = False) -> dict[str, str]:
    """['max_num_batched_tokens=4096', 'kv_unified=true'] -> dict; a one-line error on a malformed item. A key given
    twice keeps the last; with `once` (a person's items: check_repeats) one given twice with two values is refused."""
    out: dict[str, str] = {}
    for item in items or ():
        if "=" not in item:
            raise KvplanError(f"{arg('engine_opts')} expects KEY=VALUE, got {item!r}", EXIT_USAGE,
                              param="engine_opts", value=item)
        k, v = item.split("=", 1)
        k, v = k.strip().replace("-", "_"), v.strip()
        if once and out.setdefault(k, v) != v:
            raise _bad_opt(k, v, f"is given twice, {out[k]!r} and {v!r}: give one")
        out[k] = v
    return out


def check_repeats(items) -> None:
    """A person's --engine-opt items: a KEY given twice with two values is refused in one line (else the last is
    kept, so `os_memory=10GiB os_memory=20GiB` planned 20 GiB unsaid); the same value twice is one. A malformed item
    is left to the parse proper (resolve_engine), after configure's other checks."""
    parse_engine_opts([item for item in items if "=" in item], once=True)


_bad_opt = bad_opt  # kvplan.core.flags, shared with the speed layer


def opt_int(opts: dict, key: str, default: int) -> int:
    if key not in opts:
        return default
    try:
        value = int(str(opts[key]).replace("_", ""))
    except ValueError:
        raise _bad_opt(key, opts[key], f"must be an integer, got {opts[key]!r}") from None
    if value < 0:
        raise _bad_opt(key, value, f"must not be negative, got {value}")
    return value


def opt_float(opts: dict, key: str, default: float) -> float:
    if key not in opts:
        return default
    try:
        value = float(opts[key])
    except ValueError:
        raise _bad_opt(key, opts[key], f"must be a number, got {opts[key]!r}") from None
    if not 0 < value <= 1:
        raise _bad_opt(key, value, f"must be in (0, 1], got {value}")
    return value


def opt_positive(opts: dict, key: str, default: float) -> float:
    """A positive finite number (a ratio above 1 is legal), unlike opt_float's fraction."""
    if key not in opts:
        return default
    try:
        value = float(opts[key])
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise _bad_opt(key, opts[key], f"must be a positive number, got {opts[key]!r}")
    return value


def opt_bytes(opts: dict, key: str, default: int | None) -> int | None:
    """A size: `20GiB` (binary), `20GB` (decimal) or a whole number of bytes; zero allowed."""
    if key not in opts:
        return default
    try:
        return parse_bytes(str(opts[key]).strip(), allow_zero=True)
    except KvplanError:
        raise _bad_opt(key, opts[key], f"must be a size such as 20GiB, 20GB or a number of bytes, got {opts[key]!r}"
                       ) from None


def opt_shared_bytes(opts: dict, key: str, default: int | None, gpu) -> int | None:
    """What the OS and the host take of a unified-memory GPU's pool, as a size (os_memory, page_cache, host_growth):
    opt_bytes', refused past the profile's whole memory, which the OS, its page cache and the GPU share, so no share
    of it can be larger (a mistyped 500GiB for a 121.69 GiB GB10 was planned as a start-up refusal with a negative
    MemAvailable). On a discrete GPU the options are ignored (ignored_on) and not bounded."""
    value = opt_bytes(opts, key, default)
    if value is not None and gpu is not None and unified(gpu) and value > gpu.memory_usable_bytes:
        raise _bad_opt(key, opts[key], f"{opts[key]} is more than the whole memory of GPU profile '{gpu.key}' "
                       f"({gib(gpu.memory_usable_bytes)}, shared by the OS and the GPU)")
    return value


def os_share(gpu, stated: int | None) -> int:
    """The OS's stated share (os_memory) an engine keeps out of a unified-memory GPU's memory: the stated bytes (none
    assumed where unstated) on a unified GPU, 0 on a discrete one, whose device count the OS's memory is not in (the
    option ignored there: ignored_on). llama.cpp subtracts it from what the plan may take; SGLang's B, the free memory
    measured before the weights, lacks it (kvplan.engines.sglang.uma, kvplan.engines.sglang.boot._slope)."""
    return (stated or 0) if unified(gpu) else 0


def opt_choice(opts: dict, key: str, default: str, choices: tuple[str, ...]) -> str:
    """One of `choices` (case and spaces ignored), or `default` where the option is not given."""
    if key not in opts:
        return default
    value = str(opts[key]).strip().lower()
    if value not in choices:
        raise _bad_opt(key, opts[key], f"must be one of {', '.join(choices)}, got {opts[key]!r}", choices)
    return value


def check_opts(engine: str, opts: dict, allowed: tuple[str, ...]) -> None:
    for k in opts:
        if k not in allowed:
            raise KvplanError(f"unknown {arg('engine_opts')} {k!r} for {engine}; allowed: {', '.join(allowed)}",
                              EXIT_USAGE, param="engine_opts", value=k, allowed=allowed)


def ignored_on(gpu, given: dict, why: str = "is not unified memory") -> tuple:
    """The warning that engine options a GPU gives no meaning to were ignored, naming those given (a value other than
    None or False); () where none was. The unified-memory options of every engine (os_memory, page_cache, ...)."""
    names = [k for k, v in given.items() if v is not None and v is not False]
    return (PlanWarning(f"{arg('engine_opts')} {' and '.join(names)} ignored: GPU profile '{gpu.key}' {why}"),) \
        if names else ()
