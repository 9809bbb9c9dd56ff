"""vLLM's Marlin drops a symmetric 4-bit GPTQ linear's qzeros (from 0.6.2) and g_idx (0.5.2 on, until 0.30.0 stops
loading it) after the repack (kvplan.engines.vllm.marlin_freed cites the wheels' lines), so "Model loading took" and
the KV budget do not hold them.

Shapes: Llama-2-7B (../shared/configs/meta-llama__Llama-2-7b-hf.json: hidden 4,096, intermediate 11,008, 32 heads,
32 KV heads, 32 layers), kvplan's catalog entry llama-2-7b-hf, as a GPTQ int4 group-128 checkpoint at tp 1."""

from __future__ import annotations

import dataclasses

from kvplan.engines import resolve_engine
from kvplan.engines.vllm import marlin_freed
from kvplan.hardware.gpus import find_gpu
from kvplan.model.spec import Quantization
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import require_in_catalog

# One layer's shards (N, K): qkv (12,288, 4,096), o (4,096, 4,096), gate_up (22,016, 4,096), down (4,096, 11,008).
# qzeros int32 [K / 128, N / 8] = K / 128 x N / 2 B: 32 x 6,144 = 196,608; 32 x 2,048 = 65,536; 32 x 11,008 = 352,256;
# 86 x 2,048 = 176,128; 790,528 B a layer (each a whole number of 512 B blocks), 1/128 of its 101,187,584 B of int4.
# g_idx int32 [K]: 16,384 x 3 + 44,032 = 93,184 B a layer. 32 layers:
QZEROS = 32 * (32 * 12_288 // 2 + 32 * 4_096 // 2 + 32 * 22_016 // 2 + 86 * 4_096 // 2)
G_IDX = 32 * 4 * (4_096 * 3 + 11_008)
A100, H100 = find_gpu("a100-sxm-80"), find_gpu("h100")


def _gptq(**kw):
    q = Quantization(method="int4", group_size=128, quant_method="gptq", **kw)
    return dataclasses.replace(require_in_catalog("llama-2-7b-hf"), quantization=q)


def test_the_dropped_bytes_by_hand():
    assert (QZEROS, G_IDX) == (25_296_896, 2_981_888)
    freed = lambda v, gpu=A100: marlin_freed.freed_bytes(_gptq(), Deployment(1), v, gpu)  # noqa: E731
    assert freed((0, 5, 0)) == 0  # the repack at the first forward, after "Model loading took"
    assert freed((0, 5, 2)) == freed((0, 6, 1)) == G_IDX  # g_idx emptied, qzeros kept (layer.zp is a new tensor)
    assert freed((0, 6, 2)) == freed((0, 11, 0)) == QZEROS + G_IDX  # MarlinLinearKernel: both
    assert freed((0, 30, 0)) == freed((0, 33, 0)) == QZEROS  # g_idx no longer loaded (gptq_order)


def test_not_where_another_kernel_takes_the_linears():
    freed = lambda m, v=(0, 11, 0), gpu=A100: marlin_freed.freed_bytes(m, Deployment(1), v, gpu)  # noqa: E731
    assert freed(_gptq(), gpu=H100) == 0  # Machete ahead of Marlin on 9.0 from 0.6.2: keeps them
    assert freed(_gptq(), (0, 6, 1), H100) == G_IDX  # before Machete, Marlin on 9.0 too
    assert freed(_gptq(act_order=True)) == 0  # act-order keeps a sorted g_idx: not priced
    assert freed(_gptq(asym=True)) == 0  # zero points used
    assert freed(dataclasses.replace(_gptq(), quantization=Quantization(method="int4", group_size=128,
                                                                          quant_method="awq"))) == 0


def test_the_plan_loads_less_and_budgets_more():
    # the same checkpoint with act-order (not priced, its other terms alike) loads the dropped bytes more, and its KV
    # budget is as much less: the difference is the rule's bytes, exactly
    for version, dropped in (("0.11.0", QZEROS + G_IDX), ("0.25.0", QZEROS + G_IDX)):
        engine = resolve_engine("vllm", version, [])
        plain, ordered = (engine.result(m, A100, Deployment(1), Request(context=4096)).plan
                          for m in (_gptq(), _gptq(act_order=True)))
        assert ordered.weight_bytes_per_gpu - plain.weight_bytes_per_gpu == dropped
        assert plain.kv_memory_bytes_per_gpu - ordered.kv_memory_bytes_per_gpu == dropped
