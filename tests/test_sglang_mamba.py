"""SGLang's recurrent-state pool (kvplan/engines/sglang/mamba.py) against its source's rule, by release, with the hand
arithmetic from the published configs (Qwen/Qwen3.5-27B, Qwen/Qwen3-Next-80B-A3B-Thinking, Qwen/Qwen3.5-397B-A17B), and
against a real start-up log (kvcache-ai/ktransformers#1870). Sources: the PyPI wheels' `model_executor/model_runner.py`
(0.5.2-0.5.4), `model_runner_kv_cache_mixin.py` (0.5.10), `mem_cache/kv_cache_configurator.py` (0.5.17, 0.5.23),
`mem_cache/memory_pool.py` (MambaPool: size + 1 rows), `arg_groups/overrides.py` (0.5.15: the extra_buffer default).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import BF16
from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog
from conftest import engine_figures

GIB = 2**30
CORPUS = Path(__file__).parent / "fixtures" / "logs" / "corpus"
BUDGET = 70_536_510_029  # a static budget ("rest") in bytes, the input of the split


def _cap(name, version, budget=BUDGET, context=262_144, tp=1, opts=()):
    engine = resolve_engine("sglang", version, list(opts))
    model, dep = find_in_catalog(name), Deployment(tp, 1)
    st = engine.settings(model, find_gpu("h200-sxm"), dep, Request(context=context))
    cap = engine.capacity_at(model, dep, st, budget, context, BF16)
    return cap, engine_figures(cap)


def test_qwen35_27b_split_by_the_memory_ratio_0523():
    # Qwen3.5-27B: 48 Gated DeltaNet layers: conv 3 x (2 x 16 x 128 + 48 x 128) = 30,720 bf16 values = 61,440 B,
    # ssm 48 x 128 x 128 = 786,432 fp32 values = 3,145,728 B; a slot = 48 x 3,207,168 = 153,944,064 B.
    # 0.5.23: budget x 0.9 / 1.9 = 33,412,031,066.4 B; (that - one slot) // slot = 216.04 -> 216 slots;
    # rest -= (216 + 1) x 153,944,064 = 33,405,861,888 -> 37,130,648,141 B for 16 full layers x 2 x 4 KV heads x 256
    # x 2 B = 65,536 B a token -> 566,568 tokens. Buffers of 217 rows: conv 217 x 48 x 61,440 = 0.596 GiB,
    # ssm 217 x 48 x 3,145,728 = 30.52 GiB. max_running_requests = min(clamp(566,568 / 262,144 x 512 = 1,106,
    # 2048, 4096) = 2,048, 566,568 // 2, 216 // (3 + 2 extra_buffer slots) = 43) = 43.
    cap, fig = _cap("qwen3.5-27b", "0.5.23")
    assert fig["mamba_cache_per_req"] == 153_944_064
    assert fig["max_mamba_cache_size"] == 216
    assert cap.tokens == fig["max_total_num_tokens"] == 566_568
    assert f"{fig['conv_state size'] / GIB:.2f}" == "0.60" and f"{fig['ssm_state size'] / GIB:.2f}" == "30.52"
    assert fig["state slots per request"] == 5 and fig["max_running_requests"] == 43 == cap.max_running
    assert cap.max_concurrency == pytest.approx(566_568 / 262_144)  # the token pool binds at 256k
    _, short = _cap("qwen3.5-27b", "0.5.23", context=4096)
    assert short[f"requests of {4096:,} tokens"] == 43  # at 4k the state slots bind: 566,568 / 4,096 = 138


def test_qwen35_27b_before_the_padding_slot_and_the_extra_buffer_0510():
    # 0.5.10: int(33,412,031,066.4 // 153,944,064) = 217 slots, rest -= 217 slots (no padding slot paid): the same
    # 37,130,648,141 B -> 566,568 tokens; 3 slots per request (no extra_buffer default before 0.5.15): 217 // 3 = 72.
    cap, fig = _cap("qwen3.5-27b", "0.5.10")
    assert fig["max_mamba_cache_size"] == 217 and cap.tokens == 566_568
    assert fig["state slots per request"] == 3 and cap.max_running == 72


def test_qwen3_next_fixed_512_slots_before_the_ratio_053():
    # Qwen3-Next-80B at tp 4: 36 Gated DeltaNet layers: conv 3 x (2 x 16 x 128 + 32 x 128) / 4 = 6,144 bf16 values
    # = 12,288 B, ssm 32 / 4 x 128 x 128 fp32 = 524,288 B; a slot = 36 x 536,576 = 19,316,736 B. 0.5.3: radix cache
    # off, 512 slots: 512 x 19,316,736 = 9,890,168,832 B out of 50 GiB = 53,687,091,200 -> 43,796,922,368 B for 12
    # full layers x 2 x max(1, 2 // 4) KV head x 256 x 2 B = 12,288 B a token -> 3,564,202 tokens;
    # max_running_requests = min(4,096, 3,564,202 // 2, 512 // 1) = 512.
    cap, fig = _cap("qwen3-next-80b-a3b-thinking", "0.5.3", budget=50 * GIB, tp=4)
    assert fig["mamba_cache_per_req"] == 19_316_736
    assert fig["max_mamba_cache_size"] == 512 and cap.tokens == 3_564_202
    assert cap.max_running == 512


def test_options_set_the_slots_the_dtype_and_the_cap():
    # --max-mamba-cache-size 100 (0.5.23): rest -= 101 slots; --mamba-ssm-dtype bfloat16 halves the recurrent state:
    # 48 x (61,440 + 786,432 x 2) = 78,446,592 B a slot; --max-running-requests 8 caps the scheduler.
    _, fig = _cap("qwen3.5-27b", "0.5.23", opts=["max_mamba_cache_size=100"])
    assert fig["max_mamba_cache_size"] == 100
    assert fig["max_total_num_tokens"] == (BUDGET - 101 * 153_944_064) // 65_536
    _, fig = _cap("qwen3.5-27b", "0.5.23", opts=["mamba_ssm_dtype=bfloat16"])
    assert fig["mamba_cache_per_req"] == 78_446_592
    cap, _ = _cap("qwen3.5-27b", "0.5.23", opts=["max_running_requests=8"])
    assert cap.max_running == 8 and cap.max_concurrency <= 8
    cap, fig = _cap("qwen3.5-27b", "0.5.23", opts=["disable_radix_cache=true"])
    assert fig["state slots per request"] == 1 and cap.max_running == 216  # one slot a request without the radix cache


@pytest.mark.parametrize("name, version, words", [
    ("qwen3-next-80b-a3b-thinking", "0.5.1", "0.5.2"),  # Qwen3-Next arrived in 0.5.2
    ("nemotron-h-56b-base-8k", "0.5.3", "0.5.4"),  # Nemotron-H (Mamba-2) in 0.5.4
    ("ai21-jamba-1.5-mini", "0.5.23", "no Jamba"),  # no Jamba in any release
])
def test_releases_without_the_state_layer_refuse(name, version, words):
    with pytest.raises(KvplanError, match=words):
        _cap(name, version)


@pytest.mark.parametrize("opt", ["mamba_ssm_dtype=int4", "mamba_full_memory_ratio=-1", "max_mamba_cache_size=x"])
def test_bad_options_are_one_line_errors(opt):
    res = CliRunner().invoke(app, ["fit", "qwen3.5-27b", "--gpu", "h200-sxm", "--engine", "sglang",
                                   "--engine-opt", opt])
    errors = [line for line in res.stderr.splitlines() if line.startswith("Error: ")]
    assert res.exit_code == 2 and "Traceback" not in res.output  # the model line and notes are chatter before it
    assert len(errors) == 1 and opt.split("=")[0] in errors[0], res.stderr


def test_fit_prints_the_state_pool_and_emit_pins_it():
    args = ["fit", "qwen3.5-27b", "--gpu", "h200-sxm", "--engine", "sglang", "--ctx", "32k"]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    eng = json.loads(res.stdout)["plans"][0]["engine"]
    slots = eng["lines"]["max_mamba_cache_size"]
    assert eng["max_running"] > 0 and int(slots) > 0
    res = CliRunner().invoke(app, [*args, "--emit", "sglang", "--engine-opt", "mamba_ssm_dtype=bfloat16"])
    assert "--max-mamba-cache-size" in res.output and "--mamba-ssm-dtype bfloat16" in res.output


def test_ktransformers_log_sizes_from_its_slots():
    # kvcache-ai/ktransformers#1870, two RTX 4090 ranks: 82 slots of Qwen3.5-397B-A17B at tp 2 (45 GDN layers):
    # conv 83 x 45 x 3 x (2 x 16 x 128 + 64 x 128) / 2 x 2 B = 137,687,040 B = 0.13 GiB,
    # ssm 83 x 45 x 32 x 128 x 128 x 4 B = 7,832,862,720 B = 7.29 GiB; K 580,365 x 15 x 256 x 2 B = 4.15 GiB.
    # The fork's fraction is not printed: its #tokens are not predicted, the sizes from the slots are.
    res = CliRunner().invoke(app, ["check-log", str(CORPUS / "sglang-ktransformers-1870-qwen35-moe-2x4090.log"),
                                   "--model", "qwen3.5-397b-a17b", "--gpu", "rtx-4090", "--json"])
    assert res.exit_code in (0, 1), res.output
    rows = {r["quantity"]: r for r in json.loads(res.stdout)["rows"]}
    assert rows["conv_state size from slots + 1 (GB = GiB)"]["ok"] is True
    assert rows["ssm_state size from slots + 1 (GB = GiB)"]["ok"] is True
    assert rows["K size from #tokens (GB = GiB)"]["ok"] is True


def test_ktransformers_split_reproduces_its_slots():
    # The split itself: the log's own static budget is its token pool + state pool, 580,364 x 15,360 B (15 layers
    # x 2 x 256 x 2 B at tp 2) + 83 x 96,030,720 B = 8,914,391,040 + 7,970,549,760 = 16,884,940,800 B;
    # x 0.9 / 1.9 = 7,998,129,852.6; minus one slot, // 96,030,720 -> 82.29 -> 82 slots, as printed.
    engine = resolve_engine("sglang", "0.5.23")
    model, dep = find_in_catalog("qwen3.5-397b-a17b"), Deployment(2, 1)
    st = engine.settings(model, find_gpu("rtx-4090"), dep, Request(context=8192))
    cap = engine.capacity_at(model, dep, st, 16_884_940_800, 8192, BF16)
    fig = engine_figures(cap)
    assert fig["mamba_cache_per_req"] == 96_030_720
    assert fig["max_mamba_cache_size"] == 82 and cap.tokens == 580_364


def test_running_limit_caps_a_plain_model_too():
    # --max-running-requests caps SGLang's scheduler whatever the model (min with tokens // 2, as the state pool's)
    cap, _ = _cap("qwen3-8b", "0.5.23", context=4096, opts=["max_running_requests=4"])
    assert cap.max_running == 4 and cap.max_concurrency == 4
    cap, _ = _cap("qwen3-8b", "0.5.23", context=4096)
    assert cap.max_running is None and cap.max_concurrency > 4


def test_the_052_line_without_a_slot_count_is_read():
    # 0.5.2-0.5.3 print no slot count (mem_cache/memory_pool.py 0.5.2 L166-170): the sizes are read alone
    from kvplan.engines.logparse import parse_log

    rec = parse_log("[TP0] Load weight end. type=Qwen3NextForCausalLM, dtype=torch.bfloat16, avail mem=40.00 GB, "
                    "mem usage=37.00 GB.\n[TP0] Mamba Cache is allocated. conv_state size: 0.12GB, "
                    "ssm_state size: 5.00GB \n")
    assert "max_mamba_cache_size" not in rec.reported
    assert rec.reported["conv_state_gb"].text == "0.12" and rec.reported["ssm_state_gb"].text == "5.00"


def test_pp_prices_a_slot_on_the_heaviest_stage_from_0517():
    # Qwen3-Next at tp 2, pp 2: each stage holds 24 layers, 18 of them Gated DeltaNet; a layer's state at tp 2 is
    # 3 x 8,192 / 2 x 2 B + 16 x 128 x 128 x 4 B = 24,576 + 1,048,576 = 1,073,152 B. 0.5.23 prices the slot on the
    # stage (18 x 1,073,152 = 19,316,736 B, `pp_layer_scale`); 0.5.16 on the whole model (36 x = 38,633,472 B).
    for version, per in (("0.5.23", 19_316_736), ("0.5.16", 38_633_472)):
        engine = resolve_engine("sglang", version)
        model, dep = find_in_catalog("qwen3-next-80b-a3b-thinking"), Deployment(2, 2)
        st = engine.settings(model, find_gpu("h100"), dep, Request(context=32768))
        fig = engine_figures(engine.capacity_at(model, dep, st, 40 * GIB, 32768, BF16))
        assert fig["mamba_cache_per_req"] == per, version


def test_dp_attention_divides_the_servers_slots():
    # --max-mamba-cache-size is the whole server's: under DP attention over 8 ranks each rank keeps 800 // 8 = 100
    # (0.5.23 kv_cache_configurator.py `mamba_pool.per_dp_shard`), and --max-running-requests 64 is 8 a rank.
    engine = resolve_engine("sglang", "0.5.23", ["max_mamba_cache_size=800", "max_running_requests=64"])
    model, dep = find_in_catalog("qwen3.5-35b-a3b"), Deployment(1, 1, dp=8, ep=8)
    cap = engine.result(model, find_gpu("h200-sxm"), dep, Request(context=8192)).capacity
    fig = engine_figures(cap)
    assert fig["max_mamba_cache_size"] == 100 and cap.max_running == 8


def test_falcon_h1_attention_in_the_token_pool_and_its_mixer_in_the_slots():
    # tiiuae/Falcon-H1-0.5B-Instruct: attention AND a Mamba-2 mixer on all 36 layers (SGLang FalconH1Config:
    # full_attention_layer_ids = linear_layer_ids = every layer). Mixer: conv 3 x (1,536 + 2 x 1 x 128) = 5,376 bf16
    # = 10,752 B, ssm 24 x 64 x 128 fp32 = 786,432 B; a slot = 36 x 797,184 = 28,698,624 B. Token: 36 x 2 x 2 KV
    # heads x 64 x 2 B = 18,432 B. 0.5.23 on 40 GiB: 42,949,672,960 x 0.9 / 1.9 = 20,344,581,928.4; minus a slot,
    # // slot = 707.9 -> 707; rest -= 708 slots = 20,318,625,792 -> 22,631,047,168 // 18,432 = 1,227,812 tokens.
    cap, fig = _cap("falcon-h1-0.5b-instruct", "0.5.23", budget=40 * GIB, context=16384)
    assert fig["mamba_cache_per_req"] == 28_698_624 and fig["cell per token"] == 18_432
    assert fig["max_mamba_cache_size"] == 707 and cap.tokens == 1_227_812


def test_the_radix_cache_strategy_sets_the_slots_a_request_holds():
    # 3 slots beside the radix cache, + 2 for extra_buffer's ping-pong pair (overlap on), + 1 for the lazy variant;
    # no_buffer: 3 (0.5.23: 216 slots // 3 = 72); the flag's name before 0.5.14 is --mamba-scheduler-strategy
    cap, fig = _cap("qwen3.5-27b", "0.5.23", opts=["mamba_radix_cache_strategy=no_buffer"])
    assert fig["state slots per request"] == 3 and cap.max_running == 72
    _, fig = _cap("qwen3.5-27b", "0.5.23", opts=["mamba_radix_cache_strategy=extra_buffer_lazy"])
    assert fig["state slots per request"] == 4
    with pytest.raises(KvplanError, match="0.5.13"):
        _cap("qwen3.5-27b", "0.5.10", opts=["mamba_radix_cache_strategy=extra_buffer_lazy"])
    res = CliRunner().invoke(app, ["fit", "qwen3-next-80b-a3b-thinking", "--gpu", "h200-sxm", "--tp", "2", "--ctx",
                                   "32k", "--engine", "sglang", "--engine-version", "0.5.10", "--engine-opt",
                                   "mamba_radix_cache_strategy=extra_buffer", "--emit", "sglang"])
    assert res.exit_code == 0 and "--mamba-scheduler-strategy extra_buffer" in res.stdout, res.output


def test_state_options_are_checked_on_a_plain_model_too():
    with pytest.raises(KvplanError, match="mamba_ssm_dtype"):
        _cap("qwen3-8b", "0.5.23", context=4096, opts=["mamba_ssm_dtype=fp4"])
