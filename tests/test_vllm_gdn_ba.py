"""vLLM 0.33+ keeps Qwen3.5's Gated DeltaNet in_proj_ba whole on every tensor-parallel rank under AWQ, GPTQ or INC
on CUDA (issue 22, round 34): `maybe_disable_tp`, vllm/model_executor/layers/mamba/qwen_gdn_linear_attn.py of the
0.33.0 wheel L853-870 (vllm-project/vllm#35924: Marlin needs 64 outputs a rank; Qwen3.5-27B's 48 value heads give
2 x 48 / 2 = 48 at tp 2). Qwen3-Next's interleaved layout stays split; SGLang splits it (sgl-project/sglang#19406).

Hand arithmetic, Qwen3.5-27B (config.json of Qwen/Qwen3.5-27B: hidden 5120, linear_num_value_heads 48, 64 layers,
full_attention_interval 4, so 48 Gated DeltaNet layers): in_proj_b + in_proj_a = 5120 x 2 x 48 = 491,520 parameters
a layer, x 48 = 23,592,960. Kept in bf16: 47,185,920 B whole (the "about 47 MB"); at tp 4 a rank holds it all instead
of 11,796,480 B, 35,389,440 B more. AWQ int4, group 128 (64 B of weights + a 2 B scale + a 0.5 B zero a group):
23,592,960 / 128 = 184,320 groups x 66.5 B = 12,257,280 B; at tp 2 a rank holds 6,128,640 B more.
"""

from __future__ import annotations

import dataclasses

from kvplan.engines import resolve_engine
from kvplan.engines.vllm import gdn_ba, overhead
from kvplan.engines.vllm.defaults import settings as vllm_settings
from kvplan.hardware.gpus import find_gpu
from kvplan.model.spec import Quantization
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

V33, V32 = (0, 33, 0), (0, 32, 0)


def _qwen35(method: str = "awq", kept: tuple[str, ...] = ()):
    m = find_in_catalog("qwen3.5-27b")
    q = Quantization("int4", 128, quant_method=method, kept_modules=kept)
    return dataclasses.replace(m, quantization=q, checkpoint_bytes=None)


def test_counts_from_the_config():
    m = _qwen35()
    gdn = [x for x in m.layers if gdn_ba._gdn(x)]
    assert len(gdn) == 48 and {x.value_heads for x in gdn} == {48} and m.hidden_size == 5120


def test_awq_int4_extra_at_tp2():
    h100 = find_gpu("h100")
    assert gdn_ba.extra_bytes(_qwen35(), 2, 1, V33, h100) == 6_128_640
    assert gdn_ba.extra_bytes(_qwen35("gptq"), 2, 1, V33, h100) == 6_128_640


def test_kept_in_bf16_extra_at_tp4():
    m = _qwen35(kept=("linear_attn.in_proj_a", "linear_attn.in_proj_b"))
    assert gdn_ba.extra_bytes(m, 4, 1, V33, find_gpu("h100")) == 35_389_440


def test_not_applied_where_vllm_splits():
    h100 = find_gpu("h100")
    assert gdn_ba.extra_bytes(_qwen35(), 1, 1, V33, h100) == 0  # one rank: nothing to split
    assert gdn_ba.extra_bytes(_qwen35(), 2, 1, V32, h100) == 0  # a release before the one read
    assert gdn_ba.extra_bytes(_qwen35("compressed-tensors"), 2, 1, V33, h100) == 0  # not in the isinstance test
    assert gdn_ba.extra_bytes(_qwen35(), 2, 1, V33, h100, "bf16") == 0  # another weight dtype asked for
    nxt = dataclasses.replace(_qwen35(), architecture="Qwen3NextForCausalLM")
    assert gdn_ba.extra_bytes(nxt, 2, 1, V33, h100) == 0  # interleaved in_proj_ba: one output, split


def test_pipeline_stage_with_most_layers():
    # pp 2: 32 layers a stage, 24 Gated DeltaNet layers each: half the tp-2 figure
    assert gdn_ba.extra_bytes(_qwen35(), 2, 2, V33, find_gpu("h100")) == 6_128_640 // 2


def test_plan_counts_and_says_it():
    m, g, dep = _qwen35(), find_gpu("h100"), Deployment(tp=2)
    st = vllm_settings(m, g, dep, Request(context=8192), "0.33.0")
    old = dataclasses.replace(st, version="0.32.0")
    terms, before = overhead.overhead_terms(m, dep, st), overhead.overhead_terms(m, dep, old)
    assert terms["weights_repack"] - before["weights_repack"] == 6_128_640
    res = resolve_engine("vllm", "0.33.0").result(m, g, dep, Request(context=8192))
    said = [w for w in res.plan.warnings if "in_proj_ba" in w.message]
    assert len(said) == 1 and said[0].values == (6_128_640,)
    res32 = resolve_engine("vllm", "0.32.0").result(m, g, dep, Request(context=8192))
    assert res.plan.weight_bytes_per_gpu - res32.plan.weight_bytes_per_gpu >= 6_128_640
    assert not [w for w in res32.plan.warnings if "in_proj_ba" in w.message]
