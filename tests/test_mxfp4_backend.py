"""Which MXFP4 MoE backend vLLM runs gpt-oss in, by release and GPU, and what the choice costs the KV budget.

Source (read in the released sdists of vllm 0.10.1.1, 0.10.2, 0.11.0, 0.11.1, 0.11.2, 0.12.0 from PyPI, 2026-12-03):
`vllm/model_executor/layers/quantization/mxfp4.py` get_mxfp4_backend (0.11.0 L59-102, 0.11.2 L89-146, 0.12.0
L107-165) takes Triton on compute capability 9.x only when `has_triton_kernels()`; up to 0.11.2 that asks for the
optional `triton_kernels` package (0.11.0 `vllm/utils/__init__.py` L3431-3434), which neither `requirements/cuda.txt`
nor `docker/Dockerfile` installs; 0.12.0 bundles it (`CMakeLists.txt` L1090-1092; `utils/import_utils.py` L73-83).
"""

from __future__ import annotations

import pytest

from kvplan.core.errors import KvplanError
from kvplan.engines.vllm import engine as vllm
from kvplan.engines.vllm.mxfp4 import backend_for, weights_repack_extra
from kvplan.engines.vllm.overhead import MOE_WORKSPACE_BYTES, moe_workspace_elements
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

GIB = 2**30


def test_backend_by_release_and_gpu():
    h100, b200, a100 = find_gpu("h100-sxm"), find_gpu("b200"), find_gpu("a100-sxm-80")
    assert backend_for(h100, (0, 11, 0)) == "marlin"  # stock 0.11.0: no triton_kernels
    assert backend_for(h100, (0, 11, 2)) == "marlin"
    assert backend_for(h100, (0, 12, 0)) == "triton"  # bundled from 0.12.0
    assert backend_for(h100, (0, 14, 1)) == "triton"  # vllm#33155's log: "Using Triton backend"
    assert backend_for(h100, (0, 11, 0), "triton") == "triton"  # named: a log, or --engine-opt
    assert backend_for(b200, (0, 11, 0)) == "flashinfer"
    assert backend_for(a100, (0, 19, 0)) == "marlin"
    assert backend_for(find_gpu("mi300x"), (0, 11, 0)) is None


def test_gpt_oss_120b_marlin_over_triton_on_h100():
    # H = I = 2880, 128 experts x 36 layers = 4,608 expert-layers, tp 1. Per expert-layer over the checkpoint:
    #   Marlin (I -> 2944, H -> 3072, bf16 biases): 1,195,264 B (the A100 arithmetic in test_mxfp4_hopper.py, same dims)
    #   Triton on Hopper (the swizzled layouts, fp32 biases): 793,600 B (test_mxfp4_hopper.py)
    # difference 401,664 x 4,608 = 1,850,867,712 B = 1.724 GiB.
    m, h100 = find_in_catalog("gpt-oss-120b"), find_gpu("h100-sxm")
    assert weights_repack_extra(m, 1, h100, version=(0, 11, 0)) == 1_195_264 * 4608
    assert weights_repack_extra(m, 1, h100, version=(0, 12, 0)) == 793_600 * 4608
    assert weights_repack_extra(m, 1, h100, "triton", (0, 11, 0)) == 793_600 * 4608


def test_marlin_runs_fused_moe_workspace_triton_does_not():
    # fused_moe's caches at 1,024 tokens: 1,024 x top_k 4 x (3 x 2,880 + 2,880) = 47,185,920 elements
    m, h100 = find_in_catalog("gpt-oss-120b"), find_gpu("h100-sxm")
    assert moe_workspace_elements(m, 1, 1024, h100, (0, 11, 0)) == 47_185_920
    assert moe_workspace_elements(m, 1, 1024, h100, (0, 14, 1)) == 0
    assert moe_workspace_elements(m, 1, 1024, h100, (0, 11, 0), "triton") == 0


def test_vllm_27508_budget_explained_by_marlin():
    # vllm-project/vllm#27508 (matheusfvesco, 2025-10-31): `vllm serve openai/gpt-oss-120b --gpu-memory-utilization 0.95
    # --max-num-batched-tokens 1024` on one H100 printed "Available KV cache memory: 1.71 GiB" at gpu_worker.py:298,
    # 0.11.0's line (0.10.2 and 0.11.0 share 298, but core.py:708 is 0.11.0's; 0.10.2 prints 718). Planned with
    # Triton the budget was 3.564 GiB (+108%); Marlin takes 1.724 GiB more weights and 1.78 B x 47,185,920 =
    # 0.078 GiB of workspace: 3.564 - 1.724 - 0.078 = 1.762 GiB (+3.0%).
    m, h100, dep, req = find_in_catalog("gpt-oss-120b"), find_gpu("h100-sxm"), Deployment(1, 1), Request(context=131072)
    explicit = {"gpu_memory_utilization": 0.95}
    stock = vllm.Vllm("0.11.0", {"max_num_batched_tokens": "1024"}, explicit).result(m, h100, dep, req)
    named = vllm.Vllm("0.11.0", {"max_num_batched_tokens": "1024", "mxfp4_backend": "triton"}, explicit).result(
        m, h100, dep, req)
    moved = named.plan.kv_memory_bytes_per_gpu - stock.plan.kv_memory_bytes_per_gpu
    assert moved == 401_664 * 4608 + int(MOE_WORKSPACE_BYTES * 47_185_920)
    assert abs(stock.plan.kv_memory_bytes_per_gpu / GIB - 1.71) / 1.71 < 0.05
    assert any("triton_kernels" in n for n in stock.capacity.notes)  # the assumption is printed
    assert not any("triton_kernels" in n for n in named.capacity.notes)


def test_bad_backend_is_one_line_error():
    with pytest.raises(KvplanError, match="mxfp4_backend must be one of marlin, triton, flashinfer"):
        vllm.Vllm("0.11.0", {"mxfp4_backend": "cutlass"}, {}).result(
            find_in_catalog("gpt-oss-20b"), find_gpu("h100-sxm"), Deployment(1, 1), Request(context=8192))


def test_check_log_reads_the_backend_a_log_names():
    # vllm#33155 (0.14.1): "[mxfp4.py:165] Using Triton backend"; vllm#23278 (0.10.1 logs no choice): the
    # "[marlin_utils_fp4.py:196] ... leveraging the Marlin kernel" warning
    from pathlib import Path

    from kvplan.engines.logparse import parse_log

    corpus = Path(__file__).parent / "fixtures" / "logs" / "corpus"
    assert parse_log((corpus / "vllm-33155-gpt-oss-120b-h100-v0141.log").read_text()) \
        .settings["mxfp4_backend"] == "triton"
    assert parse_log((corpus / "vllm-23278-gpt-oss-120b-h100-marlin.log").read_text()) \
        .settings["mxfp4_backend"] == "marlin"
    assert "mxfp4_backend" not in parse_log((corpus / "vllm-27508-gpt-oss-120b-h100-gmu095.log").read_text()).settings
