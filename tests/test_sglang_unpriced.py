"""SGLang's terms sized after the pool and left unpriced (kvplan.engines.sglang.unpriced): said as assumptions by
release, GPU, layout and architecture, as the PyPI wheels read in round 42 gate them; the #tokens never move."""

from __future__ import annotations

import pytest

from kvplan.engines import resolve_engine
from kvplan.engines.sglang.unpriced import fusion_on, warnings
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

H100, H200, B200, A100 = (find_gpu(k) for k in ("h100-sxm", "h200", "b200", "a100-80"))


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
    ("qwen3-30b-a3b", H100, 2, "0.5.16", True),  # Qwen3MoeForCausalLM, on the list from 0.5.16 (L1515-1555)
    # 0.5.3 server_args.py L750-755: gpt-oss on capability 10.x only (is_sm100_supported), not on Hopper
    ("gpt-oss-120b", B200, 2, "0.5.3", True),
    ("gpt-oss-120b", H100, 2, "0.5.3", False),
    ("gpt-oss-120b", H100, 2, "0.5.16", True),  # from 0.5.16 on 9.x too
    ("deepseek-v3", H200, 8, "0.5.3", False),  # before 0.5.16 only gpt-oss
    ("deepseek-v3", H200, 8, "0.4.9", False),  # the flag exists, off
    # DeepSeek-V4 joins the list in 0.5.18 (L1961-2001), not in 0.5.16
    ("deepseek-v4-flash", H200, 8, "0.5.16", False),
    ("deepseek-v4-flash", H200, 8, "0.5.18", True),
    # MiMo-V2-Flash: CuTeDSL's fusion in 0.5.23 on capability 10.x at tp 2, 4, 8 or 16 (bf16), not on Hopper
    ("mimo-v2-flash", B200, 4, "0.5.23", True),
    ("mimo-v2-flash", H200, 4, "0.5.23", False),
    ("mimo-v2-flash", B200, 4, "0.5.22", False),
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
