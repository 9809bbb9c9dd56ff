"""vLLM's replicated Gated DeltaNet `in_proj_ba` under AWQ, GPTQ and INC quantization: the bytes and the note.

Why: Marlin needs an output of at least MIN_THREAD_N = 64 per rank, which Qwen3.5's non-interleaved in_proj_ba
([Hv, Hv], Hv value heads) breaks at tp >= 2 (vllm-project/vllm#35924, 2026-03). vLLM's answer is to build the
projection whole on every rank (MergedColumnParallelLinear(..., disable_tp=True)) and slice b and a to the rank's
heads in the forward pass: `maybe_disable_tp` in vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py, true
on CUDA, for the non-interleaved layout (Qwen3.5, not Qwen3-Next), where the model's quant config is one of three
classes (an isinstance test on the config, not on the kernel a layer gets). kvplan splits every column layer over
tp, so each rank holds hidden x 2 Hv x (1 - 1/tp) more parameters per Gated DeltaNet layer; this module prices them.

Releases, read in the wheels: 0.19.0-0.21.0 have no maybe_disable_tp (Qwen3.5's in_proj_ba split: planned split);
0.22.0 is the first with it (L616-632), the classes AWQMarlinConfig, AutoGPTQConfig, INCConfig; 0.24.0 on, AutoAWQConfig
for the first (0.33.0 L853-870). What a checkpoint's quant_method loads as (quantization/__init__.py's table and the
override_quantization_method walk in config/model.py):

* `gptq`: AutoGPTQConfig from 0.22.0 (`"gptq": AutoGPTQConfig`, 0.22.0 L155; its override keeps it, 0.33.0
  auto_gptq.py L214-233), whatever the GPU: replicated.
* `awq`: 0.22.0-0.23.0 load AWQConfig (L145) and AWQMarlinConfig's override turns it to `awq_marlin` only where
  Marlin runs it (awq_marlin.py L250-278, is_awq_marlin_compatible L328-350: 4 or 8 bits, group -1/32/64/128,
  compute capability 7.5+, marlin_utils.py L60): replicated there, split on a V100 (plain AWQConfig, not in the
  test). From 0.24.0 `"awq": AutoAWQConfig` on every CUDA GPU (its override, 0.33.0 auto_awq.py L263-286):
  replicated. (VLLM_BATCH_INVARIANT, which skips the Marlin override in 0.22-0.23, is not modelled.)
* `auto-round` (AutoRound, Intel Neural Compressor) and `inc`: INCConfig (0.22.0 L164-165; 0.33.0 inc/inc.py
  L361-368, "Override the `auto-round` method to `inc`") on every GPU. Below Marlin's capability INCConfig gives
  a layer a plain AWQ or GPTQ method (0.22.0 inc.py apply_awq_quant_layer L238-300), but the config is still
  INCConfig, so the projection is replicated there too.

SGLang builds the same projection split over tp (MergedColumnParallelLinear with no replicated fallback, its Marlin
failure at tp >= 2 is sgl-project/sglang#19406) and gets no such term.
"""

from __future__ import annotations

from kvplan.core.errors import arg
# vLLM's gqa_interleaved_layout (Qwen3-Next): in_proj_ba one output, split as before
from kvplan.engines.fp8_linear import VLLM_ONE_PART_GDN
from kvplan.engines.marlin_shapes import marlin_groups
from kvplan.hardware.facts import capability_of, fact_missing, vendor_of
from kvplan.model.recurrent import RecurrentState
from kvplan.model.weight_formats import PLAIN_BYTES, linear_bytes
from kvplan.model.weights import own_format
from kvplan.planning.deploy import stages_or_one
from kvplan.planning.plan_warnings import PlanWarning

FIRST = (0, 22, 0)  # the first release with maybe_disable_tp (0.22.0 wheel; 0.21.0's has none)
# from here `awq` loads as AutoAWQConfig on every CUDA GPU; before, AWQMarlinConfig where Marlin runs
AUTO_AWQ = (0, 24, 0)
# a config's quant_method that vLLM loads as an AWQ (Marlin), GPTQ or INC config (the isinstance test)
METHODS = ("awq", "gptq", "inc", "auto-round")
MARLIN_CAPABILITY = (7, 5)  # marlin_utils.query_marlin_supported_quant_types: nothing below 75 (0.22.0 L60)
# kept_modules names a fused in_proj_ba by its parts (kvplan.readers.unquantized.kept_modules)
KEPT = ("linear_attn.in_proj_b", "linear_attn.in_proj_a")


