"""Where a user reads memory, SGLang's recurrent-state pool for hybrid models (issue 22): the plan's memory rows
(kvplan.planning.plan.PooledStates), the fit table, `fit --json`, the sweep CSV and HTML bars say what SGLang
reserves. The expected bytes are SGLang's rule written out (0.5.23 `mem_cache/kv_cache_configurator.py`
L3229-3410: slots out of "rest" before the token pool, (slots + 1) MambaPool rows; `managers/schedule_batch.py` Req:
a running request holds `mamba_pool_idx` and, under the default extra_buffer strategy, the 2 slots of
`mamba_ping_pong_track_buffer`), and a start-up log's printed pools (kvcache-ai/ktransformers#1870).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.report.export import CSV_COLUMNS
from kvplan.report.html import _memory_figure
from kvplan.sources.catalog import find_in_catalog

GIB = 2**30


def _plan(engine, name, gpu, tp, context, budget, version=None):
    eng = resolve_engine(None if engine == "kvplan" else engine, version)
    req = Request(context=context, kv_cache_memory_bytes=budget)
    return eng.result(find_in_catalog(name), find_gpu(gpu), Deployment(tp, 1), req).plan


def test_qwen35_27b_free_is_what_the_token_pool_leaves():
    # "rest" 70,536,510,029 B on one H200 (SGLang 0.5.23, the default fit's budget): a slot is 48 Gated DeltaNet
    # layers x (61,440 B bf16 conv + 3,145,728 B fp32 ssm) = 153,944,064 B; slots = int((rest x 0.9 / 1.9 - one slot)
    # / slot) = 216, so the pool is 217 rows = 33,405,861,888 B (31.11 GiB). The token pool: (rest - that) // 65,536 B
    # a token (16 full layers x 2 x 4 KV heads x 256 x 2 B) = 566,568 tokens = 37,130,600,448 B. One 262,144-token
    # request uses 262,144 x 65,536 = 17,179,869,184 B of it: free (566,568 - 262,144) x 65,536 = 19,950,731,264 B
    # (18.58 GiB), not rest - 17,333,813,248 = 53,202,696,781 B (49.55 GiB). The request holds 1 + 2 tracking slots:
    # 17,179,869,184 + 3 x 153,944,064 = 17,641,701,376 B.
    p = _plan("sglang", "qwen3.5-27b", "h200-sxm", 1, 262_144, 70_536_510_029)
    assert p.state_pool_bytes_per_gpu == 33_405_861_888
    assert p.token_pool_bytes_per_gpu == 37_130_600_448
    assert p.kv_used_bytes_per_gpu == 17_179_869_184
    assert p.free_bytes_per_gpu == 19_950_731_264
    assert p.kv_bytes_per_sequence_per_gpu == p.kv_bytes_per_sequence == 17_641_701_376
    assert p.pooled_state_bytes_per_sequence_per_gpu == 461_832_192
    # never more than SGLang leaves: within its token pool, and the three parts within the budget
    assert p.free_bytes_per_gpu <= (p.kv_cache_tokens - 262_144) * 65_536
    assert p.state_pool_bytes_per_gpu + p.token_pool_bytes_per_gpu <= p.kv_memory_bytes_per_gpu


def test_ktransformers_log_pools_are_the_memory_rows():
    # kvcache-ai/ktransformers#1870 (two RTX 4090 ranks, Qwen3.5-397B-A17B at tp 2) printed "Mamba Cache is
    # allocated. max_mamba_cache_size: 82, conv_state size: 0.13GB, ssm_state size: 7.29GB" and "KV Cache is
    # allocated. #tokens: 580364, K size: 4.15 GB, V size: 4.15 GB" (GB = GiB). Its "rest" is those two pools:
    # 83 x 96,030,720 B + 580,364 x 15,360 B = 7,970,549,760 + 8,914,391,040 = 16,884,940,800 B. So the state pool row
    # is 0.13 + 7.29 = 7.42 GiB, the token pool K + V = 8.30 GiB; one 8,192-token request uses 8,192 x 15,360 =
    # 125,829,120 B and leaves (580,364 - 8,192) x 15,360 = 8,788,561,920 B; it holds 3 x 96,030,720 B of slots.
    p = _plan("sglang", "qwen3.5-397b-a17b", "rtx-4090", 2, 8192, 16_884_940_800)
    assert f"{p.state_pool_bytes_per_gpu / GIB:.2f}" == "7.42"  # 0.13 + 7.29 printed
    assert f"{p.token_pool_bytes_per_gpu / GIB:.2f}" == "8.30"  # 4.15 + 4.15 printed
    assert p.kv_cache_tokens == 580_364
    assert p.free_bytes_per_gpu == 8_788_561_920
    assert p.kv_bytes_per_sequence == 2 * (125_829_120 + 3 * 96_030_720)  # both tp ranks


def test_fit_table_and_json_show_the_state_pool():
    res = CliRunner().invoke(app, ["fit", "qwen3.5-27b", "--gpu", "h200-sxm", "--engine", "sglang",
                                   "--kv-cache-memory", "70536510029"])
    assert res.exit_code == 0, res.output
    rows = {line.split("│")[0].strip(): line.split("│")[1].strip() for line in res.stdout.splitlines() if "│" in line}
    assert rows["− state pool"] == "31.11 GiB" and rows["= token pool"] == "34.58 GiB"
    assert rows["− batch × context"] == "16.00 GiB" and rows["= free"] == "18.58 GiB"
    assert rows["KV per sequence (all its GPUs)"] == "16.43 GiB"
    res = CliRunner().invoke(app, ["fit", "qwen3.5-27b", "--gpu", "h200-sxm", "--engine", "sglang",
                                   "--kv-cache-memory", "70536510029", "--json"])
    plan = json.loads(res.stdout)["plans"][0]
    assert plan["state_pool_bytes_per_gpu"] == 33_405_861_888 and plan["token_pool_bytes_per_gpu"] == 37_130_600_448
    assert plan["free_bytes_per_gpu"] == 19_950_731_264 and plan["kv_used_bytes_per_gpu"] == 17_179_869_184


@pytest.mark.parametrize("engine, name", [("sglang", "qwen3-8b"), ("vllm", "qwen3.5-27b"), ("kvplan", "qwen3.5-27b")])
def test_no_state_pool_elsewhere(engine, name):
    # A plain model under SGLang, or a hybrid under vLLM or kvplan's own rules (each sequence's states its own
    # pages): no pool, and free is the KV cache less batch x the whole sequence, states included
    # (qwen3.5-27b: 262,144 x 65,536 + one 153,944,064 B state = 17,333,813,248 B).
    p = _plan(engine, name, "h200-sxm", 1, 32_768 if name == "qwen3-8b" else 262_144, 60 * GIB)
    assert p.state_pool_bytes_per_gpu == p.token_pool_bytes_per_gpu == p.pooled_state_bytes_per_sequence_per_gpu == 0
    assert p.free_bytes_per_gpu == 60 * GIB - p.kv_bytes_per_sequence_per_gpu
    if name == "qwen3.5-27b":
        assert p.kv_bytes_per_sequence_per_gpu == 17_333_813_248
    args = ["fit", name, "--gpu", "h200-sxm", "--kv-cache-memory", str(60 * GIB)]
    res = CliRunner().invoke(app, args + (["--engine", engine] if engine != "kvplan" else []))
    assert res.exit_code == 0, res.output
    assert "state pool" not in res.stdout and "token pool" not in res.stdout


def test_sweep_columns_and_html_bars():
    assert {"state_pool_bytes_per_gpu", "state_pool_gib_per_gpu", "token_pool_gib_per_gpu"} <= set(CSV_COLUMNS)
    row = {"weight_bytes_per_gpu": 50 * GIB, "overhead_bytes_per_gpu": GIB, "kv_memory_bytes_per_gpu": 60 * GIB,
           "usable_memory_bytes_per_gpu": 140 * GIB, "fits": True, "model": "m", "gpu": "g", "tp": 1, "pp": 1,
           "kv_dtype": "bf16", "weight_dtype": "bf16"}
    key = ("m", "g", 1, 1, "bf16", "bf16")
    fig = _memory_figure([[{**row, "state_pool_bytes_per_gpu": 20 * GIB}]], {key: "a"}, {}, "")
    bars = {d["name"]: d["x"][0] for d in fig["data"]}
    assert bars["state pool"] == 20 and bars["KV cache"] == 40 and bars["weights"] == 50
    fig = _memory_figure([[{**row, "state_pool_bytes_per_gpu": 0}]], {key: "a"}, {}, "")
    assert "state pool" not in {d["name"] for d in fig["data"]}


def test_explain_divides_the_token_pool():
    # --explain's concurrency for a pooled plan: 37,130,600,448 B token pool // 4,096 x 65,536 B = 138 requests by
    # tokens, capped at 216 // 5 = 43 by max_running_requests (not 70,536,510,029 // a sequence's bytes).
    res = CliRunner().invoke(app, ["fit", "qwen3.5-27b", "--gpu", "h200-sxm", "--engine", "sglang", "--ctx", "4k",
                                   "--kv-cache-memory", "70536510029", "--explain"])
    text = " ".join(res.stdout.split())  # --explain's lines wrap at 80 columns
    assert "floor(37,130,600,448 / 268,435,456) = 138, capped at 43" in text, res.stdout


@pytest.mark.parametrize("opt, held", [("mamba_radix_cache_strategy=no_buffer", 1),
                                       ("mamba_radix_cache_strategy=extra_buffer_lazy", 2),
                                       ("disable_radix_cache=true", 1)])
def test_the_slots_a_request_holds_follow_the_strategy(opt, held):
    # Req.mamba_pool_idx always; the ping-pong tracking slots only with the radix cache on: none under no_buffer, one
    # under extra_buffer_lazy (allocation_sizing.py L11-19). A 262,144-token request: 17,179,869,184 B of tokens +
    # held x 153,944,064 B.
    eng = resolve_engine("sglang", "0.5.23", [opt])
    req = Request(context=262_144, kv_cache_memory_bytes=70_536_510_029)
    p = eng.result(find_in_catalog("qwen3.5-27b"), find_gpu("h200-sxm"), Deployment(1, 1), req).plan
    assert p.kv_bytes_per_sequence_per_gpu == 17_179_869_184 + held * 153_944_064
