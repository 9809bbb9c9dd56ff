"""vLLM 0.22+ keeps Qwen3.5's Gated DeltaNet in_proj_ba whole on every tensor-parallel rank under AWQ, GPTQ or INC
on CUDA (issue 22, rounds 34-35): `maybe_disable_tp`, vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py,
0.22.0 wheel L616-632 (the first: the 0.21.0 wheel has none), 0.33.0 L853-870 (vllm-project/vllm#35924: Marlin
needs 64 outputs a rank; Qwen3.5-27B's 48 value heads give 2 x 48 / 2 = 48 at tp 2). Qwen3-Next's interleaved
layout stays split; SGLang splits it (sgl-project/sglang#19406). Which checkpoints: `gptq` loads as AutoGPTQConfig
(0.22.0 quantization/__init__.py L155), `auto-round` as INCConfig (L164; 0.33.0 inc/inc.py L361-368) on every GPU;
`awq` as AWQMarlinConfig in 0.22-0.23 only where Marlin runs it (compute capability 7.5+, marlin_utils.py L60: a
V100, 7.0, gets plain AWQConfig and a split projection), as AutoAWQConfig from 0.24.0 (L141) everywhere.

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
from kvplan.planning.deploy import Deployment, split_layers
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

V33, V22, V21, V24 = (0, 33, 0), (0, 22, 0), (0, 21, 0), (0, 24, 0)


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
    assert gdn_ba.extra_bytes(_qwen35(), 2, V33, h100) == 6_128_640
    assert gdn_ba.extra_bytes(_qwen35("gptq"), 2, V33, h100) == 6_128_640


def test_kept_in_bf16_extra_at_tp4():
    m = _qwen35(kept=("linear_attn.in_proj_a", "linear_attn.in_proj_b"))
    assert gdn_ba.extra_bytes(m, 4, V33, find_gpu("h100")) == 35_389_440


def test_not_applied_where_vllm_splits():
    h100 = find_gpu("h100")
    assert gdn_ba.extra_bytes(_qwen35(), 1, V33, h100) == 0  # one rank: nothing to split
    assert gdn_ba.extra_bytes(_qwen35(), 2, V21, h100) == 0  # 0.21.0: no maybe_disable_tp
    assert gdn_ba.extra_bytes(_qwen35("compressed-tensors"), 2, V33, h100) == 0  # not in the isinstance test
    assert gdn_ba.extra_bytes(_qwen35(), 2, V33, h100, "bf16") == 0  # another weight dtype asked for
    nxt = dataclasses.replace(_qwen35(), architecture="Qwen3NextForCausalLM")
    assert gdn_ba.extra_bytes(nxt, 2, V33, h100) == 0  # interleaved in_proj_ba: one output, split


def test_pipeline_stage_with_most_layers():
    # pp 2: 32 layers a stage, 24 Gated DeltaNet layers each: half the tp-2 figure
    m = _qwen35()
    assert gdn_ba.extra_bytes(m, 2, V33, find_gpu("h100"), ranges=split_layers(m.num_layers, 2)) == 6_128_640 // 2


def test_plan_counts_and_says_it():
    m, g, dep = _qwen35(), find_gpu("h100"), Deployment(tp=2)
    st = vllm_settings(m, g, dep, Request(context=8192), "0.33.0")
    old = dataclasses.replace(st, version="0.21.0")
    terms, before = overhead.overhead_terms(m, dep, st), overhead.overhead_terms(m, dep, old)
    assert terms["weights_repack"] - before["weights_repack"] == 6_128_640
    res = resolve_engine("vllm", "0.33.0").result(m, g, dep, Request(context=8192))
    said = [w for w in res.plan.warnings if "in_proj_ba" in w.message]
    assert len(said) == 1 and said[0].values == (6_128_640,)
    res32 = resolve_engine("vllm", "0.21.0").result(m, g, dep, Request(context=8192))
    assert res.plan.weight_bytes_per_gpu - res32.plan.weight_bytes_per_gpu >= 6_128_640
    assert not [w for w in res32.plan.warnings if "in_proj_ba" in w.message]


def test_first_release_and_the_configs_each_method_loads_as():
    h100, v100 = find_gpu("h100"), find_gpu("v100-sxm2-32")
    assert gdn_ba.extra_bytes(_qwen35(), 2, V22, h100) == 6_128_640  # 0.22.0: AWQMarlinConfig on a 9.0 part
    assert gdn_ba.extra_bytes(_qwen35("auto-round"), 2, V22, h100) == 6_128_640  # INCConfig
    assert gdn_ba.extra_bytes(_qwen35("gptq"), 2, V22, v100) == 6_128_640  # AutoGPTQConfig whatever the GPU
    assert gdn_ba.extra_bytes(_qwen35("auto-round"), 2, V33, v100) == 6_128_640  # INC: plain AWQ kernel, still INC
    assert gdn_ba.extra_bytes(_qwen35(), 2, V22, v100) == 0  # 7.0 < 7.5: no Marlin, plain AWQConfig, split
    assert gdn_ba.extra_bytes(_qwen35(), 2, V24, v100) == 6_128_640  # 0.24.0: AutoAWQConfig on every CUDA GPU
    odd = dataclasses.replace(_qwen35(), quantization=Quantization("int4", 256, quant_method="awq"))
    assert gdn_ba.extra_bytes(odd, 2, V22, h100) == 0  # group 256: not Marlin's, AWQConfig


def test_awq_on_022_reads_the_capability_and_says_so_where_missing():
    old = dataclasses.replace(find_gpu("h100"), compute_capability=None)  # an old profile: 8.0 assumed (>= 7.5)
    assert gdn_ba.reads_capability(_qwen35(), V22, 2, old) and not gdn_ba.reads_capability(_qwen35(), V24, 2, old)
    # where the rule does not apply whatever the capability, it read none: Qwen3-Next's interleaved layout, another
    # weight dtype asked for, one rank
    nxt = dataclasses.replace(_qwen35(), architecture="Qwen3NextForCausalLM")
    assert not gdn_ba.reads_capability(nxt, V22, 2, old) and not gdn_ba.reads_capability(_qwen35(), V22, 2, old, "bf16")
    assert not gdn_ba.reads_capability(_qwen35(), V22, 1, old)
    assert gdn_ba.extra_bytes(_qwen35(), 2, V22, old) == 6_128_640
    st = vllm_settings(_qwen35(), old, Deployment(tp=2), Request(context=8192), "0.22.0")
    assert "compute_capability" in overhead.missing_facts(_qwen35(), Deployment(tp=2), st)
