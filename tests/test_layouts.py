"""Layouts beyond tp x pp, planned: data-parallel ranks, expert parallelism, per-rank weights and KV.

The golden figures are worked by hand from each model's config.json (its published architecture)
and from vLLM's placement (docs/engines.md section 9.1), never from kvplan's output. Weights are
asserted within 0.01 %: the hand sums leave out norms and a few MB of FP8 block scales.
"""

from __future__ import annotations

import pytest

from kvplan.core.errors import KvplanError
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.engines import resolve_engine
from kvplan.planning.plan import Request
from kvplan.sources.resolve import resolve_model

GIB = 2**30
H200 = find_gpu("h200")


def _plan(name: str, dep: Deployment, ctx: int = 32768, **kw):
    return resolve_engine().plan(resolve_model(name).spec, H200, dep, Request(ctx, **kw))


def close(value: int, expected: int, rel: float = 1e-4) -> bool:
    return abs(value - expected) <= rel * expected


# DeepSeek-V3 (config.json: hidden 7168, 61 layers, first 3 dense, 256 routed experts of width 2048,
# 1 shared expert, q_lora 1536, kv_lora 512, rope 64, 128 heads of nope 128 / v 128, dense width
# 18432, vocabulary 129280, untied), FP8 weights with 128 x 128 fp32 block scales:
#   routed experts: 58 layers x 256 x 3 x 7168 x 2048 = 653,908,770,816 B + scales 44,544 matrices x
#     (56 x 16 blocks x 4 B) = 159,645,696 B -> 654,068,416,512 B; one eighth: 81,758,552,064 B.
#   split by heads / width: per layer q_b 1536 x 24576 + kv_b 512 x 32768 + o 16384 x 7168 =
#     171,966,464; dense MLP 3 x 3 x 7168 x 18432 = 1,189,085,184; shared 58 x 3 x 7168 x 2048 =
#     2,554,331,136 -> 14,233,370,624 B.
#   whole on every rank: q_a + kv_a 61 x 7168 x (1536 + 576) = 923,467,776 B; router 58 x 256 x 7168
#     x 2 B = 212,860,928 B -> 1,136,328,704 B.
#   embedding and LM head: 129,280 x 7168 x 2 B = 1,853,358,080 B each.
# tp 8:           14,233,370,624 / 8 + 81,758,552,064 + 1,136,328,704 + 2 x 1,853,358,080 / 8
#                 = 85,137,391,616 B per rank.
# dp 8 + ep 8:    14,233,370,624 + 81,758,552,064 + 1,136,328,704 + 2 x 1,853,358,080
#                 = 100,834,967,552 B per rank (attention, dense layers, embedding whole: tp 1).
# KV: the latent, 512 + 64 = 576 values x 61 layers x 2 B = 70,272 B per token, 32,768 tokens
#   (whole pages) = 2,302,672,896 B per sequence on every rank that holds it: all 8 under tp 8
#   (the latent is not split by heads), one under dp 8.
# Capacity with a fixed 2 GiB overhead: budget 150,108,897,280 (H200, 139.80 GiB) x 0.9 =
#   135,098,007,552 B. tp 8: (135,098,007,552 - 85,137,391,616 - 2,147,483,648) / 2,302,672,896
#   = 20.8 -> 20 requests. dp 8: (135,098,007,552 - 100,834,967,552 - 2,147,483,648) / 2,302,672,896
#   = 13.9 -> 13 per rank, each its own: 8 x 13 = 104 requests.
DSV3_SEQ = 2_302_672_896


