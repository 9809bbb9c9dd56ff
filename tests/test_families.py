"""Newer architectures read exactly as vLLM allocates them: KV bytes per token and per-sequence state.

Expected values are written out from vLLM's own source, not from kvplan:
  * attention: 2 (K and V) x KV heads x head_dim x 2 B (bf16) per token per attention layer
    (vllm/v1/kv_cache_interface.py FullAttentionSpec.page_size_bytes / block_size);
  * states: vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator
    (mamba1_state_shape, mamba2_state_shape, short_conv_state_shape, gated_delta_net_state_shape),
    every element in the model's dtype (bf16, 2 B) when mamba_cache_dtype is auto.
Parameter counts are checked against the model cards, and against transformers' own model classes
built on the meta device when transformers is installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import meta_param_count

from kvplan.readers.configs import spec_from_config
from kvplan.core.dtypes import BF16
from kvplan.planning.profile import kv_profile

REPO = Path(__file__).resolve().parents[1]
FIX = Path(__file__).parent / "fixtures" / "families"
EXTRA = REPO / "scripts" / "catalog_extra"


def load(path: Path) -> dict:
    return json.loads(path.read_text())  # Python's json reads Infinity, as real configs need


def profile(spec, tp: int = 1):
    return kv_profile(spec.layers, tp, BF16, BF16, 1)


def state_bytes(spec, tp: int = 1) -> int:
    """Per-sequence fixed state on one rank: a 0-token sequence holds only states."""
    return profile(spec, tp).sequence_bytes(0, paged=False)


def kinds(spec) -> dict:
    out: dict = {}
    for layer in spec.layers:
        out[layer.kind] = out.get(layer.kind, 0) + 1
    return out


# file: (layer kinds, KV bytes/token at tp 1, state bytes/sequence at tp 1, state at tp 2, params)
CASES = {
    # Mamba-1 130m: mamba1_state_shape = conv (1536, 4 - 1) + ssm (1536, 16) per layer, 24 layers.
    FIX / "mamba-130m.json": ({"state": 24}, 0, 24 * (1536 * 3 + 1536 * 16) * 2,
                              24 * (768 * 3 + 768 * 16) * 2, 129_135_360),
    # Mamba-2 Codestral: conv (3, 8192 + 2 x 8 x 128) + ssm (128, 64, 128) per layer, 64 layers;
    # tp 2: n_groups 8 divides, everything halves.
    FIX / "mamba-codestral-7b.json": ({"state": 64}, 0, 64 * (3 * (8192 + 2 * 8 * 128) + 128 * 64 * 128) * 2,
                                      64 * (3 * (8192 + 2 * 8 * 128) + 128 * 64 * 128), 7_285_403_648),
    # LFM2-1.2B: 6 attention layers x 2 x 8 x 64; 10 short-conv layers of (3 - 1) x 2048.
    # tp 2: short_conv_state_shape divides hidden by tp.
    FIX / "lfm2-1.2b.json": ({"full": 6, "state": 10}, 6 * 2 * 8 * 64 * 2, 10 * 2 * 2048 * 2,
                             10 * 2 * 1024 * 2, 1_170_340_608),
    # Granite 4.0 H Small: 4 attention layers x 2 x 8 x 128; 36 Mamba-2 layers of
    # conv 3 x (8192 + 2 x 1 x 128) + ssm 128 x 64 x 128. tp 2: n_groups 1 is replicated up to 2
    # (extra_groups_for_head_shards), so conv 3 x (8192 + 2 x 2 x 128) / 2 and ssm halves.
    FIX / "granite-4.0-h-small.json": ({"full": 4, "state": 36}, 4 * 2 * 8 * 128 * 2,
                                       36 * (3 * (8192 + 2 * 128) + 128 * 64 * 128) * 2,
                                       36 * (3 * (8192 + 4 * 128) // 2 + 64 * 64 * 128) * 2, None),
    # Qwen3.5-397B-A17B: 15 full layers x 2 x 2 KV heads x 256; 45 Gated DeltaNet layers of
    # conv 3 x (2 x 16 x 128 + 64 x 128) in bf16 + ssm 64 x 128 x 128 (gated_delta_net_state_shape) in the
    # config's mamba_ssm_dtype float32 (huggingface.co/Qwen/Qwen3.5-397B-A17B config.json as
    # ai-dynamo/aiconfigurator@095f58a5 vendors it; vLLM's Qwen3_5ForConditionalGenerationConfig hook):
    # 45 x (36,864 x 2 + 1,048,576 x 4) = 192,061,440 B; tp 2 halves both: 96,030,720 B
    EXTRA / "Qwen__Qwen3.5-397B-A17B.json": ({"full": 15, "state": 45}, 15 * 2 * 2 * 256 * 2,
                                             45 * (3 * (2 * 16 * 128 + 64 * 128) * 2 + 64 * 128 * 128 * 4),
                                             45 * (3 * (2 * 16 * 128 + 64 * 128) + 64 * 128 * 128 * 2), None),
    # Nemotron Super 49B: 49 blocks with attention, n_heads_in_group 8 -> 64 / 8 = 8 KV heads x 128;
    # 31 attention no-ops cache nothing. Parameters: the Hub page's "49.9B params" (no transformers
    # class to build on the meta device), checked to its 3 significant figures below.
    EXTRA / "nvidia__Llama-3_3-Nemotron-Super-49B-v1.json": ({"full": 49, "none": 31}, 49 * 2 * 8 * 128 * 2, 0, 0,
                                                             49.9e9),
    # Nemotron Ultra 253B: 64 attention blocks, 128 / 16 = 8 KV heads x 128; 98 without attention.
    EXTRA / "nvidia__Llama-3_1-Nemotron-Ultra-253B-v1.json": ({"full": 64, "none": 98}, 64 * 2 * 8 * 128 * 2, 0, 0,
                                                              None),
    # Gemma 4 31B: 50 sliding layers of 16 KV heads x 256 (window 1024) and 10 global layers of
    # num_global_key_value_heads 4 x global_head_dim 512; K = V still caches both (gemma4.py).
    # Growth per token: the 10 global layers, 10 x 2 x 4 x 512 x 2 B.
    FIX / "gemma-4-31b.json": ({"sliding": 50, "full": 10}, 10 * 2 * 4 * 512 * 2, 0, 0, None),
    # Gemma 4 with the last 10 of 30 layers sharing KV: layers 0-19 cache (layer types of period 6:
    # 4 global at 5, 11, 17 and ... 19 is sliding) -> globals 5, 11, 17 own a cache: 3 x 2 x 4 x 512 x 2.
    FIX / "gemma-4-shared-kv.json": ({"sliding": 17, "full": 3, "none": 10}, 3 * 2 * 4 * 512 * 2, 0, 0, None),
    # MiniMax-M1: attn_type_list 0 = lightning, 1 = softmax: 10 softmax layers x 2 x 8 x 128 per token;
    # 70 lightning layers of linear_attention_state_shape (64 / tp, 128, 128), bf16.
    # Parameters: the model card's "456 billion", to its 3 figures (transformers 5.24 has no minimax_m1).
    FIX / "minimax-m1.json": ({"full": 10, "state": 70}, 10 * 2 * 8 * 128 * 2, 70 * 64 * 128 * 128 * 2,
                              70 * 32 * 128 * 128 * 2, 456e9),
    # Jamba v0.1: attention at layers 4, 12, 20, 28 (period 8, offset 4): 4 x 2 x 8 x 128 per token;
    # 28 Mamba-1 layers of mamba1_state_shape: conv (8192, 4 - 1) + ssm (8192, 16), 8192 = 2 x 4096.
    FIX / "jamba-v0.1.json": ({"full": 4, "state": 28}, 4 * 2 * 8 * 128 * 2, 28 * (8192 * 3 + 8192 * 16) * 2,
                              28 * (4096 * 3 + 4096 * 16) * 2, 51_570_323_328),
    # Nemotron 3 Nano 30B-A3B: 6 attention layers x 2 x 2 KV heads x 128 per token; 23 Mamba-2 layers of
    # conv 3 x (4096 + 2 x 8 x 128) in bf16 and ssm 64 x 64 x 128 in float32: the config's
    # mamba_ssm_cache_dtype, which vLLM's NemotronHForCausalLMConfig copies into the cache config.
    # 23 MoE blocks cache nothing. 31,577,937,344 parameters (transformers' model of this config).
    FIX / "nemotron-3-nano-30b-a3b.json": ({"full": 6, "state": 23, "none": 23}, 6 * 2 * 2 * 128 * 2,
                                           23 * (3 * 6144 * 2 + 64 * 64 * 128 * 4),
                                           23 * (3 * 6144 // 2 * 2 + 32 * 64 * 128 * 4), 31_577_937_344),
    # Kimi Linear (KimiLinearConfig defaults): 6 MLA layers x (512 + 64) values per token; 21 KDA layers of
    # kda_state_shape: conv (4 - 1) x 3 x 32 x 128 in bf16 and 32 x 128 x 128 in float32 (kda_state_dtype).
    FIX / "kimi-linear-default.json": ({"mla": 6, "state": 21}, 6 * 576 * 2,
                                       21 * (3 * 3 * 4096 * 2 + 32 * 128 * 128 * 4),
                                       21 * (3 * 3 * 2048 * 2 + 16 * 128 * 128 * 4), 49_133_074_464),
}


@pytest.mark.parametrize("path", sorted(CASES), ids=lambda p: p.stem)
def test_family_reads_exactly(path):
    kind_counts, kv, state1, state2, params = CASES[path]
    spec, _ = spec_from_config(load(path), path.stem)
    assert kinds(spec) == kind_counts
    assert profile(spec).growth_bytes_per_token() == kv
    assert state_bytes(spec, 1) == state1
    assert state_bytes(spec, 2) == state2
    if isinstance(params, float):  # a published rounded count: equal to its 3 significant figures
        assert float(f"{spec.params.total:.3g}") == params, spec.params.total
    elif params is not None:
        assert spec.params.total == params


def test_nemotron_h_real_config_with_infinity_reads(tmp_path):
    # The published Nemotron-H config carries "time_step_limit": [0.0, Infinity]; it sizes nothing.
    src = REPO.parent / "shared" / "configs" / "nvidia__Nemotron-H-56B-Base-8K.json"
    if not src.is_file():
        pytest.skip("../shared/configs is not here (a user's clone has no ../shared)")
    assert "Infinity" in src.read_text()
    from typer.testing import CliRunner

    from kvplan.cli import app

    r = CliRunner().invoke(app, ["fit", str(src), "--gpu", "h200", "--gpus", "1", "--ctx", "8k", "--json"])
    assert r.exit_code == 0, r.output
    # 10 attention layers x 2 x 8 KV heads x 128 x 2 B
    assert json.loads(r.stdout)["kv_bytes_per_token"] == 10 * 2 * 8 * 128 * 2


@pytest.mark.parametrize("path", [FIX / "mamba-130m.json", FIX / "mamba-codestral-7b.json", FIX / "lfm2-1.2b.json",
                                  FIX / "granite-4.0-h-small.json", EXTRA / "Qwen__Qwen3.5-397B-A17B.json",
                                  FIX / "gemma-4-31b.json", FIX / "gemma-4-shared-kv.json", FIX / "jamba-v0.1.json",
                                  FIX / "nemotron-3-nano-30b-a3b.json", FIX / "kimi-linear-default.json"],
                         ids=lambda p: p.stem)
def test_parameters_equal_transformers_meta_model(path):
    cfg = load(path)
    spec, _ = spec_from_config(cfg, path.stem)
    # AutoModelForCausalLM builds the language model alone; a declared tower (Qwen3.5's vision_config)
    # is counted apart (kvplan.readers.towers.vision, tests/test_towers.py)
    assert spec.params.total - spec.params.vision == meta_param_count(cfg)


def test_nemotron_nas_is_no_longer_read_with_the_standard_keys():
    # Its top-level num_key_value_heads (8) on all 80 layers would be 80 x 4096 B: 1.6x too much.
    spec, notices = spec_from_config(load(EXTRA / "nvidia__Llama-3_3-Nemotron-Super-49B-v1.json"), "s")
    assert not any("standard keys" in n for n in notices)
    assert profile(spec).growth_bytes_per_token() != 80 * 2 * 8 * 128 * 2


def test_gemma4_local_layers_keep_their_own_shape_and_window():
    spec, _ = spec_from_config(load(FIX / "gemma-4-31b.json"), "g")
    # every caching layer's token: 50 x 2 x 16 x 256 x 2 B (local) + 10 x 2 x 4 x 512 x 2 B (global)
    assert profile(spec).slot_bytes_per_token() == 50 * 2 * 16 * 256 * 2 + 10 * 2 * 4 * 512 * 2
    # at 8192 tokens the local layers hold only their 1024-token window
    assert profile(spec).sequence_bytes(8192, paged=False) == 50 * 16384 * 1024 + 10 * 8192 * 8192


def test_fit_json_separates_state_from_growth_and_breaks_down_by_kind(kvplan_home):
    from typer.testing import CliRunner

    from kvplan.cli import app

    r = CliRunner().invoke(app, ["fit", str(FIX / "lfm2-1.2b.json"), "--gpu", "l4", "--ctx", "4k", "--gpus", "2",
                                 "--json"])
    assert r.exit_code == 0, r.output
    p = json.loads(r.stdout)
    # tp 2: each rank keeps half of every short-conv state, 10 layers x (3 - 1) x 2048 / 2 x 2 B
    assert p["state_bytes_per_sequence_per_gpu"] == 10 * 2 * 1024 * 2
    assert p["state_bytes_per_sequence"] == 10 * 2 * 2048 * 2
    kinds = {k["kind"]: k for k in p["layer_kinds"]}
    assert kinds["state"]["layers"] == 10 and kinds["full"]["layers"] == 6
    # 6 attention layers x 2 x 8 KV heads x 64 x 2 B per token, over both ranks (4 heads each)
    assert kinds["full"]["kv_bytes_per_token"] == p["kv_bytes_per_token"] == 6 * 2 * 8 * 64 * 2
    assert sum(k["bytes_per_sequence"] for k in p["layer_kinds"]) == p["kv_bytes_per_sequence"]


def test_kimi_linear_checkpoint_spelling_of_layers_is_one_based():
    # The published configs list layers 1-based in linear_attn_config; transformers subtracts one.
    cfg = load(FIX / "kimi-linear-default.json")
    full = [i + 1 for i, t in enumerate(cfg.pop("layer_types")) if t == "full_attention"]
    cfg["linear_attn_config"] = {"full_attn_layers": full, "kda_layers": [i for i in range(1, 28) if i not in full],
                                 "num_heads": 32, "head_dim": 128, "short_conv_kernel_size": 4}
    spec, _ = spec_from_config(cfg, "k")
    assert [layer.kind for layer in spec.layers] == ["mla" if i + 1 in full else "state" for i in range(27)]
    assert profile(spec).growth_bytes_per_token() == 6 * 576 * 2
