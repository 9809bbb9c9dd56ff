"""SGLang's prefill CUDA graph by release (kvplan.engines.sglang.prefill_graph): the allow-listed VLMs, DP attention
in 0.5.15-0.5.23, pp > 1 and MLA, each against the wheel that says it, and its effect on the default fraction."""

from __future__ import annotations

import dataclasses

from kvplan.engines import resolve_engine
from kvplan.engines.sglang import piecewise, prefill_graph
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

H100, H200 = find_gpu("h100-sxm"), find_gpu("h200")


def _fraction(model, gpu, dep, version):
    return resolve_engine("sglang", version, []).settings(model, gpu, dep, Request(context=8192)).mem_fraction_static


def test_0523_allow_listed_qwen35_keeps_the_breakable_graph_464_mib():
    # sglang==0.5.23 wheel `configs/model_config.py` L2501-2516 lists Qwen3_5ForConditionalGeneration among the
    # multimodal archs that keep the breakable prefill graph; `cuda_graph_hook.py` L228-238 turns it off only for a
    # multimodal model off that list. 58 sizes up to the H100's 8,192-token chunk x 8 MiB = 464 MiB.
    model = find_in_catalog("qwen3.5-27b")
    assert model.architecture == "Qwen3_5ForConditionalGeneration"
    assert piecewise.reserve_mib(model, H100, Deployment(1), "0.5.23", 8192, False) == 58 * 8 == 464
    # default fraction on nvidia-smi's 81,559 MiB: 512 + 1.5 x 8,192 + 1/8 x 1,024 + 2 x 256 = 13,440 MiB, + 464 =
    # 13,904 -> round((81,559 - 13,904) / 81,559, 3) = 0.830 (0.835 without the graph), then the VLM factor
    # (`adjust_mem_fraction_for_vlm`: 24 x 1152^2 / (24 x 1024^2) = 1.265625 -> 0.95 x (1 - 0.0265625) = 0.924765625).
    assert round((81_559 - 13_904) / 81_559, 3) == 0.830
    assert abs(_fraction(model, H100, Deployment(1), "0.5.23") - 0.830 * 0.924765625) < 1e-9
    # 0.5.15 had no breakable allow-list (`_disable_breakable_cudagraph_if_incompatible` L3341-3385: every
    # multimodal model off); 0.5.16 lists Qwen3.5 (model_config.py L1785).
    assert piecewise.reserve_mib(model, H100, Deployment(1), "0.5.15", 8192, False) == 0
    assert piecewise.reserve_mib(model, H100, Deployment(1), "0.5.16", 8192, False) == 464


def test_kimi_k25_mla_vlm_by_release():
    # KimiK25ForConditionalGeneration, MLA: 1.5 GiB flat wherever a prefill graph is kept (`reserve_for_graph_mb`).
    kimi, tp8 = find_in_catalog("kimi-k2.5"), Deployment(8)
    # 0.5.15: breakable turns off MLA and every multimodal model (L3341-3385).
    assert piecewise.reserve_mib(kimi, H200, tp8, "0.5.15", 8192, False) == 0
    # 0.5.16-0.5.17: on the piecewise allow-list only (L1776 / L1785) -> moved to tc_piecewise
    # (`_apply_cuda_graph_compatibility` 0.5.16 L3649-3679), which DP attention turns off.
    assert prefill_graph.decide(kimi, H200, tp8, "0.5.16", False)[0] == prefill_graph.TC
    assert piecewise.reserve_mib(kimi, H200, tp8, "0.5.17", 8192, False) == 1536
    assert piecewise.reserve_mib(kimi, H200, Deployment(1, 1, 8), "0.5.17", 8192, True) == 0
    # 0.5.18 on: on the breakable allow-list (0.5.18 L1921), kept under DP attention too.
    assert prefill_graph.decide(kimi, H200, tp8, "0.5.18", False)[0] == prefill_graph.BREAKABLE
    assert piecewise.reserve_mib(kimi, H200, Deployment(1, 1, 8), "0.5.23", 8192, True) == 1536
    # 0.5.23 at tp 8 on an H200 (nvidia-smi 143,771 MiB, chunk 8,192, decode max bs 512 at tp >= 4):
    # 512 + 12,288 + 1,024 + 1,024 = 14,848 MiB, + 1,536 = 16,384 -> round(127,387 / 143,771, 3) = 0.886
    # (0.897 without it), x 0.95 (the vision_config gives no size: SGLang's 24 x 1024 defaults).
    assert round((143_771 - 16_384) / 143_771, 3) == 0.886
    assert abs(_fraction(kimi, H200, tp8, "0.5.23") - 0.886 * 0.95) < 1e-9


