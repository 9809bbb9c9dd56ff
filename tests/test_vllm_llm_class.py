"""vLLM's offline `LLM` class takes the LLM_CLASS usage context's scheduler defaults, not `vllm serve`'s, and the speed
corpus prices an LLM-class harness's runs with them (kvplan.engines.vllm.defaults.llm_class_defaults,
kvplan.bench.running.llm_class_opts)."""

from __future__ import annotations

from conftest import read_point, speed_cases
from kvplan.bench.running import USAGE_TOOLS, running
from kvplan.engines.vllm.defaults import batch_defaults, engine_context_defaults, llm_class_defaults
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog

LLAMA = find_in_catalog("llama-3.1-8b-instruct")


def test_llm_class_defaults_by_release_on_an_80_gb_h100_and_a_24_gb_card():
    # EngineArgs' tables, read in the PyPI wheels (vllm/engine/arg_utils.py): `device_memory >= 70 * GiB_bytes and
    # "a100" not in device_name` -> {LLM_CLASS: 16384, OPENAI_API_SERVER: 8192} tokens, {1024, 1024} sequences;
    # else {8192, 2048} tokens, {256, 256} sequences (v0.10.0 L1584-1602, v0.19.1 L2053-2071, v0.20.1 L2208-2226;
    # v0.33.0 L2987-3005 behind a >= 160 GiB tier that gives both contexts 16384 / 1024, L2973-2982).
    # An H100 SXM (79.18 GiB, "NVIDIA H100 80GB HBM3") clears 70 GiB; an RTX 4090 (23.52 GiB) does not.
    h100, rtx = find_gpu("h100-sxm"), find_gpu("rtx-4090")
    for v in ((0, 10, 0), (0, 19, 1), (0, 20, 1), (0, 33, 0)):
        assert llm_class_defaults(v, h100) == (16384, 1024)
        assert llm_class_defaults(v, rtx) == (8192, 256)
        # the server's, for the same card: 16384 / 8192 = 2 x the tokens on the H100, 8192 / 2048 = 4 x on the 4090
        assert batch_defaults(v, h100, 8192) == (8192, 1024)
        assert batch_defaults(v, rtx, 8192) == (2048, 256)
    assert llm_class_defaults((0, 9, 0), h100) is None  # releases before 0.10.0 not read


def test_llm_class_keeps_the_a100_exception_and_takes_the_160_gib_tier_from_0_33():
    # "a100" in the device name keeps an 80 GB A100 on the small tier (v0.10.0 L1584, v0.33.0 L2983-2987);
    # a B200 (>= 160 GiB) is on the large one either way (v0.20.1: >= 70 GiB; v0.33.0: its own tier, L2973-2982).
    a100, b200 = find_gpu("a100-sxm-80"), find_gpu("b200")
    assert llm_class_defaults((0, 20, 1), a100) == (8192, 256)
    assert llm_class_defaults((0, 20, 1), b200) == llm_class_defaults((0, 33, 0), b200) == (16384, 1024)


def _case(harness, version="0.10.0", gpu="h100-sxm", flags=None):
    point = {"engine": "vllm", "gpu": gpu, "version": version, "isl": 870, "osl": 128, "request_rate": "inf",
             "kvplan_model": "llama-3.1-8b-instruct", "gpus": 1, "tp": 1, "harness_kind": "inprocess",
             "harness": harness, "flags": dict(flags or {}), "metrics": {"request_throughput": 45}}
    return read_point(point)


def test_an_llm_class_harness_is_priced_at_the_llm_class_chunk():
    # Red Hat's MLPerf v5.1 Offline SUT builds vllm.LLM(...) on vLLM 0.10.0 (mlperf-inference-v5.1.yaml): on an H100
    # its step takes 16,384 tokens (arg_utils v0.10.0 L1587), not the server's 8,192; on an L40S (48 GB) 8,192
    # (L1597), not 2,048. An in-process run whose tool is not named keeps the server's.
    h100, l40s = find_gpu("h100-sxm"), find_gpu("l40s")
    assert running(_case("vllm.LLM"), LLAMA, h100).chunk == 16384
    assert running(_case("vllm bench throughput", gpu="l40s"), LLAMA, l40s).chunk == 8192
    assert running(_case(None), LLAMA, h100).chunk == 8192
    # a stated budget wins; a V0 release reads no usage context (0.7.3: V0's max(max_model_len, 2048))
    assert running(_case("vllm.LLM", flags={"max_num_batched_tokens": 4096}), LLAMA, h100).chunk == 4096
    v0 = running(_case("vllm.LLM", version="0.7.3"), LLAMA, h100)
    assert v0 is None or v0.chunk == running(_case(None, version="0.7.3"), LLAMA, h100).chunk


def test_an_async_engine_harness_takes_the_engine_contexts_scheduler_defaults():
    # AsyncLLMEngine.from_engine_args defaults to UsageContext.ENGINE_CONTEXT (v1/engine/async_llm.py v0.10.0 L180,
    # v0.19.1 L244, v0.20.1 L236), which neither usage-context table holds: `.get(usage_context,
    # SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS)` = 2048 and DEFAULT_MAX_NUM_SEQS = 128 (config/scheduler.py
    # v0.20.1 L42-44), on any GPU; v0.10.0's SchedulerConfig.__post_init__ sets the same 128 / 2048 with chunked
    # prefill (config.py L2388-2402)
    h100, rtx = find_gpu("h100-sxm"), find_gpu("rtx-4090")
    for v in ((0, 10, 0), (0, 19, 1), (0, 20, 1), (0, 33, 0)):
        assert engine_context_defaults(v, h100) == engine_context_defaults(v, rtx) == (2048, 128)
    assert engine_context_defaults((0, 9, 0)) is None
    # on an H100 the server's step takes 8,192 tokens, the async engine's 2,048, and it runs at most 128 sequences
    r = running(_case("vllm.AsyncLLMEngine", version="0.20.1"), LLAMA, h100)
    assert r.chunk == 2048 and r.cap <= 128
    assert running(_case(None, version="0.20.1"), LLAMA, h100).chunk == 8192


def test_every_v1_in_process_point_names_the_client_its_limits_come_from():
    # A vLLM point run in process on V1 (0.10.0 on, or a release not stated: the current one) that states neither
    # limit runs at its client's usage context (LLM, AsyncLLMEngine), not the server's: its tool must be named.
    # benchmark_latency.py builds `LLM(**dataclasses.asdict(engine_args))` (vllm-project/vllm@e43d46b6:
    # benchmarks/benchmark_latency.py, the Oracle and ROCm blogs' tool); AccelMark's runners AsyncLLMEngine
    # (FreedomIntelligence/AccelMark@3c124bdc:runners/nvidia_vllm020_0f6c56e4/runner.py load_model)
    from pathlib import Path

    from kvplan.core.releases import release_of

    cases, _ = speed_cases()
    named = {}
    for c in cases:
        rel, stated = release_of(c.version), set(c.flags) | ({"max_num_seqs"} if c.max_seqs else set())
        v1 = rel is None or rel >= (0, 10, 0)
        if c.era == "vllm-inprocess" and v1 and not {"max_num_seqs", "max_num_batched_tokens"} <= stated:
            assert c.harness in USAGE_TOOLS["vllm"], (c.source, c.id)
            named[c.source] = c.harness
    assert named["oracle-blog-2024-10-10-llama31-405b-mi300x"] == "benchmark_latency.py"
    assert named["accelmark-results-verified"] == "vllm.AsyncLLMEngine"
