"""Quantized checkpoints read exactly from their config (issue 22 item 2): compressed-tensors `ignore` lists of
regexes matched against the model's module names, schemes whose `targets` are regexes, symmetric int4 (no zero
points), GPTQ's g_idx, AWQ, and a `weight_dtype` that is the checkpoint's own format (never a default group).
Expected bytes are hand arithmetic from the configs' shapes and the formats' tensors."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import write_safetensors

from kvplan.core.errors import KvplanError
from kvplan.hardware.gpus import find_gpu
from kvplan.model.weights import weight_bytes
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.engines import resolve_engine
from kvplan.report.text import format_warning
from kvplan.sources.importer import build_spec

ROOT = Path(__file__).resolve().parents[1]

# A small Llama: hidden 64, 2 layers, 4 heads of 16, 2 KV heads, MLP 128, vocab 100, untied head.
# attention per layer = q 64x64 + k,v 2 x 64x32 + o 64x64 = 12,288; MLP per layer = 3 x 64x128 = 24,576
# embedding = lm_head = 6,400; norms = 2 x 2 x 64 + 64 = 320
SMALL = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
         "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}
PLAIN_16 = (6_400 + 6_400 + 320) * 2  # embedding, LM head and norms in bf16: 26,240 B

# A small Qwen3-MoE: hidden 64, 2 layers, 4 heads of 16, 2 KV heads, 4 experts of width 32 (top 2), vocab 100.
# experts per layer = 4 x 3 x 64x32 = 24,576; attention per layer 12,288 (+ q/k norms 32)
MOE = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
       "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
       "moe_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": 2, "vocab_size": 100,
       "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}


def _spec(qc: dict | None, base: dict = SMALL):
    config = copy.deepcopy(base)
    if qc is not None:
        config["quantization_config"] = qc
    return build_spec(config, "test/small", source="test")[0]


def _ct(ignore: list, bits: int = 4, group: int = 32, symmetric: bool = True, targets=("Linear",)) -> dict:
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ignore,
            "config_groups": {"group_0": {"targets": list(targets), "weights": {
                "num_bits": bits, "group_size": group, "strategy": "group", "symmetric": symmetric, "type": "int"}}}}


def test_kimi_k2_regex_ignore_list_keeps_attention_shared_experts_and_the_dense_mlp():
    # Kimi-K2-Thinking's quantization_config (compressed-tensors W4A16, group 32, symmetric) on Kimi-K2.5's geometry
    # (scripts/catalog_extra/moonshotai__Kimi-K2.5.json: hidden 7168, 61 layers, the first dense, 384 experts of
    # 2048, one shared expert, MLA with q_lora_rank 1536). The ignore list: lm_head, re:.*self_attn.*,
    # re:.*shared_experts.*, re:.*mlp\.(gate|up|gate_up|down)_proj.* (the last matches layer 0's dense MLP,
    # model.layers.0.mlp.gate_proj, and not model.layers.N.mlp.experts.E.gate_proj nor the shared expert).
    #   attention per layer: q_a 7168x1536 = 11,010,048; q_b 1536 x 64x192 = 18,874,368; kv_a 7168x576 = 4,128,768;
    #     kv_b 512 x 64x256 = 8,388,608; o 64x128 x 7168 = 58,720,256 -> 101,122,048 x 61 = 6,168,444,928
    #   dense MLP (layer 0): 3 x 7168 x 18432 = 396,361,728
    #   shared experts: 60 layers x 3 x 7168 x 2048 = 2,642,411,520
    config = json.loads((ROOT / "scripts" / "catalog_extra" / "moonshotai__Kimi-K2.5.json").read_text())
    config["quantization_config"] = _ct(["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                                         r"re:.*mlp\.(gate|up|gate_up|down)_proj.*"])
    spec = build_spec(config, "moonshotai/Kimi-K2-Thinking", source="test")[0]
    q = spec.quantization
    assert (q.method, q.group_size, q.symmetric) == ("int4", 32, True)
    assert dict(q.kept) == {"attention": 6_168_444_928, "mlp": 396_361_728, "shared_experts": 2_642_411_520}
    # routed experts: 60 x 384 x 3 x 7168 x 2048 = 1,014,686,023,680 weights, symmetric int4 group 32:
    # 0.5 B + one bf16 scale per 32 = 507,343,011,840 + 31,708,938,240 x 2 = 570,760,888,320 B
    assert weight_bytes(spec).experts == 570_760_888_320


def test_regex_that_names_no_module_of_the_model_keeps_nothing_and_exact_names_are_matched():
    # Poolside's list: q, k, v, o and g_proj by regex, the router, layer 0's MLP by exact name. This Llama has no
    # g_proj: that entry matches nothing (as in vLLM); q/k/v/o of both layers make whole attention modules:
    # 2 x 12,288 kept; layer 0's three MLP projections are its whole MLP: 24,576 kept
    ignore = ["lm_head", *(rf"re:.*\.self_attn\.{p}_proj$" for p in "qkvog"), r"re:.*\.mlp\.gate$",
              *(f"model.layers.0.mlp.{p}_proj" for p in ("gate", "up", "down"))]
    spec = _spec(_ct(ignore, bits=8, group=0, symmetric=True) | {
        "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float"}}}})
    assert spec.quantization.method == "fp8"
    assert dict(spec.quantization.kept) == {"attention": 24_576, "mlp": 24_576}
    # weights: kept (24,576 + 24,576) x 2 B + layer 1's MLP 24,576 x 1 B + 26,240 B of embeddings, head, norms
    assert weight_bytes(spec).total == 98_304 + 24_576 + PLAIN_16


def test_regex_targets_quantize_only_the_experts():
    # targets ["re:.*experts\.[0-9]+\.(gate_proj|up_proj|down_proj)$"]: only the routed experts are NVFP4-like
    # int4 here; attention (2 x 12,288) stays bf16 though the ignore list names only lm_head
    spec = _spec(_ct(["lm_head"], targets=[r"re:.*experts\.[0-9]+\.(gate_proj|up_proj|down_proj)$"]), MOE)
    assert dict(spec.quantization.kept) == {"attention": 24_576}
    # experts 2 x 24,576 = 49,152 weights: 24,576 B + 49,152 / 32 x 2 B scales = 27,648 B
    assert weight_bytes(spec).experts == 27_648


def test_regex_naming_some_experts_of_a_layer_is_refused():
    with pytest.raises(KvplanError, match="only some of layer 0's experts"):
        _spec(_ct([r"re:.*layers\.0\.mlp\.experts\.0\..*"]), MOE)
    with pytest.raises(KvplanError, match="not a regular expression"):
        _spec(_ct(["re:.*mlp\\.(gate"]), MOE)


def test_awq_group_128_with_zero_points():
    # AWQ (AutoAWQ GEMM): qweight int32 [K, N/8], qzeros int32 [K/128, N/8], scales fp16 [K/128, N]:
    # 0.5 B a weight + 2.5 B per group of 128. Linear weights 2 x (12,288 + 24,576) = 73,728:
    # 36,864 + 576 groups x 2.5 = 1,440 -> 38,304 B; + 26,240 B in bf16
    spec = _spec({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"})
    assert (spec.quantization.method, spec.quantization.group_size, spec.quantization.index_bytes) == ("int4", 128, 0)
    assert weight_bytes(spec).total == 38_304 + PLAIN_16


def test_gptq_act_order_counts_g_idx():
    # GPTQ desc_act (act-order), group 32: qweight + qzeros + scales as AWQ (0.5 B + 2.5 B per 32) and g_idx int32 [K]
    # for each quantized linear: q, k, v, gate, up read 64 features, o 64, down 128 -> 3x64 + 64 + 2x64 + 128 = 512
    # per layer, 2 layers x 512 x 4 B = 4,096 B. Linear: 36,864 + 2,304 groups x 2.5 = 5,760 -> 42,624 B
    spec = _spec({"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True, "sym": True})
    assert spec.quantization.index_bytes == 4_096
    assert weight_bytes(spec).total == 42_624 + 4_096 + PLAIN_16


def test_symmetric_compressed_tensors_int4_has_no_zero_points():
    # symmetric group 32: 0.5 B + 2 B per 32 -> 36,864 + 2,304 x 2 = 41,472 B; asymmetric: + 0.5 B per group = 42,624
    assert weight_bytes(_spec(_ct([], symmetric=True))).total == 41_472 + PLAIN_16
    assert weight_bytes(_spec(_ct([], symmetric=False))).total == 42_624 + PLAIN_16


def test_weight_dtype_of_the_checkpoints_own_method_keeps_its_group_and_another_says_so():
    # issue 22: weight_dtype int4 on an int4 group-32 checkpoint re-planned it at group 128. The same method is the
    # checkpoint's own format (group 32 and its exact bytes); another is planned as asked, with a warning.
    spec = _spec({"quant_method": "gptq", "bits": 4, "group_size": 32})
    gpu, dep = find_gpu("h100-sxm"), Deployment()
    plans = {w: resolve_engine().plan(spec, gpu, dep, Request(context=1024, weight_dtype=w))
             for w in (None, "int4", "fp8")}
    assert plans["int4"].weight_bytes == plans[None].weight_bytes == 42_624 + 4_096 + PLAIN_16
    assert not plans["int4"].warnings
    # fp8: 73,728 B of linear weights + 26,240 B in bf16 = 99,968 B
    assert plans["fp8"].weight_bytes == 73_728 + PLAIN_16
    [note] = [format_warning(w) for w in plans["fp8"].warnings if "weights planned as" in w.message]
    assert "fp8, not the checkpoint's int4 group 32" in note




# a GPTQ layer's tensors: qweight int32 [64/8, 64] = 2,048 B, scales fp16 [64/32, 64] = 256 B, qzeros int32 [2, 8]
# = 64 B, g_idx int32 [64] = 256 B; the embedding bf16 [100, 64] = 12,800 B
GPTQ_TENSORS = {"model.layers.0.self_attn.q_proj.qweight": ("I32", [8, 64], 2_048),
                "model.layers.0.self_attn.q_proj.scales": ("F16", [2, 64], 256),
                "model.layers.0.self_attn.q_proj.qzeros": ("I32", [2, 8], 64),
                "model.layers.0.self_attn.q_proj.g_idx": ("I32", [64], 256)}
EMBED = {"model.embed_tokens.weight": ("BF16", [100, 64], 12_800)}


def _folder(tmp_path: Path) -> Path:
    config = dict(SMALL, quantization_config={"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True})
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_local_folder_reads_model_safetensors_headers(tmp_path):
    from kvplan.sources.resolve import resolve_model

    write_safetensors(_folder(tmp_path) / "model.safetensors", {**GPTQ_TENSORS, **EMBED})
    r = resolve_model(str(tmp_path))
    # 2,048 + 256 + 64 + 256 + 12,800 = 15,424 B, the checkpoint's exact bytes (not the config's estimate)
    assert r.spec.checkpoint_bytes == 15_424
    assert any("15,424 B in 1 safetensors file(s)" in n for n in r.notices)
    plan = resolve_engine().plan(r.spec, find_gpu("h100-sxm"), Deployment(), Request(context=1024))
    assert plan.weight_bytes == 15_424


def test_local_folder_reads_a_sharded_index_and_says_when_there_is_none(tmp_path):
    from kvplan.sources.resolve import resolve_model

    folder = _folder(tmp_path)
    r = resolve_model(str(folder))
    assert r.spec.checkpoint_bytes is None and any("counted from config.json" in n for n in r.notices)
    write_safetensors(folder / "a.safetensors", GPTQ_TENSORS)
    write_safetensors(folder / "b.safetensors", EMBED)
    index = {"weight_map": {**{k: "a.safetensors" for k in GPTQ_TENSORS}, **{k: "b.safetensors" for k in EMBED}}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    assert resolve_model(str(folder)).spec.checkpoint_bytes == 15_424


def test_local_file_cut_short_is_refused_naming_it(tmp_path):
    from kvplan.sources.resolve import resolve_model

    write_safetensors(_folder(tmp_path) / "model.safetensors", EMBED)
    data = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[:-100])  # 100 bytes of the embedding missing
    with pytest.raises(KvplanError, match="model.safetensors is malformed: .*cut short"):
        resolve_model(str(tmp_path))


def test_hub_and_local_folder_read_the_same_quantized_checkpoint(tmp_path, monkeypatch):
    # A Kimi-style compressed-tensors MoE checkpoint (regex ignore list, int4 group 32 symmetric) served by the fake
    # Hub (tests/hub_server.py, the real huggingface_hub client) and copied to a folder: both read its headers,
    # neither refuses the regexes, and both give the same exact bytes: experts 2 layers x 4 x 3 projections of 2,048
    # weights, each weight_packed int32 [32, 8] = 1,024 B + weight_scale bf16 [32, 2] = 128 B (one per 32, no zero
    # point): 24 x 1,152 = 27,648 (the config's own count, test_regex_targets...); attention kept bf16
    # 2 x 12,288 x 2 B = 49,152; embedding and head 2 x 100x64 x 2 B = 25,600 -> 102,400 B
    try:
        from tests.hub_server import FakeHub, FakeRepo, serving, spec_safetensors
    except ImportError:
        from hub_server import FakeHub, FakeRepo, serving, spec_safetensors  # type: ignore[no-redef]
    from kvplan.sources.resolve import resolve_model

    config = dict(MOE, quantization_config=_ct(["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                                                r"re:.*mlp\.(gate|up|gate_up|down)_proj.*"]))
    tensors = {"model.embed_tokens.weight": ("bfloat16", [100, 64]), "lm_head.weight": ("bfloat16", [100, 64])}
    for i in range(2):
        tensors |= {f"model.layers.{i}.self_attn.{p}_proj.weight": ("bfloat16", s)
                    for p, s in (("q", [64, 64]), ("k", [32, 64]), ("v", [32, 64]), ("o", [64, 64]))}
        for e in range(4):
            for p in ("gate", "up", "down"):
                tensors[f"model.layers.{i}.mlp.experts.{e}.{p}_proj.weight_packed"] = ("int32", [32, 8])
                tensors[f"model.layers.{i}.mlp.experts.{e}.{p}_proj.weight_scale"] = ("bfloat16", [32, 2])
    data = spec_safetensors(tensors)
    files = {"config.json": json.dumps(config).encode(), "model.safetensors": data}
    server = FakeHub()
    server.add("org/tiny-moe-int4", FakeRepo.single(files))
    with serving(server, monkeypatch, tmp_path / "hf_home"):
        hub = resolve_model("org/tiny-moe-int4", timeout=5.0)
    folder = tmp_path / "tiny-moe-int4"
    folder.mkdir()
    for name, content in files.items():
        (folder / name).write_bytes(content)
    local = resolve_model(str(folder))
    assert hub.spec.checkpoint_bytes == local.spec.checkpoint_bytes == 102_400
    assert dict(hub.spec.quantization.kept) == dict(local.spec.quantization.kept) == {"attention": 24_576}
    # the config's own count agrees with the headers but for what the tiny checkpoint leaves out: norms
    # (2 x (2 x 64 + 2 x 16) + 64) x 2 B = 768 and the routers 2 x 64x4 x 2 B = 1,024
    assert weight_bytes(local.spec).total == 102_400 + 768 + 1_024


@pytest.mark.parametrize("double, expected", [
    # NF4 blocks of 64, fp32 absmax each: 73,728 linear weights -> 36,864 + 1,152 blocks x 4 B = 41,472 B
    (False, 41_472),
    # double quantization: a uint8 absmax per block: 36,864 + 1,152 = 38,016 B
    (True, 38_016),
])
def test_bitsandbytes_4bit_absmax_per_64(double, expected):
    spec = _spec({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                  "bnb_4bit_use_double_quant": double})
    assert weight_bytes(spec).total == expected + PLAIN_16


def test_compressed_tensors_fp8_block_scales():
    # FP8-block (llm-compressor "strategy": "block", block_structure [128, 128]): one fp32 weight_scale per 128x128
    # tile. A small Llama of hidden 128, MLP 256, 4 heads of 32: per layer q, k, v, o 4 x 128x128 + gate, up,
    # down 3 x 128x256 = 163,840 weights, 2 layers 327,680 B in fp8 and 327,680 / 16,384 = 20 tiles x 4 B = 80 B
    spec = _spec({"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["Linear"], "weights": {
        "num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}}}},
        dict(SMALL, hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=4))
    assert (spec.quantization.method, spec.quantization.group_size) == ("fp8", 128)
    assert weight_bytes(spec).sharded == 327_680 + 80


def test_gptq_g_idx_of_a_moe_model():
    # GPTQ on the small Qwen3-MoE (every layer MoE, 4 experts of width 32): per layer q, k, v read 64 features, o 64,
    # and each expert's gate and up 64, down 32 -> 3x64 + 64 + 4 x (2x64 + 32) = 896; 2 layers x 896 x 4 B = 7,168 B
    spec = _spec({"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True}, MOE)
    assert spec.quantization.index_bytes == 7_168


def test_sglang_weights_as_loaded_hold_its_rope_table_fp32_on_cuda():
    # SGLang's RotaryEmbedding keeps cos_sin_cache [131,072 positions, 128] (Llama 3.1) in fp32 on CUDA:
    # 16,777,216 x 4 B = 67,108,864 B beside the weights; on ROCm (MI300X) in bf16: 33,554,432 B. QwQ-32B's
    # "Load weight end ... mem usage=15.54 GB" at tp 4 on L4s is checked in tests/test_checklog.py.
    # PyTorch's caching allocator adds its rounding (tests/test_caching_allocator.py): Llama 3.1 8B's big tensors
    # are whole multiples of 2 MiB (qkv 48 MiB, o 32, gate_up 224, down 112, embedding and head 1,002 MiB, the RoPE
    # table 64 or 32), and its 65 norms of 8,192 B (532,480 B) share one 2 MiB small segment: 1,564,672 B over.
    from kvplan.sources.catalog import find_in_catalog

    model = find_in_catalog("llama-3.1-8b")
    req, dep = Request(context=8192), Deployment()
    for gpu, rope in (("h100-sxm", 67_108_864), ("mi300x", 33_554_432)):
        res = resolve_engine("sglang").result(model, find_gpu(gpu), dep, req)
        assert res.settings["allocator_rounding"] == 2_097_152 - 65 * 8_192 == 1_564_672
        assert res.settings["loaded_extra"] == rope + 1_564_672
        assert res.plan.weight_bytes_per_gpu == model.checkpoint_bytes + rope + 1_564_672


def test_int4_on_a_16_bit_checkpoint_says_the_group_it_assumes(kvplan_home, tmp_path):
    # issue 22: `--weight-dtype int4` on a bf16 checkpoint planned it at group 128 without saying so. Llama-3.1-8B
    # (catalog, bf16): linear weights 32 x (attention 2 x 4096^2 + 2 x 4096x1024 = 41,943,040 + MLP 3 x 4096x14,336
    # = 176,160,768) = 6,979,321,856, at group 128 with zero points 0.5 + 2.5/128 B each = 3,625,975,808 B; embedding
    # and LM head 2 x 128,256 x 4,096 x 2 B = 2,101,346,304; norms 65 x 4,096 x 2 B = 532,480: 5,727,854,592 B
    from typer.testing import CliRunner

    from kvplan.cli import app

    r = CliRunner().invoke(app, ["fit", "llama-3.1-8b", "--gpu", "h100", "--weight-dtype", "int4", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    plan = out["plans"][out["recommended"]]
    assert plan["weight_bytes"] == 3_625_975_808 + 2_101_346_304 + 532_480
    [note] = [w for w in plan["warnings"] if "int4" in w]
    assert note.startswith("weights planned as int4 group 128 (5.33 GiB in all)")
    assert "the checkpoint states no int4 group, so 128 is assumed" in note
    assert "a quantized checkpoint whose config states it" in note  # how to plan another group
    [line] = [x for x in r.stderr.splitlines() if "int4 group 128" in x]  # said on stderr too, in one line
    assert line.startswith("warning: weights planned as int4 group 128")
    # the GPTQ int4 group-32 checkpoint (_folder): int4 is its own format, its group stands and nothing is assumed
    r = CliRunner().invoke(app, ["fit", str(_folder(tmp_path)), "--gpu", "h100", "--weight-dtype", "int4", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["plans"][out["recommended"]]["warnings"] == []
    assert "assumed" not in r.stderr and "group 128" not in r.stderr


def test_sweep_and_cheapest_say_the_int4_group_they_assume(kvplan_home, tmp_path):
    # sweep and cheapest print no plan's warnings: one note says which models' int4 group is assumed (128, the bf16
    # catalog Llama), and names none whose checkpoint states its own (the GPTQ group-32 folder, planned at 32)
    from typer.testing import CliRunner

    from kvplan.cli import app

    folder = str(_folder(tmp_path))
    r = CliRunner().invoke(app, ["sweep", "--models", f"llama-3.1-8b,{folder}", "--gpu", "h100", "--weight-dtype",
                                 "auto,int4", "--ctx", "2k", "--gpu-counts", "1"])
    assert r.exit_code == 0, r.output
    [line] = [x for x in r.stderr.splitlines() if "128 is assumed" in x]
    assert line.startswith("note: weights int4 for llama-3.1-8b: the checkpoint states no int4 group, "
                           "so 128 is assumed")
    r = CliRunner().invoke(app, ["cheapest", folder, "--gpu", "h100", "--weight-dtype", "int4", "--ctx", "2k",
                                 "--concurrency", "1"])
    assert r.exit_code == 0, r.output
    assert "int4 group" not in r.stderr and "is assumed" not in r.stderr
    r = CliRunner().invoke(app, ["cheapest", "llama-3.1-8b", "--gpu", "h100", "--weight-dtype", "int4", "--ctx", "8k",
                                 "--concurrency", "1"])
    assert r.exit_code == 0, r.output
    assert "note: weights int4 for llama-3.1-8b: the checkpoint states no int4 group, so 128 is assumed" in r.stderr
