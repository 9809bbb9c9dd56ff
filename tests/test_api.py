"""kvplan's Python API (kvplan.api, re-exported by `import kvplan`): typed results, the CLI's defaults,
errors as data, and nothing heavy imported until a function runs."""

import json
import subprocess
import sys

import pytest

import kvplan
from kvplan.core.errors import EXIT_NOT_FOUND, EXIT_USAGE, KvplanError

GIB = 2**30


def test_llama_31_8b_kv_bytes_are_the_hand_arithmetic():
    # meta-llama/Llama-3.1-8B config.json: 32 layers, 8 KV heads, head_dim 4096 / 32 = 128, bf16 (2 B).
    # K and V per token: 32 x 2 x 8 x 128 x 2 B = 131,072 B; a 32k sequence: 131,072 x 32,768 = 4 GiB.
    p = kvplan.plan("llama-3.1-8b", "h100", context="32k", batch=16)
    assert isinstance(p, kvplan.Plan)
    assert p.kv_bytes_per_token == 32 * 2 * 8 * 128 * 2 == 131_072
    assert p.kv_bytes_per_sequence == 131_072 * 32_768 == 4 * GIB  # 2,048 whole pages of 16 tokens
    assert (p.request.context, p.request.batch, p.deployment.gpus) == (32_768, 16, 1)
    assert p.budget_bytes == int(p.usable_memory_bytes * 0.9)  # vLLM's default utilisation
    assert p.max_concurrency == p.kv_memory_bytes_per_gpu // p.kv_bytes_per_sequence_per_gpu
    assert p.fits == (p.max_concurrency >= 16)


def test_no_context_is_the_models_limit_and_says_so():
    p = kvplan.plan("llama-3.1-8b", "h100")
    assert p.request.context == 131_072 and p.request.context_from_model
    assert not kvplan.plan("llama-3.1-8b", "h100", context=131_072).request.context_from_model


def test_models_and_gpus_can_be_objects():
    spec, h100 = kvplan.load_model("llama-3.1-8b"), kvplan.gpu("h100")
    assert isinstance(spec, kvplan.ModelSpec) and isinstance(h100, kvplan.GPU)
    assert kvplan.plan(spec, h100, context=8192) == kvplan.plan("llama-3.1-8b", "h100", context="8k")


def _cli_json(*args):
    from typer.testing import CliRunner

    from kvplan.cli import app

    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code in (0, 6), r.output
    return json.loads(r.stdout)


FIELDS = ("tp", "pp", "dp", "ep", "dcp", "context", "batch", "kv_dtype", "weight_bytes_per_gpu",
          "overhead_bytes_per_gpu", "kv_memory_bytes_per_gpu", "kv_bytes_per_sequence_per_gpu", "max_concurrency",
          "max_context", "fits", "decode_tokens_per_second")


