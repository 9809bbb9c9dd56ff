"""Expert parallelism's collectives: a dispatch and a combine per MoE layer only where the experts span
data-parallel replicas (ep > tp); where ep <= tp the tensor-parallel all-reduce already sums the experts' shares.

Engines: vllm-project/vllm@0014ec6c58e1b74e660a1e6d059b5689716183ff:vllm/model_executor/layers/fused_moe/layer.py
`forward_impl` (`do_naive_dispatch_combine` only where dp_size > 1, then one all-reduce where tp or ep > 1);
sgl-project/sglang@00114aef19bbb7431b9cfc5a77dce64b9c53ed95:python/sglang/srt/models/deepseek_v2.py
`DeepseekV2MoE.forward_normal` (the experts, then `tensor_model_parallel_all_reduce` where tp > 1)."""

import pytest

from kvplan.speed.model import StepModel
from kvplan.speed.allreduce import ring_latency
from kvplan.speed.terms import TERMS, Shape, features, moves_tokens

# DeepSeek-R1's layout (config.json: 61 layers, 58 MoE, hidden 7,168, top-8) on 8 GPUs of an NVSwitch board
BASE = dict(dense_bytes=2_000_000_000, expert_bytes=46_000_000_000, num_experts=256, top_k=8, expert_params=3.2e8,
            layers=61, moe_layers=58, hidden=7168, bandwidth=6.4e12, gemm_rate=7e15, bf16_rate=1.7e15,
            link_bandwidth=900e9, link_latency_s=ring_latency("nvswitch", 8))


def test_ring_latency_of_eight_ranks():
    # NCCL Ring / LL: baseLat 6.6 us + 2 x (8 - 1) x hwLat 0.6 us (NVLink) = 6.6 + 8.4 = 15.0 us
    assert ring_latency("nvswitch", 8) == pytest.approx(15.0e-6)


def test_tp8_ep8_pays_only_the_tensor_parallel_all_reduces():
    s = Shape(**BASE, tp=8, ep=8)
    assert not moves_tokens(s)
    f = dict(zip(TERMS, features(s, 1, 1, 1000, 1001)))
    # 2 all-reduces x 61 layers = 122 calls x 15.0 us = 1.830 ms (with a dispatch and a combine per MoE layer it
    # was (122 + 2 x 58) x 15.0 us = 3.570 ms)
    assert f["latency"] == pytest.approx(122 * 15.0e-6)
    # bytes: 2 x 61 x 2 x 7/8 x 1 token x 7,168 x 2 B / 900 GB/s = 3,069,952 B / 900 GB/s = 3.411 us
    assert f["comm"] == pytest.approx(2 * 61 * 2 * 7 / 8 * 7168 * 2 / 900e9)


def test_dp8_ep8_dispatches_and_combines():
    s = Shape(**BASE, tp=1, ep=8, ep_replicas=8)  # attention data parallel x 8, experts over the same 8 GPUs
    assert moves_tokens(s)
    f = dict(zip(TERMS, features(s, 1, 1, 1000, 1001)))
    # no tensor-parallel all-reduce; 2 x 58 MoE layers = 116 calls x 15.0 us = 1.740 ms
    assert f["latency"] == pytest.approx(116 * 15.0e-6)
    # 2 x 58 x 7/8 x 1 token x top-8 x 7,168 x 2 B / 900 GB/s = 11,642,880 B / 900 GB/s = 12.937 us
    assert f["comm"] == pytest.approx(2 * 58 * 7 / 8 * 8 * 7168 * 2 / 900e9)


@pytest.mark.parametrize("tp,ep,replicas", [(8, 8, 1), (1, 8, 8), (4, 4, 1)])
def test_the_simulators_step_agrees(tp, ep, replicas):
    s = Shape(**BASE, tp=tp, ep=ep, ep_replicas=replicas)
    coef = tuple(1.0 + i / 10 for i in range(len(TERMS)))
    want = sum(c * v for c, v in zip(coef, features(s, 4, 4, 4000, 4004)))
    assert StepModel(s, coef).step(4, 4, 4000, 4004) == pytest.approx(want, rel=1e-9)
