"""Issue 22's three gaps (branch quant29): a 16-bit checkpoint quantized as it loads (fp8, bitsandbytes' NF4), a
float32 config served in 16 bits, and LoRA target modules named as the model names them."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import write_safetensors, unwrapped
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()

# A small Llama: hidden 64, 4 heads of 16 over 2 KV heads, MLP 128, 2 layers, vocabulary 100, untied. Per layer the
# linear weights are q 64x64 = 4,096, k and v 64x32 = 2,048 each, o 4,096, gate, up and down 64x128 = 8,192 each:
# 36,864, so 73,728 in all; the rest is the embedding and LM head 100x64 = 6,400 each and the RMSNorms 2 x 64 a
# layer plus the final 64 = 320: 13,120 parameters, which every engine keeps in 16 bits.
SMALL = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
         "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}


def _run(folder: Path, *args: str):
    res = runner.invoke(app, ["fit", str(folder), "--gpu", "h100", "--ctx", "1k", *args])
    assert res.exit_code == 0, res.output
    return res


def _plan(folder: Path, *args: str) -> dict:
    return json.loads(_run(folder, *args, "--json").stdout)["plans"][0]


def _config(tmp_path: Path, config: dict) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


# --- 1. a 16-bit checkpoint quantized as it loads ------------------------------------------------------------------

def test_a_bf16_checkpoint_planned_as_bitsandbytes_nf4_or_fp8_is_quantized_as_it_loads(tmp_path):
    folder = _config(tmp_path, SMALL)
    # bitsandbytes as vLLM and SGLang quantize while loading: quantize_4bit(w, compress_statistics=True,
    # quant_type="nf4"), blocksize 64 (vllm 0.8.0 wheel, vllm/model_executor/model_loader/loader.py L1045-1049;
    # sglang 0.5.23 wheel, sglang/srt/model_loader/loader.py L2854-2855): 73,728 / 2 = 36,864 B of packed weights and a
    # uint8 absmax per 64 (double quantization), 1,152 B; the 13,120 others x 2 B = 26,240 B: 64,256 B
    plan = _plan(folder, "--weight-dtype", "bitsandbytes")
    assert (plan["weight_dtype"], plan["weight_bytes"]) == ("nf4", 64_256)
    # vLLM's online fp8 (Fp8LinearMethod on a checkpoint not serialized in fp8): one byte a linear weight, 73,728 B,
    # + 26,240 B = 99,968 B
    assert _plan(folder, "--weight-dtype", "fp8")["weight_bytes"] == 99_968
    res = _run(folder, "--weight-dtype", "nf4")
    assert "the checkpoint is bf16: its weights are planned as nf4" in res.stderr
    assert "embeddings, LM head, norms and routers stay bf16" in res.stderr


def test_the_emitted_command_quantizes_as_it_loads_and_says_what_loading_holds(tmp_path):
    folder = _config(tmp_path, SMALL)
    # vLLM 0.8.0 refuses --quantization bitsandbytes without --load-format bitsandbytes (vllm/engine/arg_utils.py
    # L1163-1175, create_load_config); SGLang takes both (sglang/srt/arg_groups/choices.py L19, L39)
    # (vLLM's last release with bitsandbytes is 0.27.1: kvplan.engines.vllm.quant_methods)
    for engine, version in (("vllm", "0.27.1"), ("sglang", "0.5.23")):
        res = _run(folder, "--engine", engine, "--engine-version", version, "--weight-dtype", "nf4", "--emit", engine)
        assert "--quantization bitsandbytes --load-format bitsandbytes" in res.stdout
        assert "the checkpoint is bf16; --quantization bitsandbytes quantizes it" in res.output
    # online fp8 held the whole 16-bit model before quantizing until vllm-project/vllm#31914 (vllm#32773 reports 0.14.0
    # still doing so): kvplan's 0.15.0 says so, 0.33.0 streams layer by layer
    old = _run(folder, "--engine", "vllm", "--engine-version", "0.15.0", "--weight-dtype", "fp8", "--emit", "vllm")
    assert "--quantization fp8" in old.stdout and "loads the weights at original precision first" in old.output
    new = _run(folder, "--engine", "vllm", "--weight-dtype", "fp8", "--emit", "vllm")
    assert "layer by layer" in new.output and "original precision" not in new.output


# --- 2. a float32 config ---------------------------------------------------------------------------------------------

def _f32_folder(tmp_path: Path) -> Path:
    # the same model stored and configured in float32: 6,400 + 6,400 + 4,096 elements in three F32 tensors, 67,584 B
    folder = _config(tmp_path, {**SMALL, "torch_dtype": "float32"})
    shapes = {"model.embed_tokens.weight": [100, 64], "lm_head.weight": [100, 64],
              "model.layers.0.self_attn.q_proj.weight": [64, 64]}
    write_safetensors(folder / "model.safetensors", {n: ("F32", s, s[0] * s[1] * 4) for n, s in shapes.items()})
    return folder


def test_a_float32_config_is_planned_in_the_16_bits_vllm_and_sglang_serve_it_in(tmp_path):
    folder = _f32_folder(tmp_path)
    # KV per token in 16 bits: 2 layers x (K, V) x 2 KV heads x 16 x 2 B = 256 B (float32: 512 B)
    # vLLM from vllm-project/vllm#18751 (0.9.1): _resolve_auto_dtype downcasts float32 to the platform's first supported
    # dtype, bfloat16 on compute capability >= 8.0 (vllm/platforms/cuda.py CudaPlatformBase.supported_dtypes)
    plan = _plan(folder, "--engine", "vllm")
    assert (plan["weight_dtype"], plan["kv_dtype"], plan["kv_bytes_per_token"]) == ("bf16", "bf16", 256)
    # before it, float16 (vllm 0.8.0 wheel, vllm/config.py L2535-2545); SGLang float16 (sglang 0.5.9 wheel,
    # sglang/srt/configs/model_config.py L1138-1154)
    for args in (("--engine", "vllm", "--engine-version", "0.8.5"), ("--engine", "sglang")):
        plan = _plan(folder, *args)
        assert (plan["weight_dtype"], plan["kv_dtype"], plan["kv_bytes_per_token"]) == ("fp16", "fp16", 256), args
    res = _run(folder, "--engine", "vllm", "--emit", "vllm")
    # the 67,584 B of F32 tensors load as 16,896 two-byte parameters: 33,792 B
    assert "serves it as bf16" in res.stderr and "33,792 B of weights, not the 67,584 B stored" in res.stderr
    assert "--dtype" not in next(line for line in res.stdout.splitlines() if line.startswith("vllm serve"))
    # TensorRT-LLM: no rule read, the config's float32 planned and said so
    plan = _plan(folder, "--engine", "trtllm")
    assert (plan["weight_dtype"], plan["kv_bytes_per_token"]) == ("fp32", 512)
    assert "reads no rule that casts it" in _run(folder, "--engine", "trtllm").stderr


# --- 3. LoRA target modules in the model's own names ---------------------------------------------------------------

STARCODER2 = {"model_type": "starcoder2", "architectures": ["Starcoder2ForCausalLM"], "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 256,
              "vocab_size": 100, "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "use_bias": True}
GPT2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_layer": 2, "n_head": 4,
        "vocab_size": 100, "n_positions": 1024}
PHI = {"model_type": "phi", "architectures": ["PhiForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
       "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 100, "max_position_embeddings": 2048,
       "torch_dtype": "float16"}


def _targets(folder: Path, engine: str, lora: str):
    res = runner.invoke(app, ["fit", str(folder), "--gpu", "l40s", "--ctx", "1k", "--engine", engine,
                              "--lora", lora, "--emit", engine])
    if res.exit_code != 0:
        return res.output
    line = next(x for x in unwrapped(res.stdout).splitlines() if "--lora-target-modules" in x)
    return line.split("--lora-target-modules ")[1].split(" --")[0].split()


def test_lora_target_modules_are_the_models_own_names(tmp_path):
    # vLLM's ports (vllm 0.8.0 wheel, vllm/model_executor/models/): StarCoder2 qkv_proj, o_proj, c_fc, c_proj
    # (starcoder2.py L86-144); Phi qkv_proj, dense, fc1, fc2 (phi.py L88-153); GPT-2 c_attn, c_proj, c_fc, c_proj
    # (gpt2.py L70-121); --lora-target-modules matches a module's last name (vllm/lora/utils.py is_in_target_modules)
    sc2 = _config(tmp_path / "sc2", STARCODER2)
    assert _targets(sc2, "vllm", "4:16:mlp") == ["c_fc", "c_proj"]
    assert _targets(sc2, "vllm", "4:16:attn") == ["qkv_proj", "o_proj"]
    assert _targets(sc2, "sglang", "4:16:attn") == ["qkv_proj", "o_proj"]
    # SGLang's flag takes Llama's names only (choices=SUPPORTED_LORA_TARGET_MODULES: sglang 0.5.23 wheel,
    # sglang/srt/arg_groups/fields/lora.py L51, sglang/srt/utils/common.py L4700-4721)
    refused = _targets(sc2, "sglang", "4:16:mlp")
    assert "Llama's projection names only, not c_fc, c_proj" in refused and "Traceback" not in refused
    phi = _config(tmp_path / "phi", PHI)
    assert _targets(phi, "vllm", "4:16:o,up") == ["dense", "fc1"]
    gpt2 = _config(tmp_path / "gpt2", GPT2)
    assert _targets(gpt2, "vllm", "4:16:q,o,down") == ["c_attn", "c_proj"]
    # c_proj is both the attention's output and the MLP's down projection: naming it wraps both
    refused = _targets(gpt2, "vllm", "4:16:o")
    assert "o, down are all modules named c_proj" in refused and "add down" in refused
    # the default (every linear layer) needs no names
    res = runner.invoke(app, ["fit", str(gpt2), "--gpu", "l40s", "--ctx", "1k", "--engine", "vllm", "--lora", "4:16",
                              "--emit", "vllm"])
    assert res.exit_code == 0 and "--lora-target-modules" not in res.stdout


def test_lora_target_modules_of_a_family_whose_names_are_unread_are_refused(tmp_path):
    # EXAONE (model_type exaone) is planned by the common reader, but its projection names are not among those read
    cfg = {**SMALL, "model_type": "exaone"}
    folder = _config(tmp_path, cfg)
    out = _targets(folder, "vllm", "4:16:q,v")
    assert "has not read what its family (exaone) calls its projections" in out and "Traceback" not in out