def test_dp_attention_keeps_the_breakable_graph_from_0517():
    # `_disable_breakable_cudagraph_if_incompatible` has a "DP attention" rule in 0.5.15 (L3341-3385) and 0.5.16
    # (L3799) and none from 0.5.17 (L4452-4523), 0.5.19 (`cuda_graph_hook.py` L262-325) to 0.5.22 (L138-219).
    qwen, dp4 = find_in_catalog("qwen3-30b-a3b"), Deployment(1, 1, 4)
    for version in ("0.5.15", "0.5.16"):
        assert piecewise.reserve_mib(qwen, H100, dp4, version, 8192, True) == 0
    for version in ("0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"):
        assert piecewise.reserve_mib(qwen, H100, dp4, version, 8192, True) == 464, version
    # The tc_piecewise default of 0.5.14 still turned off under DP attention (L2998-3050).
    assert piecewise.reserve_mib(qwen, H100, dp4, "0.5.14", 8192, True) == 0
    # 0.5.21, --tp-size 4 (dp 4) on nvidia-smi's 81,559 MiB: 512 + 12,288 + 4/8 x 1,024 + 2 x 512 = 14,336, DP
    # attention 512 x 4 x (3 + 1.5) = 9,216, + 464 = 24,016 -> round(57,543 / 81,559, 3) = 0.706 (0.711 before).
    assert round((81_559 - 24_016) / 81_559, 3) == 0.706
    assert _fraction(qwen, H100, dp4, "0.5.21") == 0.706


def test_mla_rules_and_deepseek_v3_under_dp_attention():
    dsv3, dsv32 = find_in_catalog("deepseek-v3"), find_in_catalog("deepseek-v3.2")
    dp8 = Deployment(1, 1, 8)
    # MLA turned the breakable graph off in 0.5.15-0.5.16 ("MLA attention"); in 0.5.17 only without DSA's indexer
    # (`is_deepseek_dsa`: an index_topk, model_config.py 0.5.17 L106-121); no MLA rule from 0.5.18 (L4666-4718).
    assert piecewise.reserve_mib(dsv3, H200, Deployment(8), "0.5.16", 8192, False) == 0
    assert piecewise.reserve_mib(dsv3, H200, Deployment(8), "0.5.17", 8192, False) == 0
    assert piecewise.reserve_mib(dsv32, H200, Deployment(8), "0.5.17", 8192, False) == 1536
    assert piecewise.reserve_mib(dsv3, H200, dp8, "0.5.18", 8192, True) == 1536
    # 0.5.20, DeepSeek-V3 over 8 DP ranks on H200: 512 + 12,288 + 1,024 + 1,024 = 14,848, DP attention 512 x 8 x 4.5
    # = 18,432, + 1,536 = 34,816 -> round(108,955 / 143,771, 3) = 0.758 (0.769 without the graph).
    assert round((143_771 - 34_816) / 143_771, 3) == 0.758
    assert _fraction(dsv3, H200, dp8, "0.5.20") == 0.758
    # tc_piecewise's architecture list turned DeepSeek-V3.2 off in 0.5.10-0.5.12 (model_config.py 0.5.10 L1352).
    assert piecewise.reserve_mib(dsv32, H200, Deployment(8), "0.5.12", 8192, False) == 0


def test_pp_keeps_the_breakable_graph_until_0519():
    # pp > 1 turns tc_piecewise off (0.5.14) and, from 0.5.19, the breakable graph (`apply_cuda_graph_compatibility`
    # 0.5.19 L122-134); 0.5.15-0.5.18's breakable rules have no pp rule, so the graph and its reserve stay.
    qwen, pp2 = find_in_catalog("qwen3-8b"), Deployment(1, 2)
    assert piecewise.reserve_mib(qwen, H100, pp2, "0.5.14", 8192, False) == 0
    assert piecewise.reserve_mib(qwen, H100, pp2, "0.5.18", 8192, False) == 464
    assert piecewise.reserve_mib(qwen, H100, pp2, "0.5.19", 8192, False) == 0
    # 0.5.18 at pp 2: 512 + 12,288 + 1 x 2 / 8 x 1,024 + 512 = 13,568, + 464 = 14,032 -> 0.828 (0.834 before).
    assert _fraction(qwen, H100, pp2, "0.5.18") == round((81_559 - 14_032) / 81_559, 3) == 0.828


