"""The published data-parallel + expert-parallel recipe for Qwen3-Coder-480B-A35B on 8 GPUs, planned.

Recipe: vLLM recipes, "Qwen3-Coder Usage Guide"
(docs.vllm.ai/projects/recipes/en/latest/Qwen/Qwen3-Coder-480B-A35B.html,
vllm-project/recipes `Qwen/Qwen3-Coder-480B-A35B.md`), "Serving on 8xH200 (or H20) GPUs (141GB x 8)", FP8 model:
`vllm serve Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8 --max-model-len 131072 --enable-expert-parallel
--data-parallel-size 8`: tp 1 on each of 8 data-parallel ranks, the 160 experts split 20 per rank.

Model: config.json of Qwen/Qwen3-Coder-480B-A35B-Instruct (scripts/catalog_extra, as ai-dynamo/aiconfigurator vendors
it): hidden 6144, 62 layers, 96 query heads and 8 KV heads of 128, 160 experts of width 2560 (top 8), no dense or
shared MLP, vocabulary 151,936, untied head. Parameters, by hand from it:
  experts    62 x 160 x 3 x 6144 x 2560        = 468,084,326,400
  attention  62 x (6144 x (12,288 + 2 x 1024) + 12,288 x 6144) = 62 x 163,577,856 = 10,141,827,072
  router     62 x 160 x 6144                   = 60,948,480 (16-bit)
  norms      62 x (2 x 6144 + 2 x 128) + 6144  = 783,872 (16-bit)
  embedding, head  151,936 x 6144              = 933,494,784 each (16-bit)
FP8 (one byte per linear weight; the 128 x 128 fp32 block scales, 16.8 MB a rank, are left out: within 0.03 %):
  per rank, dp 8 + ep 8: experts 468,084,326,400 / 8 = 58,510,540,800 + attention whole 10,141,827,072
  + (60,948,480 + 783,872) x 2 + 2 x 933,494,784 x 2 = 72,509,811,712 B.
KV (bf16): 8 heads x (128 + 128) x 2 B x 62 layers = 253,952 B per token on a tp-1 rank; 32,768 tokens
  = 8,321,499,136 B; 131,072 tokens = 33,285,996,544 B.
"""

from __future__ import annotations

import json

from kvplan.planning.deploy import Deployment
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.plan import Request
from kvplan.sources.resolve import resolve_model

GIB = 2**30
RANK_WEIGHTS = 72_509_811_712
TOKEN = 253_952


def _plan(gpu: str, ctx: int):
    spec = resolve_model("qwen3-coder-480b-a35b").spec
    req = Request(ctx, weight_dtype="fp8", overhead_bytes=2 * GIB)
    return resolve_engine().plan(spec, find_gpu(gpu), Deployment(tp=1, dp=8, ep=8), req)


def close(value: int, expected: int, rel: float = 3e-4) -> bool:
    return abs(value - expected) <= rel * expected


def test_dp8_ep8_on_8_h20_96gb():
    # H20 96 GB: torch's total 95.00 GiB = 102,005,473,280 B (modelscope/DiffSynth-Studio#1238) x 0.9
    # = 91,804,925,952 - 72,509,811,712 - 2 GiB overhead = 17,147,630,592 B of KV per rank;
    # / 8,321,499,136 = 2.06 -> 2 requests of 32k per rank, 16 in all.
    plan = _plan("h20", 32768)
    assert close(plan.weight_bytes_per_gpu, RANK_WEIGHTS)
    assert plan.kv_bytes_per_token_per_gpu == TOKEN
    assert plan.kv_bytes_per_sequence_per_gpu == 32768 * TOKEN == 8_321_499_136
    assert close(plan.kv_memory_bytes_per_gpu, 17_147_630_592, rel=1e-3)
    assert plan.max_concurrency == 16 and plan.fits
    # The recipe's 131,072-token context is for the 141 GB H20: one request (33,285,996,544 B) is more than a
    # 96 GB rank's 17.1 GB of KV room.
    assert not _plan("h20", 131072).fits


def test_dp8_ep8_recipe_context_on_141gb():
    # H200 / H20-141GB: 150,108,897,280 x 0.9 = 135,098,007,552 - 72,509,811,712 - 2 GiB = 60,440,712,192 B;
    # / 33,285,996,544 = 1.82 -> one 131,072-token request per rank, 8 in all: the recipe boots.
    plan = _plan("h200", 131072)
    assert close(plan.kv_memory_bytes_per_gpu, 60_440_712_192, rel=1e-3)
    assert plan.max_concurrency == 8 and plan.fits


def test_fit_gpus_8_finds_the_recipe_layout():
    from typer.testing import CliRunner

    from kvplan.cli import app

    res = CliRunner().invoke(app, ["fit", "qwen3-coder-480b-a35b", "--gpu", "h20", "--gpus", "8", "--weight-dtype",
                                   "fp8", "--ctx", "32k", "--json"])
    assert res.exit_code == 0, res.output
    layouts = json.loads(res.stdout)["layouts"]
    recipe = next(x for x in layouts if (x["tp"], x["pp"], x["dp"], x["ep"]) == (1, 1, 8, 8))
    assert close(recipe["weight_bytes_per_gpu"], RANK_WEIGHTS)
    assert recipe["kv_bytes_per_sequence_per_gpu"] == 8_321_499_136 and recipe["fits"]
    # Ranked by concurrency at the context: tp 8 keeps one of the 8 KV heads per rank (1/8 of the KV per
    # request), which on a 96 GB card holds more 32k requests than DP8's whole-head ranks.
    assert layouts[0]["max_concurrency"] >= recipe["max_concurrency"] == 16


def test_emit_vllm_dp8_ep8_flags():
    from typer.testing import CliRunner

    from kvplan.cli import app

    res = CliRunner().invoke(app, ["fit", "qwen3-coder-480b-a35b", "--gpu", "h200", "--dp", "8", "--ep", "8",
                                   "--weight-dtype", "fp8", "--ctx", "131072", "--engine", "vllm", "--emit", "vllm",
                                   "--json"])
    assert res.exit_code == 0, res.output
    args = json.loads(res.stdout)["emit"].split()
    assert args[args.index("-tp") + 1] == "1" and args[args.index("--data-parallel-size") + 1] == "8"
    assert "--enable-expert-parallel" in args and args[args.index("--max-model-len") + 1] == "131072"
