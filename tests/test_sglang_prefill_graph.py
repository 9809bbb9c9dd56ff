"""SGLang 0.5.23's prefill (breakable) CUDA-graph reserve in the default mem_fraction_static."""

from __future__ import annotations

from kvplan.engines import resolve_engine
from kvplan.engines.sglang import piecewise
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog


def test_h100_tp1_default_fraction_counts_58_prefill_graphs():
    # sglang==0.5.23 wheel: the prefill graph is on by default on CUDA (`srt/model_executor/cuda_graph_config.py`
    # L119-123), captures `generate_prefill_cuda_graph_batch_sizes` (`srt/arg_groups/cuda_graph_hook.py` L480-497) up
    # to the chunked-prefill size, 8,192 on a 60-90 GiB GPU (`memory_hook.py` L132-143): 4..32 by 4 (8), 48..256 by
    # 16 (14), 288..512 by 32 (8), 576..1024 by 64 (8), 1280..4096 by 256 (12), 4608..8192 by 512 (8) = 58 sizes.
    assert len(piecewise.capture_sizes(8192)) == 8 + 14 + 8 + 8 + 12 + 8 == 58
    model, gpu, dep = find_in_catalog("qwen3-8b"), find_gpu("h100-sxm"), Deployment(1, 1)
    # `reserve_for_graph_mb` L380-389: 8 MiB a size (not MLA) = 464 MiB.
    assert piecewise.reserve_mib(model, gpu, dep, "0.5.23", 8192, False) == 58 * 8 == 464
    # `memory_hook.py` L309-315 on nvidia-smi's 81,559 MiB: 512 + 1.5 x 8,192 + 1 x 1 / 8 x 1,024 + 2 x 256 (decode
    # graph max bs, tp < 4) + 464 = 13,904 MiB, above the 10 GiB floor -> (81,559 - 13,904) / 81,559 = 0.8295 -> 0.830
    # (0.835 without the 464 MiB).
    st = resolve_engine("sglang", "0.5.23", []).settings(model, gpu, dep, Request(context=8192))
    assert round((81_559 - 13_904) / 81_559, 3) == st.mem_fraction_static == 0.830


def test_0523_mla_flat_and_dp_attention_keeps_it_pp_turns_it_off():
    # MLA backend: 1.5 GiB flat (`reserve_for_graph_mb` L387-389), whatever the list. DP attention no longer turns the
    # graph off in 0.5.23 (`disable_breakable_cudagraph_if_incompatible` L170-255 has no such rule); pp > 1 does
    # (`apply_cuda_graph_compatibility` L150-162). 0.5.12 still turned it off under DP attention.
    dsv3, qwen, gpu = find_in_catalog("deepseek-v3"), find_in_catalog("qwen3-8b"), find_gpu("h100-sxm")
    assert piecewise.reserve_mib(dsv3, gpu, Deployment(8, 1), "0.5.23", 8192, False) == 1536
    assert piecewise.reserve_mib(dsv3, gpu, Deployment(8, 1), "0.5.23", 8192, True) == 1536
    assert piecewise.reserve_mib(dsv3, gpu, Deployment(8, 1), "0.5.12", 8192, True) == 0
    assert piecewise.reserve_mib(qwen, gpu, Deployment(1, 2), "0.5.23", 8192, False) == 0
