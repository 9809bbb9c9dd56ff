"""`vllm serve --max-model-len auto`: what vLLM sets max_model_len to, by release (kvplan.engines.vllm.autofit).

Golden numbers come from a vLLM log (vllm-project/vllm#29431) or vLLM's source arithmetic written out by
hand (kv_cache_utils.py `_max_memory_usage_bytes_from_groups` / `_auto_fit_max_model_len`, docs/engines.md 1.7).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.sources.catalog import find_in_catalog
from kvplan.cli import app
from kvplan.planning.deploy import Deployment
from kvplan.core.dtypes import KV_DTYPES
from kvplan.engines.vllm import engine as vllm
from kvplan.engines.vllm.autofit import LABEL, auto_fit
from kvplan.engines.vllm.pool import cache_specs
from kvplan.hardware.gpus import find_gpu
from kvplan.model.layers import Kind
from kvplan.planning.plan import Request
from conftest import engine_figures

GIB = 2**30
BF16 = KV_DTYPES["bf16"]
runner = CliRunner()


def _fit(name, version, budgets, dep=None, gpu="h100-sxm"):
    m, dep = find_in_catalog(name), dep or Deployment()
    st = vllm.settings(m, find_gpu(gpu), dep, Request(context=m.max_context), version, {}, {})
    return m, st, auto_fit(m, dep, budgets, st, BF16, BF16)


def test_llama4_scout_pp2_matches_the_pr_log():
    # vllm-project/vllm#29431 (the PR that added the flag, 2025-11-25), Llama-4-Scout w4a16, -pp 2:
    # "Hybrid KV cache manager is disabled for this hybrid model" (chunked local attention turns it off by
    # default), then "Auto-fit max_model_len: reduced from 10485760 to 324640 to fit in available GPU memory
    # (29.72 GiB available for KV cache)"; PP0 had 36.20 GiB. Every layer is a full-attention spec: 8 KV
    # heads x 128 x 2 (K,V) x 2 B = 4,096 B per token per layer; a stage holds 24 of the 48 layers:
    # 98,304 B per token, 1,572,864 B per 16-token block. 29.72 GiB is rounded: [29.715, 29.725) GiB
    # holds 20,285.4 .. 20,292.3 blocks = 324,569 .. 324,678 tokens; 20,290 blocks = 324,640 inside.
    m = find_in_catalog("llama-4-scout-17b-16e-instruct")
    assert m.max_context == 10485760
    st = vllm.settings(m, find_gpu("h100-sxm"), Deployment(1, 2), Request(context=4096), "0.19.1", {}, {})
    assert {k[0] for k, _ in cache_specs(m.layers, 1, BF16, BF16, st)} == {Kind.FULL}
    pp0 = int(36.20 * GIB)
    lo = _fit("llama-4-scout-17b-16e-instruct", "0.19.1", [pp0, int(29.715 * GIB)], Deployment(1, 2))[2]
    hi = _fit("llama-4-scout-17b-16e-instruct", "0.19.1", [pp0, int(29.725 * GIB)], Deployment(1, 2))[2]
    assert lo.tokens <= 324640 <= hi.tokens and hi.tokens - lo.tokens <= 128 and lo.reduced
    # 0.14.0-0.16.0 size the whole model's groups against the smallest stage's memory: 48 x 4,096 =
    # 196,608 B per token, 3,145,728 B per block; 29.72 GiB = 31,911,607,009 B / 3,145,728 = 10,144.4
    # blocks -> 10,144 x 16 = 162,304 tokens, half what 0.17.0 on gives the same stages.
    old = _fit("llama-4-scout-17b-16e-instruct", "0.15.0", [pp0, int(29.72 * GIB)], Deployment(1, 2))[2]
    assert old.tokens == 162304


def test_qwen3_coder_matches_the_estimate_vllm_printed():
    # vllm#34076 (0.15.0): "the available KV cache memory (3.18 GiB) ... the estimated maximum model length
    # is 34736": the same _estimate_max_model_len_from_groups auto-fit runs. Qwen3-30B-A3B geometry: 48
    # layers x 4 KV heads x 128, bf16: 98,304 B per token, 1,572,864 B per block. [3.175, 3.185) GiB holds
    # 2167.5 .. 2174.3 blocks = 34,672 .. 34,784 tokens; 34,736 inside.
    lo = _fit("qwen3-30b-a3b", "0.15.0", [int(3.175 * GIB)])[2]
    hi = _fit("qwen3-30b-a3b", "0.15.0", [int(3.185 * GIB)])[2]
    assert lo.tokens <= 34736 <= hi.tokens and hi.tokens - lo.tokens <= 128


def test_gpt_oss_hybrid_first_group_only_before_0_19():
    # gpt-oss-120b: 36 layers, layer 0 sliding (W 128), 18 sliding + 18 full, 8 KV heads x 64 x 2 x 2 B =
    # 2,048 B per token: page 16 x 2,048 = 32,768 B; 2 groups of 18: 589,824 B per block id. H100 server
    # max_num_batched_tokens 8192: a sliding layer needs cdiv(min(127 + 8192, n), 16) + 1 = 521 pages.
    # Budget 4 GiB = 4,294,967,296 B = 7,281.8 block ids.
    # 0.19.1 sums the groups: cdiv(n, 16) + 521 <= 7,281 -> n = 6,760 x 16 = 108,160.
    # 0.17.0 counts groups[0] (sliding) only: 18 x 32,768 x 521 = 307 MB fits -> the model's 131,072,
    # although the pool holds 7,281 / (8,192 + 521) = 0.84 of one such request.
    budget = 4 * GIB
    fit19 = _fit("gpt-oss-120b", "0.19.1", [budget])[2]
    assert (fit19.tokens, fit19.reduced) == (108160, True)
    m, st, fit17 = _fit("gpt-oss-120b", "0.17.0", [budget])
    assert (fit17.tokens, fit17.reduced, fit17.first_group) == (131072, False, "sliding")
    cap = vllm.capacity(m, Deployment(), budget, 4096, 1, st, BF16, BF16)
    assert engine_figures(cap)[LABEL] == 131072
    assert any("first kv-cache group (sliding) only: the pool holds 0.84 of one 131,072-token" in n
               for n in cap.notes)


def test_qwen3_next_mamba_hybrid():
    # Qwen3-Next-80B-A3B: 48 layers, layer 0 linear attention (state), 36 state + 12 full. Full: 2 KV heads
    # x 256 x 2 x 2 B = 2,048 B per token. Gated DeltaNet state: conv (2 x 16 x 128 + 32 x 128) x 3 =
    # 24,576 + recurrent 32 x 128 x 128 = 524,288 values x 2 B = 1,097,728 B. Attention block: 16 x
    # cdiv(1,097,728, 16 x 2,048) = 544 tokens; page 544 x 2,048 = 1,114,112 B. 36 >= 1.5 x 12: groups of
    # 12 (3 state + 1 full): 13,369,344 B per block id. Budget 2 GiB = 160.6 block ids.
    # 0.19.1: cdiv(n, 544) + 3 <= 160 -> n = 157 x 544 = 85,408. 0.17.0: groups[0] is a state group, one
    # page whatever the length -> the model's 262,144. 0.30.0: prefix caching on for hybrids: refused.
    assert _fit("qwen3-next-80b-a3b-thinking", "0.19.1", [2 * GIB])[2].tokens == 85408
    assert _fit("qwen3-next-80b-a3b-thinking", "0.17.0", [2 * GIB])[2].tokens == 262144
    why = _fit("qwen3-next-80b-a3b-thinking", "0.30.0", [2 * GIB])[2]
    assert isinstance(why, str) and "prefix caching" in why


def test_gemma4_pages_unified_by_a_larger_block():
    # gemma-4-26b-a4b: 25 sliding (W 1024, 8,192 B per token) + 5 full (4,096 B per token). vLLM makes pages
    # equal by block size (unify_kv_cache_spec_page_size): page 16 x 8,192 = 131,072 B, so a full layer's
    # page holds 32 tokens. Groups of 5: 5 sliding + 1 full, 655,360 B per block id. At 262,144 tokens:
    # full cdiv(262,144, 32) = 8,192; sliding cdiv(1,023 + 8,192, 16) + 1 = 577 x 5 groups = 2,885 -> 11,077.
    m, st, fit = _fit("gemma-4-26b-a4b", "0.19.1", [4 * GIB])
    pool = vllm.build_pool(m.layers, 1, BF16, BF16, st)
    assert (pool.bytes_per_block, pool.blocks_per_request(262144, st)) == (655_360, 11_077)
    # 4 GiB = 6,553.6 block ids: cdiv(n, 32) + 2,885 <= 6,553 -> n = 3,668 x 32 = 117,376
    assert fit.tokens == 117376


def test_refusals_and_not_one_token():
    assert "first in 0.14.0" in _fit("qwen3-8b", "0.13.0", [GIB])[2]
    assert _fit("qwen3-8b", "0.19.1", [0])[2].tokens == 0  # vLLM: "Cannot auto-fit max_model_len"
    assert _fit("qwen3-8b", "0.19.1", [100 * GIB])[2].tokens == 40960  # the full length fits


def _engine(out):
    return out["engine"] if "engine" in out else out["plans"][0]["engine"]


def test_cli_row_json_and_emit(kvplan_home):
    # The gpt-oss-120b figures above, through `fit` with an exact budget (--kv-cache-memory 4GiB).
    args = ["fit", "gpt-oss-120b", "--gpu", "h100-sxm", "--gpus", "1", "--engine", "vllm", "--kv-cache-memory", "4GiB"]
    r = runner.invoke(app, [*args, "--engine-version", "0.19.1", "--json"])
    assert r.exit_code == 0, r.output
    figs = engine_figures(_engine(json.loads(r.stdout)))
    assert figs[LABEL] == 108160
    r = runner.invoke(app, [*args, "--engine-version", "0.17.0"])
    assert r.exit_code == 0, r.output
    row = [line for line in r.stdout.splitlines() if LABEL in line]
    assert row and "131,072 tokens" in row[0] and all(len(line) <= 80 for line in r.stdout.splitlines())
    assert "first kv-cache group (sliding) only" in r.stderr
    r = runner.invoke(app, [*args, "--engine-version", "0.13.0", "--json"])
    assert LABEL not in {f["label"] for f in _engine(json.loads(r.stdout))["figures"]}
    # --emit without --ctx: `--max-model-len auto` where the release has it, with what it should set
    r = runner.invoke(app, [*args, "--engine-version", "0.19.1", "--emit", "vllm", "--json"])
    out = json.loads(r.stdout)
    assert "--max-model-len auto" in out["emit"] and "about 108,160 tokens" in out["emit_margin"]
    r = runner.invoke(app, [*args, "--engine-version", "0.13.0", "--emit", "vllm", "--json"])
    assert "--max-model-len 131072" in json.loads(r.stdout)["emit"]
    r = runner.invoke(app, [*args, "--engine-version", "0.19.1", "--emit", "vllm", "--ctx", "32k", "--json"])
    assert "--max-model-len 32768" in json.loads(r.stdout)["emit"]


@pytest.mark.parametrize("name", ["gemma-2-9b", "gemma-3-27b-it", "ai21-jamba-1.5-mini", "nemotron-h-56b-base-8k",
                                  "falcon-h1-0.5b-instruct", "llama-4-scout-17b-16e-instruct"])
def test_every_planned_hybrid_gets_a_length_or_a_reason(name):
    # never a silent gap: each release from 0.14.0 answers with a length within [0, limit] or a refusal,
    # and 8 GiB per GPU holds at least some context of each of these models on the releases kvplan
    # follows exactly (0.15 through 0.25), so at least one of them gives a positive length
    lengths = []
    for version in ("0.15.0", "0.19.1", "0.25.0", "0.33.0"):
        m, st, fit = _fit(name, version, [8 * GIB])
        assert isinstance(fit, str) or 0 <= fit.tokens <= m.max_context
        lengths += [] if isinstance(fit, str) else [fit.tokens]
    assert any(n > 0 for n in lengths), name
