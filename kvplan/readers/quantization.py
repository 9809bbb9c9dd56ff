"""`quantization_config` read into kvplan's Quantization, every value checked before it is used.

A malformed entry (`bits: "four"`, `group_size: [128]`, `config_groups: "x"`) is a one-line usage
error naming the key, never an internal error and never a guess.
"""

from __future__ import annotations

import math
from dataclasses import replace

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.spec import Quantization
from kvplan.readers.cfg import read_dtype, shown
from kvplan.readers.modelopt import glob_entry, modelopt_method, modelopt_view, unlisted
from kvplan.readers.params import _is_moe_layer
from kvplan.readers.unquantized import exclusion_list, kept_params, module_names, untargeted


def read_quantization(cfg, params=None, layers=()) -> Quantization:
    """The checkpoint's weight format from `quantization_config` (fp8, AWQ/GPTQ, MXFP4, ...), with the
    parameters its exclusion list (`modules_to_not_convert`, `ignore`, `ignored_layers`) keeps in the
    model dtype (kvplan.readers.unquantized; a list kvplan cannot map is refused).

    Every value is checked before use: a malformed entry (`bits: "four"`, `group_size: [128]`)
    is a one-line error naming the key, never a guess.
    """
    q = cfg.raw("quantization_config")
    if not isinstance(q, dict):
        return Quantization(_dtype(cfg))
    where = f"{cfg.where}: quantization_config"
    q = modelopt_view(q)
    quant = _method(cfg, q, where, tuple(layers))
    names = exclusion_list(q, where)
    if q.get("quant_method") == "modelopt":  # wildcards, matched as vLLM matches them (kvplan.readers.modelopt)
        names = [glob_entry(n) for n in names]
    left_out = untargeted(_targets(q), where) if quant.method != _dtype(cfg) else None
    if left_out is None and q.get("quant_method") == "modelopt":
        left_out = unlisted(q, where)  # MIXED_PRECISION: modules its quantized_layers leave out
    if left_out is not None:
        names = [*names, left_out]
    if not names or params is None or quant.method == _dtype(cfg):
        return quant
    modules = module_names(cfg, str(cfg.raw("model_type") or ""), params, tuple(layers))
    return replace(quant, kept=kept_params(names, params, tuple(layers), where, modules))


def _targets(q: dict) -> list[str]:
    """Every compressed-tensors scheme's `targets` (module classes such as Linear, or `re:` names)."""
    groups = q.get("config_groups") if q.get("quant_method") == "compressed-tensors" else None
    out: list[str] = []
    for group in (groups or {}).values() if isinstance(groups, dict) else ():
        targets = group.get("targets") if isinstance(group, dict) else None
        if isinstance(targets, list) and all(isinstance(t, str) for t in targets):
            out += targets
    return out


def _linear_sizes(cfg) -> tuple[int, int, int, int, int, str]:
    """The sizes a per-feature count over the quantized linears reads: hidden, MLP width, expert width, experts,
    attention heads, and the model_type that lays out dense and MoE layers."""
    width = cfg.int("intermediate_size", default=0, minimum=0)
    return (cfg.int("hidden_size"), width, cfg.int("moe_intermediate_size", default=width, minimum=0),
            cfg.int("num_experts", "num_local_experts", "n_routed_experts", default=0, minimum=0),
            cfg.int("num_attention_heads", default=0, minimum=0), str(cfg.raw("model_type") or ""))


def _g_idx_bytes(cfg, layers) -> int:
    """Bytes of GPTQ's g_idx tensors: 4 per input feature of each quantized linear layer (q, k, v and the
    MLP's gate and up read the hidden size, o the attention width, down the MLP width; each expert alike)."""
    if not layers:
        return 0
    h, width, expert, experts, heads, model_type = _linear_sizes(cfg)
    total = 0
    for i, layer in enumerate(layers):
        d = getattr(getattr(layer, "attention", layer), "head_dim", 0)
        moe = experts and _is_moe_layer(cfg, model_type, i)  # kvplan.readers.params' layout of dense and MoE layers
        total += (3 * h + heads * d if d else 0) + (experts * (2 * h + expert) if moe else 2 * h + width)
    return 4 * total


def _channel_scales(cfg, layers) -> tuple[int, ...]:
    """Bytes of int8 channel-wise weights' fp32 scales, one per output feature (vLLM's CompressedTensorsW8A8Int8
    create_weights: weight_scale (sum(output_partition_sizes), 1) float32, 0.8.0 wheel L67-70, 0.12.0 L78-84; the MoE
    method's w13_weight_scale (E, 2 x I, 1) and w2_weight_scale (E, hidden, 1) float32, 0.12.0
    compressed_tensors_moe.py L1331-1341), as (sharded: q, k, v, gate, up; replicated: o and down, row-parallel, whose
    output every rank holds whole; experts). Layers without a grouped-query attention (MLA, state) count their MLP
    only: their projections' few thousand scales are left out, as GPTQ's g_idx count does."""
    h, width, expert, experts, heads, model_type = _linear_sizes(cfg)
    column = row = routed = 0
    for i, layer in enumerate(layers):
        att = getattr(layer, "attention", layer)
        d, kv = getattr(att, "head_dim", 0), getattr(att, "num_kv_heads", 0)
        if d and kv:
            column, row = column + (heads + 2 * kv) * d, row + h
        if experts and _is_moe_layer(cfg, model_type, i):
            routed += experts * (2 * expert + h)
        else:
            column, row = column + 2 * width, row + h
    return (4 * column, 4 * row, 4 * routed) if column or row or routed else ()


