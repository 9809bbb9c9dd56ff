"""Speculative decoding (`--speculative`): the drafter's layers, weights and flags, against vLLM's rules.

Expected numbers are hand arithmetic from the model configs and vLLM v0.33.0's sources (cited in
kvplan/planning/speculative.py, kvplan/readers/mtp.py and docs/engines.md section 1.6), not kvplan's output.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.sources.catalog import find_in_catalog
from kvplan.cli import app
from kvplan.engines import resolve_engine
from kvplan.planning.deploy import Deployment
from kvplan.core.errors import KvplanError
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.plan import Request
from kvplan.planning.speculative import SpecRequest, apply, parse
from conftest import engine_figures

runner = CliRunner()
GIB = 2**30


def run(*args):
    return runner.invoke(app, list(args))


def catalog(name):
    spec = find_in_catalog(name)
    assert spec is not None, name
    return spec


# --- DeepSeek-V3: one MTP module, model.layers.61 -------------------------------------------------

# The checkpoint's layer 61 as vLLM builds it (deepseek_mtp.py: DeepseekV2DecoderLayer + enorm, hnorm,
# eh_proj, shared_head), with DeepSeek-V3's config (hidden 7168, 128 heads, q_lora_rank 1536,
# kv_lora_rank 512, qk_nope 128, qk_rope 64, v_head 128, 256 experts of width 2048, 1 shared expert,
# layer 61 >= first_k_dense_replace 3 so its MLP is MoE). Shapes [out, in]:
H, V = 7168, 129280
ATTENTION = {  # fp8 in the checkpoint, block scales of 128 x 128
    "q_a_proj": (1536, H), "q_b_proj": (128 * 192, 1536), "kv_a_proj_with_mqa": (576, H),
    "kv_b_proj": (128 * 256, 512), "o_proj": (H, 128 * 128),
}
EXPERT = {"gate_proj": (2048, H), "up_proj": (2048, H), "down_proj": (H, 2048)}  # x 256 routed + 1 shared
# 1536 x 7168 + 24576 x 1536 + 576 x 7168 + 32768 x 512 + 7168 x 16384
#   = 11,010,048 + 37,748,736 + 4,128,768 + 16,777,216 + 117,440,512 = 187,105,280
ATTENTION_PARAMS = 187_105_280
EXPERTS_PARAMS = 256 * 3 * 2048 * H  # 11,274,289,152
SHARED_PARAMS = 3 * 2048 * H  # 44,040,192
ROUTER_PARAMS = 256 * H + 256  # gate + e_score_correction_bias = 1,835,264
# 16-bit, whole on every rank: eh_proj 7168 x 14336 (nn.Linear) + enorm, hnorm, shared_head.norm,
# input/post-attention layernorms (5 x 7168) + q_a_layernorm 1536 + kv_a_layernorm 512
OTHER_PARAMS = H * 2 * H + 5 * H + 1536 + 512  # 102,798,336


def test_deepseek_v3_mtp_params_are_layer_61():
    spec = catalog("deepseek-v3")
    assert len(spec.layers) == 61 and len(spec.mtp_layers) == 1  # the MTP module is not a main layer
    p = spec.mtp_params
    assert p.attention == ATTENTION_PARAMS
    assert p.experts == EXPERTS_PARAMS and p.shared_experts == SHARED_PARAMS and p.router == ROUTER_PARAMS
    assert p.other == OTHER_PARAMS
    assert p.replicated == 1536 * H + 576 * H  # q_a and kv_a down-projections, whole on every rank
    assert p.embedding == 0 and p.lm_head == 0  # shared with the target (llm_base_proposer.py L1476-1585)
    # DeepSeek's README_WEIGHTS: "11.5B unique parameters" in the MTP module
    assert 11.5e9 <= p.total < 11.7e9


def _hand_fp8_bytes() -> int:
    """Layer 61's bytes as stored: fp8 weights + fp32 scale per 128 x 128 block, 16-bit elsewhere,
    e_score_correction_bias in fp32 (the embedding and head copies excluded: vLLM frees them)."""
    cdiv = lambda a, b: -(-a // b)  # noqa: E731
    fp8 = lambda o, i: o * i + cdiv(o, 128) * cdiv(i, 128) * 4  # noqa: E731
    total = sum(fp8(*s) for s in ATTENTION.values()) + 257 * sum(fp8(*s) for s in EXPERT.values())
    total += (256 * H) * 2 + 256 * 4 + OTHER_PARAMS * 2
    return total


def test_deepseek_v3_mtp_weight_bytes_match_the_checkpoint_shapes():
    info = apply(catalog("deepseek-v3"), SpecRequest("mtp")).speculative
    hand = _hand_fp8_bytes()  # 11,717,6xx,xxx: kvplan's block scales are lumped per role
    assert abs(info.weight_bytes - hand) / hand < 1e-4


def test_deepseek_v3_mtp_vllm_pool_one_more_mla_layer():
    """vLLM 0.33, H200, tp 8, 32k, --kv-cache-memory 40 GiB: the MTP layer's MLAAttentionSpec equals the
    target's (is_draft excluded from equality), so one group of 61 + 1 layers; page = 64 x 576 x 2 B per layer."""
    eng = resolve_engine("vllm")
    h200, dep = find_gpu("h200"), Deployment(8, 1)
    req = Request(context=32768, kv_cache_memory_bytes=40 * GIB)
    base = eng.result(catalog("deepseek-v3"), h200, dep, req)
    spec = eng.result(apply(catalog("deepseek-v3"), SpecRequest("mtp")), h200, dep, req)
    lines = engine_figures(spec)
    assert lines["groups x layers per group"] == (1, 62)
    assert lines["bytes per block id"] == 64 * 62 * 576 * 2  # 4,571,136
    blocks = 40 * GIB // (64 * 62 * 576 * 2)  # 9,395
    assert spec.capacity.blocks == blocks
    # the lookahead slot is capped at max_model_len (kv_cache_manager.py L551-552): 32768 / 64 blocks
    assert lines["blocks per 32,768-token request"] == 512
    assert spec.plan.max_concurrency == blocks // 512  # 18
    assert base.capacity.blocks == 40 * GIB // (64 * 61 * 1152)  # 9,549: without the flag, 61 layers
    assert spec.plan.kv_bytes_per_token_per_gpu == 62 * 576 * 2  # 71,424 B (61 x 1,152 + 1,152)


