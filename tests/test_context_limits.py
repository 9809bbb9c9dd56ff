"""Each engine's context limit from rope_scaling (kvplan.engines.context), --max-model-len, what binds a
plan that does not fit, the smallest-fit search over every GPU count, and the token labels.

Expected limits are the engines' own arithmetic written out (sources in kvplan/engines/context.py):
vLLM `_get_and_verify_max_len` (v0.33.0 vllm/config/model.py L2143-2175), SGLang `get_context_length`
(srt/hf_transformers_utils.py), TensorRT-LLM `infer_max_seq_len` (_torch/models/modeling_utils.py),
llama.cpp n_ctx_train (the GGUF context_length convert_hf_to_gguf.py writes from max_position_embeddings).
The Qwen3 figure is also Qwen's own: the Qwen3-32B model card enables 131,072 tokens with
{rope_type: yarn, factor: 4.0, original_max_position_embeddings: 32768}.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan import api
from kvplan.cli import app
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.engines import resolve_engine
from kvplan.engines.context import limited
from kvplan.readers.configs import spec_from_config
from kvplan.sources.catalog import spec_from_dict, spec_to_dict

runner = CliRunner()
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
# Qwen3-32B's config.json (Qwen/Qwen3-32B): the keys that size it.
QWEN3_32B = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 5120,
             "num_hidden_layers": 64, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
             "intermediate_size": 25600, "vocab_size": 151936, "max_position_embeddings": 40960,
             "torch_dtype": "bfloat16", "tie_word_embeddings": False, "rope_theta": 1000000}


def _spec(rope=None, **over):
    cfg = {**QWEN3_32B, **over, **({"rope_scaling": rope} if rope else {})}
    return spec_from_config(cfg, "qwen3-32b-test")[0]


def _limit(engine, spec, version=None):
    return resolve_engine(engine, version).context_limit(spec) if engine else resolve_engine(None).context_limit(spec)


@pytest.fixture
def qwen_yarn(tmp_path):
    folder = tmp_path / "qwen3-32b-yarn"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**QWEN3_32B, "rope_scaling": YARN}))
    return str(folder)


def test_qwen3_yarn_limit_by_engine():
    spec = _spec(YARN)
    assert spec.max_context == 40_960  # the config's own positions
    # vLLM: yarn starts from original_max_position_embeddings: 32,768 x 4 = 131,072.
    assert _limit("vllm", spec).tokens == 32_768 * 4 == 131_072
    assert _limit("vllm", spec, "0.5.0").tokens == 131_072  # the same arithmetic in the oldest release
    assert _limit(None, spec).tokens == 131_072  # kvplan's own: vLLM's derivation
    # SGLang: rope_scaling has original_max_position_embeddings, so the factor is 1: 40,960.
    assert _limit("sglang", spec).tokens == 40_960
    # TensorRT-LLM leaves yarn unscaled; llama.cpp's n_ctx_train is max_position_embeddings.
    assert _limit("trtllm", spec).tokens == 40_960
    assert _limit("llama.cpp", spec).tokens == 40_960


def test_other_scalings():
    # linear factor 2 on 4,096 positions: vLLM 8,192; SGLang 8,192 (no original key); TRT-LLM ceil(4,096 x 2).
    lin = _spec({"rope_type": "linear", "factor": 2.0}, max_position_embeddings=4096)
    assert [_limit(e, lin).tokens for e in ("vllm", "sglang", "trtllm", "llama.cpp")] == [8192, 8192, 8192, 4096]
    # dynamic (old "type" key) factor 1.5 on 4,096: 6,144 for vLLM, SGLang and TRT-LLM.
    dyn = _spec({"type": "dynamic", "factor": 1.5}, max_position_embeddings=4096)
    assert [_limit(e, dyn).tokens for e in ("vllm", "sglang", "trtllm")] == [6144, 6144, 6144]
    # llama3: already counted in max_position_embeddings by all of them (131,072).
    l3 = _spec({"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192},
               max_position_embeddings=131072)
    assert {_limit(e, l3).tokens for e in ("vllm", "sglang", "trtllm", "llama.cpp")} == {131_072}


def test_vllm_gemma3_exemption_and_longrope_default_by_release():
    # Gemma 3: linear factor 8 over 131,072 positions; vLLM skips the factor from the Gemma 3 release on,
    # 0.6.6 multiplied it (131,072 x 8 = 1,048,576).
    gemma = _spec({"rope_type": "linear", "factor": 8.0}, model_type="gemma3_text", max_position_embeddings=131072)
    assert _limit("vllm", gemma, "0.8.5").tokens == 131_072
    assert _limit("vllm", gemma, "0.6.6").tokens == 131_072 * 8
    # SGLang's get_context_length has no such exemption (sgl-project/sglang#20387 proposed one, closed):
    # 131,072 x 8 = 1,048,576, planned as the engine accepts it and said to be inflated.
    sg = _limit("sglang", gemma)
    assert sg.tokens == 1_048_576 and "already count that factor" in sg.rule
    # Phi-3.5-mini: longrope, 131,072 positions, top-level original_max_position_embeddings 4,096. The limit
    # is 131,072 everywhere; PR #27431 (after 0.11.0) serves 4,096 without --max-model-len.
    phi = _spec({"rope_type": "longrope", "long_factor": [1.0], "short_factor": [1.0]},
                max_position_embeddings=131072, original_max_position_embeddings=4096)
    new, old = _limit("vllm", phi, "0.15.0"), _limit("vllm", phi, "0.11.0")
    assert (new.tokens, new.default) == (131_072, 4096) and (old.tokens, old.default) == (131_072, 131_072)


def test_bundled_catalog_carries_rope_scaling():
    from kvplan.sources.catalog import find_in_catalog

    # gpt-oss: yarn factor 32 on 4,096 original positions = 131,072 = its max_position_embeddings.
    oss = find_in_catalog("gpt-oss-120b")
    assert (oss.rope_scaling.kind, oss.rope_scaling.factor, oss.rope_scaling.original) == ("yarn", 32.0, 4096)
    assert _limit("vllm", oss).tokens == 4096 * 32 == oss.max_context
    # DeepSeek-V3: yarn factor 40 on 4,096 = 163,840 under vLLM; SGLang keeps the 163,840 positions.
    ds = find_in_catalog("deepseek-v3")
    assert _limit("vllm", ds).tokens == 4096 * 40 == _limit("sglang", ds).tokens == 163_840


def test_nested_rope_parameters_and_catalog_round_trip():
    nested = {"full_attention": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
              "sliding_attention": {"rope_type": "default"}}
    spec = _spec(None, rope_parameters=nested)
    assert _limit("vllm", spec).tokens == 131_072
    back = spec_from_dict(spec_to_dict(_spec(YARN)), "test")
    assert back.rope_scaling == _spec(YARN).rope_scaling and _limit("vllm", back).tokens == 131_072
    with pytest.raises(KvplanError, match="rope_scaling factor"):
        _spec({"rope_type": "dynamic", "factor": 1e12})


def test_max_model_len_past_the_limit_per_engine():
    spec = _spec(YARN)
    with pytest.raises(KvplanError, match="VLLM_ALLOW_LONG_MAX_MODEL_LEN=1") as exc:
        limited(resolve_engine("vllm"), spec, 262_144)
    assert exc.value.exit_code == EXIT_USAGE
    longer, notes, ctx = limited(resolve_engine("vllm"), spec, 262_144, allow_longer=True)
    assert longer.max_context == ctx == 262_144 and "past" in notes[0]
    with pytest.raises(KvplanError, match="SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"):
        limited(resolve_engine("sglang"), spec, 131_072)
    capped, notes, _ = limited(resolve_engine("llama.cpp"), spec, 131_072)
    assert capped.max_context == 40_960 and "caps" in notes[0]  # llama-server caps each slot at n_ctx_train
    assert limited(resolve_engine("trtllm"), spec, 131_072)[0].max_context == 131_072  # a warning, not a refusal
    shorter = limited(resolve_engine("vllm"), spec, 32_768)[0]
    assert shorter.max_context == 32_768  # below the limit: the served length is the limit
    # the one reading of --max-model-len / max_model_len= (once three wrappers): text as the CLI passes it
    assert limited(resolve_engine("vllm"), spec, "32k") == limited(resolve_engine("vllm"), spec, 32_768)
    with pytest.raises(KvplanError) as bad:
        limited(resolve_engine("vllm"), spec, "32q")
    assert bad.value.param == "max_model_len"


def test_fit_qwen3_yarn_128k_under_vllm_no_contradiction(qwen_yarn):
    # 131,072 tokens x 64 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 32 GiB per sequence; on 2 x H100
    # (tp 2) each GPU holds 16 GiB of it beside 30.5 GiB of weights: it fits, concurrency >= 1.
    res = runner.invoke(app, ["fit", qwen_yarn, "--gpu", "h100", "--ctx", "128k", "--gpus", "2", "--tp", "2",
                              "--engine", "vllm", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["fits"] is True and out["max_concurrency"] >= 1 and out["context_limit"] == 131_072
    assert out["binds"] is None and "131,072" in res.stderr and "yarn factor 4" in res.stderr
    # vLLM's own line and kvplan's concurrency now agree (the issue: "Maximum concurrency for 131,072 tokens"
    # printed beside concurrency 0, because kvplan held the config's 40,960 as the limit)
    line = out["engine"]["lines"]["Maximum concurrency for 131,072 tokens per request"]
    assert int(float(line.rstrip("x"))) == out["max_concurrency"]


def test_does_not_fit_says_what_binds(qwen_yarn):
    res = runner.invoke(app, ["fit", qwen_yarn, "--gpu", "h100", "--ctx", "128k", "--engine", "sglang"])
    assert res.exit_code == 0
    assert "the limit binds, not memory, so no GPU count helps" in " ".join(res.stdout.split())
    assert "No deployment of up to 64 GPUs" not in res.stdout
    # SGLang's own figures ("requests of 131,072 tokens") are said to be for a length it would not serve
    assert "sglang 0.5.23 does not serve 131,072-token requests (its limit is 40,960)" in res.stderr
    res = runner.invoke(app, ["fit", qwen_yarn, "--gpu", "h100", "--ctx", "128k", "--engine", "sglang", "--json"])
    out = json.loads(res.stdout)
    assert out["plans"][0]["binds"] == "context limit" and "limit binds" in out["does_not_fit"]
    res = runner.invoke(app, ["fit", qwen_yarn, "--gpu", "h100", "--ctx", "128k", "--engine", "sglang", "--gpus", "1",
                              "--explain"])
    assert "the limit binds, not memory" in res.stdout
    # memory binding: 5,000 requests of 128k need 5,000 x 32 GiB, more than 64 GPUs hold.
    res = runner.invoke(app, ["fit", qwen_yarn, "--gpu", "h100", "--ctx", "128k", "--batch", "5000", "--json"])
    out = json.loads(res.stdout)
    assert out["plans"][0]["binds"] == "memory" and "memory binds" in out["does_not_fit"]
    res = runner.invoke(app, ["sweep", "-m", qwen_yarn, "--ctx", "128k", "-g", "h100", "--gpu-counts", "2",
                              "--engine", "sglang", "--json"])
    assert json.loads(res.stdout)["plans"][0]["binds"] == "context limit"


def test_max_model_len_flags(qwen_yarn):
    res = runner.invoke(app, ["fit", qwen_yarn, "--gpu", "h100", "--engine", "vllm", "--max-model-len", "256k"])
    assert res.exit_code == EXIT_USAGE and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in res.output
    assert "--allow-long-context" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["fit", qwen_yarn, "--gpu", "h100", "--engine", "vllm", "--max-model-len", "256k",
                              "--allow-long-context", "--gpus", "4", "--json"])
    out = json.loads(res.stdout)
    assert out["context"] == out["context_limit"] == 262_144
    # --ctx past --max-model-len: the limit binds.
    res = runner.invoke(app, ["fit", qwen_yarn, "--gpu", "h100", "--max-model-len", "32k", "--ctx", "64k",
                              "--gpus", "2", "--json"])
    assert json.loads(res.stdout)["binds"] == "context limit"
    p = api.plan(qwen_yarn, "h100", engine="sglang", max_model_len="128k",
                 allow_long_context=True, gpus=2)
    assert p.request.context == p.context_limit == 131_072 and p.fits


def test_smallest_fit_tries_every_gpu_count():
    # Llama-3-70B at 128k on A100-80: one sequence is 131,072 x 80 layers x 8 x 128 x 2 x 2 B = 40 GiB.
    # 2 GPUs (tp 2): 65.7 GiB of weights each leave ~4 GiB for a 20 GiB half-sequence: no. 3 GPUs
    # (tp 1 x pp 3, 27 layers a stage): ~44 GiB of weights leave ~25 GiB for a 13.5 GiB third: yes.
    res = runner.invoke(app, ["fit", "llama-3-70b", "--gpu", "a100-80", "--ctx", "128k", "--json"])
    out = json.loads(res.stdout)
    best = out["plans"][out["recommended"]]
    assert (best["gpus"], best["tp"], best["pp"]) == (3, 1, 3) and best["fits"]


def test_token_labels_say_pool_and_requests():
    # gpt-oss-120b at 128k: a pool counted as vLLM counts it, and the tokens the requests it holds use.
    res = runner.invoke(app, ["fit", "gpt-oss-120b", "--gpu", "h100", "--ctx", "128k", "--gpus", "2", "--json"])
    out = json.loads(res.stdout)
    assert out["kv_pool_tokens_per_deployment"] == out["kv_cache_tokens"]
    assert out["request_tokens_at_context"] == out["max_concurrency"] * 131_072
    res = runner.invoke(app, ["fit", "gpt-oss-120b", "--gpu", "h100", "--ctx", "128k", "--gpus", "2"])
    assert "KV pool tokens (as engines count)" in res.stdout and "tokens requests can use @ 128k" in res.stdout
    # the scope said once per table: the memory rows are one GPU's, the answers the deployment's (issue 22, item 6);
    # no token count is labelled as if summed over GPUs
    assert "Memory per GPU" in res.stdout and "Answers per deployment" in res.stdout
    assert "KV cache tokens per GPU" not in res.stdout and "tokens (all GPUs)" not in res.stdout


def test_engine_table_says_what_its_lines_count_over():
    # the engine's own lines keep its log words ("GPU KV cache size", "num_gpu_blocks"); a caption says which are
    # per GPU and which are the engine instance's (tp x pp GPUs; each data-parallel rank runs its own)
    res = runner.invoke(app, ["fit", "gpt-oss-120b", "--gpu", "h100", "--ctx", "128k", "--tp", "2", "--engine",
                              "vllm"])
    assert res.exit_code == 0, res.output
    flat = " ".join(res.stdout.split())
    assert "GPU KV cache size" in flat and "budget and blocks: per GPU" in flat
    assert "tokens and concurrency: one engine instance" in flat


def test_simulate_and_emit_take_the_same_limit(qwen_yarn):
    # simulate's --max-model-len is the longest request, as before, now checked against the engine's limit.
    res = runner.invoke(app, ["simulate", qwen_yarn, "--gpu", "h100", "--gpus", "2", "--engine", "vllm",
                              "--max-model-len", "256k", "--duration", "2"])
    assert res.exit_code == EXIT_USAGE and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in res.output
    sim = api.simulate(qwen_yarn, "h100", gpus=2, engine="vllm", duration=2, qps=1)
    assert sim.plan.request.context == 131_072  # no length given: vLLM's derived 32,768 x 4
    # the serve command carries the length asked for
    res = runner.invoke(app, ["fit", qwen_yarn, "--gpu", "h100", "--engine", "vllm", "--max-model-len", "32k",
                              "--emit", "vllm"])
    assert "--max-model-len 32768" in res.stdout


def test_a_skipped_yarn_factor_is_said():
    # Qwen3-32B with YaRN x4 over 32,768 original positions: vLLM takes 32,768 x 4 = 131,072; SGLang and
    # TensorRT-LLM keep the config's 40,960 (module docstring's sources). Their 40,960 is the config's own number,
    # so without a note a user who enabled YaRN would not learn it was skipped; Llama 3.1's llama3 scaling, which
    # no engine multiplies, gives none.
    for name in ("sglang", "trtllm"):
        _, notes, _ = limited(resolve_engine(name), _spec(YARN))
        assert any("context limit 40,960 tokens" in n and "take 131,072" in n for n in notes), (name, notes)
    _, notes, _ = limited(resolve_engine("vllm"), _spec(YARN))
    assert notes == ["context limit 131,072 tokens (vllm 0.33.0: 32,768 original_max_position_embeddings × yarn "
                     "factor 4 = 131,072), not the config's 40,960"]
    llama3 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192,
              "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    _, notes, _ = limited(resolve_engine("sglang"), _spec(llama3, max_position_embeddings=131072))
    assert notes == []