def test_architecture_lists_and_kda():
    nxt = find_in_catalog("qwen3-next-80b-a3b-thinking")
    # Qwen3NextForCausalLM is on piecewise_cuda_graph_disabled_model_archs (tc only: 0.5.13 L1579), no breakable rule.
    assert piecewise.reserve_mib(nxt, H100, Deployment(1), "0.5.13", 8192, False) == 0
    assert piecewise.reserve_mib(nxt, H100, Deployment(1), "0.5.15", 8192, False) == 464
    # A KDA hybrid is off from 0.5.20 ("KDA hybrid linear attention", `cuda_graph_hook.py` 0.5.20 L282-286).
    kda = dataclasses.replace(nxt, layers=tuple(dataclasses.replace(layer, variant="kda")
                                                if hasattr(layer, "variant") else layer for layer in nxt.layers))
    assert piecewise.reserve_mib(kda, H100, Deployment(1), "0.5.19", 8192, False) == 464
    assert piecewise.reserve_mib(kda, H100, Deployment(1), "0.5.20", 8192, False) == 0
    # Nemotron-H is off in 0.5.17 only ("NemotronH (hybrid Mamba2 prefill)", 0.5.17 L4476-4479).
    nem = find_in_catalog("nvidia-nemotron-3-nano-30b-a3b-bf16")
    assert [piecewise.reserve_mib(nem, H100, Deployment(1), v, 8192, False) > 0
            for v in ("0.5.16", "0.5.17", "0.5.18")] == [True, False, True]


def test_the_engine_table_prints_the_reserve_and_why():
    engine = resolve_engine("sglang", "0.5.23", [])
    model = find_in_catalog("qwen3.5-27b")
    st = engine.settings(model, H100, Deployment(1), Request(context=8192))
    assert st.prefill_graph == ("breakable", 464.0, "Qwen3_5ForConditionalGeneration is on its breakable allow-list")
    note = prefill_graph.note(st.version, *st.prefill_graph)
    assert "464 MiB" in note and "breakable" in note
    # A fraction the user gives reserves nothing: the row and note are left out.
    given = resolve_engine("sglang", "0.5.23", ["mem_fraction_static=0.8"])
    assert given.settings(model, H100, Deployment(1), Request(context=8192)).prefill_graph is None


def test_qwen3_vl_on_hopper_raises_the_decode_graph_batch_to_max_running_requests():
    # `srt/arg_groups/model_overrides/qwen3_vl.py` L20-62 (0.5.20 and 0.5.23 wheels alike): a multimodal qwen3_vl on
    # an SM90 GPU of >= 60 GiB, --max-running-requests <= 512 above the default decode max bs -> max bs = it, before
    # the reserve is sized (`memory_hook.py` 0.5.23 L191-197). A Qwen3.5 VLM relabelled as Qwen3-VL stands in for one
    # (none in the catalog): only the architecture name and the tower matter to the rule.
    from kvplan.engines.sglang.defaults import expanded_graph_bs

    vl = dataclasses.replace(find_in_catalog("qwen3.5-27b"), architecture="Qwen3VLForConditionalGeneration")
    assert expanded_graph_bs("0.5.23", 256, 512, vl, H100) == 512
    assert expanded_graph_bs("0.5.19", 256, 512, vl, H100) == 256  # not in 0.5.19's wheel
    assert expanded_graph_bs("0.5.23", 256, 600, vl, H100) == 256  # above 512
    assert expanded_graph_bs("0.5.23", 256, 512, vl, find_gpu("b200")) == 256  # SM100: is_sm90_supported is major 9
    assert expanded_graph_bs("0.5.23", 256, 512, vl, find_gpu("mi300x")) == 256  # gfx942 reads (9, 4): not CUDA
    assert expanded_graph_bs("0.5.23", 256, 512, find_in_catalog("qwen3.5-27b"), H100) == 256  # another architecture
    # On an H100 at tp 1: 512 + 12,288 + 128 + 2 x 512 = 13,952 MiB (no prefill graph: not on the breakable
    # allow-list) -> round(67,607 / 81,559, 3) = 0.829 (0.835 with the default 256), times the tower's 0.924765625.
    engine = resolve_engine("sglang", "0.5.23", ["max_running_requests=512"])
    st = engine.settings(vl, H100, Deployment(1), Request(context=8192))
    assert abs(st.mem_fraction_static - round((81_559 - 13_952) / 81_559, 3) * 0.924765625) < 1e-9
    assert round((81_559 - 13_952) / 81_559, 3) == 0.829