@pytest.mark.parametrize("cli, api", [
    (["llama-3.1-8b", "--gpu", "h100", "--ctx", "32k", "--batch", "16"], dict(context="32k", batch=16)),
    (["llama-3.1-70b", "--gpu", "h100", "--gpus", "4", "--ctx", "128k", "--engine", "vllm"],
     dict(gpus=4, context="128k", engine="vllm")),
    (["qwen3-32b", "--gpu", "h100", "--tp", "2", "--ctx", "32k", "--engine", "sglang", "--kv-dtype", "fp8"],
     dict(tp=2, context=32768, engine="sglang", kv_dtype="fp8")),
    (["deepseek-v3", "--gpu", "h200", "--dp", "8", "--ep", "8", "--ctx", "32k"], dict(dp=8, ep=8, context="32k")),
    (["llama-3.1-8b", "--gpu", "l40s", "--pp", "2", "--engine", "llama.cpp", "--kv-dtype", "q8_0",
      "--weight-dtype", "q4_k_m"], dict(pp=2, engine="llama.cpp", kv_dtype="q8_0", weight_dtype="q4_k_m")),
    (["qwen3-8b", "--gpu", "a100-80", "--ctx", "16k", "--kv-cache-memory", "20GiB", "--block-size", "32",
      "--engine", "vllm", "--engine-opt", "max_num_seqs=64"],
     dict(context="16k", kv_cache_memory="20GiB", block_size=32, engine="vllm", engine_opts={"max_num_seqs": 64})),
    (["mistral-nemo-instruct-2407", "--gpu", "h100", "--gpu-memory-utilization", "0.8", "--overhead", "2GiB",
      "--batch", "4"],
     dict(gpu_memory_utilization=0.8, overhead=2 * GIB, batch=4)),
])
def test_plan_is_what_fit_prints(cli, api):
    out = _cli_json("fit", *cli)
    printed = out["plans"][0] if "plans" in out else out  # no layout: fit's first plan is one GPU's
    p = kvplan.plan(cli[0], cli[2], **api)
    mine = {**vars(p.deployment), "context": p.request.context, "batch": p.request.batch,
            "kv_dtype": p.request.kv_dtype.name, **{k: getattr(p, k) for k in FIELDS[8:]}}
    assert {k: printed[k] for k in FIELDS} == {k: mine[k] for k in FIELDS}


def test_sweep_ranks_what_the_cli_ranks():
    r = kvplan.sweep(["llama-3.1-70b", "qwen3-32b"], gpu=["h100", "h200"], context=["8k", "32k"], gpu_counts=[1, 2])
    assert isinstance(r, kvplan.SweepResult) and len(r.plans) == 2 * 2 * 2 * 2
    rows = _cli_json("sweep", "--models", "llama-3.1-70b,qwen3-32b", "--gpu", "h100,h200", "--ctx", "8k,32k",
                     "--gpu-counts", "1,2")["plans"]
    key = ("model", "gpu", "gpus", "context", "max_concurrency", "fits")
    assert [tuple(row[k] for k in key) for row in rows] == \
        [(p.model, p.gpu, p.deployment.gpus, p.request.context, p.max_concurrency, p.fits) for p in r.plans]
    assert r.plans == kvplan.sweep("llama-3.1-70b,qwen3-32b", gpu="h100,h200", context="8k,32k", gpu_counts="1,2").plans


def test_sweep_takes_one_value_where_its_signature_says_so():
    # context: Union[int, str, Sequence[...]]: an int was iterated (TypeError: 'int' object is not iterable)
    one = kvplan.sweep("llama-3.1-8b", gpu="h100", context=8192, gpu_counts=[1])
    assert [p.request.context for p in one.plans] == [8192]
    assert one.plans == kvplan.sweep("llama-3.1-8b", gpu="h100", context="8k", gpu_counts=[1]).plans


def test_cheapest_ranks_what_the_cli_ranks():
    found = kvplan.cheapest("llama-3.1-70b", concurrency=32, context="32k", gpu="h100,h200,mi300x")
    assert all(isinstance(c, kvplan.Candidate) for c in found) and found[0].meets
    out = _cli_json("cheapest", "llama-3.1-70b", "--concurrency", "32", "--ctx", "32k", "--gpu", "h100,h200,mi300x")
    assert [(r["gpu"], r["gpus"], r["tp"], r["pp"]) for r in out["meets"]] == \
        [(c.gpu, c.gpus, c.deployment.tp, c.deployment.pp) for c in found if c.meets]
    assert len(out["fails"]) == sum(not c.meets for c in found)


def test_simulate_is_the_clis_run():
    run = kvplan.simulate("llama-3.1-8b", "h100", workload="chat", qps=5, duration=30, seed=3)
    assert isinstance(run, kvplan.Simulation) and isinstance(run.plan, kvplan.Plan)
    out = _cli_json("simulate", "llama-3.1-8b", "--gpu", "h100", "--workload", "chat", "--qps", "5",
                    "--duration", "30", "--seed", "3")
    assert out["runs"]["paged"]["summary"] == json.loads(json.dumps(run.summary))
    assert out["meta"]["kv_pool_bytes_per_gpu"] == run.summary["kv"]["budget_bytes"]


