"""SGLang's MLA page follows the release's attention backend (kvplan.engines.sglang.attention), and 0.5.5-0.5.10 serve
a BF16 DeepSeek-V3 in FP8 weights on compute capability 10 (kvplan.engines.sglang.fp8_default).

Read in the PyPI wheels (sglang/srt/server_args.py, model_executor/model_runner.py): page_size defaults to 1; the
default MLA backend is fa3 on Hopper, flashinfer on capability 10, triton elsewhere (0.4.9 model_runner L386-403, 0.5.3
L535-549, 0.5.5 server_args L1155-1175), none of which forces a page; flashmla forces 64, cutlass_mla 128, trtllm_mla
64 unless the page is 32 or 64 (0.5.5 L1199-1232); from 0.5.4 DeepseekV3ForCausalLM on capability 10 defaults to
trtllm_mla (0.5.4 L879-888), KimiK25ForConditionalGeneration from 0.5.9 (L1197-1203; 0.5.8's list has no Kimi).
"""

from __future__ import annotations

import pytest

from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.readers.configs import spec_from_config
from kvplan.sources.catalog import find_in_catalog

H200, B200, MI300X = find_gpu("h200-sxm"), find_gpu("b200"), find_gpu("mi300x")
V3, V2_LITE, KIMI = find_in_catalog("deepseek-v3"), find_in_catalog("deepseek-v2-lite"), find_in_catalog("kimi-k2.5")
DEP, REQ = Deployment(8), Request(context=32768)
BF16 = canonical_kv_dtype("bf16")


def _page(model, gpu, version, opts=()):
    st = resolve_engine("sglang", version, list(opts)).settings(model, gpu, DEP, REQ)
    return st.page_size, st.page_why


@pytest.mark.parametrize("gpu, version, page", [
    (H200, "0.5.5", 1),  # fa3 on Hopper: no page forced (it was 64 for every MLA model)
    (H200, "0.5.23", 1),
    (B200, "0.5.3", 1),  # flashinfer on capability 10: 0.5.3 has no trtllm_mla default
    (B200, "0.5.4", 64),  # trtllm_mla from 0.5.4
    (B200, "0.5.23", 64),
    (MI300X, "0.5.5", 1),  # aiter or triton on ROCm
])
def test_deepseek_v3_page_follows_the_default_backend(gpu, version, page):
    got, why = _page(V3, gpu, version)
    assert got == page
    assert ("trtllm_mla" in why) == (page == 64)


def test_the_trtllm_mla_default_is_by_architecture_and_release():
    assert _page(V2_LITE, B200, "0.5.23")[0] == 1  # DeepseekV2ForCausalLM is on no release's list: flashinfer
    assert _page(KIMI, B200, "0.5.8")[0] == 1  # KimiK25ForConditionalGeneration joins the list in 0.5.9
    assert _page(KIMI, B200, "0.5.9")[0] == 64


def test_a_named_backend_forces_its_page():
    assert _page(V3, H200, "0.5.5", ["attention_backend=flashmla"])[0] == 64
    assert _page(V3, H200, "0.5.5", ["attention_backend=cutlass_mla"])[0] == 128
    assert _page(V3, B200, "0.5.5", ["attention_backend=flashinfer"])[0] == 1  # the trtllm_mla default is skipped
    assert _page(V3, B200, "0.5.5", ["attention_backend=trtllm_mla", "page_size=32"])[0] == 32  # 32 is kept
    assert _page(V3, B200, "0.5.5", ["attention_backend=trtllm_mla", "page_size=16"])[0] == 64  # 16 is not
    assert _page(V3, H200, "0.5.5", ["page_size=16"])[0] == 16  # fa3 keeps what is given
    with pytest.raises(KvplanError, match="capability 10.x only"):  # "only supported on Blackwell GPUs (SM100)"
        _page(V3, H200, "0.5.5", ["attention_backend=trtllm_mla"])
    with pytest.raises(KvplanError, match="reads the page of"):
        _page(V3, H200, "0.5.5", ["attention_backend=flex_attention"])
    with pytest.raises(KvplanError, match="at least 1"):
        _page(V3, H200, "0.5.5", ["page_size=0"])


def test_the_pool_rounds_to_the_backends_page():
    # DeepSeek-V3's MLA cell: (kv_lora_rank 512 + qk_rope_head_dim 64) x 61 layers x 2 B = 70,272 B a token, not
    # split by tp. A budget of 1,000 cells + 5 B: page 1 holds 1,000 tokens; page 64 holds 1,000 // 64 x 64 = 960
    budget = 70_272 * 1_000 + 5
    for gpu, tokens in ((H200, 1_000), (B200, 960)):
        engine = resolve_engine("sglang", "0.5.5", [])
        st = engine.settings(V3, gpu, DEP, REQ)
        assert engine.capacity_at(V3, DEP, st, budget, 32768, BF16).tokens == tokens
        # buffers carry one page more: (1,000 + 1) x 70,272 B and (960 + 64) x 70,272 B
        assert engine.k_size_gib(V3, DEP, st, tokens, BF16) == pytest.approx((tokens + st.page_size) * 70_272 / 2**30)