def test_mtp_weights_only_with_the_flag():
    eng = resolve_engine(None)
    h200, dep, req = find_gpu("h200"), Deployment(8, 1), Request(context=32768)
    plain = eng.plan(catalog("deepseek-v3"), h200, dep, req)
    mtp = eng.plan(apply(catalog("deepseek-v3"), SpecRequest("mtp")), h200, dep, req)
    hand = _hand_fp8_bytes()
    assert abs((mtp.weight_bytes - plain.weight_bytes) - hand) / hand < 1e-4
    # per rank: the routed and shared experts and most of attention split over 8, the rest whole
    assert mtp.weight_bytes_per_gpu - plain.weight_bytes_per_gpu < hand / 6


def test_qwen3_next_mtp_is_a_full_attention_layer():
    """qwen3_next_mtp.py: num_nextn_predict_layers absent -> 1 (L63), a full_attention decoder layer (L90-95):
    2 KV heads x 256 x 2 (K, V) x 2 B = 2,048 B per token on one GPU."""
    spec = catalog("qwen3-next-80b-a3b-thinking")
    assert [la.kind for la in spec.mtp_layers] == ["full"]
    assert spec.mtp_layers[0].token_bytes(_bf16(), 1) == 2 * 256 * 2 * 2
    p = spec.mtp_params
    assert p.mlp == 2 * 2048 * 2048  # fc: ColumnParallelLinear(2H, H), split by tp (L79-87)
    assert p.experts == 512 * 3 * 2048 * 512  # 512 experts of width 512


def _bf16():
    from kvplan.core.dtypes import canonical_kv_dtype

    return canonical_kv_dtype("bf16", "bf16")


