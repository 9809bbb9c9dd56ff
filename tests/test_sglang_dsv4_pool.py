"""SGLang's DeepSeek-V4 pools (kvplan.engines.sglang.dsv4_pool, kvplan.engines.sglang.dsv4), issue 22.

Expected figures are hand arithmetic from DeepSeek-V4-Flash's config (tests/fixtures/families/deepseek-v4-flash.json:
43 layers, 2 window-only, 21 of ratio 4 and 20 of ratio 128; head_dim 512 with qk_rope_head_dim 64, so qk_nope 448;
sliding_window 128; index_head_dim 128) and the sglang 0.5.15 wheel, `model_executor/pool_configurator.py`
DSV4PoolConfigurator: _get_bytes_per_full_token L609-649, _compute_dsv4_sizes L651-661, _get_c128_state_fixed_bytes
L668-689, calculate_pool_sizes L734-762; `model_runner_kv_cache_mixin.py` _resolve_max_num_reqs L1225-1262;
`arg_groups/overrides.py` L694 (page 256) and L709-711 (swa_full_tokens_ratio 0.1); `mem_cache/
deepseek_v4_memory_pool.py` L34-48 (rings 8 and 128) and L107-124 (the uint8 store it asserts).

Bytes of one full token, by hand: kv = 448 + 2 x 64 + 8 = 584, idx = 128 + 128 / 128 x 4 = 132,
  0.1 x 584 x 43 = 2,511.2 (SWA share)  + 584 / 4 x 21 = 3,066 (1:4 latents)  + 584 / 128 x 20 = 91.25 (1:128)
  + 132 / 4 x 21 = 693 (indexer keys)   + 0.1 x 8 / 128 x (2 x 2 x 512 + 2 x 2 x 128) x 4 B x 21 = 1,344 (c4 states)
  = 7,705.45 B.
c128 states of 256 requests a worker: (256 + 1) x 128 + 128 + 1 = 33,025 rows -> 33,152 (259 x 128), each
2 x 512 fp32 values on 20 layers: 33,152 x 4,096 x 20 = 2,715,811,840 B ("2.53 GB").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines import resolve_engine
from kvplan.engines.sglang import dsv4, dsv4_pool
from kvplan.hardware.gpus import find_gpu
from kvplan.model.compressed import CompressedMLA
from kvplan.planning.deploy import Deployment
from kvplan.planning.request import read_request
from kvplan.readers.configs import spec_from_config
from conftest import engine_figures

FIX = Path(__file__).parent / "fixtures" / "families" / "deepseek-v4-flash.json"
FIT = ["fit", "deepseek-v4-flash", "--gpu", "h200", "--gpus", "8", "--tp", "8", "--kv-dtype", "fp8", "--engine",
       "sglang"]


def flash():
    spec, _ = spec_from_config(json.loads(FIX.read_text()), "deepseek-v4-flash")
    return spec


def test_bytes_per_full_token_and_c128_states_by_hand():
    d = dsv4_pool.dims(flash().layers)
    assert (d.layers, d.c4, d.c128, d.kv_bytes, d.index_bytes) == (43, 21, 20, 584, 132)
    assert dsv4_pool.bytes_per_full_token(d, 0.1) == pytest.approx(2_511.2 + 3_066 + 91.25 + 693 + 1_344)
    assert f"{dsv4_pool.bytes_per_full_token(d, 0.1):.2f}" == "7705.45"  # as SGLang logs it (:.2f)
    assert dsv4_pool.c128_state_fixed(d, 256) == 33_152 * 4_096 * 20 == 2_715_811_840
    # 64 a worker (256 // dp 4): 65 x 128 + 129 = 8,449 rows -> 8,576 (67 x 128); x 4,096 x 20
    assert dsv4_pool.c128_state_fixed(d, 64) == 8_576 * 4_096 * 20


def test_a_real_log_pins_the_formula():
    # DeepSeek-V4-Pro under SGLang 0.5.15.post1 on MI355X (8 x 288 GiB, tp 8 + DP attention 8, --max-running-requests
    # 512 -> 64 a worker, --swa-full-tokens-ratio 0.15), a public report file "DSv4-Pro SGLang 1P1D 每卡 KV cache"
    # (2026-07-24; its repository not identified by the search tools) logs "DSV4 memory calculation:
    # bytes_per_full_token=13735.04, available_bytes=118.93 GB, c128_state_fixed=1.01 GB, full_token=9217792".
    # Its 61 layers: c128_state_fixed pins 31 ratio-128 layers (8,576 rows x 4,096 B x 31 = 1,089,208,320 B = 1.01 GiB;
    # 30 or 32 print 0.98 or 1.05), and then 13,735.04 = 0.15 x 584 x 61 (5,343.6) + 584 / 128 x 31 (141.4375)
    # + 30 x (584 / 4 + 132 / 4 + 0.15 x 8 / 128 x 10,240) (30 x 275 = 8,250) needs exactly 30 of ratio 4.
    layers = [CompressedMLA(compress_ratio=4, window=128, index_head_dim=128)] * 30 + \
        [CompressedMLA(compress_ratio=128, window=128)] * 31
    d = dsv4_pool.dims(layers)
    assert f"{dsv4_pool.bytes_per_full_token(d, 0.15):.2f}" == "13735.04"
    assert f"{dsv4_pool.c128_state_fixed(d, 64) / 2**30:.2f}" == "1.01"
    # full_token from the printed budget, two decimals of GiB (0.01 GiB = 781.8 tokens at 13,735.04 B: 4 pages at most)
    low = dsv4_pool.full_tokens(d, int(118.925 * 2**30), 0.15, 64)
    high = dsv4_pool.full_tokens(d, int(118.935 * 2**30), 0.15, 64)
    assert low <= 9_217_792 <= high and high - low <= 4 * 256
    p = dsv4_pool.pools(d, 9_217_792, 0.15, 64)
    # its "DSV4 pool sizes: full=9217792, swa=1382656, c4=2304448, c128=72014"
    assert (p.full, p.swa, p.c4, p.c128) == (9_217_792, 1_382_656, 2_304_448, 72_014)


def _settings(version="0.5.15", opts=None, gpu="h200", tp=8, dp=1):
    eng = resolve_engine("sglang", version, opts or {})
    model, dep = flash(), Deployment(tp=tp, dp=dp)
    req = read_request(model, context=1_048_576, kv_dtype="fp8")
    return eng, model, dep, eng.settings(model, find_gpu(gpu), dep, req)


@pytest.mark.parametrize("version", ["0.5.15", "0.5.17", "0.5.18"])
def test_pools_from_a_given_budget(version):
    # 0.5.17 and 0.5.18 size them as 0.5.15-0.5.16 do (DSV4PoolConfigurator, 0.5.17 pool_configurator.py L610-873,
    # 0.5.18 L715-1004; the hook's 256, page 256 and SWA share 0.1 unchanged: kvplan.engines.sglang.dsv4)
    eng, model, dep, st = _settings(version)
    assert (st.page_size, st.swa_full_tokens_ratio) == (256, 0.1)
    cap = eng.capacity_at(model, dep, st, 100 * 2**30, 1_048_576, read_request(model, kv_dtype="fp8").kv_dtype)
    # (107,374,182,400 - 2,715,811,840) / 7,705.45 = 13,582,382.7 -> 13,582,382 -> pages of 256: 53,056 x 256
    full = 13_582_336
    assert cap.tokens == full
    lines = engine_figures(cap)
    # swa int(1,358,233.6) -> 5,305 pages = 1,358,080; c4 full // 4 = 3,395,584; c128 full // 128 = 106,112;
    # c4_state 1,358,080 // 128 x 8 = 84,880; c128_state (256 + 1) x 128 = 32,896
    assert lines["DSV4 pool sizes"] == (full, 1_358_080, 3_395_584, 106_112, 84_880, 32_896)
    assert lines["max_running_requests"] == cap.max_running == 256
    # 1M tokens: 4,096 pages of the full pool each, 13,582,336 / 1,048,576 = 12.95 requests; SWA 512 each
    assert cap.max_concurrency == pytest.approx(full / 1_048_576)


def test_the_running_limit_is_at_most_half_the_pool():
    eng, model, dep, st = _settings()
    kv = read_request(model, kv_dtype="fp8").kv_dtype
    # 2,000,000 B past the c128 states: 2,000,000 / 7,705.45 = 259.6 -> 256 tokens; running min(256, 256 // 2) = 128
    cap = eng.capacity_at(model, dep, st, 2_715_811_840 + 2_000_000, 100, kv)
    assert cap.tokens == 256 and cap.max_running == 128
    # DP attention 4: 256 // 4 = 64 requests a worker, its c128 states 8,576 rows (test above) out of the same budget
    eng4, model, dep4, st4 = _settings(tp=2, dp=4)
    cap4 = eng4.capacity_at(model, dep4, st4, 100 * 2**30, 8_192, kv)
    assert cap4.max_running == 64
    assert cap4.tokens == int((100 * 2**30 - 8_576 * 4_096 * 20) / 7_705.45) // 256 * 256
    assert cap4.max_concurrency == 64  # 8k requests: the pool holds thousands, the limit binds


def test_fit_json_prints_sglangs_figures():
    res = CliRunner().invoke(app, [*FIT, "--ctx", "1m", "--engine-version", "0.5.15", "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    eng = plan["engine"]
    budget = eng["kv_memory_bytes_per_gpu"]  # SGLang's "rest" as kvplan estimates it (weights, fraction)
    full = int((budget - 2_715_811_840) / 7_705.45) // 256 * 256
    assert eng["tokens"] == plan["kv_cache_tokens"] == full
    swa = int(full * 0.1) // 256 * 256
    assert eng["lines"]["DSV4 pool sizes"] == (
        f"full={full:,}, swa={swa:,}, c4={full // 4:,}, c128={full // 128:,}, c4_state={swa // 128 * 8:,}, "
        "c128_state=32,896")
    assert eng["lines"]["bytes_per_full_token"] == "7,705.45 B"
    assert eng["lines"]["c128_state_fixed"] == "2.53 GB (GiB)"
    assert eng["max_running"] == 256
    assert plan["max_concurrency"] == full // 1_048_576  # the full pool binds at 1M (the SWA pool: 512 a request)
    assert eng["settings"]["page_size"] == 256 and eng["settings"]["swa_full_tokens_ratio"] == 0.1


def test_swa_ratio_and_running_are_engine_options():
    res = CliRunner().invoke(app, [*FIT, "--ctx", "8k", "--engine-version", "0.5.16", "--json", "--engine-opt",
                                   "swa_full_tokens_ratio=0.2", "--engine-opt", "max_running_requests=128"])
    assert res.exit_code == 0, res.output
    eng = json.loads(res.stdout)["engine"]
    # 7,705.45 + a further 0.1 x 584 x 43 (2,511.2) + 0.1 x 8 / 128 x 10,240 x 21 (1,344) = 11,560.65
    assert eng["lines"]["bytes_per_full_token"] == "11,560.65 B"
    assert eng["max_running"] == 128
    emitted = CliRunner().invoke(app, [*FIT, "--ctx", "8k", "--engine-version", "0.5.16", "--emit", "sglang",
                                       "--engine-opt", "swa_full_tokens_ratio=0.2"]).stdout
    assert "--swa-full-tokens-ratio 0.2" in emitted and "--page-size 256" in emitted
    assert "--max-running-requests 256" in emitted and "--kv-cache-dtype fp8_e4m3" in emitted


@pytest.mark.parametrize("version, words", [("0.5.14", "from 0.5.15"), ("0.5.23", "0.5.23 reworked"),
                                            ("0.5.19", "0.5.19-0.5.22 were not read")])
def test_releases_not_read_are_refused_with_the_reason(version, words):
    res = CliRunner().invoke(app, [*FIT, "--ctx", "8k", "--engine-version", version])
    assert res.exit_code != 0 and words in res.output and "Traceback" not in res.output


def test_auto_is_sglangs_fp8_e4m3_with_a_note():
    # sglang 0.5.15 wheel, arg_groups/overrides.py L1298-1320 (_deepseek_v4_kv_cache_dtype; 0.5.16 L1463-1485): a
    # DeepseekV4ForCausalLM server whose --kv-cache-dtype is auto runs fp8_e4m3 and logs "Setting KV cache dtype to
    # fp8_e4m3". No --kv-dtype here plans the pools of --kv-dtype fp8: 584 B a latent (448 fp8 nope + 64 x 2 B rope
    # + 8 B scales), 7,705.45 B a full token, (budget - 2,715,811,840) / 7,705.45 tokens in pages of 256.
    res = CliRunner().invoke(app, [*FIT[:-4], "--engine", "sglang", "--engine-version", "0.5.15", "--ctx", "1m",
                                   "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    eng = plan["engine"]
    assert plan["kv_dtype"] == "fp8" and eng["lines"]["bytes_per_full_token"] == "7,705.45 B"
    assert eng["tokens"] == int((eng["kv_memory_bytes_per_gpu"] - 2_715_811_840) / 7_705.45) // 256 * 256
    assert any("auto is fp8_e4m3 for DeepSeek-V4" in n for n in plan["notes"])  # the engine's default: a note
    emitted = CliRunner().invoke(app, [*FIT[:-4], "--engine", "sglang", "--engine-version", "0.5.15", "--ctx", "8k",
                                       "--emit", "sglang"]).stdout
    assert "--kv-cache-dtype fp8_e4m3" in emitted  # said, though SGLang's auto gives the same
    # a ranking prints no plan's warnings, so it says this once
    ranked = CliRunner().invoke(app, ["sweep", "-m", "deepseek-v4-flash", "--gpu", "h200", "--gpu-counts", "8",
                                      "--ctx", "8k", "--engine", "sglang", "--engine-version", "0.5.15"])
    assert ranked.exit_code == 0, ranked.output
    assert ranked.stderr.count("auto is fp8_e4m3 for DeepSeek-V4") == 1


def test_a_bf16_cache_and_another_page_are_refused():
    res = CliRunner().invoke(app, [*FIT[:-4], "--kv-dtype", "bf16", "--engine", "sglang", "--engine-version",
                                   "0.5.15", "--ctx", "8k"])
    assert res.exit_code != 0 and "fp8 latents only" in res.output  # bf16 asked for by name
    res = CliRunner().invoke(app, [*FIT, "--engine-version", "0.5.15", "--ctx", "8k", "--engine-opt", "page_size=64"])
    assert res.exit_code != 0 and "page_size 256" in res.output


def test_no_engine_version_says_in_one_line_which_release_to_pass():
    # A new user's first command: DeepSeek-V4 under SGLang with no --engine-version plans kvplan's default release
    # (0.5.23: kvplan.engines.sglang.engine.DEFAULT_VERSION), whose pools are not restated; the one-line error names
    # the flag and the releases that plan (0.5.15 to 0.5.18, the wheels read), and that one of them then plans.
    res = CliRunner().invoke(app, [*FIT, "--ctx", "8k"])
    assert res.exit_code == 2, res.output
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("Error: DeepSeek-V4 under SGLang needs --engine-version 0.5.18 (or 0.5.15-0.5.17): with "
                           "none given kvplan plans SGLang 0.5.23"), line
    assert line.count("--engine-version") == 1 and "\n" not in line
    for version in ("0.5.16", "0.5.18"):
        res = CliRunner().invoke(app, [*FIT, "--ctx", "8k", "--engine-version", version])
        assert res.exit_code == 0, res.output
    # a release asked for by name keeps its own wording
    res = CliRunner().invoke(app, [*FIT, "--ctx", "8k", "--engine-version", "0.5.23"])
    assert res.exit_code == 2 and "Error: SGLang 0.5.23: kvplan restates" in res.stderr


def test_release_rule_and_speed_limit_agree():
    assert {dsv4.release_problem(v) for v in ("0.5.15", "0.5.16", "0.5.17", "0.5.18.post1")} == {""}
    assert "0.5.19-0.5.22 were not read" in dsv4.release_problem("0.5.19")
    # the running limit the speed fit reads is unchanged for every release from 0.5.15 (tests/test_sglang_dsv4.py)
    assert dsv4.running_limit("0.5.23", flash().layers, 1, None) == 256


def test_the_emitted_fraction_prices_a_full_token_as_sglang_does():
    # --emit sglang's advice (kvplan.engines.sglang.boot) holds batch x context full tokens at 7,705.45 B rounded up
    # to 7,706 B, after the 2,715,811,840 B of c128 states, not at the plan's growth bytes (the 1:4 and 1:128 entries)
    from kvplan.engines.sglang.boot import token_cost

    res = resolve_engine("sglang", "0.5.15").result(flash(), find_gpu("h200"), Deployment(tp=8),
                                                    read_request(flash(), context=1_048_576, kv_dtype="fp8"))
    assert token_cost(res.plan, res.settings, flash()) == (7_706, 2_715_811_840)
    assert token_cost(res.plan, res.settings, None)[1] == 0  # any other model: the plan's bytes a token, nothing first


def test_deepseek_v4_is_refused_on_a_gpu_its_kernels_do_not_run_on():
    # 0.5.15's DeepSeek-V4 backend runs FlashMLA (SM90 / SM100) on every CUDA GPU but SM120 (deepseek_v4_backend.py
    # L114-119, L1419-1442); the L20 is compute capability 8.9 (its profile), where sgl-project/sglang#28620 added a
    # fallback only after these releases
    args = ["fit", "deepseek-v4-flash", "--gpus", "8", "--tp", "8", "--ctx", "32k", "--kv-dtype", "fp8",
            "--engine", "sglang", "--engine-version", "0.5.15"]
    r = CliRunner().invoke(app, args + ["--gpu", "l20"])
    assert r.exit_code == 2 and "compute capability 8.9" in r.output and "FlashMLA" in r.output
    assert CliRunner().invoke(app, args + ["--gpu", "h200"]).exit_code == 0