def test_the_launch_command_names_the_backend_and_its_page():
    from kvplan.engines.sglang.command import launch_args

    engine = resolve_engine("sglang", "0.5.5", ["attention_backend=flashmla"])
    res = engine.result(V3, H200, DEP, REQ)
    args = launch_args(engine, res.plan, V3, res.settings, H200)
    assert args[args.index("--attention-backend") + 1] == "flashmla"
    assert args[args.index("--page-size") + 1] == "64"
    plain = resolve_engine("sglang", "0.5.5", [])
    res = plain.result(V3, H200, DEP, REQ)
    assert "--page-size" not in launch_args(plain, res.plan, V3, res.settings, H200)  # fa3's page 1, SGLang's default


# A DeepseekV3ForCausalLM checkpoint that declares no quantization_config (a BF16 conversion, or Moonlight-16B-A3B,
# which shares the architecture): SGLang 0.5.5-0.5.10 set --quantization fp8 for it on capability 10
BF16_V3 = spec_from_config({
    "model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 1024,
    "num_attention_heads": 16, "num_key_value_heads": 16, "num_hidden_layers": 4, "vocab_size": 32000,
    "intermediate_size": 2048, "moe_intermediate_size": 256, "n_routed_experts": 8, "num_experts_per_tok": 2,
    "n_shared_experts": 1, "first_k_dense_replace": 1, "kv_lora_rank": 512, "q_lora_rank": 768, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"},
    "bf16-deepseek-v3")[0]


@pytest.mark.parametrize("version, gpu, fp8", [
    ("0.5.4", B200, False),  # the sm100 branch without the fp8 default
    ("0.5.5", B200, True), ("0.5.10", B200, True),
    ("0.5.11", B200, False),  # reads the safetensors first: no FP8 weights, kept bf16
    ("0.5.5", H200, False),  # capability 9: no rule
])
def test_sglang_serves_a_bf16_deepseek_v3_as_fp8_weights_on_capability_10(version, gpu, fp8):
    one = Deployment(1)
    plan = resolve_engine("sglang", version, []).result(BF16_V3, gpu, one, Request(context=4096)).plan
    assert (plan.request.weight_dtype == "fp8") == fp8
    assert any("default to fp8 for DeepSeek on sm100" in w.message for w in plan.warnings) == fp8
    if fp8:  # the plan --quantization fp8 gives, asked for by hand: the same weights; the KV cache stays bf16
        asked = resolve_engine("sglang", "0.5.4", []).result(BF16_V3, gpu, one,
                                                              Request(context=4096, weight_dtype="fp8")).plan
        assert plan.weight_bytes == asked.weight_bytes < resolve_engine("sglang", "0.5.4", []).result(
            BF16_V3, gpu, one, Request(context=4096)).plan.weight_bytes
        assert plan.kv_bytes_per_token == asked.kv_bytes_per_token


def test_the_fp8_default_leaves_a_named_dtype_and_a_quantized_checkpoint_alone():
    one = Deployment(1)
    named = resolve_engine("sglang", "0.5.5", []).result(BF16_V3, B200, one, Request(context=4096, weight_dtype="bf16"))
    assert named.plan.request.weight_dtype == "bf16"
    declared = resolve_engine("sglang", "0.5.5", []).result(V3, B200, DEP, REQ)  # its config declares fp8 itself
    assert declared.plan.request.weight_dtype is None


def test_a_profile_without_its_capability_says_what_the_page_rule_assumed():
    import dataclasses

    # B200's profile less its compute capability: the rules assume 8.0 (kvplan.hardware.facts.ASSUMED_CAPABILITY),
    # so no trtllm_mla default (page 1), and the plan says it assumed; Llama 3.1 8B's page reads no capability
    bare = dataclasses.replace(B200, compute_capability=None)
    plan = resolve_engine("sglang", "0.5.5", []).result(V3, bare, DEP, REQ)
    assert plan.settings["page_size"] == 1
    assert any("gives no compute_capability" in w.message for w in plan.plan.warnings)
    dense = resolve_engine("sglang", "0.5.5", []).result(find_in_catalog("llama-3.1-8b"), bare, DEP, REQ)
    assert not any("gives no compute_capability" in w.message for w in dense.plan.warnings)


def test_an_empty_backend_is_refused_not_read_as_none_named():
    # `--engine-opt attention_backend=` once planned SGLang's default backend and emitted no --attention-backend
    with pytest.raises(KvplanError, match="reads the page of"):
        _page(V3, B200, "0.5.5", ["attention_backend="])


def test_aiter_is_planned_by_name_with_the_fraction_it_cuts():
    # it was refused: SGLang multiplies mem_fraction_static by 0.85 under aiter once the context passes 8,192 tokens
    # (sgl-project/sglang#6564), which kvplan now plans (tests/test_sglang_aiter.py); aiter forces no page
    assert _page(V3, MI300X, "0.5.5", ["attention_backend=aiter"]) == (1, "")