def test_deepseek_v3_tp8_against_dp8_ep8():
    tp8 = _plan("deepseek-v3", Deployment(tp=8), overhead_bytes=2 * GIB)
    dpep = _plan("deepseek-v3", Deployment(tp=1, dp=8, ep=8), overhead_bytes=2 * GIB)
    assert close(tp8.weight_bytes_per_gpu, 85_137_391_616)
    assert close(dpep.weight_bytes_per_gpu, 100_834_967_552)
    assert tp8.kv_bytes_per_sequence_per_gpu == dpep.kv_bytes_per_sequence_per_gpu == DSV3_SEQ
    assert tp8.kv_bytes_per_sequence == 8 * DSV3_SEQ  # eight copies of the latent
    assert dpep.kv_bytes_per_sequence == DSV3_SEQ  # one
    assert (tp8.max_concurrency, dpep.max_concurrency) == (20, 104)
    assert tp8.deployment.gpus == dpep.deployment.gpus == 8


def test_deepseek_v3_dp_without_ep_places_experts_the_same():
    # vLLM: without --enable-expert-parallel the expert layers are one tensor-parallel group of
    # dp x tp = 8 ranks, so each rank still holds one eighth of the routed experts (by width).
    dp = _plan("deepseek-v3", Deployment(tp=1, dp=8), overhead_bytes=2 * GIB)
    assert close(dp.weight_bytes_per_gpu, 100_834_967_552)
    assert dp.max_concurrency == 104


# Qwen3-235B-A22B (config.json: hidden 4096, 94 layers, 64 heads and 4 KV heads of 128, 128 experts
# of width 1536, vocabulary 151936, untied), bf16:
#   routed experts: 94 x 128 x 3 x 4096 x 1536 x 2 B = 454,192,791,552 B; one eighth 56,774,098,944 B.
#   attention per layer: q 4096 x 8192 + k, v 2 x 4096 x 512 + o 8192 x 4096 = 71,303,168; x 94 x 2 B
#     = 13,404,995,584 B; at tp 8 the 4 KV heads are replicated (one per rank): K, V per rank
#     2 x 4096 x 128 = 1,048,576 instead of 4,194,304 / 8 = 524,288, + 524,288 x 94 x 2 B = 98,566,144 B.
#   router 94 x 128 x 4096 x 2 B = 98,566,144 B; embedding and head 151,936 x 4096 x 2 B = 1,244,659,712 B each.
#   (norms: 94 x (2 x 4096 + 2 x 128) x 2 B = 1.6 MB, left out.)
# tp 8:        13,404,995,584 / 8 + 98,566,144 (replicated K, V) + 56,774,098,944 + 98,566,144 (router)
#              + 2 x 1,244,659,712 / 8 = 58,958,020,608 B.
# dp 8 + ep 8: 13,404,995,584 + 56,774,098,944 + 98,566,144 + 2 x 1,244,659,712 = 72,766,980,096 B.
# KV per token per rank: tp 8 one KV head: 94 x 1 x 256 x 2 B = 48,128 B; dp 8 all four: 192,512 B.
# At 32,768 tokens: 1,577,058,304 B and 6,308,233,216 B per sequence.
def test_qwen3_235b_tp8_against_dp8_ep8():
    tp8 = _plan("qwen3-235b-a22b", Deployment(tp=8), overhead_bytes=2 * GIB)
    dpep = _plan("qwen3-235b-a22b", Deployment(tp=1, dp=8, ep=8), overhead_bytes=2 * GIB)
    assert close(tp8.weight_bytes_per_gpu, 58_958_020_608)
    assert close(dpep.weight_bytes_per_gpu, 72_766_980_096)
    assert tp8.kv_bytes_per_sequence_per_gpu == 1_577_058_304
    assert dpep.kv_bytes_per_sequence_per_gpu == 6_308_233_216
    # (135,098,007,552 - 58,958,020,608 - 2 GiB) / 1,577,058,304 = 46.9 -> 46;
    # 8 x floor((135,098,007,552 - 72,766,980,096 - 2 GiB) / 6,308,233,216 = 9.5) = 8 x 9 = 72.
    assert (tp8.max_concurrency, dpep.max_concurrency) == (46, 72)


