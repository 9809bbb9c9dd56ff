"""GPU totals as torch (and so vLLM, which sizes its budget from `torch.cuda.mem_get_info()`'s total) sees them.

Golden values come from public logs cited in each profile's `memory_usable_source`, not from kvplan: a torch
total printed as "X.XX GiB" is stored as X.XX GiB rounded down to a whole MiB (as the H200's 139.80 GiB =
143155 MiB). Where only nvidia-smi's (or OpenCL's) total is known, the profile flags it and plans warn.
"""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from kvplan.sources.catalog import find_in_catalog
from kvplan.planning.deploy import Deployment
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import GPU, load_gpus
from kvplan.planning.plan import Request
from kvplan.report.text import plan_warnings

MiB, GiB = 2**20, 2**30


def mib_down(gib: str) -> int:
    return math.floor(Decimal(gib) * 1024) * MiB


@pytest.mark.parametrize("key, printed, smi_mib", [
    ("a10", "21.99", 23028),  # QwenLM/Qwen3#1387: floor(21.99 x 1024) = 22517 MiB; nvidia-smi 23028 MiB
    ("l4", "22.03", 23034),  # ArcInstitute/evo2#190: 22558 MiB; nvidia-smi 23034 MiB
    ("l40s", "44.42", 46068),  # stepfun-ai/Step-Video-T2V#8: 45486 MiB; nvidia-smi 46068 MiB
    ("h100-nvl", "93.00", 95830),  # ali-vilab/VACE#56: 95232 MiB; nvidia-smi 95830 MiB
    ("h20", "95.00", 97871),  # modelscope/DiffSynth-Studio#1238: 97280 MiB; nvidia-smi 97871 MiB
    ("rtx-5090", "31.36", 32607),  # TrajectoryCrafter#20: 32112 MiB; nvidia-smi 32607 MiB
    ("rtx-pro-6000-server", "94.97", 97887),  # antirez/ds4#431 (CUDA total): 97249 MiB; nvidia-smi 97887 MiB
    ("b200", "178.35", 183359),  # stas00/ml-engineering debug/pytorch.md: 182630 MiB; nvidia-smi 183359 MiB
    ("gb300", "276.50", 284208),  # same book, DGX Station GB300: 283136 MiB; nvidia-smi 284208 MiB
    ("rtx-6000-ada", "44.43", 46068),  # DINGYANB/MTVCrafter#21 (ECC on): 45496 MiB; nvidia-smi 46068 MiB
    ("rtx-5080", "15.46", 16303),  # Nightstalkeer/taming-3dgs@ea0a5325 (torch OOM): 15831 MiB; nvidia-smi 16303 MiB
])
def test_torch_totals_from_public_logs(key, printed, smi_mib):
    gpu = load_gpus()[key]
    assert gpu.memory_usable_bytes == mib_down(printed)
    assert not gpu.memory_usable_above_torch and printed in gpu.memory_usable_source
    # torch sees 0.46-1.05 GiB less than nvidia-smi on every one of them
    assert 0.45 * GiB < smi_mib * MiB - gpu.memory_usable_bytes < 1.06 * GiB


@pytest.mark.parametrize("key, printed", [
    ("l20", "44.53"),  # Tencent-Hunyuan/HunyuanCustom#36, 8x L20: floor(44.53 x 1024) = 45598 MiB
    ("l40", "44.40"),  # QwenLM/Qwen3-VL#2097, one L40: 45465 MiB
    ("gb10", "121.69"),  # MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#204, unified memory per Spark: 124610 MiB
])
def test_torch_totals_without_a_tool_total(key, printed):
    # no nvidia-smi figure was found beside these; an ECC GDDR6 card keeps under 15/16 of its 48 GiB
    gpu = load_gpus()[key]
    assert gpu.memory_usable_bytes == mib_down(printed) and printed in gpu.memory_usable_source
    assert not gpu.memory_usable_above_torch


def test_only_tool_totals_are_flagged():
    flagged = {k for k, g in load_gpus().items() if g.memory_usable_above_torch}
    assert flagged == {"b300", "gb200", "gh200"}
    for key in flagged:
        assert "upper bound" in load_gpus()[key].memory_usable_source


