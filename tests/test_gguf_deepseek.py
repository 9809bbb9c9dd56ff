"""A `deepseek2` GGUF (DeepSeek-V2 / V3 / R1, issue 22) planned from the file alone: its MLA metadata read as the
config.json it was converted from, its cache llama.cpp's latent + rope key, the older per-head form refused.

The tensors are the ones llama.cpp creates for LLM_ARCH_DEEPSEEK2 in the MLA form (src/llama-model.cpp load_tensors:
attn_q_a / attn_q_a_norm / attn_q_b, attn_kv_a_mqa {n_embd, kv_lora_rank + rope}, attn_kv_a_norm, attn_k_b {qk_nope,
kv_lora_rank, n_head}, attn_v_b {kv_lora_rank, v_head, n_head}, attn_output; dense ffn_* on the leading blocks, then
ffn_gate_inp, exp_probs_b (V3's router bias), *_exps and *_shexp).
"""

from __future__ import annotations

import json

import pytest
from conftest import F32, Q8_0, gguf_tensor as _t, one_line_error, shared_config, write_gguf
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.readers.configs import spec_from_config
from kvplan.sources.gguf import spec_from_gguf

runner = CliRunner()
# a small V3-shaped model: hidden 256, 4 layers (1 dense), 4 heads, q_lora 128, kv_lora 64, rope 32, nope 32, v 32,
# dense MLP 512, 8 experts of 64 (2 used, 1 shared), vocab 1024
SMALL = {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "q_lora_rank": 128,
         "kv_lora_rank": 64, "qk_rope_head_dim": 32, "qk_nope_head_dim": 32, "v_head_dim": 32,
         "intermediate_size": 512, "moe_intermediate_size": 64, "n_routed_experts": 8, "num_experts_per_tok": 2,
         "n_shared_experts": 1, "first_k_dense_replace": 1, "vocab_size": 1024, "max_position_embeddings": 4096}


def _tensors(c: dict, kind=Q8_0, router_bias=True) -> list:
    H, E, FF, EF = c["hidden_size"], c["n_routed_experts"], c["intermediate_size"], c["moe_intermediate_size"]
    heads, rank, rope, nope, v = (c[k] for k in ("num_attention_heads", "kv_lora_rank", "qk_rope_head_dim",
                                                 "qk_nope_head_dim", "v_head_dim"))
    q, S = c.get("q_lora_rank"), c["n_shared_experts"] * EF
    out = [_t("token_embd.weight", (H, c["vocab_size"]), kind), _t("output_norm.weight", (H,), F32),
           _t("output.weight", (H, c["vocab_size"]), kind)]
    for i in range(c["num_hidden_layers"]):
        b = f"blk.{i}"
        out += [_t(f"{b}.attn_norm.weight", (H,), F32), _t(f"{b}.ffn_norm.weight", (H,), F32),
                _t(f"{b}.attn_kv_a_mqa.weight", (H, rank + rope), kind),
                _t(f"{b}.attn_kv_a_norm.weight", (rank,), F32), _t(f"{b}.attn_k_b.weight", (nope, rank, heads), kind),
                _t(f"{b}.attn_v_b.weight", (rank, v, heads), kind),
                _t(f"{b}.attn_output.weight", (heads * v, H), kind)]
        if q:
            out += [_t(f"{b}.attn_q_a.weight", (H, q), kind), _t(f"{b}.attn_q_a_norm.weight", (q,), F32),
                    _t(f"{b}.attn_q_b.weight", (q, heads * (nope + rope)), kind)]
        else:
            out.append(_t(f"{b}.attn_q.weight", (H, heads * (nope + rope)), kind))
        if i < c["first_k_dense_replace"]:
            out += [_t(f"{b}.ffn_{m}.weight", (H, FF) if m != "down" else (FF, H), kind)
                    for m in ("gate", "up", "down")]
            continue
        out += [_t(f"{b}.ffn_gate_inp.weight", (H, E), F32)] + ([_t(f"{b}.exp_probs_b.bias", (E,), F32)]
                                                                 if router_bias else [])
        out += [_t(f"{b}.ffn_{m}_exps.weight", (H, EF, E) if m != "down" else (EF, H, E), kind)
                for m in ("gate", "up", "down")]
        out += [_t(f"{b}.ffn_{m}_shexp.weight", (H, S) if m != "down" else (S, H), kind)
                for m in ("gate", "up", "down")]
    return out