def test_batch_is_spread_over_dp_ranks():
    # 104 requests fit dp 8 (13 each); 105 need a 14th on one rank: does not fit.
    assert _plan("deepseek-v3", Deployment(dp=8, ep=8), batch=104, overhead_bytes=2 * GIB).fits
    assert not _plan("deepseek-v3", Deployment(dp=8, ep=8), batch=105, overhead_bytes=2 * GIB).fits


@pytest.mark.parametrize("dep,text", [
    (Deployment(tp=1, dp=8, ep=4), "tp x dp = 8"),
    (Deployment(tp=8, ep=8), None),
])
def test_expert_parallel_size_is_tp_times_dp(dep, text):
    if text is None:
        assert _plan("deepseek-v3", dep).deployment.ep == 8
    else:
        with pytest.raises(KvplanError, match=text):
            _plan("deepseek-v3", dep)


def test_expert_parallel_needs_experts():
    with pytest.raises(KvplanError, match="no routed experts"):
        _plan("llama-3.1-8b", Deployment(tp=1, dp=2, ep=2))


def test_dense_model_dp_is_replicas():
    # A dense model on dp 2: each rank the whole model, its own requests: twice one GPU's concurrency.
    one = _plan("llama-3.1-8b", Deployment(), ctx=8192, overhead_bytes=2 * GIB)
    two = _plan("llama-3.1-8b", Deployment(dp=2), ctx=8192, overhead_bytes=2 * GIB)
    assert two.weight_bytes_per_gpu == one.weight_bytes_per_gpu
    assert two.max_concurrency == 2 * one.max_concurrency > 0
    assert two.deployment.gpus == 2


# --- fit's layout flags ------------------------------------------------------------------------

def _fit(*args):
    from typer.testing import CliRunner

    from kvplan.cli import app

    return CliRunner().invoke(app, ["fit", *args])


def test_fit_dp_ep_flags_json():
    import json

    res = _fit("deepseek-v3", "--gpu", "h200", "--dp", "8", "--ep", "8", "--ctx", "32k", "--overhead", "2GiB", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["gpus"], out["tp"], out["dp"], out["ep"]) == (8, 1, 8, 8)
    assert out["max_concurrency"] == 104  # the hand arithmetic of test_deepseek_v3_tp8_against_dp8_ep8
    assert out["kv_bytes_per_sequence_per_gpu"] == DSV3_SEQ


