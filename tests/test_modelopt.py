"""NVIDIA ModelOpt checkpoints read exactly (issues 22 and 21): hf_quant_config.json beside config.json (local folder
and Hub), config.json's own forms, the exclusion wildcards as vLLM matches them, MIXED_PRECISION, and the GEMM
term pricing the modules kept in the model dtype at the bf16 rate. Expected figures are hand arithmetic from the
configs' shapes; the engines' rules are vLLM's (vllm-project/vllm@00155cde:vllm/model_executor/layers/
quantization/modelopt.py) and NVIDIA's DeepSeek FP4 recipe (NVIDIA/TensorRT-Model-Optimizer@103b1bb1:
examples/deepseek/ptq.py: `mtq_cfg["quant_cfg"]["*attn*"] = {"enable": False}` and the head; the MTP layer
appended as `layers.61*`, renamed model.layers.61* by quantize_to_nvfp4.py _remap_key)."""

from __future__ import annotations

import copy
import json

import pytest
from conftest import shared_config

from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.model.weights import weight_bytes
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.readers.modelopt import glob_entry, with_quant_file
from kvplan.sources.catalog import find_in_catalog
from kvplan.sources.importer import build_spec
from kvplan.sources.resolve import resolve_model
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import features

# A small Qwen3-MoE: hidden 64, 2 layers, 4 heads of 16, 2 KV heads, 4 experts of width 32 (top 2), vocab 100.
# attention per layer: q 64x64 + k, v 2 x 64x32 + o 64x64 = 12,288; experts per layer 4 x 3 x 64x32 = 24,576
MOE = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
       "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
       "moe_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": 2, "vocab_size": 100,
       "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}

# DeepSeek-R1 (hidden 7168, 128 heads, q_lora_rank 1536, kv_lora_rank 512, rope 64, nope 128, v 128, 61 layers)
# MLA projections per layer: q_a 7168 x 1536 = 11,010,048; q_b 1536 x 128x192 = 37,748,736; kv_a 7168 x 576 =
# 4,128,768; kv_b 512 x 128x256 = 16,777,216; o 128x128 x 7168 = 117,440,512: 187,105,280; x 61 = 11,413,422,080
R1_ATTENTION = 11_413_422_080
R1_O_PROJ = 61 * 117_440_512  # 7,163,871,232
R1_HEAD = 129_280 * 7168  # 926,679,040


def _spec(qc: dict | None, base: dict = MOE):
    config = copy.deepcopy(base)
    config.pop("quantization_config", None)
    if qc is not None:
        config["quantization_config"] = qc
    return build_spec(config, "test/modelopt", source="test")[0]


def _r1(exclude: list[str], **quantization):
    # nvidia/DeepSeek-R1-FP4's form: config.json without quantization_config, hf_quant_config.json beside it
    base = shared_config("deepseek-ai__DeepSeek-R1")
    base.pop("quantization_config", None)
    quant = {"producer": {"name": "modelopt", "version": "0.23.0"}, "quantization": {
        "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16, "exclude_modules": exclude,
        **quantization}}
    return build_spec(with_quant_file(base, quant), "nvidia/DeepSeek-R1-FP4", source="test")[0]


def test_deepseek_r1_fp4_keeps_its_mla_attention_in_bf16():
    # the recipe's exclusions: every layer's self_attn (wildcard), the head, and the MTP layer (model.layers.61*,
    # past the 61 decoder layers: it matches none of them)
    spec = _r1(["lm_head", "model.layers.*.self_attn*", "model.layers.61*"])
    assert spec.quantization.method == "nvfp4"
    assert spec.quantization.kept == (("attention", R1_ATTENTION),)
    fp4 = _r1(["lm_head"])
    assert fp4.quantization.kept == ()
    # kept: 2 B a weight instead of 9/16 B (NVFP4: uint8 [N, K/2] + fp8 scales [N, K/16]):
    # 11,413,422,080 x (2 - 9/16) = 22,826,844,160 - 6,420,049,920 = 16,406,794,240 B
    assert weight_bytes(spec).total - weight_bytes(fp4).total == 16_406_794_240
    # the same, one entry per layer (ModelOpt's get_quant_config lists module by module)
    per_layer = _r1([f"model.layers.{i}.self_attn*" for i in range(61)] + ["lm_head"])
    assert per_layer.quantization.kept == spec.quantization.kept


