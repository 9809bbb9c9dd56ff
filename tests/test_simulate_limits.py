"""Simulations run at the engine's own scheduler limits (issue 21): simulate, the API, disagg, sweep and cheapest.

The speed coefficients are fitted at each engine's own running limit and tokens per step (kvplan.bench.running), so
a simulation left without --max-num-seqs / --max-num-batched-tokens takes the same (kvplan.simulator.limits).

vLLM's defaults, as kvplan/engines/vllm/defaults.py batch_defaults restates vLLM's EngineArgs._set_default_args_v1
(OPENAI_API_SERVER entries): from v0.9.0 the large tier is `device_memory >= 70 * GiB_bytes and "a100" not in
device_name` (arg_utils v0.9.0 L1495-1508, v0.11.0 L1605-1623): max_num_batched_tokens 8,192, max_num_seqs 1,024;
otherwise 2,048 and 256; from v0.10.1 the default max_num_seqs is min(default, max_num_batched_tokens) (arg_utils
v0.10.1 L1711): min(1,024, 8,192) = 1,024 and min(256, 2,048) = 256; from 0.33.0 a device of >= 160 GiB takes
16,384 / 1,024, which neither 80 GB card reaches. So vllm 0.33.0 on an H100 SXM (80 GB, "NVIDIA H100 80GB HBM3"):
1,024 / 8,192; on an A100 80GB ("NVIDIA A100-SXM4-80GB", the name test): 256 / 2,048.

Qwen2-0.5B's KV is small enough (24 layers x 2 x 2 heads x 64 x 2 B = 12 KiB a token) that at 400 requests/s of
chat the pool holds far more requests than either cap: the peak of running requests is the cap itself.
"""

from __future__ import annotations

import json

import kvplan
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()
SMALL = ("qwen2-0.5b-instruct", "--workload", "chat", "--qps", "400", "--duration", "5", "--json")