def test_simulate_at_an_older_release_is_the_clis_run():
    # --engine-version 0.5.6 prices SGLang's steps with the coefficients of its era (sglang<0.5.14,
    # kvplan.speed.eras), in the API as in the CLI (the API took the current era's before); an MoE model, whose
    # grouped-GEMM term is where the two eras' coefficients differ
    kw = dict(workload="chat", qps=5, duration=20, seed=3, engine="sglang", engine_version="0.5.6")
    run = kvplan.simulate("qwen3-30b-a3b", "h100", **kw)
    out = _cli_json("simulate", "qwen3-30b-a3b", "--gpu", "h100", "--workload", "chat", "--qps", "5",
                    "--duration", "20", "--seed", "3", "--engine", "sglang", "--engine-version", "0.5.6")
    assert "sglang<0.5.14" in out["meta"]["step_time"]
    assert out["runs"]["paged"]["summary"] == json.loads(json.dumps(run.summary))


def test_simulate_offload_is_the_clis_run():
    # the Mooncake excerpt on a 4 GiB pool with a 64 GiB CPU tier behind the dgx-h100 host's 64 GB/s PCIe Gen5
    # link: the same summary as simulate --offload --host, and the tier as vLLM's rule sizes it
    from pathlib import Path

    trace = str(Path(__file__).parent / "fixtures" / "traces" / "mooncake_conversation_400.jsonl")
    run = kvplan.simulate("llama-3.1-8b", "h100", trace=trace, kv_cache_memory="4GiB", engine="vllm",
                          offload="cpu:64GiB", host="dgx-h100")
    out = _cli_json("simulate", "llama-3.1-8b", "--gpu", "h100", "--trace", trace, "--kv-cache-memory", "4GiB",
                    "--engine", "vllm", "--offload", "cpu:64GiB", "--host", "dgx-h100")
    assert out["runs"]["paged"]["summary"] == json.loads(json.dumps(run.summary))
    (cpu,) = run.summary["offload"]["tiers"]
    assert cpu["hit_tokens"] > 0 and cpu["link_bytes_per_s"] == 64e9
    # 64 GiB // (16 x 131,072 B) = 32,768 blocks = 524,288 tokens
    (tier,) = run.offload.tiers
    assert (tier.tier, tier.tokens) == ("cpu", 524_288)
    assert kvplan.simulate("llama-3.1-8b", "h100", workload="chat", qps=2, duration=5).offload is None
    for kwargs, param in (({"offload": "cpu:64GiB", "mode": "contiguous"}, "offload"),
                          ({"offload": "cpu:auto"}, "offload"), ({"host": "dgx-h100"}, "offload"),
                          ({"offload": "gpu:1GiB"}, "offload")):
        with pytest.raises(KvplanError) as e:
            kvplan.simulate("llama-3.1-8b", "h100", workload="chat", qps=2, duration=5, **kwargs)
        assert e.value.param == param and "--" not in str(e.value), (kwargs, str(e.value))


