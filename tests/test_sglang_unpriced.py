"""SGLang's terms sized after the pool and left unpriced (kvplan.engines.sglang.unpriced): said as assumptions by
release, GPU, layout and architecture, as the PyPI wheels read in round 42 gate them; the #tokens never move."""

from __future__ import annotations

import dataclasses

import pytest

from kvplan.engines import resolve_engine
from kvplan.engines.sglang.unpriced import fusion_on, warnings
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

H100, H200, B200, A100, H20 = (find_gpu(k) for k in ("h100-sxm", "h200", "b200", "a100-80", "h20"))


def _said(model, gpu, tp, version, opts=()):
    plan = resolve_engine("sglang", version, list(opts)).result(find_in_catalog(model), gpu, Deployment(tp),
                                                                 Request(8192)).plan
    return plan, " | ".join(w.message for w in plan.warnings)


def test_post_capture_kv_sizing_is_said_off_where_the_release_has_it():
    # post_capture_resize_kv_pool first ships in 0.5.16 (model_runner.py L798, scheduler.py L856-858; 0.5.15.post1 has
    # none) behind SGLANG_ENABLE_POST_CAPTURE_KV_SIZING = EnvBool(False) (0.5.16 environ.py L337, 0.5.23 L640)
    plan, said = _said("llama-3.1-8b", H100, 1, "0.5.16")
    assert "post-capture KV sizing (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING) assumed off" in said
    assert "post-capture" not in _said("llama-3.1-8b", H100, 1, "0.5.15")[1]
    # off, SGLang's pool is the one sized before capture: max_total_num_tokens = rest // cell, the cell from the
    # config (Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K + V) x 2 B = 131,072 B a token), nothing held back
    assert plan.kv_cache_tokens == plan.kv_memory_bytes_per_gpu // (32 * 8 * 128 * 2 * 2)
    # an MLA model never takes the path (post_capture_kv_sizing_planned: `not use_mla_backend`), nor DP attention
    assert "post-capture" not in _said("deepseek-v3", H200, 8, "0.5.23")[1]
    llama = find_in_catalog("llama-3.1-8b")
    assert not any("post-capture" in w.message for w in warnings(llama, H100, 8, True, "0.5.23"))
    assert any("post-capture" in w.message for w in warnings(llama, H100, 8, False, "0.5.23"))


@pytest.mark.parametrize("model, gpu, tp, version, on", [
    # 0.5.23 overrides.py L929-999: an architecture of the list, capability 9.x or 10.x, tp > 1, no DP attention
    ("deepseek-v3", H200, 8, "0.5.23", True),
    ("deepseek-v3", H200, 1, "0.5.23", False),  # tp 1: no all-reduce
    ("deepseek-v3", A100, 8, "0.5.23", False),  # capability 8.0: neither is_sm90 nor is_sm100
    ("llama-3.1-8b", H100, 8, "0.5.23", False),  # LlamaForCausalLM is not on the list
    ("qwen3-30b-a3b", H100, 2, "0.5.16", True),  # Qwen3MoeForCausalLM, on the list since 0.5.7 (0.5.16 L1515-1555)
    # 0.5.3 server_args.py L750-755: gpt-oss on capability 10.x only (is_sm100_supported), not on Hopper
    ("gpt-oss-120b", B200, 2, "0.5.3", True),
    ("gpt-oss-120b", H100, 2, "0.5.3", False),
    ("gpt-oss-120b", H100, 2, "0.5.16", True),  # on 9.x too since 0.5.7 (L1470-1493)
    ("deepseek-v3", H200, 8, "0.5.3", False),  # 0.5.3: gpt-oss only (DeepSeek-V3 from 0.5.4, on 10.x)
    ("deepseek-v3", H200, 8, "0.4.9", False),  # the flag exists, off
    # DeepSeek-V4 joins the list in 0.5.18 (L1961-2001), not in 0.5.16
    ("deepseek-v4-flash", H200, 8, "0.5.16", False),
    ("deepseek-v4-flash", H200, 8, "0.5.18", True),
    # MiMo-V2-Flash: CuTeDSL's fusion in 0.5.23 on capability 10.x at tp 2, 4, 8 or 16 (bf16), not on Hopper
    ("mimo-v2-flash", B200, 4, "0.5.23", True),
    ("mimo-v2-flash", H200, 4, "0.5.23", False),
    ("mimo-v2-flash", B200, 4, "0.5.22", False),
    # 0.5.7-0.5.12 leave the H20 out by torch's name ("H20" in it, "H200" not: L1470-1493), 0.5.13 no more
    # (sgl-project/sglang#26470); its capability 9.0 is the H100's, which stays on
    ("qwen3-30b-a3b", H20, 2, "0.5.12", False),
    ("qwen3-30b-a3b", H20, 2, "0.5.13", True),
    ("qwen3-30b-a3b", H200, 2, "0.5.12", True),
])
def test_fusion_is_said_where_sglang_turns_it_on(model, gpu, tp, version, on):
    assert fusion_on(find_in_catalog(model), gpu, tp, False, version) is on
    assert fusion_on(find_in_catalog(model), gpu, tp, True, version) is False  # DP attention: off in every release


