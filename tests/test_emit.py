"""`fit --emit`: the serve command carries the plan's own numbers."""

from __future__ import annotations

import json
import shlex

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()


def emitted(*args):
    r = runner.invoke(app, ["fit", *args, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    return d, shlex.split(d["emit"])


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_emit_vllm():
    d, argv = emitted("llama-3.1-70b", "--gpu", "h100", "--gpus", "4", "--ctx", "128k", "--emit", "vllm")
    assert argv[:3] == ["vllm", "serve", "meta-llama/Meta-Llama-3.1-70B"]
    assert flag(argv, "--max-model-len") == "131072" and flag(argv, "-tp") == "4"
    assert flag(argv, "--gpu-memory-utilization") == f"{d['engine']['settings']['gpu_memory_utilization']:g}"
    assert int(flag(argv, "--max-num-seqs")) == max(1, d["max_concurrency"])


def test_emit_vllm_fp8_cache():
    _, argv = emitted("qwen3-8b", "--gpu", "h100", "--ctx", "32k", "--kv-dtype", "fp8", "--emit", "vllm")
    assert flag(argv, "--kv-cache-dtype") == "fp8"


def test_emit_sglang():
    d, argv = emitted("qwen3-32b", "--gpu", "h100", "--gpus", "2", "--ctx", "32k", "--engine", "sglang",
                      "--emit", "sglang")
    assert flag(argv, "--context-length") == "32768" and flag(argv, "--tp-size") == "2"
    assert float(flag(argv, "--mem-fraction-static")) == d["engine"]["settings"]["mem_fraction_static"]


def test_emit_llamacpp_total_context_and_slots():
    _, argv = emitted("qwen3-8b", "--gpu", "4090", "--ctx", "8k", "--batch", "4", "--kv-dtype", "q8_0",
                      "--emit", "llama.cpp")
    assert flag(argv, "-c") == str(4 * 8192) and flag(argv, "-np") == "4"
    assert flag(argv, "-ctk") == "q8_0" and flag(argv, "-ctv") == "q8_0" and flag(argv, "-fa") == "on"


def test_emit_mismatch_and_unsupported():
    r = runner.invoke(app, ["fit", "qwen3-8b", "--gpu", "h100", "--engine", "sglang", "--emit", "vllm"])
    assert r.exit_code == 2 and r.output.startswith("Error:")
    r = runner.invoke(app, ["fit", "qwen3-8b", "--gpu", "h100", "--emit", "trtllm"])
    assert r.exit_code == 2 and "--emit supports" in r.output


def test_emit_vllm_states_the_margin_and_raises_utilization_only_when_needed():
    # Qwen3-8B on one H100 (vLLM 0.33 defaults, gmu 0.92): 8 x 32k tokens need 8 x 32768 x 36 layers
    # x 8 heads x 128 x 2 x 2 B = 36 GiB; the plan's budget holds that, so 0.92 stays and the margin is stated.
    d, argv = emitted("qwen3-8b", "--gpu", "h100", "--gpus", "1", "--ctx", "32k", "--batch", "8", "--emit", "vllm")
    assert flag(argv, "--gpu-memory-utilization") == "0.92"
    assert "need 36.00 GiB" in d["emit_margin"] and "to spare" in d["emit_margin"]
    # --gpu-memory-utilization 0.5 cannot hold them (0.5 x 79.18 GiB - 16.4 GiB of weights < 36 GiB):
    # the command carries the lowest value that does, with 5% to spare, and says it was raised.
    d, argv = emitted("qwen3-8b", "--gpu", "h100", "--gpus", "1", "--ctx", "32k", "--batch", "8",
                      "--gpu-memory-utilization", "0.5",
                      "--emit", "vllm")
    g = float(flag(argv, "--gpu-memory-utilization"))
    assert 0.5 < g < 0.92 and "raised from 0.5" in d["emit_margin"]


def test_emit_sglang_raises_the_fraction_only_when_the_pool_is_short():
    # Qwen3-32B at tp 2 on H100s, 8 x 32k = 262,144 tokens (+10% margin = 288,358): at
    # mem_fraction_static 0.5 the pool is far smaller, so the command carries a higher fraction and says so.
    d, argv = emitted("qwen3-32b", "--gpu", "h100", "--gpus", "2", "--ctx", "32k", "--batch", "8",
                      "--engine", "sglang", "--engine-opt", "mem_fraction_static=0.5", "--emit", "sglang")
    f = float(flag(argv, "--mem-fraction-static"))
    assert 0.5 < f < 0.99 and "raised from 0.5" in d["emit_margin"] and "need 262,144" in d["emit_margin"]
    assert d["kv_cache_tokens"] < 262144  # the plan at 0.5 itself does not hold them


# --weight-dtype: the emitted command loads the weights the plan counted, or kvplan refuses to print one.

def test_emit_fp8_weights_from_a_bf16_checkpoint_quantize_online():
    # vLLM docs/features/quantization/fp8.md: "Dynamic quantization of an original precision BF16/FP16 model
    # to FP8 ... by specifying --quantization="fp8""; SGLang docs/advanced_features/quantization.md: online
    # quantization is `--quantization fp8` on the 16-bit model. Qwen3-8B's config.json has no
    # quantization_config (torch_dtype bfloat16), so without the flag both would load 2-byte weights.
    for engine in ("vllm", "sglang"):
        d, argv = emitted("qwen3-8b", "--gpu", "h100", "--ctx", "32k", "--weight-dtype", "fp8", "--emit", engine)
        assert flag(argv, "--quantization") == "fp8", argv
        assert "fp8" in d["emit_weights"]
        _, argv = emitted("qwen3-8b", "--gpu", "h100", "--ctx", "32k", "--emit", engine)
        assert "--quantization" not in argv and "--dtype" not in argv  # the checkpoint as stored


def test_emit_fp8_checkpoint_takes_no_quantization_flag():
    # DeepSeek-V3's config.json carries quantization_config {quant_method: fp8, weight_block_size [128, 128]}:
    # both engines read it; SGLang's docs say not to add --quantization to a pre-quantized model.
    _, argv = emitted("deepseek-v3", "--gpu", "h200", "--gpus", "8", "--ctx", "32k", "--weight-dtype", "fp8",
                      "--emit", "vllm")
    assert "--quantization" not in argv


def test_emit_16_bit_cast_is_dtype():
    # fp16 weights from a bf16 checkpoint: vLLM's --dtype float16 casts at load (same 2 bytes a weight).
    _, argv = emitted("qwen3-8b", "--gpu", "h100", "--ctx", "32k", "--weight-dtype", "fp16", "--emit", "vllm")
    assert flag(argv, "--dtype") == "float16" and "--quantization" not in argv


def test_emit_refuses_weights_no_engine_flag_makes():
    cases = [
        ("qwen3-8b", "h100", "1", "int4", "vllm"),  # neither engine makes AWQ/GPTQ int4 from bf16 at load
        ("qwen3-8b", "h100", "1", "int4", "sglang"),
        ("deepseek-v3", "h200", "16", "bf16", "vllm"),  # no flag dequantizes an fp8 checkpoint
        ("qwen3-8b", "4090", "1", "fp8", "llama.cpp"),  # GGUF has no fp8 tensor type
    ]
    for model, gpu, gpus, wd, engine in cases:
        r = runner.invoke(app, ["fit", model, "--gpu", gpu, "--gpus", gpus, "--ctx", "8k", "--weight-dtype", wd,
                                "--emit", engine])
        assert r.exit_code == 2, (engine, wd, r.output)
        assert f"Error: --emit {engine}: the plan counts {wd} weights" in r.stderr
        assert engine.split(".")[0] + " serve" not in r.stdout and "launch_server" not in r.stdout
        assert "llama-server" not in r.stdout


def test_emit_llamacpp_names_the_gguf_type_the_plan_counts():
    # llama.cpp loads tensors in the file's own types (no load-time conversion): the -m file is named for
    # the plan's type, and the note says so.
    d, argv = emitted("qwen3-8b", "--gpu", "4090", "--ctx", "8k", "--weight-dtype", "q4_k_m", "--emit", "llama.cpp")
    assert flag(argv, "-m") == "qwen3-8b-Q4_K_M.gguf" and "Q4_K_M GGUF" in d["emit_weights"]
    _, argv = emitted("qwen3-8b", "--gpu", "4090", "--ctx", "8k", "--emit", "llama.cpp")
    assert flag(argv, "-m") == "qwen3-8b-BF16.gguf"  # the checkpoint's own bf16, as the plan counts it


def test_emit_vllm_never_raises_the_running_limit_the_plan_was_made_at():
    # vLLM's profile run sizes the sampler's dummy batch and the CUDA-graph capture sizes by --max-num-seqs
    # (kvplan/engines/vllm/overhead.py), so a command must carry the limit the plan was made at: Llama-3.1-8B on an
    # H100 at 2,200 tokens holds 200-odd requests, yet with max_num_seqs=32 the plan (and the pool it predicts) is
    # vLLM's at 32, and the command says 32. Without the option the plan is at vLLM's 1,024 and the command keeps
    # the pool's capacity, which is lower.
    d, argv = emitted("llama-3.1-8b", "--gpu", "h100", "--ctx", "2200", "--engine", "vllm",
                      "--engine-opt", "max_num_seqs=32", "--emit", "vllm")
    plan = d["plans"][d["recommended"]]
    assert plan["max_concurrency"] > 32 and flag(argv, "--max-num-seqs") == "32"
    d, argv = emitted("llama-3.1-8b", "--gpu", "h100", "--ctx", "2200", "--engine", "vllm", "--emit", "vllm")
    plan = d["plans"][d["recommended"]]
    assert int(flag(argv, "--max-num-seqs")) == plan["max_concurrency"] < plan["engine"]["settings"]["max_num_seqs"]


def test_emit_sglang_context_length_follows_max_model_len_not_a_shorter_ctx():
    # --ctx 8k plans requests of 8,192 tokens, but --max-model-len 32k is the length the server is to accept: SGLang's
    # --context-length (srt/server_args.py) is that limit, 32 x 1,024 = 32,768, not the plan's 8,192 (which it emitted
    # before, as vLLM's --max-model-len did until the twenty-fourth round)
    _, short = emitted("llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--engine", "sglang", "--emit", "sglang")
    _, asked = emitted("llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--max-model-len", "32k", "--engine", "sglang",
                       "--emit", "sglang")
    assert flag(short, "--context-length") == "8192" and flag(asked, "--context-length") == "32768"


def test_emit_llamacpp_slots_follow_max_model_len_not_a_shorter_ctx():
    # llama-server's -c is the total over -np slots and each slot's length limit is -c / -np (llama.cpp `0c1e5709`
    # llama-context.cpp L292-306: n_ctx_seq = GGML_PAD(n_ctx / n_seq, 256), n_ctx = n_ctx_seq x n_seq), which it also
    # allocates: with --max-model-len 32k past --ctx 8k a slot must take 32,768 tokens, so -c is 4 x 32,768 = 131,072
    # (issue 22; it emitted 4 x 8,192 = 32,768 before) and the plan is that cache's, as --ctx 32k's
    base = ("qwen3-8b", "--gpu", "h100", "--batch", "4", "--engine", "llamacpp", "--emit", "llama.cpp")
    _, short = emitted(*base, "--ctx", "8k")
    asked, argv = emitted(*base, "--ctx", "8k", "--max-model-len", "32k")
    long, _ = emitted(*base, "--ctx", "32k")
    assert flag(short, "-c") == "32768" and flag(argv, "-c") == "131072" and flag(argv, "-np") == "4"
    asked, long = asked["plans"][0], long["plans"][0]  # --gpus not given: the layouts searched, one GPU first
    assert asked["context"] == long["context"] == 32768
    assert asked["kv_bytes_per_sequence"] == long["kv_bytes_per_sequence"]
    assert asked["max_concurrency"] == long["max_concurrency"]


def test_llamacpp_says_when_max_model_len_lengthens_each_slot():
    # as above (llama-context.cpp L292-306: a slot's limit is -c / -np, and what it allocates): --ctx 8k with
    # --max-model-len 32k plans 32,768-token slots, said on stderr with the command's -c, 4 x 32,768 = 131,072;
    # --ctx 32k asks for that length itself, so there is nothing to say
    base = ["fit", "qwen3-8b", "--gpu", "h100", "--gpus", "1", "--batch", "4", "--engine", "llamacpp",
            "--max-model-len", "32k"]
    res = CliRunner().invoke(app, [*base, "--ctx", "8k"])
    assert res.exit_code == 0, res.output
    assert "each slot planned at --max-model-len 32,768 tokens, not --ctx 8,192" in res.stderr
    assert "-c 131,072 for -np 4" in res.stderr
    same = CliRunner().invoke(app, [*base, "--ctx", "32k"])
    assert same.exit_code == 0 and "each slot planned" not in same.stderr


def test_emit_sglang_carries_a_given_chunk_and_chunked_prefill_off():
    # the chunk the plan priced goes on the line (a given 4,096; -1, SGLang's "disable chunked prefill"), with the
    # fraction it priced: 0.5.7 on an H100 at -1 reserves 25,728 MiB -> 0.685 (tests/test_sglang_chunk_off.py)
    _, argv = emitted("llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--engine", "sglang", "--engine-version", "0.5.7",
                      "--engine-opt", "chunked_prefill_size=-1", "--emit", "sglang")
    assert flag(argv, "--chunked-prefill-size") == "-1" and flag(argv, "--mem-fraction-static") == "0.685"
    _, argv = emitted("llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--engine", "sglang", "--engine-opt",
                      "chunked_prefill_size=4096", "--emit", "sglang")
    assert flag(argv, "--chunked-prefill-size") == "4096"
    _, argv = emitted("llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--engine", "sglang", "--emit", "sglang")
    assert "--chunked-prefill-size" not in argv