def _meta(c: dict, gating=2, **extra) -> dict:
    """What convert_hf_to_gguf.py's DeepseekV2Model writes in the MLA form (llama-arch.cpp's key names)."""
    a, rank, rope = "deepseek2", c["kv_lora_rank"], c["qk_rope_head_dim"]
    meta = {"general.architecture": a, "general.file_type": 7, f"{a}.block_count": c["num_hidden_layers"],
            f"{a}.context_length": c["max_position_embeddings"], f"{a}.embedding_length": c["hidden_size"],
            f"{a}.feed_forward_length": c["intermediate_size"], f"{a}.attention.head_count": c["num_attention_heads"],
            f"{a}.attention.head_count_kv": 1, f"{a}.attention.key_length": rank + rope,
            f"{a}.attention.value_length": rank, f"{a}.attention.key_length_mla": c["qk_nope_head_dim"] + rope,
            f"{a}.attention.value_length_mla": c["v_head_dim"], f"{a}.attention.kv_lora_rank": rank,
            f"{a}.rope.dimension_count": rope, f"{a}.leading_dense_block_count": c["first_k_dense_replace"],
            f"{a}.expert_count": c["n_routed_experts"], f"{a}.expert_used_count": c["num_experts_per_tok"],
            f"{a}.expert_shared_count": c["n_shared_experts"],
            f"{a}.expert_feed_forward_length": c["moe_intermediate_size"], f"{a}.expert_gating_func": gating}
    if c.get("q_lora_rank"):
        meta[f"{a}.attention.q_lora_rank"] = c["q_lora_rank"]
    if c.get("rope_scaling"):  # V3/R1's YaRN (factor 40 over 4096) as the converter writes it
        rs = c["rope_scaling"]
        meta.update({f"{a}.rope.scaling.type": "yarn", f"{a}.rope.scaling.factor": float(rs["factor"]),
                     f"{a}.rope.scaling.original_context_length": rs["original_max_position_embeddings"],
                     f"{a}.rope.scaling.yarn_log_multiplier": 0.1})
    return {**meta, **extra}


def test_a_small_deepseek2_file_is_planned_with_llama_cpps_latent_cache(tmp_path):
    path = tmp_path / "tiny-ds.gguf"
    write_gguf(path, _meta(SMALL), _tensors(SMALL))
    spec, _ = spec_from_gguf(path, "g")
    assert [layer.kind.value for layer in spec.layers] == ["mla"] * 4
    # parameters by hand: embedding and head 256 x 1024 = 262,144 each. Per layer attention: kv_a 256 x 96 = 24,576,
    # k_b 32 x 64 x 4 = 8,192, v_b 64 x 32 x 4 = 8,192, o 128 x 256 = 32,768, q_a 256 x 128 = 32,768,
    # q_b 128 x 256 = 32,768 -> 139,264; norms 256 + 256 + 64 + 128 = 704 -> 139,968 x 4 = 559,872. Dense layer MLP
    # 3 x 256 x 512 = 393,216. Each of 3 MoE layers: router 256 x 8 + bias 8 = 2,056, experts 3 x 256 x 64 x 8 =
    # 393,216, shared 3 x 256 x 64 = 49,152 -> 444,424 x 3 = 1,333,272. Final norm 256.
    # Total 524,288 + 559,872 + 393,216 + 1,333,272 + 256 = 2,810,904
    assert spec.params.total == 2_810_904
    res = runner.invoke(app, ["fit", str(path), "--engine", "llama.cpp", "--gpu", "rtx-4090", "--ctx", "8k", "--json"])
    assert res.exit_code == 0, res.output
    # llama.cpp's MLA cache now: K only, kv_lora_rank + rope = 96 values in f16 per layer: 96 x 2 x 4 = 768 B a token
    assert json.loads(res.stdout)["plans"][0]["kv_bytes_per_token"] == 768


