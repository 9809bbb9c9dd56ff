"""Issue 22 walked as a new user (branch walk22): what a --max-model-len cap is called, and a float checkpoint
stored in another width than its config's dtype planned as the engine loads it."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from conftest import write_safetensors
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()

# Qwen3-32B's config.json (Qwen/Qwen3-32B): max_position_embeddings 40,960, no rope_scaling, bf16.
# KV per token: 64 layers x 2 (K, V) x 8 KV heads x 128 x 2 B = 262,144 B = 256 KiB.
QWEN3_32B = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 5120,
             "num_hidden_layers": 64, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
             "intermediate_size": 25600, "vocab_size": 151936, "max_position_embeddings": 40960,
             "torch_dtype": "bfloat16", "tie_word_embeddings": False, "rope_theta": 1000000}


def _fit(folder: Path, *args: str) -> dict:
    res = runner.invoke(app, ["fit", str(folder), "--gpu", "h200", "--json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["plans"][0]


def test_a_max_model_len_cap_is_named_as_such_not_as_the_model_limit(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_32B))
    # On one H200 (139.8 GiB x 0.9 = 125.8 GiB, less ~61 GiB of bf16 weights) one 40,960-token sequence takes
    # 40,960 x 256 KiB = 10 GiB: memory is not what binds at batch 1, the length is.
    own = _fit(tmp_path, "--ctx", "8k")
    assert own["max_context"] == 40_960 and own["max_context_limited_by"] == "model"
    capped = _fit(tmp_path, "--ctx", "8k", "--max-model-len", "16k")
    assert capped["max_context"] == 16_384 and capped["max_context_limited_by"] == "max_model_len"
    # past the model's 40,960 (planned as asked, kvplan's own plan): the 65,536 is --max-model-len's, not the model's
    past = _fit(tmp_path, "--ctx", "8k", "--max-model-len", "64k")
    assert past["max_context"] == 65_536 and past["max_context_limited_by"] == "max_model_len"
    res = runner.invoke(app, ["fit", str(tmp_path), "--gpu", "h200", "--ctx", "8k", "--max-model-len", "64k"])
    row = next(line for line in res.stdout.splitlines() if "max context @ batch 1" in line)
    assert "65,536 (--max-model-len)" in row and "model limit" not in row
    res = runner.invoke(app, ["fit", str(tmp_path), "--gpu", "h200", "--ctx", "8k"])
    assert "40,960 (model limit)" in res.stdout




# A small Llama (hidden 64, vocab 100) whose config says bfloat16; the tensors: embedding [100, 64] and LM head
# [100, 64] = 6,400 elements each, one q_proj [64, 64] = 4,096: 16,896 elements.
SMALL = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
         "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}
SHAPES = {"model.embed_tokens.weight": [100, 64], "lm_head.weight": [100, 64],
          "model.layers.0.self_attn.q_proj.weight": [64, 64]}


def _folder(tmp_path: Path, dtypes: list[str], torch_dtype: str = "bfloat16") -> Path:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps({**SMALL, "torch_dtype": torch_dtype}))
    width = {"F32": 4, "BF16": 2, "F16": 2}
    tensors = {name: (d, shape, shape[0] * shape[1] * width[d]) for (name, shape), d in zip(SHAPES.items(), dtypes)}
    write_safetensors(tmp_path / "model.safetensors", tensors)
    return tmp_path


def test_an_f32_checkpoint_under_a_bf16_config_is_planned_as_loaded_in_bf16(tmp_path):
    # vLLM's --dtype auto takes the config's bfloat16 and casts each F32 tensor into a bf16 parameter as it loads
    # ("auto will use ... BF16 precision for BF16 models": vllm-project/vllm@0052a5b8 vllm/config/model.py): the
    # 16,896 elements take 33,792 B loaded, not the 67,584 B stored
    folder = _folder(tmp_path, ["F32", "F32", "F32"])
    res = runner.invoke(app, ["fit", str(folder), "--gpu", "h100", "--ctx", "1k", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["plans"][0]["weight_bytes"] == 33_792
    assert "every tensor is stored as F32, the model dtype is bf16 (config.json)" in res.stderr
    assert "33,792 B planned, not the 67,584 B stored" in res.stderr



def test_the_load_rule_is_the_engines_passed_down_to_the_reader(tmp_path):
    # sources/ reads what is stored (67,584 B: 16,896 F32 elements x 4); the cast to the config's bf16 is
    # kvplan.engines.served_dtype's rule, which every front end passes to resolve_model (16,896 x 2 = 33,792 B)
    from kvplan.engines.served_dtype import loaded_as_model_dtype
    from kvplan.sources.resolve import resolve_model

    folder = _folder(tmp_path, ["F32", "F32", "F32"])
    assert resolve_model(str(folder)).spec.checkpoint_bytes == 67_584
    assert resolve_model(str(folder), loaded_bytes=loaded_as_model_dtype).spec.checkpoint_bytes == 33_792

def test_a_checkpoint_stored_in_its_config_dtype_or_in_several_is_planned_as_stored(tmp_path):
    # F16 under bfloat16: the same 2 bytes each, 33,792 B; a mix (F32 embedding, BF16 rest) is left as stored:
    # 25,600 + 12,800 + 8,192 = 46,592 B (engines keep some tensors in fp32; a mix is not one cast)
    assert _fit(_folder(tmp_path / "a", ["F16", "F16", "F16"]), "--ctx", "1k")["weight_bytes"] == 33_792
    assert _fit(_folder(tmp_path / "b", ["F32", "BF16", "BF16"]), "--ctx", "1k")["weight_bytes"] == 46_592
    # a BF16 file under a float32 config: planned in fp32 as the plan says (4 B each: 67,584 B)
    assert _fit(_folder(tmp_path / "c", ["BF16"] * 3, "float32"), "--ctx", "1k")["weight_bytes"] == 67_584


# StarCoder2-7B's config.json (bigcode/starcoder2-7b): an ungated MLP (c_fc 4,608 -> 18,432, c_proj back), 36 heads
# of 128 over 4 KV heads, 32 layers, vocabulary 49,152, bf16.
STARCODER2_7B = {"model_type": "starcoder2", "architectures": ["Starcoder2ForCausalLM"], "hidden_size": 4608,
                 "num_hidden_layers": 32, "num_attention_heads": 36, "num_key_value_heads": 4,
                 "intermediate_size": 18432, "vocab_size": 49152, "max_position_embeddings": 16384,
                 "sliding_window": 4096, "torch_dtype": "bfloat16", "use_bias": True, "norm_type": "layer_norm"}


def _lora(folder: Path, engine: str, lora: str):
    return runner.invoke(app, ["fit", str(folder), "--gpu", "l40s", "--ctx", "8k", "--engine", engine, "--lora", lora,
                               "--json"])


def test_lora_on_an_ungated_mlp_adapts_up_and_down_only_and_refuses_gate_alone(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(STARCODER2_7B))
    # vLLM (vllm/lora/layers/base_linear.py create_lora_weights): lora_a (max_loras, rank, in) + lora_b
    # (max_loras, out, rank) per wrapped projection in bf16. c_fc: 4,608 + 18,432 = 23,040, c_proj the same:
    # 4 x 16 x 46,080 x 2 B x 32 layers = 188,743,680 B; the gate kvplan used to add (a third 23,040) is not there
    for engine in ("vllm", "sglang", "trtllm"):
        for lora in ("4:16:mlp", "4:16:up,down"):
            res = _lora(tmp_path, engine, lora)
            assert res.exit_code == 0, res.output
            assert json.loads(res.stdout)["plans"][0]["lora_bytes_per_gpu"] == 188_743_680, (engine, lora)
        res = _lora(tmp_path, engine, "4:16:gate")
        assert res.exit_code != 0 and "no gate projection" in res.output and "Traceback" not in res.output
    # vLLM's default: every linear layer, q 4,608 + 4,608, k and v 4,608 + 512 each, o 4,608 + 4,608 = 28,672 and
    # the MLP's 46,080 a layer (x 32 = 2,392,064), plus the vocabulary slots 49,152 + 4,608 + 4,608 + 49,152 =
    # 107,520: 4 x 16 x 2,499,584 x 2 B = 319,946,752 B
    res = _lora(tmp_path, "vllm", "4:16")
    assert json.loads(res.stdout)["plans"][0]["lora_bytes_per_gpu"] == 319_946_752


def test_a_context_past_max_model_len_says_it_is_max_model_len_that_binds_not_the_models_limit(tmp_path):
    # Qwen3-32B's own limit is 40,960; --max-model-len 16k caps it at 16,384, so a 32,768-token request is refused by
    # the length asked for (vLLM: "... longer than the maximum model length of 16384"), not by the model's limit
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_32B))
    m = str(tmp_path)
    res = runner.invoke(app, ["fit", m, "--gpu", "h200", "--ctx", "32k", "--max-model-len", "16k"])
    text = " ".join(res.output.split())
    assert "is past --max-model-len of 16,384 tokens" in text and "the model's limit" not in text
    res = runner.invoke(app, ["fit", m, "--gpu", "h200", "--ctx", "32k", "--max-model-len", "16k", "--explain"])
    assert "context 32,768 > --max-model-len 16,384 tokens" in " ".join(res.output.split())
    res = runner.invoke(app,
                        ["sweep", "-m", m, "-c", "32k", "-g", "h200", "--gpu-counts", "1", "--max-model-len", "16k"])
    assert "1 plan asks a context past --max-model-len (fits: limit)" in " ".join(res.output.split())
    res = runner.invoke(app, ["cheapest", m, "--ctx", "32k", "--concurrency", "2", "-g", "h200", "--max-model-len",
                              "16k", "--json"])
    assert "exceeds --max-model-len (16,384)" in res.stderr
    assert "exceeds --max-model-len (16k tokens; the limit binds" in res.stdout
    # without the flag, the model's own 40,960 binds a 64k request and is named as the model's
    res = runner.invoke(app, ["fit", m, "--gpu", "h200", "--ctx", "64k"])
    assert "is past the model's context limit of 40,960 tokens" in " ".join(res.output.split())


def test_a_gguf_file_or_a_folder_of_one_is_read_as_gguf_not_as_json(tmp_path):
    # a GGUF file starts with the magic "GGUF" and a uint32 version (ggml-org/ggml docs/gguf.md); it used to be read
    # as a config.json ("not valid JSON (Expecting value ...)"), a folder of one as "no config.json". Now it is read
    # as GGUF (tests/test_gguf.py); one without general.architecture says that, in one line
    gguf = tmp_path / "model-Q4_K_M.gguf"
    gguf.write_bytes(b"GGUF" + struct.pack("<I", 3) + bytes(16))
    for model in (gguf, tmp_path):
        res = runner.invoke(app, ["fit", str(model), "--gpu", "rtx-4090", "--ctx", "8k"])
        assert res.exit_code == 2 and "Traceback" not in res.output
        assert f"{gguf}: no general.architecture in its metadata" in " ".join(res.output.split())


def test_a_config_that_declares_fp8_over_files_of_bf16_tensors_says_so(tmp_path):
    # DeepSeek-style block FP8 in config.json, but the file holds BF16 tensors only (16,896 elements x 2 B =
    # 33,792 B): the stored bytes are planned, and the disagreement is said instead of a silent 'weights fp8'
    config = {**SMALL, "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
                                               "weight_block_size": [128, 128]}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    write_safetensors(tmp_path / "model.safetensors",
                 {name: ("BF16", shape, shape[0] * shape[1] * 2) for name, shape in SHAPES.items()})
    res = runner.invoke(app, ["fit", str(tmp_path), "--gpu", "h100", "--ctx", "1k", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["plans"][0]["weight_bytes"] == 33_792
    assert ("config.json declares fp8 weights but every tensor is stored as BF16 (none quantized): planned at the "
            "33,792 B stored" in " ".join(res.stderr.split()))


def test_an_all_windowed_model_says_its_cache_is_fixed_per_sequence_not_free():
    # StarCoder2-7B (bigcode/starcoder2-7b config.json): 32 layers, 4 KV heads of 4,608 / 36 = 128, every layer a
    # 4,096-token sliding window. Past 4,096 tokens the cache does not grow: per sequence 2 x 32 x 4 x 128 x 4,096
    # x 2 B = 268,435,456 B = 256 MiB at any context, so its growth per token at 16k is 0 B, which the table says is
    # a fixed size per sequence rather than printing a bare "0 B".
    res = runner.invoke(app, ["fit", "starcoder2-7b", "--gpu", "l4", "--ctx", "16k"], env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    row = next(line for line in res.stdout.splitlines() if "KV per token" in line)
    assert "0 B (fixed per sequence)" in row
    assert "256.00 MiB" in next(line for line in res.stdout.splitlines() if "KV per sequence" in line)
    plan = json.loads(runner.invoke(app, ["fit", "starcoder2-7b", "--gpu", "l4", "--ctx", "16k", "--json"]).stdout)
    assert plan["plans"][0]["kv_bytes_per_sequence"] == 268_435_456
