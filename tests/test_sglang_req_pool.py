"""SGLang's request-slot pool (kvplan.engines.sglang.req_pool): rows x (context_len + 4) int32 entries, allocated
after the KV budget is read, so it comes out of the memory above mem_fraction_static; a plan whose pool does not fit
there does not start. Expected figures are hand arithmetic on SGLang's source and sgl-project/sglang#5755's log."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from conftest import engine_figures
from kvplan.cli import app
from kvplan.engines import resolve_engine
from kvplan.engines.sglang import req_pool
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

H100 = find_gpu("h100")
SCOUT = find_in_catalog("llama-4-scout-17b-16e-instruct")
LLAMA = find_in_catalog("llama-3.1-8b")


def _result(model, ctx, version, opts=(), tp=1):
    return resolve_engine("sglang", version, list(opts)).result(model, H100, Deployment(tp), Request(context=ctx))


def _slots(res):
    return engine_figures(res)[req_pool.LABEL]


def test_scout_at_its_default_context_is_the_80_gib_of_sglang_5755():
    # sgl-project/sglang#5755 (Llama-4-Scout, --tp 8, no --context-length, H100s "total capacity of 79.10 GiB"):
    # "Tried to allocate 80.04 GiB" with 20.08 GiB free. The pool: max_num_reqs = clamp(tokens / 10,485,760 x 512,
    # 2048, 4096) = 2,048 (a pool of ~1.7M tokens gives 83), + 1 padding row = 2,049 rows; each row 10,485,760 + 4 =
    # 10,485,764 int32: 2,049 x 10,485,764 x 4 = 85,941,321,744 B = 80.039 GiB, "80.04 GiB". Far above what SGLang
    # leaves above the fraction, so the plan does not fit, and says why.
    assert SCOUT.max_context == 10_485_760
    for version in ("0.4.3", "0.5.23"):  # the padding row: passed by ModelRunner to 0.4.6, the pool's own from 0.5.11
        res = _result(SCOUT, 10_485_760, version, tp=8)
        assert _slots(res) == (2_049, 10_485_764, 85_941_321_744)
        what, size, room = res.plan.above_budget
        assert size == 85_941_321_744 and size > room
        assert not res.plan.fits and res.plan.max_concurrency == 0
        assert any("request-slot pool" in w.message and "start-up" in w.message for w in res.plan.warnings)


def test_no_padding_row_from_047_to_0510():
    # 0.4.7-0.5.10: ReqToTokenPool(size=max_num_reqs) allocates `size` rows: 2,048 x 10,485,764 x 4 = 85,899,378,688 B
    for version in ("0.4.9", "0.5.3", "0.5.10"):
        assert _slots(_result(SCOUT, 10_485_760, version, tp=8)) == (2_048, 10_485_764, 85_899_378_688)
    assert _slots(_result(SCOUT, 10_485_760, "0.5.11", tp=8))[0] == 2_049


def test_it_takes_nothing_from_the_token_pool_and_shows_in_the_memory_rows():
    # Llama-3.1-8B at 128k on one H100: the token pool (~412k tokens) gives an estimate of 412k / 131,072 x 512 =
    # 1,609, clamped up to 2,048; + 1 = 2,049 rows x 131,076 x 4 B = 1,074,298,896 B (1.00 GiB). The pool is sized
    # before it is allocated, so max_total_num_tokens is the same with or without it: the budget is not moved.
    res = _result(LLAMA, 131_072, "0.5.23")
    assert _slots(res) == (2_049, 131_076, 1_074_298_896)
    what, size, room = res.plan.above_budget
    assert (what, size) == ("request slots", 1_074_298_896) and size < room and res.plan.fits
    # the room: the free memory before the weights x (1 - fraction in force): (85,018,877,624 B usable on the H100
    # profile - 536,870,912 B tp-1 init) x (1 - 0.83) = 84,482,006,712 x 0.17 = 14,361,941,141.04 -> 14,361,941,141 B
    assert res.settings["mem_fraction_static"] == 0.83 and room == 14_361_941_141
    assert res.plan.kv_memory_bytes_per_gpu == res.capacity.kv_memory_bytes  # the budget is what it was


def test_max_running_requests_by_release():
    # --max-running-requests 64 on a tp-1 server (dp 1): 0.4.9 takes the flag as given, no padding row: 64 rows x
    # 131,076 x 4 B = 64 x 524,304 = 33,555,456 B; 0.5.23 min(64, tokens // 2) = 64 + 1 padding row = 34,079,760 B
    assert _slots(_result(LLAMA, 131_072, "0.4.9", ["max_running_requests=64"])) == (64, 131_076, 33_555_456)
    assert _slots(_result(LLAMA, 131_072, "0.5.23", ["max_running_requests=64"])) == (65, 131_076, 34_079_760)
    # the rule alone: 0.5.10-0.5.13 caps a flag by the estimate, 0.5.14 on by tokens // 2; before 0.5.10 the flag
    assert req_pool.max_num_reqs("0.5.8", 9_000, 1, 100_000, 131_072) == 9_000
    assert req_pool.max_num_reqs("0.5.12", 9_000, 1, 100_000, 131_072) == 2_048  # estimate clamped up to 2,048
    assert req_pool.max_num_reqs("0.5.14", 9_000, 1, 100_000, 131_072) == 9_000  # tokens // 2 = 50,000
    assert req_pool.max_num_reqs("0.5.14", 9_000, 4, 1_000, 131_072) == 500  # 9,000 // 4 = 2,250; 1,000 // 2
    assert req_pool.max_num_reqs("0.5.3", None, 1, 1_000, 131_072) == 2_048  # no tokens // 2 before 0.5.10
    assert req_pool.max_num_reqs("0.5.10", None, 1, 1_000, 131_072) == 500


def test_fit_json_and_text_show_it():
    runner = CliRunner()
    out = runner.invoke(app, ["fit", "llama-3.1-8b", "--gpu", "h100", "--engine", "sglang", "--ctx", "128k", "--json"])
    assert out.exit_code == 0, out.output
    (plan,) = json.loads(out.stdout)["plans"]
    above = plan["above_budget"]
    assert above["what"] == "request slots" and above["bytes_per_gpu"] == 1_074_298_896
    text = runner.invoke(app, ["fit", "llama-3.1-8b", "--gpu", "h100", "--engine", "sglang", "--ctx", "128k"])
    assert "above it: request slots" in text.output and "2,049 x 131,076 x 4 B = 1.00 GiB" in text.output


def test_emitted_fraction_says_where_the_slots_do_not_fit_above_it():
    # --emit sglang may raise the fraction (boot.emit_advice); the room above it shrinks to (free before the weights)
    # x (1 - fraction). Llama-3.1-8B at 128k on an H100: free before = 85,018,877,624 B (the profile's usable) -
    # 536,870,912 B (tp 1's init) = 84,482,006,712 B; at 0.99 the room is 844,820,067 B, less than the 1,074,298,896 B
    # of request slots (2,049 x 131,076 x 4): the advice says the server would not start; at 0.83 it fits
    from kvplan.engines.sglang import boot

    res = _result(LLAMA, 131_072, "0.5.23")
    st = res.settings
    assert st["usable_bytes"] - st["init_bytes"] == 84_482_006_712
    said = boot._slots_overrun(res.plan, st, 0.99)
    assert "1,074,298,896 B" in said and "844,820,067 B" in said and "start-up" in said
    assert boot._slots_overrun(res.plan, st, 0.83) == ""


def _plan(model, gpu, ctx, version="0.5.23", kv="auto", tp=8):
    from kvplan.planning.request import read_request
    req = read_request(model, context=ctx, kv_dtype=kv)
    return resolve_engine("sglang", version, []).result(model, find_gpu(gpu), Deployment(tp), req)


def test_the_longest_context_is_one_whose_request_slots_fit_above_the_fraction():
    # Llama-4-Scout, tp 8 on H100s, fp8 KV, 0.5.23: the token pool holds 3,332,204 tokens, so one request of that
    # length fits the pool; but the server started at --context-length n allocates 2,049 rows x (n + 4) x 4 B (for n
    # above tokens / 4 the estimate 3,332,204 / n x 512 < 2,048 is clamped up to 2,048, + 1 padding row) above the
    # fraction, whose room is (85,018,877,624 usable - 2,039,480,320 tp-8 init) x (1 - 0.812) = 15,600,126,693 B.
    # 2,049 x 4 = 8,196 B per position: 15,600,126,693 // 8,196 = 1,903,382 = n + 4, so n = 1,903,378
    # (8,196 x 1,903,382 = 15,600,118,872 <= room; one more position, 15,600,127,068, is over it).
    # The tokens: the KV budget is free before the weights (82,979,397,304 B above) less the weights as loaded
    # (26,950,215,680 + 5,624,846,336 B, the engine table's "Load weight end" row) less 82,979,397,304 x 0.188 =
    # 50,404,335,288 - 15,600,126,693.15 = 34,804,208,594.85 -> 34,804,208,595 B (rounded up); Scout's 12 full and
    # 36 chunked layers at one fp8 KV head of 128 per GPU cost 12 x 256 = 3,072 B and 36 x 256 = 9,216 B a token,
    # the chunked pool 0.8 of the full one:
    # 34,804,208,595 / (3,072 + 0.8 x 9,216 = 10,444.8) = 3,332,204.4 -> 3,332,204 tokens.
    res = _plan(SCOUT, "h100", 10_485_760, kv="fp8")
    assert res.capacity.kv_memory_bytes == 34_804_208_595
    assert res.capacity.tokens == 3_332_204 and res.plan.above_budget[2] == 15_600_126_693
    assert res.plan.max_context == 1_903_378 and res.plan.max_context_limited_by == "memory"  # was 3,332,204
    # the plan at that context fits and one token longer does not: the search judges a context as the plan does
    assert _plan(SCOUT, "h100", 1_903_378, kv="fp8").plan.fits
    longer = _plan(SCOUT, "h100", 1_903_379, kv="fp8").plan
    assert not longer.fits and longer.above_budget[1] == 15_600_127_068


def test_below_a_quarter_of_the_pool_the_estimate_takes_more_rows():
    # H200, fp8 KV, 0.5.23: 9,540,721 tokens, room 15,843,427,614 B. Between tokens / 8 and tokens / 4 the estimate
    # (tokens / n x 512, 2,048 to 4,096 rows) makes the pool ~ tokens x 512 x 4 B = 19.5 GB, over the room, and
    # above tokens / 4 it only grows; below tokens / 8 = 1,192,590 it is 4,097 rows x (n + 4) x 4 = 16,388 B per
    # position: 15,843,427,614 // 16,388 = 966,770 = n + 4, so n = 966,766 (the token pool alone allowed 9,540,721).
    # The room as the H100's above: (150,108,897,280 B usable on the H200 profile - 2,039,480,320 B tp-8 init) x
    # (1 - 0.893) = 148,069,416,960 x 0.107 = 15,843,427,614.72 -> 15,843,427,614 B. The tokens: 148,069,416,960 -
    # 32,575,062,016 B of weights as loaded (as on the H100) - 15,843,427,614.72 = 99,650,927,329.28 -> (rounded up)
    # 99,650,927,330 B of KV budget; / 10,444.8 B a token (the H100 case's fp8 cell) = 9,540,721.4 -> 9,540,721.
    res = _plan(SCOUT, "h200", 10_485_760, kv="fp8")
    assert res.settings["mem_fraction_static"] == 0.893 and res.capacity.kv_memory_bytes == 99_650_927_330
    assert res.capacity.tokens == 9_540_721 and res.plan.above_budget[2] == 15_843_427_614
    assert res.plan.max_context == 966_766
    assert req_pool.pool_bytes("0.5.23", req_pool.max_num_reqs("0.5.23", None, 1, 9_540_721, 966_766), 966_766) \
        == 4_097 * 966_770 * 4


def test_a_fixed_context_length_whose_slots_overrun_leaves_no_context():
    # --max-model-len 10,485,760 fixes the server's --context-length, so the pool is sglang#5755's 80.04 GiB
    # (2,049 x 10,485,764 x 4 B) at every request length, over the 15,600,126,693 B room of tp 8 at 0.812: no request
    # length is served, so the longest context is 0, not the 1,666,102 tokens the token pool alone would hold: bf16 KV
    # doubles the fp8 cell of the test above to 20,889.6 B a token over the same 34,804,208,595 B budget:
    # 34,804,208,595 / 20,889.6 = 1,666,102.2 -> 1,666,102 (half the fp8 pool's 3,332,204)
    out = CliRunner().invoke(app, ["fit", "llama-4-scout-17b-16e-instruct", "--gpu", "h100", "--tp", "8", "--engine",
                                   "sglang", "--engine-version", "0.5.23", "--max-model-len", "10485760", "--ctx",
                                   "1M", "--json"])
    assert out.exit_code == 0, out.output
    plan = json.loads(out.stdout)  # one deployment (--tp): the plan itself
    assert plan["above_budget"]["bytes_per_gpu"] == 85_941_321_744 > plan["above_budget"]["room_bytes_per_gpu"]
    assert plan["kv_cache_tokens"] == 1_666_102 and plan["max_context"] == 0 and not plan["fits"]