def test_fit_gpus_alone_searches_layouts():
    import json

    res = _fit("deepseek-v3", "--gpu", "h200", "--gpus", "8", "--ctx", "32k", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    rows = out["layouts"]
    assert all(r["tp"] * r["pp"] * r["dp"] == 8 for r in rows)
    keys = [(not r["fits"], -r["max_concurrency"], -r["decode_tokens_per_second"]) for r in rows]
    assert keys == sorted(keys)  # best first
    assert (out["tp"], out["pp"], out["dp"]) == (rows[0]["tp"], rows[0]["pp"], rows[0]["dp"])
    tp8 = next(r for r in rows if r["tp"] == 8)
    dp8 = next(r for r in rows if r["dp"] == 8)
    assert dp8["ep"] == 8 and dp8["max_concurrency"] > 4 * tp8["max_concurrency"]
    assert "requests" in rows[0]["why"]


def test_fit_gpus_search_table_fits_80_columns():
    res = _fit("qwen3-235b-a22b", "--gpu", "h200", "--gpus", "8", "--ctx", "32k")
    assert res.exit_code == 0, res.output
    assert "layouts of 8 GPUs" in res.stdout
    assert max(len(line) for line in res.stdout.splitlines()) <= 80


def test_fit_gpus_explains_a_pipelined_first_choice():
    # DeepSeek-V3 on 8 H200s at 32k: tp 1 x pp 2 x dp 4 holds the most requests (the ranking rule, unchanged; pp 8
    # is second now that a stage of MoE layers holds their experts, not an even share beside the 3 dense layers), but
    # a token crosses the 2 stages one after another; the table says so and names the fastest flat layout shown,
    # and the JSON `why` of every pipelined layout mentions the per-token step and bubbles.
    # The stage arithmetic (figures of the header above; budget 135,098,007,552 B; both layouts tp 1, so the same
    # estimated overhead O = 2,112,094,208 B a rank: an 8,192-token prefill's activations + CUDA context + NCCL):
    #   a MoE layer on one rank at tp 1: attention 171,966,464 + q_a/kv_a 7168 x 2112 = 15,138,816, shared expert
    #   3 x 7168 x 2048 = 44,040,192, router 256 x 7168 x 2 = 3,670,016, routed 654,068,416,512 / 58 = 11,277,041,664
    #   over the ep ranks. Stages as get_pp_indices cuts 61 layers (the remainder before the last stage).
    #   pp 2 (31 + 30 layers) x dp 4 (ep 4: routed / 4 = 2,819,260,416 a layer): the last stage holds 30 MoE layers
    #     30 x (187,105,280 + 44,040,192 + 3,670,016 + 2,819,260,416) + LM head 1,853,358,080 = 93,475,635,200 B,
    #     KV 30 x 576 x 2 B x 32,768 = 1,132,462,080 B a request: (135,098,007,552 - 93,475,635,200 - O)
    #     / 1,132,462,080 = 34.9 -> 34 (the first stage's 37.5 does not bind) x 4 replicas = 136.
    #   pp 8 (7, 7, 8, 8, 8, 8, 8, 7 layers), ep 1: a middle stage of 8 MoE layers holds every expert,
    #     8 x (187,105,280 + 44,040,192 + 3,670,016 + 11,277,041,664) = 92,094,857,216 B, KV 8 x 1,152 x 32,768 =
    #     301,989,888 B: (135,098,007,552 - 92,094,857,216 - O) / 301,989,888 = 135.4 -> 135, one replica.
    #   pp 1 x dp 8: 104 (the header's 13 x 8, with 2 GiB there). So (1, 2, 4) first, by one request.
    import json

    out = json.loads(_fit("deepseek-v3", "--gpu", "h200", "--gpus", "8", "--ctx", "32k", "--json").stdout)
    rows = out["layouts"]
    assert (rows[0]["tp"], rows[0]["pp"], rows[0]["dp"]) == (1, 2, 4)
    assert all("pipeline stages in turn" in r["why"] and "bubbles" in r["why"] for r in rows if r["pp"] > 1)
    assert not any("pipeline" in r["why"] for r in rows if r["pp"] == 1)
    text = _fit("deepseek-v3", "--gpu", "h200", "--gpus", "8", "--ctx", "32k").stdout
    flat = " ".join(text.split())
    assert "#1 runs 2 pipeline stages one after another" in flat and "pipeline bubbles" in flat
    assert "(tp 1 × dp 8, ep 8) holds 104 requests" in flat and "lower per-token latency" in flat
    assert max(len(line) for line in text.splitlines()) <= 80


@pytest.mark.parametrize("args,needle", [
    (["--dp", "8", "--ep", "4"], "tp x dp = 8"),
    (["--gpus", "8", "--dp", "3"], "multiple of --pp 1 × --dp 3"),
    (["--tp", "8", "--dp", "2", "--gpus", "8"], "does not equal"),
    (["--dp", "0"], "between 1 and 4096"),
])
def test_fit_layout_refusals(args, needle):
    from conftest import one_line_error

    one_line_error(_fit("deepseek-v3", "--gpu", "h200", "--ctx", "32k", *args), 2, needle)


def test_fit_ep_on_a_dense_model_refused():
    from conftest import one_line_error

    one_line_error(_fit("llama-3.1-8b", "--gpu", "h100", "--dp", "2", "--ep", "2"), 2, "no routed experts")


def test_decode_context_parallel_stripes_the_latent():
    # vLLM -tp 8 -dcp 8 (PR #23734: token i on DCP rank i mod 8): each rank holds 32,768 / 8 = 4,096
    # tokens of the 70,272 B/token latent = 287,834,112 B per request, one eighth of tp 8's
    # 2,302,672,896. With 2 GiB overhead the KV room is tp 8's: 150,108,897,280 x 0.9 = 135,098,007,552
    # - 85,137,391,616 (weights, test_deepseek_v3_tp8_against_dp8_ep8) - 2,147,483,648 = 47,813,132,288 B
    # by hand (kvplan's figure differs by < 0.01 %, the RoPE table): 47.81e9 / 287,834,112 = 166.1 -> 166.
    tp8 = _plan("deepseek-v3", Deployment(tp=8), overhead_bytes=2 * GIB)
    dcp = _plan("deepseek-v3", Deployment(tp=8, dcp=8), overhead_bytes=2 * GIB)
    assert dcp.kv_bytes_per_sequence_per_gpu == DSV3_SEQ // 8 == 287_834_112
    assert dcp.max_concurrency == 166
    assert dcp.kv_cache_tokens == 8 * tp8.kv_cache_tokens  # "kvcache token budget always increased by dcp times"
    assert dcp.weight_bytes_per_gpu == tp8.weight_bytes_per_gpu


@pytest.mark.parametrize("model,dep,needle", [
    ("deepseek-v3", Deployment(tp=4, dcp=8), "must divide tp=4"),
    ("llama-3.1-8b", Deployment(tp=2, dcp=2), "needs tp \\(2\\) above the model's 8 KV heads"),
    ("qwen3-235b-a22b", Deployment(tp=8, dcp=4), "exceeds vLLM's maximum tp // KV heads = 2"),
    ("gemma-2-9b", Deployment(tp=8, dcp=2), "only full-attention and MLA caches"),
])
def test_decode_context_parallel_refusals(model, dep, needle):
    with pytest.raises(KvplanError, match=needle):
        _plan(model, dep)


# --- cheapest: layouts and replicas ---------------------------------------------------------------

def _cheapest(*args):
    import json

    from typer.testing import CliRunner

    from kvplan.cli import app

    res = CliRunner().invoke(app, ["cheapest", *args, "--json"])
    assert res.exit_code in (0, 6), res.output
    return json.loads(res.stdout)


def test_cheapest_layouts_find_eight_gpus_for_deepseek():
    # 70 requests of 32k: tp 8 holds about 20 (test above), so tp then pp needs 16 GPUs (tp 8 x pp 2);
    # dp 8 + ep 8 holds about 104 on 8: with --layouts 8 H200 meet it.
    base = ["deepseek-v3", "--ctx", "32k", "--concurrency", "70", "--gpu", "h200", "--gpu-counts", "8,16"]
    plain = _cheapest(*base)
    wide = _cheapest(*base, "--layouts")
    assert min(r["gpus"] for r in plain["meets"]) == 16
    assert min(r["gpus"] for r in wide["meets"]) == 8
    assert any(r["dp"] == 8 and r["ep"] == 8 for r in wide["meets"])


def test_cheapest_replicas():
    # Llama 3.1 70B at 128k: one tp 8 H200 deployment holds N requests (< 32, fails); with --replicas 4 the
    # fewest copies reaching 32 are ceil(32 / N), each serving ceil(32 / copies), at copies x 8 GPUs.
    out = _cheapest("llama-3.1-70b", "--ctx", "128k", "--concurrency", "32", "--gpu", "h200", "--gpu-counts", "8",
                    "--replicas", "4")
    one = next(r for r in out["fails"] if r["replicas"] == 1 and r["gpus"] == 8)
    rep = next(r for r in out["meets"] if r["replicas"] > 1)
    n = -(-32 // one["max_concurrency"])
    assert rep["replicas"] == n and rep["gpus_total"] == 8 * n
    assert rep["batch"] == -(-32 // n) and rep["max_concurrency_total"] == n * rep["max_concurrency"] >= 32


def test_sweep_layouts_keeps_the_best_layout_per_count():
    import json

    from typer.testing import CliRunner

    from kvplan.cli import app

    args = ["sweep", "--models", "qwen3-235b-a22b", "--gpu", "h200", "--gpu-counts", "8", "--ctx", "32k", "--json"]
    plain = json.loads(CliRunner().invoke(app, args).stdout)["plans"]
    best = json.loads(CliRunner().invoke(app, args + ["--layouts"]).stdout)["plans"]
    assert len(plain) == len(best) == 1
    assert (plain[0]["tp"], plain[0]["pp"]) == (8, 1)
    assert best[0]["max_concurrency"] > plain[0]["max_concurrency"]  # tp 8 replicates the 4 KV heads
    assert best[0]["tp"] * best[0]["pp"] * best[0]["dp"] == 8


# --- engines and --emit ---------------------------------------------------------------------------

def _fit_json(*args):
    import json

    res = _fit(*args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_engine_dp_ranks_each_hold_their_own(engine):
    # The engine's pool is one DP rank's (its log line), the deployment holds dp x its requests.
    out = _fit_json("deepseek-v3", "--gpu", "h200", "--dp", "8", "--ep", "8", "--ctx", "32k", "--engine", engine)
    assert out["max_concurrency"] == 8 * int(out["engine"]["max_concurrency"]) > 0
    # and its pool is dp x one rank's token slots (each DP rank keeps its own), so it holds what its requests use
    # at the context (it printed one rank's before: vLLM 395,712 tokens "for all GPUs" beside 96 x 32,768 in use)
    assert out["kv_pool_tokens_per_deployment"] == 8 * int(out["engine"]["tokens"])
    assert out["kv_pool_tokens_per_deployment"] >= out["request_tokens_at_context"] == out["max_concurrency"] * 32_768


def test_emit_dp_ep_flags():
    vllm = _fit_json("deepseek-v3", "--gpu", "h200", "--dp", "8", "--ep", "8", "--ctx", "32k", "--emit", "vllm")
    args = vllm["emit"].split()
    assert args[args.index("-tp") + 1] == "1" and args[args.index("--data-parallel-size") + 1] == "8"
    assert "--enable-expert-parallel" in args
    per_rank = int(args[args.index("--max-num-seqs") + 1])  # vLLM's is per DP rank: never below the plan's share
    assert per_rank * 8 >= vllm["max_concurrency"]
    sgl = _fit_json("deepseek-v3", "--gpu", "h200", "--dp", "8", "--ep", "8", "--ctx", "32k", "--emit", "sglang")
    args = sgl["emit"].split()
    assert args[args.index("--tp-size") + 1] == "8" and args[args.index("--dp-size") + 1] == "8"
    assert "--enable-dp-attention" in args and args[args.index("--ep-size") + 1] == "8"
    assert int(args[args.index("--max-running-requests") + 1]) >= sgl["max_concurrency"]


@pytest.mark.parametrize("args,needle", [
    (["--engine", "sglang", "--engine-opt", "enable_dp_attention=true"], "needs --dp above 1"),
    (["--dp", "8", "--engine", "sglang", "--engine-opt", "enable_dp_attention=false"], "replicas"),
    (["--tp", "8", "--dcp", "8", "--engine", "sglang"], "not modelled"),
    (["--tp", "8", "--dcp", "8", "--engine", "vllm", "--engine-version", "0.10.1"], "added in 0.10.2"),
    (["--dp", "2", "--engine", "transformers"], "data-parallel ranks are not modelled"),
    (["--tp", "2", "--dp", "4", "--ep", "8", "--engine", "trtllm"], "Mapping.dp_size"),
])
def test_engine_layout_refusals(args, needle):
    from conftest import one_line_error

    one_line_error(_fit("deepseek-v3", "--gpu", "h200", "--ctx", "32k", *args), 2, needle)


def test_sglang_dp_attention_places_dense_mlps_and_head_over_every_rank():
    # SGLang --tp-size 8 --dp-size 8 --enable-dp-attention (docs/engines.md 9.2): attention TP 1 as
    # vLLM's -dp 8, but the 3 dense MLPs and the shared experts stay TP over all 8 ranks and so does
    # the LM head; the embedding is whole. Against the vLLM layout (100,834,967,552 B above), each
    # rank holds 7/8 less of: dense 1,189,085,184 + shared 2,554,331,136 = 3,743,416,320 B and the
    # head 1,853,358,080 B: 100,834,967,552 - 7/8 x 5,596,774,400 = 95,937,789,952 B.
    from kvplan.engines import resolve_engine

    spec = resolve_model("deepseek-v3").spec
    dep, req = Deployment(tp=1, dp=8, ep=8), Request(32768, overhead_bytes=2 * GIB)
    # The plans' weights are as loaded: the placement's bytes plus what each engine's loading adds, which for
    # DeepSeek-V3 (FP8, nothing repacked) is its RoPE cos/sin table on every rank: deepseek_yarn builds
    # original_max_position_embeddings x factor = 4,096 x 40 = 163,840 rows x qk_rope_head_dim 64 values
    # (vllm/model_executor/layers/rotary_embedding/deepseek_scaling_rope.py _compute_cos_sin_cache, cast to the
    # model's bf16 by base.py RotaryEmbedding.__init__: 2 B); SGLang keeps it in fp32 on CUDA (4 B:
    # python/sglang/srt/layers/rotary_embedding.py, "cache needs to be in FP32 for numerical stability").
    rope_rows = 4_096 * 40
    # SGLang's weights as loaded also hold PyTorch's caching allocator's rounding (tests/test_caching_allocator.py).
    sgl = resolve_engine("sglang").result(spec, H200, dep, req)
    rounding = sgl.settings["allocator_rounding"]
    assert sgl.settings["loaded_extra"] == rope_rows * 64 * 4 + rounding
    assert close(sgl.plan.weight_bytes_per_gpu - rounding, 95_937_789_952 + rope_rows * 64 * 4)
    # vLLM's "Model loading took" counts the blocks the allocator handed out (kvplan.core.caching_allocator): the
    # embedding and the LM head (129,280 x 7,168 x 2 B = 1,767.5 MiB each) keep their segments' 0.5 MiB tails: 1 MiB.
    vllm = resolve_engine("vllm").result(spec, H200, dep, req)
    assert vllm.settings["overhead_weights_repack"] == rope_rows * 64 * 2 + 2**20
    assert close(vllm.plan.weight_bytes_per_gpu, 100_834_967_552 + rope_rows * 64 * 2 + 2**20)


def test_cheapest_replicas_within_max_gpus():
    # Llama 3.1 70B at 32k on H100, 64 requests: tp 4 holds 14 (the fail row), so 5 copies of tp 4 reach 64 on 20
    # GPUs; --max-gpus 4 took that answer past its 4 GPUs (as a workload's copies are not). Within 4 nothing meets;
    # within 20 the 5 copies are tried again.
    base = ["llama-3.1-70b", "--ctx", "32k", "--concurrency", "64", "--gpu", "h100", "--replicas", "8"]
    capped = _cheapest(*base, "--max-gpus", "4")
    assert not capped["meets"]
    assert all(r.get("gpus_total", r["gpus"]) <= 4 for r in capped["fails"])
    wide = _cheapest(*base, "--max-gpus", "20", "--gpu-counts", "4")
    assert [(r["replicas"], r["gpus_total"]) for r in wide["meets"]] == [(5, 20)]