@pytest.mark.parametrize("name, gating", [("deepseek-ai__DeepSeek-V3", 2), ("deepseek-ai__DeepSeek-R1", 2),
                                          ("deepseek-ai__DeepSeek-V2-Lite", 1)])
def test_the_deepseek2_layout_is_the_config_jsons(tmp_path, name, gating):
    # the real config.json and a GGUF of it agree layer by layer (MLA widths, dense then MoE) and in parameters by
    # role; the file holds no MTP layer (convert leaves model.layers.61 out), so the config's is not planned here
    cfg = shared_config(name)
    path = tmp_path / f"{name}.gguf"
    write_gguf(path, _meta(cfg, gating), _tensors(cfg, router_bias=gating == 2))
    ours, notes = spec_from_gguf(path, "g")
    theirs, _ = spec_from_config({**cfg, "num_nextn_predict_layers": 0, "quantization_config": None}, "c")
    assert ours.layers == theirs.layers
    assert (ours.max_context, ours.vocab_size, ours.hidden_size) == (theirs.max_context, theirs.vocab_size,
                                                                     theirs.hidden_size)
    assert ours.params == theirs.params
    if cfg.get("rope_scaling"):
        assert (ours.rope_scaling.kind, ours.rope_scaling.factor, ours.rope_scaling.original) == (
            theirs.rope_scaling.kind, theirs.rope_scaling.factor, theirs.rope_scaling.original)


def test_deepseek_v3_on_llama_cpp_holds_576_values_a_layer_per_token(tmp_path):
    # llama.cpp's MLA cache (kvplan.engines.llamacpp, llama-kv-cache.cpp: K of kv_lora_rank + rope, no V now):
    # (512 + 64) x 2 B (f16) x 61 layers = 70,272 B a token, the catalog's deepseek-v3 the same
    cfg = shared_config("deepseek-ai__DeepSeek-V3")
    path = tmp_path / "DeepSeek-V3-Q8_0.gguf"
    write_gguf(path, _meta(cfg), _tensors(cfg))
    got = []
    for model in (str(path), "deepseek-v3"):
        res = runner.invoke(app, ["fit", model, "--engine", "llama.cpp", "--gpu", "h200", "--pp", "8", "--ctx", "8k",
                                  "--json"])
        assert res.exit_code == 0, res.output
        got.append(json.loads(res.stdout)["kv_bytes_per_token"])
    assert got == [70_272, 70_272]


@pytest.mark.parametrize("drop, extra, needle", [
    ("deepseek2.attention.key_length_mla", {}, "key_length_mla is missing: an older DeepSeek GGUF"),
    (None, {"deepseek2.nextn_predict_layers": 1}, "nextn_predict_layers declares multi-token-prediction"),
    (None, {"deepseek2.attention.value_length": 32}, "are not the MLA latent's (96, 64, 1)"),
    (None, {"deepseek2.expert_gating_func": 3}, "expert_gating_func 3 is neither"),
])
def test_a_deepseek2_form_kvplan_does_not_plan_is_refused(tmp_path, drop, extra, needle):
    path = tmp_path / "ds.gguf"
    meta = {k: v for k, v in _meta(SMALL, **extra).items() if k != drop}
    write_gguf(path, meta, _tensors(SMALL))
    one_line_error(runner.invoke(app, ["fit", str(path), "--gpu", "rtx-4090", "--ctx", "8k"]), 2, needle)


def test_a_file_that_keeps_the_mtp_layer_behind_block_count_is_refused(tmp_path):
    # the converter drops model.layers.N >= num_hidden_layers; a file holding them as blk.4 of a 4-block file holds
    # 139,968 + 444,424 = 584,392 more parameters than its layout (2,810,904): 21 %, over the 1 % check
    path = tmp_path / "ds-mtp.gguf"
    extra = [t for t in _tensors({**SMALL, "num_hidden_layers": 5}) if t[0].startswith("blk.4.")]
    write_gguf(path, _meta(SMALL), _tensors(SMALL) + extra)
    one_line_error(runner.invoke(app, ["fit", str(path), "--gpu", "rtx-4090", "--ctx", "8k"]), 2,
                   "describes 2,810,904 parameters but its tensors hold 3,395,296")