def _warnings(gpu) -> list[str]:
    model = find_in_catalog("llama-3.1-8b-instruct")
    return plan_warnings(resolve_engine(None).result(model, gpu, Deployment(), Request(context=8192)).plan)


def test_a_flagged_gpu_warns_and_a_torch_total_does_not():
    gpus = load_gpus()
    # B300: nvidia-smi 275040 MiB = 268.59 GiB, left as the upper bound it is
    assert any("268.59 GiB" in w and "upper bound" in w for w in _warnings(gpus["b300"]))
    assert not any("upper bound" in w for w in _warnings(gpus["b200"]))
    # the flag is data: a user profile or a log's total (GPU.of_memory) carries none
    assert not any("upper bound" in w for w in _warnings(GPU.of_memory("x", "X", 80 * GiB, "a log")))


def test_unified_memory_parts_warn():
    # GB10 and MI300A share their pool with the CPU and the OS (profiles README, Memory); a discrete card does not
    unified = {k for k, g in load_gpus().items() if g.memory_unified}
    assert unified == {"gb10", "mi300a"}
    assert any("unified memory" in w for w in _warnings(load_gpus()["gb10"]))
    assert not any("unified memory" in w for w in _warnings(load_gpus()["h100-sxm"]))


def test_rtx_4090_total_is_the_lowest_a_vllm_stack_reports():
    # pytorch/pytorch#182941 (= vllm-project/vllm#42049): 3x RTX 4090, driver R580, CUDA 13.0.3, vLLM 0.20.1 prints
    # "(GPU 0; 23.52 GiB total; ...)": floor(23.52 x 1024) = floor(24084.48) = 24084 MiB.
    # vllm-project/vllm#13061 (2x RTX 4090, driver 560.35.03, V0, --gpu_memory_utilization 0.98): the figures
    # add up to its per-GPU budget, 13.9476 (weights) + 0.25 (non-torch) + 0.19 (activations) + 8.69 (KV) = 23.0776 ~
    # 23.08
    # GiB = total x 0.98, so that driver's total was 23.08 / 0.98 = 23.551 GiB (23.546-23.556): 31 MiB more than R580's.
    # nvidia-smi prints 24564 MiB (vllm#7553). OOM messages elsewhere print 23.64 GiB: planning on a higher total than
    # the card reports to vLLM over-promises a 4090 (issue 22), so the profile keeps the lowest.
    gpu = load_gpus()["rtx-4090"]
    assert gpu.memory_usable_bytes == mib_down("23.52") == 24084 * MiB
    assert Decimal("23.0775") <= Decimal("13.9476") + Decimal("0.25") + Decimal("0.19") + Decimal("8.69") \
        < Decimal("23.085")
    assert gpu.memory_usable_bytes < Decimal("23.075") / Decimal("0.98") * 1024 * MiB  # below the older driver's total
    assert gpu.memory_usable_bytes < mib_down("23.64")
    assert "182941" in gpu.memory_usable_source



def test_rtx_5080_torch_total_replaces_the_estimate():
    # Nightstalkeer/taming-3dgs@ea0a5325 docs/rtx5080/BIG_MODE_BUGS_AND_FIXES.md#L28 (RTX 5080, driver 580.82.09,
    # PyTorch 2.9.0+cu128): "GPU 0 has a total capacity of 15.46 GiB": floor(15.46 x 1024) = floor(15831.04)
    # = 15831 MiB.
    # The estimate it replaces, floor(16384 MiB x 0.9825) = 16097 MiB, was 266 MiB above it; nvidia-smi's 16303 MiB
    # (SlimRAG/MinerU-docker README@2f07a352) is 472 MiB above it, as on every measured card (0.46-1.05 GiB).
    g = load_gpus()["rtx-5080"]
    assert not g.usable_is_estimate and g.memory_usable_bytes == 15831 * MiB == 16_600_006_656
    assert 16097 * MiB - g.memory_usable_bytes == 266 * MiB
    assert g.memory_smi_bytes - g.memory_usable_bytes == 472 * MiB and "taming-3dgs" in g.memory_usable_source
