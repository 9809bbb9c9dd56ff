"""vLLM before 0.7.1 on an MLA model: no MLA kernel, so each layer caches the K and V its kv_b_proj decompresses.

vLLM's MLA attention arrived in 0.7.1 (vllm-project/vllm#12601; Neural Magic's blog "Enhancing DeepSeek Models with
MLA and FP8 Optimizations in vLLM", 2025-02-04, https://neuralmagic.com/blog/enhancing-deepseek-models-with-mla-and-fp8-
optimizations-in-vllm/: "token capacity expanded from 54,560 to 512,000" on 8 x H200 against 0.7.0). Until then a
DeepSeek layer attended as multi-head attention with every query head its own KV head at the query's width
(qk_nope + rope), V zero-padded to it. The rule and its source are kvplan.speed.mlaform's (`LATENT_FROM`, `as_run`),
which the step-time model reads too; this module applies it to what the engine plans and says so."""

from __future__ import annotations

from kvplan.engines.versions import dotted
from kvplan.model.layers import Kind
from kvplan.speed.mlaform import LATENT_FROM, as_run

ENGINE = "vllm"  # LATENT_FROM's key for this engine


def as_planned(model, version: str):
    """`model` as vLLM `version` caches it: decompressed MLA before 0.7.1, else `model` itself."""
    return as_run(model, ENGINE, version)


def note(model, version: str) -> str:
    """The plan's words where `version` runs `model`'s MLA layers decompressed ("" elsewhere)."""
    run = as_planned(model, version)
    if run is model:
        return ""
    mla = next(layer for layer in model.layers if layer.kind == Kind.MLA)
    width = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    return (f"vLLM {version} has no MLA kernel (MLA came in {dotted(LATENT_FROM[ENGINE][0])}): each MLA layer caches "
            f"K and V decompressed, {model.num_attention_heads} KV heads x {width} (V {mla.v_head_dim} zero-padded to "
            f"{width}), not the {mla.kv_lora_rank} + {mla.qk_rope_head_dim} latent")
