"""Block-FP8 MoE checkpoints at a tensor parallelism whose expert shard is not whole blocks (kvplan.engines.fp8_blocks).

Qwen3-235B-A22B-FP8 (its config.json: quant_method fp8, weight_block_size [128, 128]; the base model's shapes: 94 MoE
layers, 128 experts of moe_intermediate_size 1536, hidden 4096). At tp 8 each rank holds 1536 / 8 = 192 rows of every
expert's gate and up, and 192 % 128 = 64 != 0:
* vLLM 0.12.0-0.28.0 raise "The output_size of gate's and up's weight = 192 is not divisible by weight quantization
  block_n = 128." (0.28.0 wheel model_executor/layers/quantization/fp8.py L530-548);
* vLLM from 0.29.0 refine the scales to gcd(128, 128, 192, 4096) = 64 >= 32 and run (0.33.0
  fused_moe/oracle/fp8.py L292-320);
* SGLang 0.5.23 raises the same message (layers/quantization/fp8.py L1578-1600).
At tp 4 the shard is 384 = 3 x 128; under expert parallelism every rank holds whole 1536-wide experts (12 x 128).
"""

from __future__ import annotations

import dataclasses

import pytest

from kvplan.compare.candidates import search_layouts
from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.model.spec import Quantization
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

H200 = find_gpu("h200-sxm")
BASE = find_in_catalog("qwen3-235b-a22b")
FP8 = dataclasses.replace(BASE, name="qwen3-235b-a22b-fp8",
                          quantization=Quantization("fp8", 128, quant_method="fp8"))
REQ = Request(context=8192)


def _plan(engine, version, dep):
    return resolve_engine(engine, version, []).result(FP8, H200, dep, REQ)


@pytest.mark.parametrize("engine, version", [("vllm", "0.28.0"), ("sglang", "0.5.23")])
def test_tp8_refused_with_the_engines_reason(engine, version):
    with pytest.raises(KvplanError, match=r"1536 / 8 = 192, not a multiple of the checkpoint's 128 x 128") as e:
        _plan(engine, version, Deployment(8))
    assert "\n" not in e.value.message and e.value.param == "tp"


@pytest.mark.parametrize("engine, version", [("vllm", "0.28.0"), ("sglang", "0.5.23")])
def test_whole_blocks_plan(engine, version):
    assert _plan(engine, version, Deployment(4)).plan is not None  # 1536 / 4 = 384 = 3 x 128
    assert _plan(engine, version, Deployment(8, ep=8)).plan is not None  # experts whole: 1536 = 12 x 128


def test_vllm_from_0_29_refines_the_scales():
    assert _plan("vllm", "0.29.0", Deployment(8)).plan is not None  # gcd(128, 192, 4096) = 64 >= 32
    assert _plan("vllm", "0.33.0", Deployment(8)).plan is not None


def test_the_bf16_model_and_trtllm_are_not_refused():
    assert resolve_engine("vllm", "0.28.0", []).result(BASE, H200, Deployment(8), REQ).plan is not None
    assert _plan("trtllm", None, Deployment(8)).plan is not None  # TensorRT-LLM has no such check: no refusal


def test_layout_search_skips_the_tp_it_cannot_run():
    engine = resolve_engine("vllm", "0.28.0", [])
    layouts = {(p.deployment.tp, p.deployment.pp) for p in search_layouts(FP8, H200, 8, REQ, engine)}
    assert (8, 1) not in layouts and (4, 2) in layouts