def test_models_without_mtp_have_none():
    for name in ("llama-3.1-8b", "gpt-oss-120b", "qwen3-32b", "deepseek-v2-lite"):
        spec = catalog(name)
        assert spec.mtp_layers == () and spec.mtp_params is None
    with pytest.raises(KvplanError, match="no multi-token-prediction layers"):
        apply(catalog("gpt-oss-120b"), SpecRequest("mtp"))


# --- a draft model ------------------------------------------------------------------------------

def test_draft_model_llama_70b_with_1b_draft():
    """Llama-3.1-70B-Instruct (80 layers, 8 KV heads x 128) with Llama-3.2-1B-Instruct (16 layers, 8 KV heads x
    64, same 128,256 vocabulary), tp 4, bf16, --kv-cache-memory 20 GiB, 8k.

    Per GPU per token: 80 x 2 x (8/4) x 128 x 2 B = 81,920 plus the draft's 16 x 2 x (8/4) x 64 x 2 B = 8,192
    -> 90,112 B. All full attention, so one group (UniformTypeKVCacheSpecs): a block id is 16 x 90,112 =
    1,441,792 B; 20 GiB // that = 14,894 blocks; 8192 / 16 = 512 blocks per request -> 29 requests.
    Weights: the draft keeps its own (draft_model.py L115-122): 1,235,814,400 parameters x 2 B more."""
    eng = resolve_engine("vllm")
    target = catalog("llama-3.1-70b-instruct")
    both = apply(target, SpecRequest("draft_model", 4, "llama-3.2-1b-instruct"), catalog)
    req = Request(context=8192, kv_cache_memory_bytes=20 * GIB)
    res = eng.result(both, find_gpu("h100"), Deployment(4, 1), req)
    plain = eng.result(target, find_gpu("h100"), Deployment(4, 1), req)
    lines = engine_figures(res)
    assert res.plan.kv_bytes_per_token_per_gpu == 81_920 + 8_192
    assert lines["bytes per block id"] == 1_441_792
    assert res.capacity.blocks == 20 * GIB // 1_441_792 == 14_894
    assert res.plan.max_concurrency == 14_894 // 512 == 29
    # and on each of the 4 GPUs vLLM's "Model loading took" counts the caching allocator's unsplit tails of the
    # draft's tensors (kvplan.core.caching_allocator, tests/test_caching_allocator.py): its embedding 128,256 / 4 x
    # 2,048 x 2 B = 125.25 MiB keeps 0.75 MiB of its 126 MiB segment, and 5 of its 16 down projections (8 MiB) take
    # a 9 MiB remainder of a 20 MiB segment whole: 786,432 + 5 x 1,048,576 = 6,029,312 B.
    assert res.plan.weight_bytes - plain.plan.weight_bytes == 1_235_814_400 * 2 + 4 * 6_029_312
    assert both.speculative.config() == {"method": "draft_model", "num_speculative_tokens": 4,
                                         "model": "meta-llama/Llama-3.2-1B-Instruct"}


def test_draft_with_another_vocabulary_is_refused():
    with pytest.raises(KvplanError, match="vocabulary"):
        apply(catalog("llama-3.1-70b-instruct"), SpecRequest("draft_model", 3, "qwen3-0.6b"), catalog)


# --- the flag -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, want", [
    ("mtp", SpecRequest("mtp")), ("mtp:2", SpecRequest("mtp", 2)), ("MTP:1", SpecRequest("mtp", 1)),
    ("draft:llama-3.2-1b-instruct:4", SpecRequest("draft_model", 4, "llama-3.2-1b-instruct")),
    ("draft:./my/model:3", SpecRequest("draft_model", 3, "./my/model")),
    ("ngram:3", SpecRequest("ngram", 3)),
])
def test_parse(text, want):
    assert parse(text) == want


@pytest.mark.parametrize("text, words", [
    ("eagle", "not modelled"), ("eagle3:3", "not modelled"), ("draft:llama-3.2-1b", "needs the draft model and N"),
    ("mtp:x", "must be an integer"), ("mtp:0", "between 1 and"), ("ngram", "needs N"), ("lookahead", "expects"),
])
def test_parse_refusals(text, words):
    with pytest.raises(KvplanError, match=words):
        parse(text)