def test_deepseek_r1_fp4_v2_quantizes_o_proj_and_keeps_the_rest():
    # nvidia/DeepSeek-R1-FP4-v2 "additionally quantizes the wo module" (its model card; ptq.py's `*wo*` quantizers):
    # kept per layer 187,105,280 - 117,440,512 = 69,664,768; x 61 = 4,249,550,848
    projs = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj")
    spec = _r1(["lm_head", *(f"model.layers.*.self_attn.{p}" for p in projs)])
    assert spec.quantization.kept == (("attention", R1_ATTENTION - R1_O_PROJ),)
    assert R1_ATTENTION - R1_O_PROJ == 4_249_550_848
    # q_a without kv_a: vLLM loads them as one fused_qkv_a_proj and refuses a fused layer listed in part
    with pytest.raises(KvplanError, match="kvplan counts whole modules"):
        _r1(["model.layers.*.self_attn.q_a_proj"])


def test_config_json_forms_flat_ignore_and_nested():
    # newer exports: config.json's quantization_config, flat with `ignore` (vLLM from_config's else branch), or
    # the hf_quant_config.json text nested under `quantization`. Attention 2 x 12,288 = 24,576 kept; the router
    # (*.mlp.gate) and the head are 16-bit already; experts 2 x 24,576 = 49,152 x 9/16 = 27,648 B
    flat = _spec({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                  "ignore": ["lm_head", "model.layers.*.self_attn*", "*.mlp.gate"]})
    nested = _spec({"quant_method": "modelopt", "quantization": {
        "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]}})
    for spec in (flat, nested):
        assert (spec.quantization.method, spec.quantization.kept) == ("nvfp4", (("attention", 24_576),))
        assert weight_bytes(spec).experts == 27_648
    assert _spec({"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ["lm_head"]}).quantization.method == "fp8"


def test_vllm_matching_rules():
    # is_layer_excluded: an entry equal to the name, a substring of it (also past a leading language_model.),
    # or an fnmatch pattern of it
    assert glob_entry("model.layers.0.self_attn*")("model.layers.0.self_attn.q_proj")
    assert glob_entry("model.layers.1*")("model.layers.12.mlp.gate_proj")  # fnmatch: layer 12 too
    assert glob_entry("model.layers.3.mlp")("model.layers.3.mlp.experts.0.up_proj")  # substring
    assert glob_entry("model.layers.3.mlp")("language_model.model.layers.3.mlp.down_proj")
    assert not glob_entry("model.layers.3.self_attn*")("model.layers.30.self_attn.q_proj")
    assert not glob_entry("*.mlp.gate")("model.layers.3.mlp.gate_proj")


def test_mixed_precision_fp8_dense_and_nvfp4_experts():
    # ModelOptMixedPrecisionConfig: each listed module its own algo; a module not listed stays unquantized
    # (_resolve_quant_algo -> None -> UnquantizedLinearMethod). Layer 0's attention FP8, both layers' experts NVFP4,
    # layer 1's attention (12,288) not listed: kept in bf16
    layers = {f"model.layers.0.self_attn.{p}": {"quant_algo": "FP8"} for p in ("q_proj", "k_proj", "v_proj", "o_proj")}
    layers |= {f"model.layers.{i}.mlp.experts.{e}.{p}": {"quant_algo": "NVFP4"}
               for i in (0, 1) for e in range(4) for p in ("gate_proj", "up_proj", "down_proj")}
    spec = _spec({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": layers})
    q = spec.quantization
    assert (q.method, q.experts_method, q.kept) == ("fp8", "nvfp4", (("attention", 12_288),))
    # dense: 12,288 B fp8 + 12,288 x 2 B; experts 49,152 x 9/16 = 27,648 B
    assert weight_bytes(spec).experts == 27_648
    layers["model.layers.0.self_attn.o_proj"] = {"quant_algo": "NVFP4"}
    with pytest.raises(KvplanError, match="MIXED_PRECISION mixes fp8, nvfp4 among its dense modules"):
        _spec({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": layers})
    with pytest.raises(KvplanError, match="needs `quantized_layers`"):
        _spec({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"})
    with pytest.raises(KvplanError, match="'W4A8_AWQ' is not read"):
        _spec({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"})


def test_hf_quant_config_json_beside_a_local_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(MOE))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt"}, "quantization": {
        "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]}}))
    got = resolve_model(str(tmp_path))
    assert (got.spec.quantization.method, got.spec.quantization.kept) == ("nvfp4", (("attention", 24_576),))
    assert got.note.endswith("with its hf_quant_config.json")  # where the quantization came from, said
    # config.json's own quantization_config wins, as in vLLM (hf_quant_config.json is read only without one)
    (tmp_path / "config.json").write_text(json.dumps({**MOE, "quantization_config": {"quant_method": "fp8"}}))
    got = resolve_model(str(tmp_path))
    assert got.spec.quantization.method == "fp8" and not got.note.endswith("hf_quant_config.json")


def test_gemm_term_prices_kept_modules_at_the_bf16_rate():
    # DeepSeek-R1-FP4 on a B200 at tp 8: of 2 x active FLOPs a token, the kept attention (2 x 11,413,422,080 / 8) runs
    # at the bf16 rate, the rest at the fp4 rate; the LM head (2 x 926,679,040 / 8), also kept, runs at the bf16 rate
    # for the one position a sequence samples (kvplan.speed.terms.head_rows), not for every token
    spec = _r1(["lm_head", "model.layers.*.self_attn*"])
    gpu = find_gpu("b200")
    s = shape_for(spec, gpu, tp=8)
    assert s.plain_flops == pytest.approx(2 * R1_ATTENTION / 8)
    assert s.head_flops == pytest.approx(2 * R1_HEAD / 8) and s.plain_head
    tokens = 4096
    gemm = features(s, tokens, 1, 0, 0)[2]
    expect = ((s.flops_per_token - s.plain_flops) * tokens / s.gemm_rate
              + (s.plain_flops * tokens + s.head_flops) / s.bf16_rate)
    assert gemm == pytest.approx(expect)
    assert s.bf16_rate < s.gemm_rate  # so the kept attention costs more than it did at the fp4 rate
    # a weight dtype that is not the checkpoint's own drops its exclusions: only the head stays at bf16
    fp8 = shape_for(spec, gpu, tp=8, weight_dtype="fp8")
    assert fp8.plain_flops == 0 and fp8.plain_head and fp8.head_flops == pytest.approx(2 * R1_HEAD / 8)


def test_nvidia_llama_3_1_405b_fp8_is_its_own_catalog_entry():
    """NVIDIA's ModelOpt FP8 export (hf_quant_config.json: quant_algo FP8, per-tensor, no exclude_modules;
    huggingface.co/nvidia/Llama-3.1-405B-Instruct-FP8/blob/main/hf_quant_config.json) quantizes every decoder linear;
    Meta's fbgemm_fp8 release keeps attention and layers 0 / 125's MLP in bf16 (catalog_extra/SOURCES.md)."""
    nv, meta = find_in_catalog("nvidia-llama-3.1-405b-instruct-fp8"), find_in_catalog("llama-3.1-405b-instruct-fp8")
    assert nv.quantization.quant_method == "modelopt" and nv.quantization.kept == ()
    assert meta.quantization.quant_method == "fbgemm_fp8"
    # per GPU at tp 8: linears (attention 71,873,593,344 + MLP 329,772,957,696) x 1 B / 8 = 50,205,818,880;
    # embedding + lm_head 2 x 2,101,346,304 x 2 B / 8 = 1,050,673,152; norms 4,145,152 x 2 B = 8,290,304 replicated:
    # 51,264,782,336 B (47.74 GiB; per-tensor scales, a few fp32 a layer, left out)
    req = Request(context=4096)
    res = resolve_engine("trtllm", None, []).result(nv, find_gpu("h200-sxm"), Deployment(8), req)
    assert res.plan.stages[0].weight_bytes == 51_264_782_336
