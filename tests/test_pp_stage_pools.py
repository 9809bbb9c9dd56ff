"""Pools under pipeline stages, as the engines size them: vLLM's whole-model kv-cache groups on each worker, SGLang's
token pool counted in the cell that sized it, and simulate's pool on the stage fit's memory table shows."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan import api
from kvplan.cli import app
from kvplan.simulator.adapter import sim_model
from conftest import engine_figures

runner = CliRunner()
NEMOTRON = "nemotron-h-56b-base-8k"


def _fit_json(*args) -> dict:
    r = runner.invoke(app, ["fit", *map(str, args), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_vllm_workers_keep_the_whole_models_groups_under_pipeline_stages(kvplan_home):
    # Nemotron-H-56B's hybrid_override_pattern (its config.json): 118 layers, '*' attention at 7, 18, ..., 106 (10),
    # 'M' Mamba-2 at 54, '-' an MLP (no cache). vLLM 0.33.0 groups the whole model's specs: group_size =
    # min(10, 54) = 10 (54 >= 1.5 x 10), attention 1 group, Mamba cdiv(54, 10) = 6 groups, group j = the Mamba
    # layers j::6 (kv_cache_utils "In PP case"). pp 4 cuts 29, 30, 30, 29 layers; layers 0-28 hold attention 7 and
    # 18 and the first 14 Mamba layers: 3 in groups 0 and 1 (Mamba 0, 6, 12 and 1, 7, 13), 2 in the others; the
    # other stages hold 3, 3 and 2 attention layers and at most 3 of a Mamba group. So 3 layers per block id on every
    # worker and 7 groups: an 8,192-token request takes cdiv(8192, 4128) = 2 attention blocks + 6 Mamba pages = 8.
    # Regrouping each stage's own layers (as 0.10.x did) gave 8 groups of 2: 9 blocks a request, 924 blocks.
    whole = engine_figures(_fit_json(NEMOTRON, "--gpu", "h100", "--ctx", "8k", "--engine", "vllm", "--tp", "1"))
    assert whole["groups x layers per group"] == [7, 10]
    page = 4_128 * 2 * 8 * 128 * 2  # an attention page: 4,128 tokens x K and V x 8 KV heads x 128 dims x 2 B (bf16)
    assert whole["bytes per block id"] == 10 * page  # = 169,082,880 B: 10 layers a group, a page each
    out = _fit_json(NEMOTRON, "--gpu", "h100", "--ctx", "8k", "--engine", "vllm", "--pp", "4")
    lines = engine_figures(out)
    assert lines["groups x layers per group"] == [7, 3] and lines["bytes per block id"] == 3 * page
    assert lines["blocks per 8,192-token request"] == 8
    # every worker the same bytes per block id: the fewest blocks are the least budget's
    assert lines["num_gpu_blocks"] == lines["KV budget per GPU"] // (3 * page)
    assert out["max_concurrency"] == lines["num_gpu_blocks"] // 8


def test_sglang_token_pool_used_and_free_count_in_the_cell_that_sized_it(kvplan_home):
    # Nemotron-H-56B under SGLang at pp 4: every stage sizes its pools from one "rest" (the least free memory over
    # ranks), and the token count is all-reduced to the least over stages (0.5.23 kv_cache_configurator.py
    # _apply_token_constraints), the count of the stage with the largest cell. SGLang 0.5.23 cuts the 118 layers
    # 29, 29, 30, 30 (get_pp_indices L136-148: 118 // 4 = 29, the remainder 2 one apiece on the last two stages), so
    # attention (7, 18, ..., 106) falls 2, 3, 3, 2 over them: layers 29-57 have the first largest cell, 3 attention
    # layers x 2 (K, V) x 8 KV heads x 128 x 2 B = 12,288 B a token (layers 0-28: 2 x 4,096 = 8,192). The table's
    # token pool is #tokens x 12,288, so 16 requests of 8,192 tokens use 16 x 8,192 x 12,288 = 1,610,612,736 B of it
    # (the binding stage's own 8,192 B cell gave 1,073,741,824 B, and a free figure no stage has). The least room is
    # the last stage's, layers 88-117: 14 Mamba, 2 attention and 14 MLP blocks and the LM head, one MLP block more
    # than the first's 14, 2 and 13 and the embedding (untied: the LM head is the embedding's size).
    out = _fit_json(NEMOTRON, "--gpu", "h100", "--ctx", "8k", "--engine", "sglang", "--pp", "4", "--batch", "16")
    stage = out["binding_stage"]
    assert stage["layers"] == [88, 117] and stage["token_pool_layers"] == [29, 57]
    assert out["token_pool_bytes_per_gpu"] == out["kv_cache_tokens"] * 12_288
    assert stage["kv_used_bytes_per_gpu"] == out["kv_used_bytes_per_gpu"] == 1_610_612_736
    assert stage["free_bytes_per_gpu"] == out["token_pool_bytes_per_gpu"] - 1_610_612_736
    r = runner.invoke(app, ["fit", NEMOTRON, "--gpu", "h100", "--ctx", "8k", "--engine", "sglang", "--pp", "4"])
    assert "layers 88-117 (token pool: 29-57)" in r.stdout
    # simulate's pool: the same #tokens, not the token pool's bytes over the 8,192 B cell (1.5 x as many)
    plan = api.plan(NEMOTRON, "h100", context="8k", engine="sglang", pp=4)
    sim = sim_model(plan, api.load_model(NEMOTRON), api.gpu("h100"), speed="roofline")
    assert sim.token_bytes() == 12_288 and sim.kv_budget_bytes // sim.token_bytes() == plan.kv_cache_tokens


def test_simulate_pool_is_the_stage_fit_shows(kvplan_home):
    # Gemma-2-9B (config.json: 42 layers, 8 KV heads x 256, sliding window 4,096 on the even layers) at pp 2 with
    # --kv-cache-memory 4GiB: both stages have 4 GiB and 21 layers; layers 0-20 hold 11 sliding and 10 full, layers
    # 21-41 10 sliding and 11 full, so at 8k the second stage holds fewer requests: fit's memory table shows it.
    # A layer's token is 2 x 8 x 256 x 2 B = 8,192 B: the simulated pool's full-attention group is 11 x 8,192 =
    # 90,112 B a token and its window group 10 x 8,192 = 81,920 (the first stage's, 81,920 and 90,112, held more).
    plan = api.plan("gemma-2-9b", "h100", context="8k", pp=2, kv_cache_memory="4GiB")
    assert plan.binding_stage.layers == (21, 42)
    sim = sim_model(plan, api.load_model("gemma-2-9b"), api.gpu("h100"), speed="roofline")
    assert sim.kv_budget_bytes == 4 * 2**30
    assert [(g.bytes_per_token, g.window) for g in sim.groups] == [(90_112, None), (81_920, 4096)]


def test_sweep_layouts_says_why_an_engine_runs_no_layout(kvplan_home):
    # every layout of 16 GPUs refused by TensorRT-LLM for one reason (no rule for Qwen3-Next's Gated DeltaNet states):
    # the skip says it, where it said only "no valid layout", as if no tp x pp x dp split existed
    r = runner.invoke(app, ["sweep", "-m", "qwen3-next-80b-a3b-thinking", "-g", "h100", "-c", "32k", "--gpu-counts",
                            "16", "--layouts", "--engine", "trtllm", "--json"])
    assert r.exit_code == 0, r.output
    (skip,) = json.loads(r.stdout)["skipped"]
    assert skip["reason"].startswith("no valid layout: trtllm has no rule for state layers"), skip


def test_vllm_groups_the_whole_model_from_0_11_0_and_each_stage_before(kvplan_home):
    # The release boundary (kvplan.engines.vllm.pool.GLOBAL_GROUPS), read in the wheels: 0.10.2's engine/core.py
    # L193-202 calls get_kv_cache_config on each worker's own specs, then unify_kv_cache_configs; 0.11.0's L199 calls
    # get_kv_cache_configs, which merges every worker's specs (kv_cache_utils.py L1249-1259) and gives each worker the
    # global groups less the layers it does not hold (L1261-1280). Both group by min(layers of a type) (0.10.2 L981,
    # 0.11.0 L977, no 1.5 rule yet). Stage 0 of pp 4 (layers 0-28: attention 7 and 18, 14 Mamba layers): 0.10.2 gives
    # group_size min(2, 14) = 2, 1 + cdiv(14, 2) = 8 groups of 2; 0.11.0 the whole model's min(10, 54) = 10, 1 +
    # cdiv(54, 10) = 7 groups, 3 of stage 0's layers the most in one (L1054): a block id 3 pages, not 2.
    old, new = (engine_figures(_fit_json(NEMOTRON, "--gpu", "h100", "--ctx", "8k", "--engine", "vllm",
                                         "--engine-version", v, "--pp", "4")) for v in ("0.10.2", "0.11.0"))
    assert old["groups x layers per group"] == [8, 2] and new["groups x layers per group"] == [7, 3]
    assert old["bytes per block id"] // 2 == new["bytes per block id"] // 3
