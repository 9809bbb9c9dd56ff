"""LoRA adapters as asked (`lora`: MAX_LORAS:RANK[:MODULES]) and the linear modules they wrap, per rank.

What a person asks: how many adapters the engine holds on the GPU at once (vLLM's --max-loras, SGLang's
--max-loras-per-batch, TensorRT-LLM's LoraConfig.max_loras), the largest rank (--max-lora-rank) and which
projections they adapt (q, k, v, o, gate, up, down; `attn` = q,k,v,o, `mlp` = gate,up,down; the HF
names q_proj ... down_proj too). Without MODULES, every linear layer of the decoder: what vLLM wraps by
default (`vllm/lora/utils.py` get_supported_lora_modules: "In vLLM, all linear layers support LoRA").

`slices` gives each wrapped projection's (input, output) widths on one tensor-parallel rank: a column-
parallel projection (q, k, v, gate, up) keeps its whole input and splits its output, a row-parallel one
(o, down) splits its input and keeps its output (vLLM `vllm/lora/layers/base_linear.py`
create_lora_weights; TensorRT-LLM LoraModule localInDim/localOutDim; SGLang's LoRA memory pool). K and V
heads are replicated where tp exceeds them (one head per rank). Engines price the pool from these
(kvplan.engines.lora). Models with layers that are not plain GQA attention (MLA, recurrent, cache-less) are
refused, and MLP modules of a mixture-of-experts model: their adapter shapes are not read. An ungated MLP
(up -> act -> down: kvplan.readers.mlp_layout.gated_mlp) has no gate to wrap: `mlp` and the default adapt up
and down only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.model.layers import ChunkedLocal, FullAttention, SlidingWindow
from kvplan.readers.mlp_layout import gated_mlp

MODULES = ("q", "k", "v", "o", "gate", "up", "down")
ATTENTION = ("q", "k", "v", "o")
MLP = ("gate", "up", "down")
COLUMN = frozenset({"q", "k", "v", "gate", "up"})  # output split over tp; o and down split their input
_GROUPS = {"attn": ATTENTION, "attention": ATTENTION, "mlp": MLP, "all": MODULES, "all-linear": MODULES,
           "qkv": ("q", "k", "v"), "gate_up": ("gate", "up")}
MAX_LORAS, MAX_RANK = 4096, 4096


@dataclass(frozen=True)
class LoraRequest:
    """Adapters resident on each GPU at once, their largest rank, the projections they wrap
    (`modules` None: every linear layer, the engine's default)."""

    max_loras: int
    rank: int
    modules: tuple[str, ...] | None = None

    @property
    def text(self) -> str:
        return f"{self.max_loras}:{self.rank}" + (f":{','.join(self.modules)}" if self.modules else "")

    def wrapped(self) -> tuple[str, ...]:
        return self.modules or MODULES


def _bad(value, why: str) -> KvplanError:
    return KvplanError(f"{arg('lora')} takes MAX_LORAS:RANK[:MODULES] (e.g. 4:16:q,k,v,o): {why}", EXIT_USAGE,
                       param="lora", value=value, allowed=MODULES)


def _module(name: str, value) -> tuple[str, ...]:
    key = name.strip().lower().removesuffix("_proj")
    if key in MODULES:
        return (key,)
    if key in _GROUPS:
        return _GROUPS[key]
    raise _bad(value, f"unknown module {name.strip()!r} (use {', '.join(MODULES)}, attn, mlp or all)")


def _count(text: str, what: str, top: int, value) -> int:
    try:
        n = int(text.strip())
    except ValueError:
        raise _bad(value, f"{what} {text.strip()!r} is not a whole number") from None
    if not 1 <= n <= top:
        raise _bad(value, f"{what} must be between 1 and {top}, got {n}")
    return n


def parse_lora(value) -> LoraRequest | None:
    """'4:16', '4:16:q,k,v,o', '8:64:attn' (or a LoraRequest, or None: no LoRA) read into a LoraRequest."""
    if value is None or isinstance(value, LoraRequest):
        return value
    parts = str(value).split(":")
    if len(parts) not in (2, 3):
        raise _bad(value, f"got {value!r}")
    loras = _count(parts[0], "MAX_LORAS", MAX_LORAS, value)
    rank = _count(parts[1], "RANK", MAX_RANK, value)
    if len(parts) == 2 or parts[2].strip().lower() in ("all", "all-linear"):
        return LoraRequest(loras, rank)
    names = [n for n in parts[2].split(",") if n.strip()]
    if not names:
        raise _bad(value, "MODULES is empty")
    chosen = {m for n in names for m in _module(n, value)}
    return LoraRequest(loras, rank, tuple(m for m in MODULES if m in chosen))


class Slice(NamedTuple):
    """One wrapped projection of one layer on one rank: its name, input and output widths."""

    module: str
    in_dim: int
    out_dim: int


def _attention(layer):
    return layer if isinstance(layer, (FullAttention, SlidingWindow, ChunkedLocal)) else None


def check_model(model, modules) -> None:
    """A one-line refusal where `modules` touch layers whose adapter shapes kvplan has not read."""
    odd = sorted({layer.kind for layer in model.layers if _attention(layer) is None})
    if odd:  # MLA, recurrent or cache-less layers: neither their projections nor which layers hold an MLP are read
        raise KvplanError(f"{model.name}: {arg('lora')} is priced on decoders of GQA attention layers only; this "
                          f"model has {', '.join(odd)} layers", EXIT_USAGE, param="lora")
    if any(m in MLP for m in modules) and model.params.num_experts:
        raise KvplanError(f"{model.name}: {arg('lora')} on MLP modules of a mixture-of-experts model is not "
                          "priced (adapters on routed experts); name attention modules, e.g. 4:16:q,k,v,o",
                          EXIT_USAGE, param="lora")


def adapted(model, modules: tuple[str, ...]) -> tuple[str, ...]:
    """The modules asked for that `model` has: an ungated MLP (up -> act -> down) has no gate; a one-line refusal
    where none is left."""
    if gated_mlp(model):
        return modules
    kept = tuple(m for m in modules if m != "gate")
    if not kept:
        raise KvplanError(f"{model.name}: its MLP is up -> act -> down, with no gate projection for {arg('lora')} "
                          "to adapt; name up, down or mlp", EXIT_USAGE, param="lora")
    return kept


def layer_slices(model, layer, modules, tp: int) -> list[Slice]:
    """The wrapped projections of one decoder layer on one tensor-parallel rank (widths in elements)."""
    attn, h, out = _attention(layer), model.hidden_size, []
    for m in modules:
        if m in ATTENTION and attn is not None:
            q = model.num_attention_heads * attn.head_dim
            kv = max(1, attn.num_kv_heads // tp) * attn.head_dim
            out.append({"q": Slice("q", h, q // tp), "k": Slice("k", h, kv), "v": Slice("v", h, kv),
                        "o": Slice("o", q // tp, h)}[m])
        elif m in MLP and (m != "gate" or gated_mlp(model)):  # an ungated MLP (c_fc, c_proj) has no gate
            inter = model.intermediate_size
            out.append(Slice(m, inter // tp, h) if m == "down" else Slice(m, h, inter // tp))
    return out


def stage_slices(model, modules, tp: int, layers: tuple[int, int]) -> list[Slice]:
    """Every wrapped projection of the layers [a, b) on one rank."""
    check_model(model, modules)
    a, b = layers
    return [s for layer in model.layers[a:b] for s in layer_slices(model, layer, modules, tp)]