@pytest.mark.parametrize("call, param, value, words", [
    (lambda: kvplan.plan("llama-3.1-8b", "h100", context="12q"), "context", "12q", "context '12q' is not a token"),
    (lambda: kvplan.plan("llama-3.1-8b", "h100", gpus=8, pp=3), "gpus", 8, "gpus 8 is not a multiple of pp 3"),
    (lambda: kvplan.plan("llama-3.1-8b", "h100", tp=0), "tp", 0, "tp must be between 1 and 4096, got 0"),
    (lambda: kvplan.plan("llama-3.1-8b", "h100", batch=0), "batch", 0, "batch must be between 1 and 1,000,000"),
    (lambda: kvplan.plan("llama-3.1-8b", "h100", engine_version="0.11.0"), "engine", None,
     "engine_version and engine_opts need engine"),
    (lambda: kvplan.plan("llama-3.1-8b", "h100", engine="vllm", engine_opts={"nope": 1}), "engine_opts", "nope",
     "unknown engine_opts 'nope' for vllm"),
    (lambda: kvplan.plan("llama-3.1-8b", "h100", gpu_memory_utilization=0.0), "gpu_memory_utilization", 0.0,
     "must be in (0, 1]"),
    (lambda: kvplan.plan("llama-3.1-8b", "h100", speculative="eagle"), "speculative", "eagle", "eagle: not modelled"),
    (lambda: kvplan.cheapest("llama-3.1-8b", concurrency=0), "concurrency", 0, "concurrency must be between 1"),
    (lambda: kvplan.simulate("llama-3.1-8b", "h100", qps=-1), "qps", -1, "qps must be between 1e-06 and 1e+06"),
    (lambda: kvplan.sweep("llama-3.1-8b", context=""), "context", "", "context list '' is empty"),
    # a catalog name with an empty revision was looked up on the Hub: "unknown model 'llama-3.1-8b'; did you
    # mean: llama-3.1-8b?" (a bug fixed here)
    (lambda: kvplan.load_model("llama-3.1-8b", revision=""), "revision", "", "revision must be a non-empty branch"),
])
def test_bad_input_is_a_kvplan_error_naming_the_keyword(call, param, value, words):
    with pytest.raises(KvplanError) as e:
        call()
    err = e.value
    assert (err.param, err.value, err.exit_code) == (param, value, EXIT_USAGE)
    assert words in str(err) and "--" not in str(err)


def test_unknown_names_say_which_input():
    for call, param, value, code in ((lambda: kvplan.gpu("h1000"), "gpu", "h1000", EXIT_NOT_FOUND),
                                     (lambda: kvplan.load_model("llama-9"), "model", "llama-9", EXIT_NOT_FOUND),
                                     (lambda: kvplan.plan("llama-3.1-8b", "h100", engine="vllmx"), "engine", "vllmx",
                                      EXIT_USAGE),
                                     (lambda: kvplan.plan("llama-3.1-8b", "h100", kv_dtype="fp7"), "kv_dtype", "fp7",
                                      EXIT_USAGE),
                                     (lambda: kvplan.plan("llama-3.1-8b", "h100", weight_dtype="int3"),
                                      "weight_dtype", "int3", EXIT_USAGE)):
        with pytest.raises(KvplanError) as e:
            call()
        assert (e.value.param, e.value.value, e.value.exit_code) == (param, value, code), str(e.value)
    assert "int4" in e.value.allowed  # (the last: weight_dtype) the formats it would take


def test_import_kvplan_loads_nothing_heavy():
    heavy = ("torch", "plotly", "huggingface_hub", "transformers", "numpy", "typer", "rich", "click", "yaml")
    code = ("import sys, kvplan; assert callable(kvplan.plan) and kvplan.KvplanError; "
            f"print([m for m in {heavy!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    code = ("import sys, kvplan; kvplan.plan('llama-3.1-8b', 'h100', context='8k'); "
            f"print([m for m in {heavy!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['yaml']"  # a plan reads the GPU profile (YAML), no more


def test_the_package_lists_its_api():
    assert {"plan", "sweep", "cheapest", "simulate", "load_model", "gpu", "KvplanError", "Plan"} <= set(kvplan.__all__)
    assert set(kvplan.__all__) <= set(dir(kvplan))
    with pytest.raises(AttributeError):
        kvplan.no_such_thing  # noqa: B018


def test_the_cli_and_the_api_share_one_limit_on_requests():
    from kvplan.cli._common import MAX_BATCH
    from kvplan.planning.request import MAX_BATCH as READ

    assert MAX_BATCH == READ == 1_000_000  # _common keeps its own copy: it may not import the planner at start-up