def _method(cfg, q: dict, where: str, layers=()) -> Quantization:
    """The method and its scope, before the exclusion list."""
    method = str(q.get("quant_method", "")).lower()
    if method == "mxfp4":
        # vLLM's Mxfp4Config.get_quant_method gives every LinearBase an UnquantizedLinearMethod (listed or
        # not: "MXFP4 linear layer is not implemented"); only FusedMoE experts are MXFP4
        return Quantization("mxfp4", 32, experts_only=True)
    if method in ("fp8", "fbgemm_fp8"):
        block = q.get("weight_block_size")
        if block is not None and (not isinstance(block, list) or len(block) not in (0, 2)):
            raise KvplanError(f"{where}.weight_block_size must be a list of two integers, got {block!r}", EXIT_USAGE)
        sizes = [_q_int({"weight_block_size": b}, where, "weight_block_size", default=0) for b in block or []]
        return Quantization("fp8", sizes[0] if sizes else 0)
    if method == "modelopt":  # NVIDIA ModelOpt, either file's form (kvplan.readers.modelopt)
        return modelopt_method(q, where)
    if method in ("awq", "gptq", "autoround"):
        # AWQ and GPTQ store a packed zero point per group whatever `sym` says (qzeros int32 [K/g, N/8]);
        # GPTQ adds g_idx (int32 [K]) to every quantized linear, act-order (`desc_act`) or not (AutoGPTQ
        # QuantLinear; vLLM gptq.py GPTQLinearMethod.create_weights loads it as a parameter)
        bits = _q_int(q, where, "bits", "w_bit", default=4)
        group = _q_int(q, where, "group_size", "q_group_size", default=128, minimum=-1)
        return Quantization(_int_format(bits, where), group if group > 0 else 128,
                            index_bytes=_g_idx_bytes(cfg, layers) if method == "gptq" else 0)
    if method == "bitsandbytes":
        # NF4/FP4 blocks of 64 with an absmax each and no zero point (bitsandbytes functional.quantize_4bit;
        # transformers saves weight.absmax fp32, or uint8 + nested_absmax with bnb_4bit_use_double_quant)
        if q.get("load_in_4bit") is True:
            return Quantization("int4", 64, symmetric=True,
                                scale_bytes=1 if q.get("bnb_4bit_use_double_quant") is True else 4)
        return Quantization("int8")
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        if not isinstance(groups, dict) or not all(isinstance(g, dict) for g in groups.values()):
            raise KvplanError(f"{where}.config_groups must be an object of objects, got {groups!r:.60}", EXIT_USAGE)
        for group in groups.values():
            weights = group.get("weights") or {}
            if not isinstance(weights, dict):
                raise KvplanError(f"{where}.config_groups: weights must be an object, got {weights!r:.60}", EXIT_USAGE)
            bits = _q_int(weights, where, "num_bits", default=0, minimum=0)
            if bits == 4 and weights.get("type") == "float":  # nvfp4-pack-quantized: e2m1 + fp8 scale per 16
                return Quantization("nvfp4", 16)
            if bits == 4:  # pack-quantized: weight_packed, weight_scale, and weight_zero_point unless symmetric
                return Quantization("int4", _q_int(weights, where, "group_size", default=128),
                                    symmetric=weights.get("symmetric") is True)
            if bits == 8:  # a "block" strategy stores an fp32 scale per block_structure tile (FP8-block checkpoints)
                block = weights.get("block_structure") if weights.get("strategy") == "block" else None
                tile = _q_int({"block_structure": block[0]}, where, "block_structure", default=0) if (
                    isinstance(block, list) and len(block) == 2 and block[0] == block[1]) else 0
                if weights.get("type") != "float" and weights.get("strategy") == "channel":
                    return Quantization("int8", tile, channel_scales=_channel_scales(cfg, layers))
                return Quantization("fp8" if weights.get("type") == "float" else "int8", tile)
            if bits:
                raise KvplanError(f"{where}: {bits}-bit weights are not supported (4 or 8)", EXIT_USAGE)
    return Quantization(_dtype(cfg))


def _q_int(q: dict, where: str, *names: str, default: int, minimum: int = 1) -> int:
    """An integer from a quantization_config entry, or a one-line error naming it."""
    for name in names:
        value = q.get(name)
        if value is None:
            continue
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or (isinstance(value, float) and not math.isfinite(value)) or value != int(value)
                or not minimum <= value <= (1 << 20)):
            raise KvplanError(f"{where}.{name} must be an integer, got {_shown(value)}", EXIT_USAGE)
        return int(value)
    return default


def _int_format(bits: int, where: str) -> str:
    if bits not in (4, 8):
        raise KvplanError(f"{where}: {bits}-bit weights are not supported (4 or 8)", EXIT_USAGE)
    return "int4" if bits == 4 else "int8"


def _dtype(cfg) -> str:
    return read_dtype(cfg)


def _shown(value) -> str:
    return shown(value)
