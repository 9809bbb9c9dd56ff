"""DeepSeek-V4: the compressed caches and weights as vLLM builds them, on the published DeepSeek-V4-Flash config.

Expected figures are hand arithmetic from the config (tests/fixtures/families/deepseek-v4-flash.json: 43 layers,
compress_ratios 0, 0, then 4 and 128 alternating from layer 2, 4 at layer 42: 2 window-only layers, 21 of ratio 4
and 20 of ratio 128; head_dim 512 with 64 rope values, sliding_window 128, index_head_dim 128) and vLLM's source
(v0.20.0 model_executor/layers/deepseek_v4_attention.py, deepseek_compressor.py, v1/attention/backends/mla/
sparse_swa.py, v1/kv_cache_interface.py, v1/core/kv_cache_utils.py; the same in v0.22.0 under
vllm/models/deepseek_v4/), checked against figures users posted: DeepSeek's published parameter count and a
vLLM 0.22 start-up error quoted in vllm-project/vllm#44376.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvplan
from kvplan.core.dtypes import BF16, FP8
from kvplan.core.errors import KvplanError
from kvplan.engines.base import parse_version
from kvplan.engines.vllm.deepseek_v4 import approximate_gcd, build
from kvplan.model.compressed import CompressedMLA
from kvplan.planning.profile import kv_profile
from kvplan.readers.configs import spec_from_config
from conftest import engine_figures

FIX = Path(__file__).parent / "fixtures" / "families" / "deepseek-v4-flash.json"
GIB = 2**30
ROOT = Path(kvplan.__file__).parent


def flash(**changes):
    spec, _ = spec_from_config({**json.loads(FIX.read_text()), **changes}, "deepseek-v4-flash")
    return spec


class InFlight:  # what the pool reads of vLLM's settings: max_num_batched_tokens (T)
    def __init__(self, t: int):
        self.in_flight_tokens = t


def test_layers_follow_compress_ratios():
    spec = flash()
    ratios = [layer.compress_ratio for layer in spec.layers]
    assert ratios[:4] == [1, 1, 4, 128] and ratios[-1] == 4
    assert (ratios.count(1), ratios.count(4), ratios.count(128)) == (2, 21, 20)
    c4 = spec.layers[2]
    assert c4 == CompressedMLA(4, 128, 512, 64, 128) and spec.layers[3].index_head_dim == 0


def test_entry_and_per_token_bytes():
    c4, c128, window = CompressedMLA(4, 128, 512, 64, 128), CompressedMLA(128, 128, 512, 64), CompressedMLA(1, 128)
    # fp8_ds_mla entry: 448 fp8 NoPE + 64 x 2 bf16 rope + 448 / 64 = 7 scale bytes + 1 pad = 584
    assert c4.entry_bytes(FP8) == 584 and c4.entry_bytes(BF16) == 1024
    assert c4.indexer_bytes() == 128 + 4  # fp8 keys + one fp32 scale per 128
    assert c4.token_bytes(FP8) == 716 and c128.token_bytes(FP8) == 584 and window.token_bytes(FP8) == 0
    # fixed per sequence: the window 128 x 584 = 74,752, plus the compressor states (fp32):
    #   ratio 4: 8 tokens x 2 x 2 x 512 x 4 = 65,536 and the indexer's 8 x 2 x 2 x 128 x 4 = 16,384
    #   ratio 128: 128 tokens x 2 x 512 x 4 = 524,288
    assert c4.fixed_bytes(FP8) == 74_752 + 65_536 + 16_384
    assert c128.fixed_bytes(FP8) == 74_752 + 524_288 and window.fixed_bytes(FP8) == 74_752
    # one token of growth at long context: 21 x 716 / 4 + 20 x 584 / 128 = 3,759 + 91.25 -> 3,850
    assert kv_profile(flash().layers, 8, FP8, BF16, 256).growth_bytes_per_token() == 3_850


def test_kvplan_rules_price_a_sequence_from_its_entries_and_fixed_part():
    prof = kv_profile(flash().layers, 1, FP8, BF16, 256)
    fixed = 43 * 74_752 + 21 * (65_536 + 16_384) + 20 * 524_288  # 15,420,416
    assert prof.state_bytes_per_sequence() == fixed
    # 1M tokens: 21 layers x 262,144 entries x 716 + 20 x 8,192 x 584 (entry pages of 256 are whole)
    assert prof.sequence_bytes(2**20) == fixed + 21 * 262_144 * 716 + 20 * 8_192 * 584


def test_parameters_match_deepseeks_published_count():
    # DeepSeek-V4-Flash's model card: 284B parameters, 13B activated. Per layer (D 4096, 64 x 512 heads,
    # q_lora 1024, o_groups 8 x o_lora 1024): fused_wqa_wkv 4096 x 1536, wq_b 1024 x 32768, wo_a 4096 x 8192,
    # wo_b 8192 x 4096 = 6,291,456 + 3 x 33,554,432 = 106,954,752 (+ the indexer's wq_b 1024 x 8192 on ratio-4
    # layers); 256 experts
    # x 3 x 4096 x 2048 = 6,442,450,944 per layer, x 43 = 277,025,390,592; one shared expert 25,165,824 per layer.
    p = flash().params
    assert p.attention == 43 * 106_954_752 + 21 * 1024 * 8192
    assert p.experts == 277_025_390_592 and p.shared_experts == 43 * 25_165_824
    assert round(p.total / 1e9) == 284 and round((p.active - p.embedding - p.lm_head) / 1e9) == 13


def test_weights_ship_fp4_experts_and_fp8_blocks():
    from kvplan.model.weights import weight_bytes

    w = weight_bytes(flash())
    assert flash().quantization.experts_method == "mxfp4"
    assert w.experts == 277_025_390_592 * 17 // 32  # uint8-packed fp4 + a uint8 scale per 32 values


def test_vllm_pool_groups_and_bytes_per_block_v020():
    # pages (256-token block, padded to 576 B): ratio-4 latents 64 x 584 = 37,376 -> 37,440; indexer keys
    # 64 x 132 = 8,448 -> 8,640; ratio-128 latents 2 x 584 -> 1,728; window 64 x 584 -> 37,440; compressor
    # states 4 x 2048 x 4 = 32,768 -> 32,832 (padded again to 37,440 in its group), indexer states -> 8,640,
    # ratio-128 states 8 x 1024 x 4 -> 32,832 (-> 37,440).
    # tuples per group: MLA 21 (most layers of one page size), window 43, ratio-4 states 21, ratio-128 states
    # 20; _approximate_gcd(lower bound 21): d = 22 pads 1 + 1 + 1 + 2 = 5, d = 21 pads 20 + 1 = 21 -> N = 22;
    # the window group (43) splits into two (22 + 21): 5 groups. Bytes per block id: (37,440 + 8,640 + 1,728)
    # x 22 (the longest bucket: the first window group) = 1,051,776.
    assert approximate_gcd([21, 43, 21, 20], 21) == 22
    pool = build(flash().layers, FP8, parse_version("0.20.0"))
    assert pool.num_groups == 5 and pool.bytes_per_block == 47_808 * 22 == 1_051_776
    assert sorted(len(g.pages) for g in pool.groups) == [20, 21, 22, 42, 62]
    assert pool.report_block == 4  # v0.20.0's "GPU KV cache size" counts num_blocks // 5 x 4
    # v0.25.0 packs by page size: 37,440 x 22 + 8,640 x 21 + 1,728 x 20 = 1,039,680
    assert build(flash().layers, FP8, parse_version("0.25.0")).bytes_per_block == 1_039_680


def test_vllm_022_startup_check_matches_a_users_log():
    # vllm-project/vllm#44376 (vLLM v0.22, DeepSeek-V4-Flash, 2 x GH200, tp 2, LLM(max_model_len=30_000,
    # block_size=256, kv_cache_dtype="fp8"): the offline LLM's max_num_batched_tokens 16,384):
    #   "30000 ... 6.66 GiB KV cache is needed, ... available KV cache memory (5.44 GiB) ... estimated maximum
    #   model length is 13528".
    # Blocks per 30,000-token request: MLA cdiv(30000, 256) = 118; two window groups cdiv(min(127 + 16384, 30000),
    # 64) + 1 = 259 each; ratio-4 states cdiv(16391, 4) + 1 = 4,099; ratio-128 states cdiv(16511, 8) + 1 = 2,065
    # -> 6,800 x 1,051,776 B = 7,152,076,800 B = 6.66 GiB.
    pool, st = build(flash().layers, FP8, parse_version("0.22.0")), InFlight(16_384)
    assert pool.blocks_per_request(30_000, st) == 6_800
    assert f"{6_800 * pool.bytes_per_block / GIB:.2f}" == "6.66"
    # 13,528 tokens: 53 + 2 x 213 + 3,383 + 1,692 = 5,554 blocks = 5.44 GiB; 13,529 needs 5,556
    assert pool.blocks_per_request(13_528, st) == 5_554 and pool.blocks_per_request(13_529, st) == 5_556
    assert f"{5_554 * pool.bytes_per_block / GIB:.2f}" == "5.44"


def test_vllm_fit_prints_its_concurrency_and_admits_fewer(kvplan_home, tmp_path):
    from typer.testing import CliRunner

    from kvplan.cli import app

    path = tmp_path / "config.json"
    path.write_text(FIX.read_text())
    r = CliRunner().invoke(app, ["fit", str(path), "--gpu", "h200", "--gpus", "8", "--tp", "8", "--ctx", "1m",
                                 "--kv-dtype", "fp8", "--engine", "vllm", "--engine-version", "0.20.0",
                                 "--engine-opt", "max_num_batched_tokens=8192", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    lines = engine_figures(out)
    per_block = lines["bytes per block id"]
    blocks = lines["num_gpu_blocks"]
    assert per_block == 1_051_776 and blocks == out["engine"]["kv_memory_bytes_per_gpu"] // per_block
    # 1M tokens, T = 8192: 4,096 + 2 x 131 + 2,051 + 1,041 = 7,450 block ids; printed: cdiv(4,096 x 1,002,240
    # + 131 x 823,680 + 131 x 786,240 + 2,051 x 967,680 + 1,041 x 748,800, 1,002,240) = 7,065
    assert lines["blocks per 1,048,576-token request"] == 7_450
    assert out["max_concurrency"] == blocks // 7_450
    assert lines["Maximum concurrency for 1,048,576 tokens per request"] == pytest.approx(blocks / 7_065)


def test_refusals_name_their_reason():
    with pytest.raises(KvplanError, match="compress_ratios"):
        flash(compress_ratios=[0, 2] * 22)
    with pytest.raises(KvplanError, match="fp8"):
        build(flash().layers, BF16, parse_version("0.22.0"))


PRO = Path(__file__).parent / "fixtures" / "families" / "deepseek-v4-pro-nvfp4.json"


def test_v4_pro_parameters_and_vllm_pool():
    # DeepSeek-V4-Pro's shape (NVIDIA's NVFP4 checkpoint config): 61 layers, compress_ratios 128, 128, then 4 and
    # 128 alternating, 4 at layer 60: 30 layers of ratio 4, 31 of ratio 128, none window-only.
    spec, _ = spec_from_config(json.loads(PRO.read_text()), "deepseek-v4-pro")
    ratios = [layer.compress_ratio for layer in spec.layers]
    assert (ratios.count(4), ratios.count(128), ratios.count(1)) == (30, 31, 0)
    # DeepSeek's model card: 1.6T parameters, 49B activated (between kvplan's count without the embedding and LM
    # head, 47.9B, and with them, 49.8B)
    p = spec.params
    assert round(p.total / 1e11) == 16
    assert p.active - p.embedding - p.lm_head < 49e9 < p.active
    # vLLM: tuples per group MLA 31, window 61, ratio-4 states 30, ratio-128 states 31; _approximate_gcd from 31:
    # d = 31 pads 0 + 1 + 1 + 0 = 2 -> N = 31; the window group splits in two (31 + 30): 5 groups.
    # (37,440 + 8,640 + 1,728) x 31 = 1,482,048 B per block id up to 0.22.0; packed (0.25.0):
    # 37,440 x 31 + 8,640 x 30 + 1,728 x 31 = 1,473,408
    pool = build(spec.layers, FP8, parse_version("0.22.0"))
    assert sorted(len(g.pages) for g in pool.groups) == [30, 31, 31, 60, 91]
    assert pool.bytes_per_block == 47_808 * 31 == 1_482_048
    assert build(spec.layers, FP8, parse_version("0.25.0")).bytes_per_block == 1_473_408


def test_models_check_says_why_it_does_not_compare_deepseek_v4(kvplan_home):
    from typer.testing import CliRunner

    from kvplan.cli import app

    r = CliRunner().invoke(app, ["models", "check", str(FIX)])
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "not compared" in r.stderr.strip().splitlines()[-1]


def test_vllm_025_start_up_check_binds_the_longest_context(kvplan_home):
    # One byte below what vLLM 0.22's check needs for 13,528 tokens (5,554 block ids x 1,051,776 B, above):
    # 5,841,563,903 // 1,051,776 = 5,553 block ids, so no 13,528-token request. vLLM 0.25.0 packs the same pool
    # into 1,039,680-byte block ids (5,618 of them) but its start-up check still charges 1,051,776 B per block
    # id of one request (_max_memory_usage_bytes_from_groups): the longest context is the same under both.
    assert build(flash().layers, FP8, parse_version("0.25.0")).startup_bytes_per_block == 1_051_776
    from typer.testing import CliRunner

    from kvplan.cli import app

    out = {}
    for version in ("0.22.0", "0.25.0", "0.22.0+1"):
        release, budget = version.split("+")[0], 5_841_563_903 + ("+" in version)
        r = CliRunner().invoke(app, ["fit", "deepseek-v4-flash", "--gpu", "h200", "--gpus", "8", "--tp", "8",
                                     "--kv-dtype", "fp8", "--engine", "vllm", "--engine-version", release,
                                     "--engine-opt", "max_num_batched_tokens=16384",
                                     "--kv-cache-memory", str(budget), "--ctx", "8192", "--json"])
        assert r.exit_code == 0, r.output
        out[version] = json.loads(r.stdout)
    assert (out["0.22.0"]["engine"]["blocks"], out["0.25.0"]["engine"]["blocks"]) == (5_553, 5_618)
    assert out["0.22.0"]["max_context"] == out["0.25.0"]["max_context"] < 13_528
    for version, plan in out.items():  # --max-model-len auto: the same start-up check
        auto = engine_figures(plan)["--max-model-len auto sets"]
        assert auto == plan["max_context"], version
    # one byte more and 13,528 tokens fit: the length vLLM 0.22 estimated in vllm-project/vllm#44376
    assert out["0.22.0+1"]["max_context"] == 13_528


def test_every_layer_spec_answers_the_compressed_fields():
    # vLLM's kv_cache_interface.py: one frozen spec per kind, each knowing its bytes. LayerSpec's defaults
    # are one cached entry per token and nothing held whatever the length; only CompressedMLA differs, so no
    # site asks a layer whether it has the fields (it once did at about nine sites, hasattr / getattr).
    from kvplan.model.layers import ChunkedLocal, FullAttention, MLALatent, NoCache, SlidingWindow
    from kvplan.model.recurrent import RecurrentState
    plain = (FullAttention(8, 128), SlidingWindow(8, 128, 4096), ChunkedLocal(8, 128, 8192), MLALatent(512, 64),
             RecurrentState(1, 2, 1), NoCache())
    assert {(s.compress_ratio, s.fixed_bytes(FP8), s.fixed_bytes(BF16)) for s in plain} == {(1, 0, 0)}
    c128 = CompressedMLA(128, 128, 512, 64)
    assert (c128.compress_ratio, CompressedMLA(1, 128).compress_ratio) == (128, 1)
    # window 128 x 584 fp8 bytes + compressor state 1 x 128 x 2 x 1 x 512 x 4 (as test_entry_and_per_token_bytes)
    assert c128.fixed_bytes(FP8) == 128 * 584 + 128 * 2 * 512 * 4
    with pytest.raises(TypeError):
        CompressedMLA(window=128)  # the ratio stays a required field, LayerSpec's 1 is no default
    probes = [f"{path.relative_to(ROOT.parent)}:{n}" for path in sorted(ROOT.rglob("*.py"))
              for n, line in enumerate(path.read_text().splitlines(), 1)
              if any(f'{f}(' in line and f'"{name}"' in line for f in ("hasattr", "getattr")
                     for name in ("compress_ratio", "fixed_bytes", "printed_blocks_per_request", "report_block",
                                  "startup_bytes_per_block"))]
    assert probes == []


def test_vllm_default_release_names_both_fixes_in_one_error(kvplan_home):
    # issue 22: the default vLLM release is past the ones kvplan reads DeepSeek-V4 for, and those cache it in fp8
    # only (vllm-project/vllm v0.20.0-v0.25.0 DeepseekV4MLAAttention asserts an fp8_ds_mla cache): a first try
    # without either flag gets one error naming both; with --kv-dtype fp8 given, only the release is named.
    from typer.testing import CliRunner

    from kvplan.cli import app

    base = ["fit", "deepseek-v4-flash", "--gpu", "h200", "--engine", "vllm"]
    r = CliRunner().invoke(app, base)
    assert r.exit_code != 0
    assert "--engine-version" in r.output and "--kv-dtype fp8" in r.output and "0.25.0" in r.output
    for gpus in ((), ("--gpus", "8")):  # one GPU, and the layouts of eight searched
        r = CliRunner().invoke(app, [*base, *gpus, "--kv-dtype", "fp8"])
        assert r.exit_code != 0 and "--engine-version" in r.output and "--kv-dtype" not in r.output
    r = CliRunner().invoke(app, [*base, "--kv-dtype", "fp8", "--engine-version", "0.25.0", "--gpus", "2", "--tp", "2"])
    assert r.exit_code == 0, r.output


def test_vllm_with_no_engine_version_names_one_release_to_pass(kvplan_home):
    # A new user's first command: DeepSeek-V4 under vLLM with no --engine-version plans kvplan's default release
    # (kvplan.engines.vllm.defaults.DEFAULT_VERSION, 0.30.0 or later: its reworked cache specs are not restated).
    # The one-line error names one release to pass (0.25.0, the newest wheel read, as the module docstring lists
    # v0.20.0, v0.20.1, v0.22.0 and v0.25.0) and the fp8 cache, as SGLang's does (test_sglang_dsv4_pool), and
    # following it plans.
    from typer.testing import CliRunner

    from kvplan.cli import app
    from kvplan.engines.vllm.defaults import DEFAULT_VERSION

    fit = ["fit", "deepseek-v4-flash", "--gpu", "h200", "--gpus", "8", "--tp", "8", "--engine", "vllm",
           "--ctx", "8k"]
    r = CliRunner().invoke(app, fit)
    assert r.exit_code == 2, r.output
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("Error: DeepSeek-V4 under vLLM needs --engine-version 0.25.0 (or 0.20.0, 0.20.1 or "
                           "0.22.0, the other wheels read) and --kv-dtype fp8: with none given kvplan plans "
                           f"vLLM {DEFAULT_VERSION}"), line
    assert line.count("--engine-version") == 1
    r = CliRunner().invoke(app, [*fit, "--kv-dtype", "fp8"])  # the cache already fp8: the release alone
    assert "needs --engine-version 0.25.0 (or 0.20.0, 0.20.1 or 0.22.0, the other wheels read): with" in r.stderr
    r = CliRunner().invoke(app, [*fit, "--kv-dtype", "fp8", "--engine-version", "0.25.0"])
    assert r.exit_code == 0, r.output
    # a release asked for by name keeps its own wording
    r = CliRunner().invoke(app, [*fit, "--kv-dtype", "fp8", "--engine-version", DEFAULT_VERSION])
    assert r.exit_code == 2 and f"Error: vLLM {DEFAULT_VERSION} reworked DeepSeek-V4's cache specs" in r.stderr
