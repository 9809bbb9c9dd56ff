"""Offload tiers (`offload`, the CLI's --offload TIER:SIZE[,TIER:SIZE]): the tiers asked for, the GPU pool
an engine laid out (`Geometry`), and the frozen spec of one sized tier (`TierPool`).

A tier is `cpu` (host DRAM), `disk` (local NVMe) or `remote` (a store over the network), in that
order below the GPU. SIZE is a size in kvplan's syntax (64GiB, 64GB, 28G: kvplan.core.units) for
the whole deployment (every GPU of one replica together), or a ratio of the GPU KV pool (`2x`, as
SGLang's `--hicache-ratio`). `auto` (cpu only) asks for the smallest tier past a trace's knee
(kvplan.simulator.mrc). Each engine turns the request into its own flag and its own pool
(kvplan.engines.offload); the pool is a `TierPool`, the same spec whatever engine made it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.units import human_bytes, parse_bytes

TIERS = ("cpu", "disk", "remote")  # top to bottom
MAX_RATIO = 1000.0  # a host tier a thousand times the GPU pool is a typo
MIN_BARE = 2**20  # a bare number of bytes below 1 MiB holds no KV block: a unit left out (`cpu:64` for 64GiB)
_RATIO_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*[xX]\s*$")


@dataclass(frozen=True)
class TierRequest:
    """One tier as the user asked for it: bytes for the whole deployment, a ratio of the GPU pool, or auto."""

    tier: str
    size_bytes: int | None = None
    ratio: float | None = None
    auto: bool = False

    def describe(self) -> str:
        if self.auto:
            return f"{self.tier}:auto"
        if self.ratio is not None:
            return f"{self.tier}:{self.ratio:g}x"
        return f"{self.tier}:{human_bytes(self.size_bytes)}"


@dataclass(frozen=True)
class TierPool:
    """One tier as an engine sizes it. Bytes are integers; `blocks` are the engine's own units
    (vLLM CPU blocks, TRT-LLM secondary blocks, LMCache chunks, KVBM blocks, SGLang pages)."""

    tier: str
    engine: str  # who sizes it: "vllm 0.20.0 OffloadingConnector", "sglang 0.5.23 HiCache", ...
    flag: str  # the engine's setting as it would be given: "kv_offloading_size=64.0"
    bytes_per_rank: int  # what one GPU's process allocates (a shared region: the whole over ranks)
    ranks: int
    bytes_total: int  # host memory the deployment's tier takes
    blocks: int | None  # in the engine's unit, per rank where the engine counts per rank
    block_tokens: int  # tokens per unit
    tokens: int  # tokens the tier holds (every rank holds its shard of the same tokens)
    contexts: int  # full-length contexts (the plan's context) the tier holds
    rule: str  # the engine's arithmetic in one line, with its source
    notes: tuple[str, ...] = ()
    in_dev_shm: bool = False  # mapped as a file in /dev/shm (recent vLLM's SharedMmapRegion)
    flag_kind: str = "args"  # how `flag` is given: "args" (serve flags), "env" (NAME=value), "config" (a.b=value)
    extra_args: str = ""  # serve flags the tier needs besides its size (a connector to load)
    holds: str = "prefix"  # what the tier keeps: "prefix" (evicted prefix blocks) or "preempted" (V0's swap space)
    # (fraction of the host's DRAM, what the engine then does), strictest first: checks the engine itself makes
    dram_limits: tuple[tuple[float, str], ...] = ()


def _bad(message: str, value) -> KvplanError:
    return KvplanError(f"{arg('offload')} {message}", EXIT_USAGE, param="offload", value=value)


def parse_offload(text: str | None) -> tuple[TierRequest, ...]:
    """`cpu:64GiB,disk:2TiB` -> (TierRequest('cpu', 68719476736), TierRequest('disk', ...)); () for None/empty.

    Tiers in order, each at most once, sizes positive; a one-line error names the bad item."""
    if text is None or not str(text).strip():
        return ()
    out: list[TierRequest] = []
    for item in str(text).split(","):
        item = item.strip()
        tier, sep, size = item.partition(":")
        tier = tier.strip().lower()
        if not sep or not size.strip():
            raise _bad(f"expects TIER:SIZE (cpu:64GiB, cpu:2x, disk:2TiB), got {item!r}", text)
        if tier not in TIERS:
            raise KvplanError(f"{arg('offload')} tier {tier!r} is not one of {', '.join(TIERS)}", EXIT_USAGE,
                              param="offload", value=text, allowed=TIERS)
        if any(t.tier == tier for t in out):
            raise _bad(f"names the {tier} tier twice", text)
        out.append(_request(tier, size.strip(), text))
    order = [TIERS.index(t.tier) for t in out]
    if order != sorted(order):
        raise _bad(f"tiers must go down in order ({' then '.join(TIERS)}), got {', '.join(t.tier for t in out)}",
                   text)
    if any(t.auto for t in out[1:]) or (out[0].auto and out[0].tier != "cpu"):
        raise _bad("auto sizes the cpu tier only (cpu:auto)", text)
    return tuple(out)


def _request(tier: str, size: str, text: str) -> TierRequest:
    if size.lower() == "auto":
        return TierRequest(tier, auto=True)
    m = _RATIO_RE.match(size)
    if m:
        ratio = float(m.group(1))
        if not 0 < ratio <= MAX_RATIO:
            raise KvplanError(f"{arg('offload')} {tier} ratio must be in (0, {MAX_RATIO:g}], got {size!r}",
                              EXIT_USAGE, param="offload", value=text, allowed=(0, MAX_RATIO))
        return TierRequest(tier, ratio=ratio)
    size_bytes = parse_bytes(size, "offload")
    if size.isdigit() and size_bytes < MIN_BARE:  # `cpu:64`: 64 bytes, a size no tier is given in
        raise _bad(f"{tier}:{size} is {size_bytes:,} bytes (a bare number is bytes): did you mean {tier}:{size}GiB?",
                   text)
    return TierRequest(tier, size_bytes=size_bytes)


@dataclass(frozen=True)
class Geometry:
    """What a host pool rule reads from a plan: one replica's GPU pool as its engine laid it out."""

    engine: str
    version: str
    bytes_per_token: int  # one rank, every caching layer (the engine's own cell)
    ranks: int  # GPU processes of one replica (tp)
    block_size: int  # the engine's GPU page: vLLM block, SGLang page, TRT-LLM tokens_per_block
    device_tokens: int  # token slots of the GPU pool (per rank: each rank holds its shard of each)
    device_bytes: int  # the GPU KV pool per rank
    context: int  # one full-length request
    model: str = ""
    kinds: tuple[str, ...] = ("full",)  # the kinds of the model's caching layers (kvplan.model.layers.Kind)

    def whole(self, req: TierRequest) -> int:
        """The tier's bytes for the whole replica: the size asked, or the ratio times the GPU pool."""
        if req.ratio is not None:
            return int(req.ratio * self.device_bytes * self.ranks)
        return int(req.size_bytes)

    def contexts(self, tokens: int) -> int:
        """Full-length requests `tokens` token slots hold, in whole blocks of the GPU page."""
        per = -(-self.context // self.block_size) * self.block_size
        return tokens // per if per else 0


FULL_KINDS = ("full", "mla")
HYBRID_WHY = "the engine's host pool takes one page size; hybrid host pools are not read"


def check_kinds(g: Geometry, allowed: tuple[str, ...] = FULL_KINDS, why: str = HYBRID_WHY) -> None:
    """Refuse a model whose caching layers a rule was not read for (sliding, chunked, recurrent, ...)."""
    odd = sorted(set(g.kinds) - set(allowed))
    if odd:
        raise refuse(f"{arg('offload')} as {g.engine} sizes it is modelled for {' and '.join(allowed)} layers; "
                     f"{g.model or 'the model'} has {', '.join(odd)} layers ({why})")


def refuse(message: str, param: str = "offload", value=None) -> KvplanError:
    """A tier kvplan does not size for this engine, with the reason (one line, exit 2)."""
    return KvplanError(message, EXIT_USAGE, param=param, value=value)
