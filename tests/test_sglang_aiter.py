"""SGLang's cut of mem_fraction_static under the aiter attention backend (kvplan.engines.sglang.attention.aiter_cut).

Read in the PyPI wheels: `if server_args.attention_backend == "aiter": if self.model_config.context_len > 8192:
self.mem_fraction_static *= 0.85` (0.4.7 model_executor/model_runner.py L423-425, none in 0.4.6.post5; 0.5.3 L600-602;
0.5.5 server_args.py L1270-1272; 0.5.23 arg_groups/attention_hook.py L245-269, sgl-project/sglang#6564). ROCm's
default backend is aiter for a model without MLA and for MLA with 16 or 128 KV heads a rank (0.5.3 model_runner.py
L517-546; 0.5.23 model_override_base.py L306-346), chosen before the test, so the default is cut too.

The MI300X profile's capacity is 196,592 MiB; SGLang 0.5.23's default reserve on a GPU above 160 GiB is
512 + 1.5 x 16,384 (chunk) + 1/8 x 1,024 (tp 1) + 2 x 512 (graph batch) = 26,240 MiB (no piecewise graph off CUDA),
so the default fraction is round((196,592 - 26,240) / 196,592, 3) = round(0.86652, 3) = 0.867.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

MI300X, H100 = find_gpu("mi300x"), find_gpu("h100-sxm")
LLAMA, V3, OSS = find_in_catalog("llama-3.1-8b"), find_in_catalog("deepseek-v3"), find_in_catalog("gpt-oss-20b")
NEXT = find_in_catalog("qwen3-next-80b-a3b")
DEFAULT_MI300X = 0.867  # the module docstring's arithmetic


def _st(model, gpu, version="0.5.23", opts=(), context=32768, tp=1):
    return resolve_engine("sglang", version, list(opts)).settings(model, gpu, Deployment(tp), Request(context=context))


def test_rocm_default_aiter_cuts_the_default_fraction_past_8192_tokens():
    st = _st(LLAMA, MI300X)
    # 0.867 x 0.85 = 0.73695
    assert st.aiter_factor == 0.85 and st.mem_fraction_static == pytest.approx(0.73695, abs=1e-9)
    assert "aiter on ROCm" in st.aiter_why and "32,768" in st.aiter_why


def test_exactly_8192_tokens_is_not_cut():
    # the test is context_len > 8192: 8,192 keeps 0.867
    st = _st(LLAMA, MI300X, context=8192)
    assert st.aiter_factor == 1.0 and st.mem_fraction_static == DEFAULT_MI300X and st.aiter_why == ""


def test_an_explicit_fraction_is_cut_too():
    # 0.8 given, aiter named: 0.8 x 0.85 = 0.68 in force (0.5.23 honours it only under
    # SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION, off by default)
    st = _st(LLAMA, MI300X, opts=["attention_backend=aiter", "mem_fraction_static=0.8"], context=16384)
    assert st.mem_fraction_static == pytest.approx(0.68, abs=1e-9)


def test_triton_named_on_rocm_is_not_cut():
    st = _st(LLAMA, MI300X, opts=["attention_backend=triton"])
    assert st.aiter_factor == 1.0 and st.mem_fraction_static == DEFAULT_MI300X


def test_no_cut_before_0_4_7():
    # 0.4.3's model_runner.py has no such test (0.4.6.post5 neither); the fraction stays the release's default
    st = _st(LLAMA, MI300X, version="0.4.3")
    assert st.aiter_factor == 1.0 and st.aiter_why == ""


def test_mla_is_cut_at_16_or_128_heads_a_rank_only():
    # DeepSeek-V3: 128 heads; tp 8 -> 16 a rank: aiter, cut; tp 4 -> 32: triton, not cut
    assert _st(V3, MI300X, tp=8).aiter_factor == 0.85
    assert _st(V3, MI300X, tp=4).aiter_factor == 1.0


def test_gpt_oss_takes_triton_on_rocm_before_0_5_10():
    # 0.5.3 server_args.py L734-741: GptOss triton off CUDA; 0.5.10 L1704-1705 and 0.5.23 gpt_oss.py: aiter on HIP
    assert _st(OSS, MI300X, version="0.5.3").aiter_factor == 1.0
    assert _st(OSS, MI300X, version="0.5.23").aiter_factor == 0.85


def test_cuda_default_is_not_cut_and_aiter_is_refused_there():
    assert _st(LLAMA, H100).aiter_factor == 1.0
    with pytest.raises(KvplanError, match="ROCm"):
        _st(LLAMA, H100, opts=["attention_backend=aiter"])


def test_a_hybrid_on_rocm_must_name_its_backend():
    # kvplan has not read a recurrent hybrid's default backend on ROCm: refused by default, planned once named
    with pytest.raises(KvplanError, match="attention_backend=aiter or triton"):
        _st(NEXT, MI300X, tp=4)
    assert _st(NEXT, MI300X, opts=["attention_backend=triton"], tp=4).aiter_factor == 1.0


def test_the_emitted_flag_is_the_uncut_fraction():
    # SGLang cuts the flag itself: kvplan emits 0.867 and says 0.73695 is in force
    r = CliRunner().invoke(app, ["fit", "llama-3.1-8b", "--engine", "sglang", "--gpu", "mi300x", "--ctx", "32k",
                                 "--emit", "sglang"])
    assert r.exit_code == 0, r.output
    assert "--mem-fraction-static 0.867 " in r.output
    assert "SGLang x 0.85 under aiter past 8,192 tokens: 0.73695 in force" in r.output


def test_the_raised_flag_stops_at_0_99_before_the_cut():
    # the flag is capped at 0.99, so the most in force under aiter is 0.99 x 0.85 = 0.8415: 33 x 32k (x 1.1 margin =
    # 1,189,478 tokens) fits at 0.84 in force, flag 0.84 / 0.85 = 0.98824; 34 x 32k (1,225,523) would need more than
    # 0.8415 gives (kvplan's pool there is about 1,197,000 tokens), so it is said not to fit, not emitted as 0.99
    def margin(batch):
        r = CliRunner().invoke(app, ["fit", "llama-3.1-8b", "--engine", "sglang", "--gpu", "mi300x", "--ctx", "32k",
                                     "--batch", str(batch), "--tp", "1", "--emit", "sglang"])
        assert r.exit_code == 0, r.output
        return r.output
    assert "--mem-fraction-static 0.98824 " in margin(33)
    assert "34 x 32,768 tokens do not fit even at --mem-fraction-static 0.99" in margin(34)


def test_mla_heads_a_rank_are_the_configs_kv_heads_over_the_whole_tp_size():
    # SGLang reads model_config.get_num_kv_heads(tp_size) (0.5.3 model_runner.py L540-543; 0.5.23
    # arg_groups/model_override_base.py L340-345): the config's num_key_value_heads (get_total_num_kv_heads' attribute
    # list, configs/model_config.py L1669-1690; num_attention_heads only where none is given) over the whole
    # --tp-size, floor 1. An MLA config of 128 query heads and 32 num_key_value_heads at tp 2: 32 // 2 = 16 a rank,
    # aiter (cut), where its 128 attention heads would give 64 (triton, not cut).
    import dataclasses

    fewer = dataclasses.replace(V3, mla_kv_heads=32)
    st = _st(fewer, MI300X, tp=2)
    assert st.aiter_factor == 0.85 and "32 num_key_value_heads" in st.aiter_why
    assert _st(V3, MI300X, tp=2).aiter_factor == 1.0  # DeepSeek-V3's config: 128 num_key_value_heads, 64 a rank


def test_an_mla_configs_kv_heads_are_read_where_they_differ():
    import json
    from pathlib import Path

    from kvplan.readers.configs import spec_from_config
    from kvplan.sources.catalog import spec_from_dict, spec_to_dict

    cfg = json.loads((Path(__file__).parent / "fixtures" / "families" / "deepseek-v3.2-exp.json").read_text())
    assert spec_from_config(cfg, "same")[0].mla_kv_heads == 0  # 128 and 128: not written
    spec = spec_from_config({**cfg, "num_key_value_heads": 32}, "fewer")[0]
    assert spec.mla_kv_heads == 32
    assert spec_from_dict(spec_to_dict(spec), "round trip").mla_kv_heads == 32  # kept by a catalog entry


def test_rocm_mla_heads_a_rank_count_dp_attention_ranks_on_both_sides():
    # review32 (dsa32's finding): SGLang divides the config's KV heads by its whole --tp-size, which counts DP
    # attention's ranks (get_num_kv_heads(tp_size): 0.5.23 arg_groups/model_override_base.py L340-345; kvplan's
    # Deployment(tp 2, dp 4) under DP attention is SGLang's --tp-size 8). DeepSeek-V3's 128 heads: 128 // 8 = 16 a
    # rank, aiter on ROCm, which decompresses every extend (kvplan.speed.mlaform); the speed side divided by the
    # attention tp alone (128 // 2 = 64: triton, absorbed). Both now read kvplan.speed.mlaform.mla_heads_per_rank.
    from kvplan.speed.mlaform import mla_heads_per_rank
    from kvplan.speed.shape import shape_for

    assert mla_heads_per_rank(V3, 2 * 4) == 16 and mla_heads_per_rank(V3, 2) == 64
    st = resolve_engine("sglang", "0.5.7", []).settings(V3, MI300X, Deployment(2, dp=4), Request(context=32768))
    assert st.aiter_factor == 0.85 and "16 KV heads per rank" in st.aiter_why
    adp = shape_for(V3, MI300X, tp=2, dp=4, engine="sglang", version="0.5.7", attention_dp=True)
    # aiter: decompressed
    assert adp.decompress_flops > 0 and adp.attn_prefill_flops_per_pair != adp.attn_flops_per_pair
    plain = shape_for(V3, MI300X, tp=2, dp=4, engine="sglang", version="0.5.7")  # replicas of tp 2: 64 a rank, triton
    assert plain.decompress_flops == 0 and plain.attn_prefill_flops_per_pair == plain.attn_flops_per_pair


@pytest.mark.parametrize("tp,dp", [(2, 4), (4, 2)])
def test_a_plans_speed_counts_dp_attention_ranks_in_the_mla_heads(tp, dp):
    # mlaplan32: the plan-level speed path (kvplan.speed.plan, the simulator's adapter) now reads the DP-attention fact
    # the SGLang engine's request step sets (Request.attention_dp), so a rank's heads are DeepSeek-V3's 128 over
    # SGLang's --tp-size tp x dp = 8: 128 // 8 = 16, aiter on ROCm (decompressed prefill), as the engine's own
    # aiter default and the corpus shapes read them; before, 128 // tp (64 or 32: triton, absorbed with a prefix).
    from kvplan import api
    from kvplan.simulator.adapter import _stage_costs
    from kvplan.speed.plan import DecodeSteps, plan_decode_seconds, plan_prefill_seconds, plan_shape
    from kvplan.speed.shape import shape_for

    plan = api.plan("deepseek-v3", "mi300x", tp=tp, dp=dp, context="8k", engine="sglang", engine_version="0.5.7")
    assert plan.request.attention_dp  # MoE with dp > 1: DP attention on by default (engines/sglang/defaults.py)
    want = shape_for(V3, MI300X, tp=tp, dp=dp, engine="sglang", version="0.5.7", attention_dp=True)
    got = plan_shape(plan, V3, MI300X, "sglang", "0.5.7")
    assert got == want and got.decompress_flops > 0 and got.attn_prefill_flops_per_pair != got.attn_flops_per_pair
    replicas = shape_for(V3, MI300X, tp=tp, dp=dp, engine="sglang", version="0.5.7")  # 128 // tp: triton, absorbed
    assert replicas.decompress_flops == 0
    # a prompt's prefill priced in the decompressed form: per pair 2 x heads x (128 + 64 + 128) = 640 x heads, not the
    # absorbed 4 x heads x (512 + 64) = 2,304 x heads, so the figure moves (lower at a fresh prompt)
    from kvplan.speed.model import prefill_seconds
    prompt = 8192
    assert plan_prefill_seconds(plan, V3, MI300X, "sglang", prompt, version="0.5.7") == prefill_seconds(
        want, "sglang", prompt) < prefill_seconds(replicas, "sglang", prompt)
    step = plan_decode_seconds(plan, V3, MI300X, "sglang", version="0.5.7")
    assert abs(DecodeSteps("sglang", version="0.5.7").seconds(plan, V3, MI300X) - step) < 1e-12
    cost = _stage_costs(plan, V3, "sglang", "0.5.7", MI300X)[0]  # the simulator's roofline: decompressed too
    assert cost.decompress_flops > 0 and cost.attn_prefill_flops_per_pair != cost.attn_flops_per_pair


def test_a_plan_without_dp_attention_keeps_the_attention_tp():
    # tp 8 alone (dp 1: DP attention cannot be on): 128 // 8 = 16 either way; tp 2 alone: 128 // 2 = 64, triton
    from kvplan import api
    from kvplan.speed.plan import plan_shape

    plan = api.plan("deepseek-v3", "mi300x", tp=2, context="8k", engine="sglang", engine_version="0.5.7")
    assert not plan.request.attention_dp
    assert plan_shape(plan, V3, MI300X, "sglang", "0.5.7").decompress_flops == 0  # triton absorbs with a prefix