def test_mtp_tokens_must_divide():
    # one MTP layer: any N; vLLM's divisibility rule only bites with more layers (config/speculative.py)
    assert apply(catalog("deepseek-v3"), SpecRequest("mtp", 3)).speculative.num_speculative_tokens == 3
    import dataclasses

    from kvplan.model.layers import FullAttention
    from kvplan.model.spec import ParamCounts

    two = dataclasses.replace(catalog("gpt-oss-20b"), mtp_layers=(FullAttention(8, 64),) * 2, mtp_params=ParamCounts())
    assert apply(two, SpecRequest("mtp", 4)).speculative.num_speculative_tokens == 4  # 4 % 2 == 0
    with pytest.raises(KvplanError, match="divisible"):  # 3 > 2 and 3 % 2 != 0
        apply(two, SpecRequest("mtp", 3))


def test_cli_fit_mtp_json_and_emit(kvplan_home):
    r = run("fit", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--ctx", "32k", "--speculative", "mtp:2",
            "--emit", "vllm", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    s = out["speculative"]
    assert s["method"] == "mtp" and s["num_speculative_tokens"] == 2 and s["layers"] == 1
    assert s["layer_kinds"] == [{"kind": "mla", "layers": 1, "kv_bytes_per_token": 8 * 1152}]
    assert "--speculative-config" in out["emit"]
    assert '{"method":"mtp","num_speculative_tokens":2}' in out["emit"]
    plain = json.loads(run("fit", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--ctx", "32k", "--json").stdout)
    assert plain["speculative"] is None
    assert out["kv_bytes_per_token"] - plain["kv_bytes_per_token"] == 8 * 1152  # every rank keeps the latent


def test_cli_explain_names_the_drafter(kvplan_home):
    r = run("fit", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--ctx", "32k", "--speculative", "mtp", "--explain")
    assert r.exit_code == 0, r.output
    assert "62 MLA layers" in r.stdout and "the last 1 are MTP layer(s): 1,152 B/token per GPU" in r.stdout


@pytest.mark.parametrize("args, words", [
    (("deepseek-v3", "--tp", "8", "--engine", "sglang"), "--speculative with --engine sglang"),
    (("deepseek-v3", "--tp", "8", "--engine", "trtllm"), "--speculative with --engine trtllm"),
    (("deepseek-v3", "--tp", "4", "--pp", "2"), "last pipeline stage"),
    (("llama-3.1-8b",), "no multi-token-prediction layers"),
])
def test_cli_refusals(kvplan_home, args, words):
    r = run("fit", *args, "--gpu", "h200", "--ctx", "8k", "--speculative", "mtp")
    assert r.exit_code == 2, r.output
    assert words in r.stderr and r.stderr.startswith("Error: ") and r.stdout == ""


def test_cli_eagle_refused_before_work(kvplan_home):
    r = run("fit", "llama-3.1-8b", "--gpu", "h100", "--speculative", "eagle3:3")
    assert r.exit_code == 2 and "eagle3: not modelled" in r.stderr and r.stdout == ""


def test_cli_ngram_costs_nothing(kvplan_home):
    base = json.loads(run("fit", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--ctx", "8k", "--json", "--emit",
                          "vllm").stdout)  # (vLLM's weights as loaded: its RoPE table included)
    r = run("fit", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--ctx", "8k", "--json", "--speculative", "ngram:3",
            "--emit", "vllm")
    out = json.loads(r.stdout)
    assert out["kv_bytes_per_token"] == base["kv_bytes_per_token"] and out["weight_bytes"] == base["weight_bytes"]
    assert '"method":"ngram","num_speculative_tokens":3' in out["emit"]


def test_cli_sweep_with_mtp(kvplan_home):
    r = run("sweep", "-m", "deepseek-v3", "-c", "32k", "-g", "h200", "--gpu-counts", "8", "--json",
            "--speculative", "mtp")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    plans = rows["plans"] if isinstance(rows, dict) else rows
    assert plans[0]["kv_bytes_per_token"] == 8 * 62 * 1152
    assert plans[0]["speculative"] == "mtp:1"  # a flat column in CSV and JSON rows


# --- Hub checkpoints: the MTP tensors are not the served model's weights -------------------------

def _metas(tensors: dict[str, tuple[str, list[int]]]):
    from types import SimpleNamespace

    bits = {"BF16": 16, "F8_E4M3": 8, "F32": 32}
    out, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = 1
        for d in shape:
            n *= d
        size = n * bits[dtype] // 8
        out[name] = SimpleNamespace(dtype=dtype, shape=shape, data_offsets=[offset, offset + size])
        offset += size
    return {"model.safetensors": SimpleNamespace(tensors=out)}


def test_hub_weights_tell_mtp_layers_apart():
    from kvplan.sources.hub_headers import sum_headers

    w = sum_headers(_metas({
        "model.embed_tokens.weight": ("BF16", [100, 8]),  # 1,600 B
        "model.layers.0.mlp.weight": ("F8_E4M3", [8, 8]),  # 64 B
        "model.layers.1.mlp.weight": ("F8_E4M3", [8, 8]),  # 64 B
        "model.layers.2.eh_proj.weight": ("BF16", [8, 16]),  # 256 B: the MTP module (layer num_hidden_layers)
        "model.layers.2.embed_tokens.weight": ("BF16", [100, 8]),  # 1,600 B: its copy of the embedding
        "mtp.fc.weight": ("BF16", [8, 16]),  # 256 B: Qwen3-Next's spelling
    }))
    assert w.total_bytes == 1600 + 64 + 64 + 256 + 1600 + 256
    assert w.mtp_bytes(2) == 256 + 1600 + 256  # layers 2.. and mtp.*
    assert w.mtp_bytes(3) == 256  # a 3-layer model: layer 2 is a main layer


def test_hub_model_without_flag_drops_the_mtp_tensors(monkeypatch):
    """A DeepSeek-V3-shaped Hub checkpoint: vLLM skips model.layers.61 when MTP is off (deepseek_v2.py
    load_weights, get_spec_layer_idx_from_weight_name), so the model's bytes exclude it."""
    from kvplan.sources import hub
    from kvplan.sources import resolve
    from kvplan.sources.hub import HubConfig
    from kvplan.sources.hub_headers import sum_headers

    config = {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 64,
              "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 100,
              "intermediate_size": 128, "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2,
              "n_shared_experts": 1, "first_k_dense_replace": 1, "kv_lora_rank": 16, "q_lora_rank": 32,
              "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_nextn_predict_layers": 1,
              "max_position_embeddings": 4096}
    weights = sum_headers(_metas({"model.layers.0.w": ("BF16", [64, 64]), "model.layers.1.w": ("BF16", [64, 64]),
                                         "model.layers.2.w": ("BF16", [64, 32])}))
    monkeypatch.setattr(hub, "fetch_config", lambda *a, **k: HubConfig("org/ds", None, "c" * 40, config, False, None))
    monkeypatch.setattr(hub, "fetch_weights", lambda *a, **k: weights)
    monkeypatch.setattr(hub, "fetch_quant_file", lambda *a, **k: None)  # no hf_quant_config.json
    got = resolve.resolve_model("org/ds")
    assert got.spec.checkpoint_bytes == 2 * 64 * 64 * 2  # layer 2 (4,096 B) is the MTP module
    assert any("4,096 B of multi-token-prediction layers not counted" in n for n in got.notices)
    assert len(got.spec.mtp_layers) == 1


def test_vllm_before_0_20_keeps_the_mtp_head_copy():
    """vLLM 0.11.0's EAGLE/MTP loader shares only the drafter's `lm_head` (v1/spec_decode/eagle.py L883-889); the
    MTP layer computes logits with its own shared_head.head (deepseek_mtp.py L143), a ParallelLMHead of
    129,280 x 7,168 bf16 = 1,853,358,080 B, split over tp 8 = 231,669,760 B per GPU. 0.33.0 replaces it by
    the target's head (llm_base_proposer.py L1560-1585). 0.33.0 also loads under the 0.21+ 20 MiB split limit
    (kvplan.engines.vllm.load_split): the rank's embedding and LM head, 16,160 x 7,168 x 2 B = 231,669,760 B
    (220.94 MiB) each, keep their whole 222 MiB segments, 1,114,112 B over each, which the default rule split off."""
    h200, dep, req = find_gpu("h200"), Deployment(8, 1), Request(context=32768, kv_cache_memory_bytes=40 * GIB)
    spec = apply(catalog("deepseek-v3"), SpecRequest("mtp"))
    old = resolve_engine("vllm", "0.11.0").result(spec, h200, dep, req).plan
    new = resolve_engine("vllm", "0.33.0").result(spec, h200, dep, req).plan
    tails = 2 * (222 * 2**20 - 16_160 * 7_168 * 2)  # 2 x 1,114,112 B a GPU
    assert old.weight_bytes - new.weight_bytes == 129_280 * 7_168 * 2 - 8 * tails
    assert old.weight_bytes_per_gpu - new.weight_bytes_per_gpu == 129_280 * 7_168 * 2 // 8 - tails


def test_cli_draft_model_needs_vllm_0_15(kvplan_home):
    r = run("fit", "llama-3.1-70b-instruct", "--gpu", "h100", "--tp", "4", "--ctx", "8k", "--engine", "vllm",
            "--engine-version", "0.11.0", "--speculative", "draft:llama-3.2-1b-instruct:4")
    assert r.exit_code == 2 and "serves draft models from 0.15.0" in r.stderr and r.stdout == ""
    ok = run("fit", "llama-3.1-70b-instruct", "--gpu", "h100", "--tp", "4", "--ctx", "8k", "--emit", "vllm",
             "--speculative", "draft:llama-3.2-1b-instruct:4")
    assert ok.exit_code == 0, ok.output
    assert ('--speculative-config \'{"method":"draft_model","num_speculative_tokens":4,'
            '"model":"meta-llama/Llama-3.2-1B-Instruct"}\'') in ok.stdout


def test_vllm_mamba_states_keep_a_page_per_speculative_token():
    """Qwen3-Next (12 full-attention + 36 Gated DeltaNet layers) with its MTP layer, vLLM 0.33: MambaSpec's
    num_speculative_blocks = num_speculative_tokens (mamba/abstract.py L86), so a request holds 1 + 1 pages
    per state group (kv_cache_interface.py L1141). 13 full layers: group size min(13, 36) = 13, the states
    make cdiv(36, 13) = 3 groups -> 3 x 2 state blocks; without the drafter 3 x 1 (36 / 12)."""
    eng = resolve_engine("vllm")
    req = Request(context=32768, kv_cache_memory_bytes=40 * GIB)
    spec = catalog("qwen3-next-80b-a3b-thinking")
    plain = eng.result(spec, find_gpu("h200"), Deployment(1, 1), req).capacity
    mtp = eng.result(apply(spec, SpecRequest("mtp")), find_gpu("h200"), Deployment(1, 1), req).capacity
    line = lambda cap, label: engine_figures(cap)[label]  # noqa: E731
    assert line(plain, "groups x layers per group") == (4, 12) and line(mtp, "groups x layers per group") == (4, 13)
    full = -(-32768 // plain.block_size)  # the attention block is the same: one layer's page decides it
    assert plain.block_size == mtp.block_size
    assert line(plain, "blocks per 32,768-token request") == full + 3 * 1
    assert line(mtp, "blocks per 32,768-token request") == full + 3 * 2


def test_vllm_multi_module_mtp_retains_window_tokens():
    """vLLM 0.33 keeps num_speculative_tokens - 1 extra tokens below every sliding window when more than one
    MTP module drafts (kv_cache_planning.py L1634-1641, SlidingWindowSpec.max_admission_blocks_per_request).
    gpt-oss-20b's window (128, block 16) with three MTP modules (made up: no such checkpoint) and mtp:3 on an
    H200, max_num_batched_tokens 8,200, async scheduling -> T = 2 x 8,200 = 16,400 in flight:
    without the drafter cdiv(127 + 16,400, 16) + 1 = 1,033 + 1 = 1,034 blocks; with it 2 more tokens,
    cdiv(16,529, 16) + 1 = 1,034 + 1 = 1,035."""
    import dataclasses

    from kvplan.model.layers import FullAttention
    from kvplan.model.spec import ParamCounts

    base = catalog("gpt-oss-20b")
    fake = dataclasses.replace(base, mtp_layers=(FullAttention(8, 64),) * 3, mtp_params=ParamCounts())
    spec = apply(fake, SpecRequest("mtp", 3))
    eng = resolve_engine("vllm", None, ["max_num_batched_tokens=8200"])
    req = Request(context=131072, kv_cache_memory_bytes=40 * GIB)
    st = eng.settings(spec, find_gpu("h200"), Deployment(1, 1), req)
    assert st.in_flight_tokens == 16_400 and st.swa_retained == 2
    window = next(la for la in base.layers if la.kind == "sliding")
    assert eng.rules(st).tokens_allocated(window, 131072, 16) == 1_035 * 16
    plain_st = eng.settings(base, find_gpu("h200"), Deployment(1, 1), req)
    assert plain_st.swa_retained == 0
    assert eng.rules(plain_st).tokens_allocated(window, 131072, 16) == 1_034 * 16
    old = resolve_engine("vllm", "0.25.0", ["max_num_batched_tokens=8200"])
    assert old.settings(spec, find_gpu("h200"), Deployment(1, 1), req).swa_retained == 0  # absent in 0.25.0


def test_check_log_plans_the_drafter_its_log_names(kvplan_home, tmp_path):
    """A real vLLM 0.19.0 log of Llama-3.1-8B (RedHatAI's W8A8, fp16) on an H100 (llm-d, training split), with its
    `speculative_config=None` replaced by the SpeculativeConfig line vLLM prints for a draft model
    (config/speculative.py L2196-2210), so the numbers below test the plumbing, not a measured run. From the printed
    64.6 GiB, one block id is 16 x (32 x 2 x 8 x 128 + 16 x 2 x 8 x 64) x 2 B = 2,621,440 B -> 26,460 blocks ->
    423,360 tokens."""
    from conftest import REPO

    src = REPO / "tests/fixtures/logs/corpus/llmd-w8a8-redhatai-llam-h100-80gb-tp1pp1dp1-8192-dtf16.log"
    line = "SpeculativeConfig(method='draft_model', model='meta-llama/Llama-3.2-1B-Instruct', num_spec_tokens=4)"
    log = tmp_path / "draft.log"
    log.write_text(src.read_text().replace("speculative_config=None", f"speculative_config={line}"))
    r = run("check-log", str(log), "--model", "llama-3.1-8b-instruct", "--json")  # the log names RedHatAI's repo
    assert r.exit_code == 0, r.output
    assert "planned with --speculative draft:meta-llama/Llama-3.2-1B-Instruct:4" in r.stderr
    row = next(x for x in json.loads(r.stdout)["rows"] if x["quantity"].startswith("KV cache tokens"))
    lo, hi = (int(v.replace(",", "")) for v in row["predicted"].split(" .. "))
    assert lo <= int(64.6 * 2**30) // 2_621_440 * 16 == 423_360 <= hi


def test_an_unreadable_mtp_key_does_not_refuse_the_model():
    """num_nextn_predict_layers sizes nothing unless --speculative mtp asks: a broken value is a note."""
    from conftest import REPO

    from kvplan.readers.configs import spec_from_config

    src = REPO.parent / "shared" / "configs" / "deepseek-ai__DeepSeek-V3.json"
    if not src.exists():
        pytest.skip("../shared/configs is not here (a user's clone has no ../shared)")
    cfg = json.loads(src.read_text())
    cfg["num_nextn_predict_layers"] = "one"
    spec, notes = spec_from_config(cfg, "ds")
    assert len(spec.layers) == 61 and spec.mtp_layers == ()
    assert any("multi-token-prediction layers not read" in n for n in notes)
    cfg["num_nextn_predict_layers"] = 2  # two modules: twice layer 61's parameters
    spec, _ = spec_from_config(cfg, "ds")
    layer_61 = ATTENTION_PARAMS + EXPERTS_PARAMS + SHARED_PARAMS + ROUTER_PARAMS + OTHER_PARAMS  # 11,610,068,224
    assert len(spec.mtp_layers) == 2 and spec.mtp_params.total == 2 * layer_61
