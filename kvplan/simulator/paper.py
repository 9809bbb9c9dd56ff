"""Reproducing the PagedAttention paper's memory-utilisation comparison on its own setting.

Kwon et al., "Efficient Memory Management for Large Language Model Serving with PagedAttention",
SOSP 2023. Their setting (§6.1, Table 1): OPT-13B on one A100-40GB, 12 GB of KV cache
(15.7K token slots of 800 KB: 2 x 40 layers x 5,120 x 2 bytes), sequences up to 2,048 tokens,
ShareGPT lengths (means 161.31 in / 337.99 out), Poisson arrivals. Their Fig. 2 splits the KV
memory of three contiguous-reservation baselines (Orca with Max, Pow2 and Oracle reservations)
and of vLLM into token states, reservation, internal fragmentation and "external fragmentation &
others"; their Fig. 13 gives the mean batch size at 2 requests/s.

kvplan does not model a buddy allocator, so its contiguous pool has no external fragmentation:
that share appears under `unused`. Compare token states, reservation and internal
fragmentation to each other (their ratios), and the batch sizes.
"""

from __future__ import annotations

from kvplan.simulator.engine import Engine, EngineConfig
from kvplan.simulator.model import Group, SimModel, StageCost
from kvplan.simulator.workload import WORKLOADS, generate

OPT13B_TOKEN_BYTES = 2 * 40 * 5120 * 2  # K and V, 40 layers, hidden 5,120, fp16: 819,200 bytes ("800 KB")

# Fig. 2 (percent of the KV memory) and Fig. 13 (mean batched requests, ShareGPT at 2 req/s), as printed.
PAPER_FIG2 = {
    "max": {"token_states": 20.4, "reservation": 13.3, "internal_fragmentation": 57.3, "external_and_other": 8.9},
    "pow2": {"token_states": 26.8, "reservation": 17.9, "internal_fragmentation": 13.6, "external_and_other": 41.6},
    "oracle": {"token_states": 38.2, "reservation": 25.2, "internal_fragmentation": None, "external_and_other": 36.6},
    "paged": {"token_states": 96.3},
}
PAPER_FIG13_SHAREGPT_2RPS = {"max": 7.00, "pow2": 9.81, "oracle": 13.62, "paged": 30.42}


def opt13b_a100(block_size: int = 16) -> SimModel:
    """OPT-13B on one A100-40GB as the paper describes it (Table 1), with kvplan's roofline step time."""
    return SimModel(
        "opt-13b (PagedAttention Table 1)", kv_budget_bytes=12 * 2**30, block_size=block_size,
        groups=(Group(OPT13B_TOKEN_BYTES),), max_model_len=2048,
        stages=(StageCost(dense_read_bytes=26 * 10**9, kv_bytes_per_token=OPT13B_TOKEN_BYTES,
                          flops_per_token=2 * 13e9, attn_flops_per_pair=4 * 40 * 5120),),
        bandwidth_bytes_per_s=1_555 * 10**9, flops_per_s=312e12,  # A100-40GB SXM: 1,555 GB/s, 312 TFLOPS bf16/fp16
    )


def reproduce(qps: float = 2.0, duration: float = 1800.0, seed: int = 0) -> dict:
    """kvplan's figures for each allocator on the paper's setting: {name: summary}."""
    model = opt13b_a100()
    requests = generate(WORKLOADS["sharegpt"], qps, duration, seed)
    out = {}
    for name, cfg in (("paged", EngineConfig(prefix_caching=False)),
                      ("max", EngineConfig(mode="contiguous", reserve="max")),
                      ("pow2", EngineConfig(mode="contiguous", reserve="pow2")),
                      ("oracle", EngineConfig(mode="contiguous", reserve="oracle"))):
        out[name] = Engine(model, cfg).run(requests).summary(slo_ttft=2.0, slo_tpot=0.1)
    return out