def sim(*args):
    r = runner.invoke(app, ["simulate", *SMALL, *map(str, args)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    return doc["meta"], doc["runs"]["paged"]["summary"], r.stderr


def test_vllm_on_an_h100_runs_at_1024_sequences_and_8192_tokens(kvplan_home):
    meta, summary, err = sim("--gpu", "h100", "--engine", "vllm")
    assert (meta["max_num_seqs"], meta["max_num_batched_tokens"]) == (1024, 8192)
    assert summary["concurrency"]["max_running"] == 1024  # the simulator ran at it (256 was today's fixed cap)
    assert meta["scheduler_limits_from"]["max_num_seqs"] == "vllm 0.33.0's default on this GPU"
    assert "at most 1,024 requests running at once (vllm 0.33.0's default on this GPU; --max-num-seqs to change)" in err
    assert "8,192 tokens a step (vllm 0.33.0's default on this GPU" in err


def test_vllm_on_an_a100_runs_at_256_sequences_and_2048_tokens(kvplan_home):
    meta, summary, err = sim("--gpu", "a100-80gb", "--engine", "vllm")
    assert (meta["max_num_seqs"], meta["max_num_batched_tokens"]) == (256, 2048)
    assert summary["concurrency"]["max_running"] == 256
    assert "2,048 tokens a step (vllm 0.33.0's default on this GPU" in err


def test_a_flag_given_wins_and_is_said(kvplan_home):
    meta, summary, err = sim("--gpu", "h100", "--engine", "vllm", "--max-num-seqs", "64")
    assert (meta["max_num_seqs"], meta["max_num_batched_tokens"]) == (64, 8192)
    assert summary["concurrency"]["max_running"] == 64
    assert meta["scheduler_limits_from"]["max_num_seqs"] == "given"
    assert "at most 64 requests running at once (--max-num-seqs given)" in err


def test_a_flag_given_is_also_the_engines_own_setting_for_its_memory(kvplan_home):
    # vLLM's profile run sizes its sampler by max_num_seqs (kvplan/engines/vllm/overhead.py), so `vllm serve
    # --max-num-seqs 32` leaves more memory for the KV cache than the default 1,024: the simulated pool must be the
    # one the engine plans with that flag, the same as --engine-opt max_num_seqs=32 gives, and larger than the default.
    flag, _, _ = sim("--gpu", "h100", "--engine", "vllm", "--max-num-seqs", "32")
    opt, _, _ = sim("--gpu", "h100", "--engine", "vllm", "--engine-opt", "max_num_seqs=32")
    default, _, _ = sim("--gpu", "h100", "--engine", "vllm")
    assert flag["kv_pool_bytes_per_gpu"] == opt["kv_pool_bytes_per_gpu"] > default["kv_pool_bytes_per_gpu"]
    same, _, _ = sim("--gpu", "h100", "--engine", "vllm", "--max-num-seqs", "32", "--engine-opt", "max_num_seqs=32")
    assert same["kv_pool_bytes_per_gpu"] == flag["kv_pool_bytes_per_gpu"]
    api = kvplan.simulate("qwen2-0.5b-instruct", gpu="h100", engine="vllm", max_num_seqs=32, qps=400, duration=5)
    assert api.plan.kv_memory_bytes_per_gpu == flag["kv_pool_bytes_per_gpu"]


def test_a_flag_and_an_engine_option_that_disagree_are_refused(kvplan_home):
    r = runner.invoke(app, ["simulate", *SMALL, "--gpu", "h100", "--engine", "vllm", "--max-num-seqs", "32",
                            "--engine-opt", "max_num_seqs=64"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "--max-num-seqs 32 and --engine-opt max_num_seqs=64 disagree" in r.stderr


def test_an_engine_option_is_the_engines_setting(kvplan_home):
    meta, summary, err = sim("--gpu", "h100", "--engine", "vllm", "--engine-opt", "max_num_seqs=32")
    assert meta["max_num_seqs"] == 32 and summary["concurrency"]["max_running"] == 32
    assert "(vllm 0.33.0 as --engine-opt sets it; --max-num-seqs to change)" in err


def test_no_engine_keeps_256_and_8192_and_says_so(kvplan_home):
    meta, summary, err = sim("--gpu", "h100")
    assert (meta["max_num_seqs"], meta["max_num_batched_tokens"]) == (256, 8192)
    assert summary["concurrency"]["max_running"] == 256
    assert ("at most 256 requests running at once (the simulator's default: no --engine, and kvplan's own rules "
            "set none; --max-num-seqs to change)") in err


def test_the_api_takes_the_engines_limits_and_says_which(kvplan_home):
    run = kvplan.simulate("qwen2-0.5b-instruct", "a100-80gb", engine="vllm", workload="chat", qps=50, duration=2)
    assert (run.limits.max_num_seqs, run.limits.max_num_batched_tokens) == (256, 2048)
    given = kvplan.simulate("qwen2-0.5b-instruct", "a100-80gb", engine="vllm", workload="chat", qps=50, duration=2,
                            max_num_batched_tokens=4096)
    assert (given.limits.max_num_batched_tokens, given.limits.tokens_from) == (4096, "given")
    assert "max_num_seqs" in given.limits.notes()[0]  # the API's words name its keywords


def test_disagg_pools_run_at_the_engines_limits(kvplan_home):
    args = ["disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "1k", "--osl", "128", "--json"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert {role: (x["max_num_seqs"], x["max_num_batched_tokens"]) for role, x in doc["scheduler_limits"].items()} \
        == {"prefill": (1024, 8192), "decode": (1024, 8192)}
    assert "each replica: at most 1,024 requests running at once (vllm 0.33.0's default on this GPU" in r.stderr
    # A prefill replica computes max_num_batched_tokens // ISL prompts a step: 8,192 // 1,024 = 8 (2,048 given: 2),
    # and holds one more step's prompts staged, since one prompt's KV (32 layers x 2 x 8 heads x 128 x 2 B = 128 KiB
    # a token, x 1,024 = 128 MiB) crosses ib-400g's 50 GB/s in about 2.7 ms, well within a step: 16 (given: 4).
    small = json.loads(runner.invoke(app, [*args, "--max-num-batched-tokens", "2048", "--max-num-seqs", "4"]).stdout)
    assert (doc["prefill"]["requests_needed"], small["prefill"]["requests_needed"]) == (16, 4)
    assert small["decode"]["batch"] == 4 and small["decode"]["batch_binds"] == "max_num_seqs"
    assert small["scheduler_limits"]["decode"]["scheduler_limits_from"]["max_num_seqs"] == "given"



def test_disagg_flags_are_the_engines_own_settings_and_its_commands_say_them(kvplan_home):
    # As in simulate: `vllm serve --max-num-seqs 32` profiles its sampler at 32 rows, not 1,024, so both pools are
    # the ones vLLM plans with the flag (the same as --engine-opt max_num_seqs=32, larger than the default's), and
    # each pool's serve command carries 32, the limit the plan was made at (before: the pool's capacity at the
    # context, 200-odd, a command whose own profile run would reserve more than the plan assumed).
    args = ["disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "2000", "--osl", "200", "--json"]
    flag = json.loads(runner.invoke(app, [*args, "--max-num-seqs", "32"]).stdout)
    opt = json.loads(runner.invoke(app, [*args, "--engine-opt", "max_num_seqs=32"]).stdout)
    default = json.loads(runner.invoke(app, args).stdout)
    pool = {role: flag[role]["kv_memory_bytes_per_gpu"] for role in ("prefill", "decode")}
    assert pool == {role: opt[role]["kv_memory_bytes_per_gpu"] for role in ("prefill", "decode")}
    assert all(pool[role] > default[role]["kv_memory_bytes_per_gpu"] for role in pool)
    assert all("--max-num-seqs 32 " in flag[role]["command"] for role in pool)
    r = runner.invoke(app, [*args, "--max-num-seqs", "32", "--engine-opt", "max_num_seqs=64"])
    assert r.exit_code == 2 and "--max-num-seqs 32 and --engine-opt max_num_seqs=64 disagree" in r.stderr

def test_sweep_simulates_each_gpu_at_its_own_limits(kvplan_home):
    r = runner.invoke(app, ["sweep", "--models", "qwen2-0.5b-instruct", "--gpu", "h100,a100-80gb", "--ctx", "4k",
                            "--engine", "vllm", "--workload", "chat", "--qps", "2", "--duration", "5", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["plans"]
    assert {(p["gpu"], p["sim_max_num_seqs"], p["sim_max_num_batched_tokens"]) for p in rows} == {
        ("h100-sxm", 1024, 8192), ("a100-sxm-80", 256, 2048)}
    assert "each plan simulated at vllm 0.33.0's own running limit and tokens per step on its GPU" in r.stderr


def test_cheapest_simulates_each_candidate_at_its_own_limits(kvplan_home):
    r = runner.invoke(app, ["cheapest", "qwen2-0.5b-instruct", "--gpu", "h100,a100-80gb", "--ctx", "4k",
                            "--concurrency", "8", "--engine", "vllm", "--workload", "chat", "--qps", "2",
                            "--duration", "5", "--json"])
    assert r.exit_code == 0, r.output
    simulated = {(c["gpu"], c["sim_max_num_seqs"], c["sim_max_num_batched_tokens"])
                 for c in json.loads(r.stdout)["meets"] if c.get("sim_max_num_seqs")}
    assert simulated == {("h100-sxm", 1024, 8192), ("a100-sxm-80", 256, 2048)}


def test_sglang_hybrid_runs_at_the_cap_its_state_pool_computes(kvplan_home):
    # SGLang 0.5.3 keeps 512 recurrent-state slots for Qwen3-Next (radix cache off: one slot a request), and its
    # max_running_requests = min(4,096, tokens // 2, 512 // 1) = 512 (tests/test_sglang_mamba.py, the fixed 512 slots
    # before the ratio; kvplan/engines/sglang/mamba.py): not the 4,096 of its request pool's ceiling.
    r = runner.invoke(app, ["simulate", "qwen3-next-80b-a3b-thinking", "--gpu", "h200", "--tp", "4", "--engine",
                            "sglang", "--engine-version", "0.5.3", "--workload", "chat", "--qps", "5", "--duration",
                            "5", "--json"])
    assert r.exit_code == 0, r.output
    meta = json.loads(r.stdout)["meta"]
    assert meta["max_num_seqs"] == 512
    assert "at most 512 requests running at once (sglang 0.5.3's own limit for this KV pool" in r.stderr
