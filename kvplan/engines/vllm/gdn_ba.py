"""vLLM's replicated Gated DeltaNet `in_proj_ba` under AWQ, GPTQ and INC quantization: the bytes and the note.

Why: Marlin needs an output of at least MIN_THREAD_N = 64 per rank, which Qwen3.5's non-interleaved in_proj_ba
([Hv, Hv], Hv value heads) breaks at tp >= 2 (vllm-project/vllm#35924, 2026-03). vLLM's answer is to build the
projection whole on every rank (MergedColumnParallelLinear(..., disable_tp=True)) and slice b and a to the rank's
heads in the forward pass: `maybe_disable_tp` in vllm/model_executor/layers/mamba/qwen_gdn_linear_attn.py (0.33.0
wheel L853-870): true on CUDA, for the non-interleaved layout (Qwen3.5, not Qwen3-Next), where the quant config is
an AWQ (Marlin), GPTQ or INC one. kvplan splits every column layer over tp, so each rank holds
hidden x 2 Hv x (1 - 1/tp) more parameters per Gated DeltaNet layer than the split gives; this module prices them.

Releases: applied from 0.33.0, the first release kvplan has read with it; earlier releases were not read for it
and are planned split, as before. SGLang builds the same projection split over tp (MergedColumnParallelLinear
with no replicated fallback, its Marlin failure at tp >= 2 is sgl-project/sglang#19406) and gets no such term.
"""

from __future__ import annotations

from kvplan.core.errors import arg
# vLLM's gqa_interleaved_layout (Qwen3-Next): in_proj_ba one output, split as before
from kvplan.engines.fp8_linear import VLLM_ONE_PART_GDN
from kvplan.hardware.facts import vendor_of
from kvplan.model.layers import RecurrentState
from kvplan.model.spec import PLAIN_BYTES, own_format
from kvplan.model.weight_formats import linear_bytes
from kvplan.planning.deploy import split_layers
from kvplan.planning.plan_warnings import PlanWarning

FIRST = (0, 33, 0)  # the release read with maybe_disable_tp (0.33.0 wheel)
# a config's quant_method that vLLM loads as AWQMarlinConfig, a GPTQ config or INCConfig (the isinstance test)
METHODS = ("awq", "gptq", "inc")
# kept_modules names a fused in_proj_ba by its parts (kvplan.readers.unquantized.kept_modules)
KEPT = ("linear_attn.in_proj_b", "linear_attn.in_proj_a")


def _gdn(layer) -> bool:
    return isinstance(layer, RecurrentState) and layer.variant == "gated_deltanet" and layer.value_heads > 0


def applies(model, version: tuple[int, ...], tp: int, gpu, weight_dtype=None) -> bool:
    """Whether this vLLM release builds `model`'s in_proj_ba whole on every rank of `tp` (the checkpoint loaded
    in its own format: another weight dtype asked for is not its AWQ/GPTQ/INC config)."""
    q = model.quantization
    return (tp > 1 and own_format(model, weight_dtype) and version >= FIRST and vendor_of(gpu) == "NVIDIA"
            and q.quant_method in METHODS and model.architecture not in VLLM_ONE_PART_GDN
            and any(_gdn(x) for x in model.layers))


def _bytes(model, params: int) -> int:
    """`params` of in_proj_b and in_proj_a in the checkpoint's format, or in the model dtype where its exclusion
    list keeps them (kvplan.readers.unquantized.kept_modules)."""
    q = model.quantization
    if any(m in KEPT for m in q.kept_modules):
        return params * PLAIN_BYTES.get(model.dtype, 2)
    return linear_bytes(params, q.method, q.group_size, not q.symmetric, q.scale_bytes or 2)


def extra_bytes(model, tp: int, pp: int, version: tuple[int, ...], gpu, weight_dtype=None) -> int:
    """Bytes one rank holds beyond its 1/tp share of in_proj_ba, on the stage with the most Gated DeltaNet
    layers: (whole - whole / tp) of hidden x 2 Hv per layer."""
    if not applies(model, version, tp, gpu, weight_dtype):
        return 0
    most = 0
    for start, end in split_layers(model.num_layers, pp):
        params = sum(model.hidden_size * 2 * x.value_heads for x in model.layers[start:end] if _gdn(x))
        whole = _bytes(model, params)
        most = max(most, whole - whole // tp)
    return most


def note(model, tp: int, pp: int, version: tuple[int, ...], gpu, weight_dtype=None) -> tuple[PlanWarning, ...]:
    """The plan's assumption where the term applies (its bytes as a figure, read at the edge), else ()."""
    extra = extra_bytes(model, tp, pp, version, gpu, weight_dtype)
    if not extra:
        return ()
    return (PlanWarning(f"vLLM builds the Gated DeltaNet in_proj_ba whole on every rank under "
                        f"{model.quantization.quant_method} at {arg('tp')} {tp} (maybe_disable_tp, "
                        "vllm-project/vllm#35924: Marlin needs 64 outputs a rank): {} per GPU more weights than a "
                        "1/tp split, counted", (extra,), ("MiB",)),)