def _gdn(layer) -> bool:
    return isinstance(layer, RecurrentState) and layer.variant == "gated_deltanet" and layer.value_heads > 0


def _marlin_awq(model, version: tuple[int, ...], gpu) -> bool:
    """Whether an AWQ checkpoint's config is one the test replicates: AutoAWQConfig from 0.24.0; in 0.22-0.23
    AWQMarlinConfig, which the override picks only where Marlin runs the checkpoint (else plain AWQConfig)."""
    if version >= AUTO_AWQ:
        return True
    q = model.quantization
    return (capability_of(gpu) or (0, 0)) >= MARLIN_CAPABILITY and marlin_groups(q) \
        and q.method in ("int4", "int8")


def _candidate(model, version: tuple[int, ...], tp: int, gpu, weight_dtype=None) -> bool:
    """maybe_disable_tp's every test but which config an `awq` checkpoint loads as (_marlin_awq)."""
    q = model.quantization
    return (tp > 1 and own_format(model, weight_dtype) and version >= FIRST and vendor_of(gpu) == "NVIDIA"
            and q.quant_method in METHODS and model.architecture not in VLLM_ONE_PART_GDN
            and any(_gdn(x) for x in model.layers))


def applies(model, version: tuple[int, ...], tp: int, gpu, weight_dtype=None) -> bool:
    """Whether this vLLM release builds `model`'s in_proj_ba whole on every rank of `tp` (the checkpoint loaded
    in its own format: another weight dtype asked for is not its AWQ/GPTQ/INC config)."""
    return _candidate(model, version, tp, gpu, weight_dtype) and (
        model.quantization.quant_method != "awq" or _marlin_awq(model, version, gpu))


def reads_capability(model, version: tuple[int, ...], tp: int, gpu, weight_dtype=None) -> bool:
    """Whether the rule read a compute capability the profile leaves out (an AWQ checkpoint on 0.22-0.23, where
    Marlin decides the config): the plan says what it assumed (kvplan.hardware.facts.ASSUMED_CAPABILITY)."""
    return (version < AUTO_AWQ and model.quantization.quant_method == "awq"
            and fact_missing(gpu, "compute_capability") and _candidate(model, version, tp, gpu, weight_dtype))


def _bytes(model, params: int) -> int:
    """`params` of in_proj_b and in_proj_a in the checkpoint's format, or in the model dtype where its exclusion
    list keeps them (kvplan.readers.unquantized.kept_modules)."""
    q = model.quantization
    if any(m in KEPT for m in q.kept_modules):
        return params * PLAIN_BYTES.get(model.dtype, 2)
    return linear_bytes(params, q.method, q.group_size, *q.group_format)


def extra_bytes(model, tp: int, version: tuple[int, ...], gpu, weight_dtype=None,
                ranges: list[tuple[int, int]] | None = None) -> int:
    """Bytes one rank holds beyond its 1/tp share of in_proj_ba, on the stage of `ranges` (the pipeline stages,
    kvplan.planning.deploy.stage_ranges; None: one) with the most Gated DeltaNet layers: (whole - whole / tp) of
    hidden x 2 Hv per layer."""
    if not applies(model, version, tp, gpu, weight_dtype):
        return 0
    most = 0
    for start, end in stages_or_one(model, ranges):
        params = sum(model.hidden_size * 2 * x.value_heads for x in model.layers[start:end] if _gdn(x))
        whole = _bytes(model, params)
        most = max(most, whole - whole // tp)
    return most


def note(model, tp: int, version: tuple[int, ...], gpu, weight_dtype=None,
         ranges: list[tuple[int, int]] | None = None) -> tuple[PlanWarning, ...]:
    """The plan's assumption where the term applies (its bytes as a figure, read at the edge), else ()."""
    extra = extra_bytes(model, tp, version, gpu, weight_dtype, ranges)
    if not extra:
        return ()
    return (PlanWarning(f"vLLM builds the Gated DeltaNet in_proj_ba whole on every rank under "
                        f"{model.quantization.quant_method} at {arg('tp')} {tp} (maybe_disable_tp, "
                        "vllm-project/vllm#35924: Marlin needs 64 outputs a rank): {} per GPU more weights than a "
                        "1/tp split, counted", (extra,), ("MiB",)),)