def test_the_fusion_note_leaves_the_pool_as_it_is():
    # the workspace is created by the graph runners' warm-up, after the pool (0.5.23 base_runner.py L329-333): the
    # note says so, and the #tokens are the pool's own, rest // cell with no workspace taken: DeepSeek-V3's MLA cell
    # from its config, (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 B x 61 layers = 70,272 B a token on every rank
    plan, said = _said("deepseek-v3", H200, 8, "0.5.23")
    assert "SGLang 0.5.23 turns FlashInfer's all-reduce fusion on for DeepseekV3ForCausalLM" in said
    assert "not priced (the #tokens do not move)" in said
    assert plan.kv_cache_tokens == plan.kv_memory_bytes_per_gpu // ((512 + 64) * 2 * 61)


H20, RTX5090 = find_gpu("h20"), find_gpu("rtx-5090")


@pytest.mark.parametrize("model, gpu, tp, version, on", [
    # each release's auto-enable as its wheel's server_args.py reads it (unpriced.py's docstring cites the lines)
    ("deepseek-v3", B200, 8, "0.5.4", True),  # L879-895: DeepseekV3ForCausalLM on is_sm100_supported
    ("deepseek-v3", H200, 8, "0.5.6", False),  # L1027-1035: still 10.x only
    ("deepseek-v3", H200, 8, "0.5.7", True),  # L1470-1493: the list, on is_sm90_supported too
    ("gpt-oss-120b", RTX5090, 2, "0.5.4", False),  # L928-932: is_sm100_supported, capability 10 only
    ("gpt-oss-120b", RTX5090, 2, "0.5.5", True),  # L964-971: is_blackwell_supported, 10 or 12 (common.py L201-206)
    ("gpt-oss-120b", RTX5090, 2, "0.5.7", True),  # L1487: is_sm90_supported() or is_blackwell_supported()
    ("gpt-oss-120b", RTX5090, 2, "0.5.8", False),  # L1620: is_sm90_supported() or is_sm100_supported()
    ("gpt-oss-120b", H100, 2, "0.5.6", False),  # gpt-oss on Hopper only from the 0.5.7 list
    ("qwen3-30b-a3b", H100, 2, "0.5.6", False),
    ("qwen3-30b-a3b", H100, 2, "0.5.7", True),
    ("kimi-k2.5", H200, 8, "0.5.8", False),
    ("kimi-k2.5", H200, 8, "0.5.9", True),  # L1672-1697
    ("qwen3-next-80b-a3b-thinking", H100, 2, "0.5.10", False),
    ("qwen3-next-80b-a3b-thinking", H100, 2, "0.5.11", True),  # L2320-2353
    ("deepseek-v3.2", H200, 8, "0.5.10", False),  # DeepseekV32ForCausalLM joins in 0.5.11
    ("deepseek-v3.2", H200, 8, "0.5.11", True),
    ("deepseek-v3", H20, 8, "0.5.12", False),  # L2441: `"H20" in device_name and "H200" not in device_name`
    ("deepseek-v3", H20, 8, "0.5.13", True),  # L2620-2651: the H20 test gone
    ("deepseek-v3", H200, 8, "0.5.12", True),  # an H200 is not an H20
    ("nvidia-nemotron-3-nano-30b-a3b-bf16", H100, 2, "0.5.13", False),
    ("nvidia-nemotron-3-nano-30b-a3b-bf16", H100, 2, "0.5.14", True),  # L4294-4325
])
def test_fusion_follows_each_release(model, gpu, tp, version, on):
    assert fusion_on(find_in_catalog(model), gpu, tp, False, version) is on


def test_fusion_leaves_a_dsa_deepseek_v3_out_in_0_5_4_and_0_5_5_only():
    # 0.5.4 L879 / 0.5.5 L899: `model_arch in ["DeepseekV3ForCausalLM"] and not is_deepseek_nsa(hf_config)`; 0.5.6
    # moves the fusion to the block "common to all Deepseek MoE models" (L1027-1035), DSA or not
    dsa = dataclasses.replace(find_in_catalog("deepseek-v3.2"), architecture="DeepseekV3ForCausalLM")
    assert [fusion_on(dsa, B200, 8, False, v) for v in ("0.5.4", "0.5.5", "0.5.6")] == [False, False, True]
    assert fusion_on(find_in_catalog("deepseek-v3"), B200, 8, False, "0.5.5") is True


@pytest.mark.parametrize("gpu, tp, node, version, on", [
    # the node rule (module docstring): one node only from 0.5.6 (0.5.6 L1027-1035); more than one node on
    # capability 10.x from 0.5.14 (L4294-4325); no node rule before 0.5.6
    (H200, 16, 8, "0.5.23", False),  # 9.x across two nodes of 8
    (H200, 8, 8, "0.5.23", True),  # one node
    (B200, 16, 8, "0.5.23", True),  # 10.x across nodes, from 0.5.14
    (B200, 16, 8, "0.5.13", False),  # one node only before 0.5.14
    (B200, 16, 8, "0.5.5", True),  # no node rule before 0.5.6 (DeepSeek-V3 on 10.x from 0.5.4)
])
def test_the_fusion_s_node_rule_by_release(gpu, tp, node, version, on):
    model = find_in_catalog("deepseek-v3")
    said = warnings(model, gpu, tp, False, version, Deployment(tp=tp, node_gpus=node))
    assert any("all-reduce fusion" in w.message for w in said) is on
