"""An engine's own batch cap and prefill chunk for a published benchmark's setting (kvplan.bench.running),
and the speed fit pricing a corpus point with them (kvplan.speed.fit.Built)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from conftest import read_point, speed_cases
from kvplan.bench.running import Running, case_waves, running
from kvplan.core.errors import KvplanError
from kvplan.engines.scheduler import budget_bound, prefill_first_release, resident_context, worker_chunk
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.corpus import Case
from kvplan.speed.fit import Built
from kvplan.speed.bench_load import Load

LLAMA = find_in_catalog("llama-3.1-8b-instruct")


def case(engine="vllm", gpu="h100-sxm", version="0.19.0", isl=7680, osl=1024, flags=None, dp=1,
         model="llama-3.1-8b-instruct"):
    """A corpus point read as the corpus reader reads one (flags as the source writes them)."""
    point = {"engine": engine, "gpu": gpu, "version": version, "isl": isl, "osl": osl, "concurrency": 1024,
             "kvplan_model": model, "gpus": dp, "dp": dp, "tp": 1, "flags": dict(flags or {}),
             "metrics": {"tpot_ms": 20}}
    return read_point(point)


def test_vllm_runs_what_its_pool_holds_at_the_mean_resident_length():
    # llm-d-planner accuracy sweep, vLLM 0.19.0 on an H100 80GB HBM3, Qwen2.5-7B-Instruct,
    # gpu_memory_utilization 0.95 (training split:
    # tests/fixtures/logs/corpus/llmd-qwen-qwen2-5-7b-instruct-h100-80gb-tp1pp1dp1-8192.log): "GPU KV cache size:
    # 1,096,000 tokens", "Maximum concurrency for 8,192 tokens per request: 133.79x".
    # A run of 7,680-token prompts and 1,024-token outputs holds 7,680 + 1,024 / 2 = 8,192 tokens per running
    # request on average, so 1,096,000 / 8,192 = 133.8 requests run at once; vLLM 0.19 on a >= 70 GiB GPU takes
    # 8,192 tokens a step (max_num_batched_tokens, arg_utils' large-GPU tier) and up to 1,024 sequences.
    r = running(case(flags={"gpu_memory_utilization": 0.95}, model="qwen2.5-7b-instruct"),
                find_in_catalog("qwen2.5-7b-instruct"), find_gpu("h100-sxm"))
    assert r.cap == pytest.approx(1_096_000 / 8_192, rel=0.02)
    assert r.chunk == 8192


def test_sglang_counts_a_first_wave_request_as_its_prompt_and_0_7_of_its_output():
    # SGLang's PrefillAdder counts each running request as min(max_new_tokens - output so far, 4096) x
    # new_token_ratio beyond the tokens it holds, the ratio starting at SGLANG_INIT_NEW_TOKEN_RATIO 0.7 x
    # --schedule-conservativeness 1.0 (v0.5.9 schedule_policy.py L439-446, scheduler.py L811-823, environ.py
    # L225-229; the same defaults in v0.5.1.post3 global_config.py L24-31 and v0.5.16 environ.py L356-360).
    # A first-wave request of 1,000 + 1,000 tokens: 1,000 + 0.7 x 1,000 = 1,700; of 1,000 + 8,000 tokens the
    # output is clipped at 4,096: 1,000 + 0.7 x 4,096 = 3,867.2. Other engines keep 1,000 + 1,000 / 2 = 1,500.
    assert resident_context("sglang", "0.5.9", 1000, 1000) == pytest.approx(1700)
    assert resident_context("sglang", "0.5.16", 1000, 8000) == pytest.approx(3867.2)
    assert resident_context("vllm", "0.11.0", 1000, 1000) == pytest.approx(1500)
    # so SGLang runs as many 1,350 + 500 requests (1,350 + 350 = 1,700) as 1,000 + 1,000 ones, where the mean
    # resident length (1,600 against 1,500) would have run 6% fewer
    h100 = find_gpu("h100-sxm")
    a = running(case("sglang", version="0.5.9", isl=1000, osl=1000), LLAMA, h100).cap
    b = running(case("sglang", version="0.5.9", isl=1350, osl=500), LLAMA, h100).cap
    assert a < 4096 and b == pytest.approx(a, rel=0.002)


def test_stated_flags_bind():
    h100 = find_gpu("h100-sxm")
    assert running(case(flags={"max-num-seqs": 32}), LLAMA, h100).cap == 32
    assert running(case(isl=100, osl=100, flags={"max_num_seqs": 32}), LLAMA, h100).cap == 32
    assert running(case(flags={"max-num-batched-tokens": 2048}), LLAMA, h100).chunk == 2048
    sg = running(case("sglang", version="0.5.3", flags={"max-running-requests": 16}), LLAMA, h100)
    assert sg.cap == 16
    low = running(case("sglang", version="0.5.3", flags={"mem-fraction-static": 0.5}), LLAMA, h100)
    high = running(case("sglang", version="0.5.3", flags={"mem-fraction-static": 0.8}), LLAMA, h100)
    assert low.cap < high.cap  # a smaller static fraction leaves a smaller token pool


def test_the_engine_default_running_limit_and_chunk():
    # vLLM v0.11.0 arg_utils (L1605-1623): an A100 is outside the large-GPU tier whatever its memory, so
    # `vllm serve` takes 2,048 tokens a step and at most 256 sequences. 100 + 50 tokens a request of an 8B
    # model leave room for thousands; the limit binds.
    r = running(case(gpu="a100-sxm-80", version="0.11.0", isl=100, osl=100), LLAMA, find_gpu("a100-sxm-80"))
    assert (r.cap, r.chunk) == (256, 2048)


def test_what_the_engine_rules_do_not_take_keeps_the_plain_estimate():
    h100 = find_gpu("h100-sxm")
    # before the modelled releases: no cap or chunk of the engine's; the plain pool, at the share of the memory
    # left free after loading that the C++ runtime pools (kvplan.bench.running.unsized; tests/test_trtllm_bench.py);
    # its micro-batch scheduler takes the generation requests first in each step's budget (unsized: mixed)
    assert running(case("trtllm", version="0.17"), LLAMA, h100) == Running(None, None, free_share=0.9, mixed=True)
    dpa = case("sglang", version="0.5.3", dp=2, flags={"enable_dp_attention": True})
    # attention-DP ranks of one engine: not sized here (no cap: the plain estimate), but SGLang's two workers run
    # every forward together (sglang 0.5.15 dp_attn.py prepare_mlp_sync_batch_raw): lockstep 2, and each takes
    # chunked_prefill_size // dp_size (sglang 0.5.6.post2 wheel, srt/server_args.py L1571
    # `self.chunked_prefill_size = self.chunked_prefill_size // self.dp_size`): 8,192 on an 80 GB H100 / 2 = 4,096
    # (an SGLang request joins running_batch after its prefill batch, kvplan.engines.joining: joins_late)
    assert running(dpa, LLAMA, h100) == Running(None, 4096, False, 2, joins_late=True)
    kept = Built(dpa, running)
    assert kept.load.chunk == 4096 and kept.load.lockstep == 2 and not kept.load.waves
    big = find_in_catalog("llama-3.1-405b")
    # weights over memory: no cap or chunk (the plain estimate); vLLM's async-scheduling fetch lag is not priced
    # (kvplan.bench.running.case_fetch_lag)
    assert running(case(model="llama-3.1-405b"), big, find_gpu("rtx-4090")) is None
    plain = Built(case(version="0.17", engine="trtllm"), running)
    assert plain.load.chunk == 8192 and plain.load.cap > 0


def dstack_case(point_id: str) -> Case:
    """One point of dstack's DeepSeek-R1 study (tests/fixtures/speed), read as the corpus reads it."""
    cases, _ = speed_cases()
    return next(c for c in cases if c.source == "dstack-benchmarks-deepseek-r1-h200-mi300x" and c.id == point_id)


def test_sglang_before_0_4_4_post1_halves_each_dp_attention_workers_chunk():
    # SGLang 0.4.3.post2 (dstack's H200 server: --tp 8 --trust-remote-code --enable-dp-attention, no chunk flag):
    # its default chunk is 8,192 on a GPU of 25,000 MB or more (wheel srt/server_args.py L209-212), and DP attention
    # then sets dp_size = tp_size and "self.chunked_prefill_size = self.chunked_prefill_size // 2" (L253-257), which
    # each worker's scheduler takes as is (srt/managers/scheduler.py L334): 8,192 // 2 = 4,096 tokens a worker, so a
    # 3,200-token prompt is one chunk, not four of 8,192 // 8 = 1,024. 0.4.4 still halves (L264-267); 0.4.4.post1
    # divides by dp_size (L264-270): 8,192 // 8 = 1,024, as every later release read.
    assert worker_chunk("sglang", 8192, 8, "0.4.3.post2") == 4096
    assert worker_chunk("sglang", 8192, 8, "0.4.4") == 4096
    assert worker_chunk("sglang", 8192, 8, "0.4.4.post1") == 1024
    assert worker_chunk("sglang", 8192, 8, "0.5.6.post2") == 1024
    assert worker_chunk("sglang", 8192, 8) == 1024  # no release given: the current rule
    assert worker_chunk("sglang", 8192, 1, "0.4.3.post2") == 8192  # no DP attention: the whole chunk
    assert worker_chunk("vllm", 8192, 8, "0.4.3") == 8192
    c = dstack_case("h200-sglang-3200-800-c4")
    assert running(c, find_in_catalog("deepseek-r1"), find_gpu("h200-sxm")).chunk == 4096


def test_vllm_v0_on_an_mla_model_runs_a_closed_loop_in_waves():
    # vLLM before 0.8 (V0) forces chunked prefill off for an MLA model (vllm 0.7.3 wheel config.py L3327-3331) and
    # then runs _schedule_default: "Don't schedule decodes if prefills are scheduled" (core/scheduler.py L1240-1246).
    # dstack's 0.7.4.dev181 H200 and 0.7.3.dev138 MI300X DeepSeek-R1 servers are V0; 0.8.0 made V1 the default. A
    # model without MLA gets chunked prefill by default over a 32K max_model_len on CUDA (engine/arg_utils.py
    # L1163-1194), a length the corpus does not state: not read as prefill-first.
    assert prefill_first_release("vllm", "0.7.4.dev181+gf35f8e22", True)
    assert prefill_first_release("vllm", "0.7.3", True)
    assert not prefill_first_release("vllm", "0.7.3", False)
    assert not prefill_first_release("vllm", "0.8.0", True) and not prefill_first_release("vllm", None, True)
    assert not prefill_first_release("sglang", "0.4.3.post2", True)  # SGLang's prefill-first is PREFILL_FIRST's
    r1 = find_in_catalog("deepseek-r1")
    assert case_waves(dstack_case("h200-vllm-3200-800-c4"), r1)
    assert running(dstack_case("mi300x-vllm-3200-800-c4"), r1, find_gpu("mi300x")).waves
    assert not case_waves(case(version="0.7.3"), LLAMA) and not case_waves(case(version="0.19.0"), LLAMA)


def test_the_fit_prices_a_point_at_the_engines_cap_and_chunk():
    c = case(gpu="a100-sxm-80", version="0.11.0", isl=100, osl=100)
    engine, plain = Built(c, running), Built(c)
    assert (engine.load.cap, engine.load.chunk) == (256, 2048)
    assert plain.load.chunk == 8192 and plain.load.cap == 256  # the corpus's vLLM default, 8,192 tokens


def test_a_pipeline_is_priced_as_its_micro_batches():
    # Two stages of Llama-3.1-8B on H100s: each micro-batch passes both stages (the whole model's step),
    # two micro-batches are in flight (the load counts 2 replicas), and each GPU holds half the weights,
    # so a micro-batch's KV room is one GPU's memory less half the weights: more than on one GPU.
    one = case(flags={"gpu_memory_utilization": 0.95})
    two = Case(**{**one.__dict__, "pp": 2, "gpus": 2})
    r1, r2 = running(one, LLAMA, find_gpu("h100-sxm")), running(two, LLAMA, find_gpu("h100-sxm"))
    assert r1.cap < r2.cap < 2 * r1.cap
    b = Built(Case(**{**two.__dict__, "load": Load(7680, 1024, 1024, dp=2)}))
    assert b.load.dp == 2 and b.shape.dense_bytes == Built(one).shape.dense_bytes


def test_a_layout_that_cannot_hold_the_weights_is_skipped_with_its_reason():
    # Llama-3.1-405B in bf16 is 405e9 x 2 B = 810 GB; one H100 holds 80 GB: what ran was not one H100
    # (a GPU count left unsaid), so the point is not priced at all rather than at an invented batch.
    b = Built(case(model="llama-3.1-405b"))
    assert b.shape is None and b.why == "weights over memory at the stated layout"


def test_independent_replicas_are_each_one_engine():
    # MLPerf harnesses run one engine per tp x pp group of a node's GPUs (NVIDIA's trtllm_executor_core.py:
    # len(devices) // model_world_size executors; AMD's one vLLM per GPU), so each of dp replicas is the one-replica
    # deployment: the same cap and chunk as dp 1.
    h100 = find_gpu("h100-sxm")
    one = running(case(flags={"gpu_memory_utilization": 0.95}), LLAMA, h100)
    eight = running(case(dp=8, flags={"gpu_memory_utilization": 0.95}), LLAMA, h100)
    assert eight == one and eight is not None


def _mlperf_llama2_70b(gpu, weights, rate, output, batch, tokens, frac, throughput):
    """An MLPerf v5.1 Llama-2-70B point on 8 GPUs at tp 1 as the corpus stores it (its dataset's mean prompt 222.33)."""
    return {"engine": "trtllm", "gpu": gpu, "kvplan_model": "llama-2-70b-hf", "weight_dtype": weights,
            "kv_dtype": "fp8", "gpus": 8, "tp": 1, "pp": 1, "dp": 8, "request_rate": rate, "arrival": "poisson",
            "input_dist": {"kind": "dataset", "mean": 222.33}, "output_dist": {"kind": "dataset", "mean": output},
            "flags": {"gpu_batch_size": batch, "max_num_tokens": tokens, "kvcache_free_gpu_mem_frac": frac,
                      "batch_scheduler_policy": "max_util"},
            "metrics": {"output_throughput": throughput}}


def test_nvidia_mlperf_harness_settings_bind():
    # MLPerf Inference v5.1, NVIDIA DGX B200 x 8, Llama-2-70B Server (mlcommons/inference_results_v5.1@965182b0:
    # closed/NVIDIA/configs/B200-SXM-180GBx8/Server/llama2-70b.py): tp 1 pp 1, so 8 engines; gpu_batch_size 2048
    # (TensorRT-LLM's max_batch_size of each engine), runtime max_num_tokens 3584, kvcache_free_gpu_mem_frac 0.95,
    # batch_scheduler_policy max_util, fp4 weights, fp8 KV. Each engine's pool: Llama-2-70B's fp8 KV is 80 layers x
    # 8 heads x 128 x 2 (K, V) x 1 B = 160 KiB a token; with ~35 GB of fp4 weights on a 180 GB part, ~0.95 x 140 GB /
    # 160 KiB = ~800k tokens; MAX_UTILIZATION takes blocks as tokens arrive, so over 222 + 274 / 2 = 359 resident
    # tokens a request ~2,200 requests: more than 2,048, so the batch size would bind; but max_num_tokens counts the
    # generation tokens of a step beside its context chunks (kvplan.engines.scheduler.MIXED_BUDGET), so a steady state
    # keeps 3,584 x 274.35 / (222.33 + 274.35) = 3,584 x 274.35 / 496.68 = 1,979.7 running (budget_bound).
    point = _mlperf_llama2_70b("b200", "fp4", 364, 274.35, "2048", "3584", 0.95, 99123.04)
    c = read_point(point)
    assert c.max_seqs == 2048 and c.dp == 8
    r = running(c, find_in_catalog("llama-2-70b-hf"), find_gpu("b200"))
    assert r.chunk == 3584 and r.cap == pytest.approx(1979.7, abs=0.1)


def test_trtllm_max_num_tokens_bounds_the_running_requests():
    # MLPerf Inference v5.1, HPE Cray XD670 (8x H200-SXM), Llama-2-70B Interactive (mlcommons/inference_results_v5.1@
    # 965182b0:closed/HPE/configs/HPE_Cray_XD670_H200_SXM_141GBx8/Interactive/llama2-70b.py): gpu_batch_size 512,
    # max_num_tokens 256. TensorRT-LLM's micro-batch scheduler gives each generation request 1 token of max_num_tokens
    # and chunks the context requests into what is left, in the same forward (NVIDIA/TensorRT-LLM@b8b7b782:cpp/
    # tensorrt_llm/batch_manager/microBatchScheduler.cpp, MicroBatchScheduler::operator()). Admitting r requests a
    # step costs r x 222.33 prompt tokens and each then takes a token a step for 292.77 steps, so r (222.33 + 292.77)
    # <= 256 and the running ones number at most 256 x 292.77 / 515.10 = 145.5, not the 512 the batch size allows
    # (the measured run's Little's law, 69.79 / 8 requests/s x 10.37 s = 90.5 running, sits inside it).
    point = _mlperf_llama2_70b("h200-sxm", "fp8", 70, 292.77, "512", "256", 0.9, 20432.07)
    c = read_point(point)
    r = running(c, find_in_catalog("llama-2-70b-hf"), find_gpu("h200-sxm"))
    assert r.chunk == 256 and r.cap == pytest.approx(145.5, abs=0.1)
    assert budget_bound("trtllm", 256, 222.33, 292.77) == pytest.approx(145.5, abs=0.1)
    assert budget_bound("sglang", 256, 222.33, 292.77) is None  # prefill batches apart from decode batches


def test_amd_mlperf_points_carry_their_harness_running_limit():
    # MLPerf Inference v5.1, AMD 8x MI300X, Mixtral-8x7B Offline (the AMD run that keeps CUDA graphs: its Llama-2 runs
    # set enforce_eager and are skipped): the measurements README runs main.py --config-name offline_mi300x, whose
    # vllm_engine_config sets max_num_seqs 5000 and max_num_batched_tokens 51200
    # (mlcommons/inference_results_v5.1@965182b0:closed/AMD/code/mixtral-8x7b/harness_llm/models/mixtral-8x7b/
    # offline_mi300x.yaml). Here the pool binds first: 32 layers x 8 KV heads x 128 x 2 x 2 B = 131,072 B a token, a
    # request holding 427.39 + 143.68 / 2 = 499 tokens on average is 65.4 MB, and the ~127 GB an MI300X keeps for KV
    # beside ~47 GB of fp8 weights hold about 1,940 of them, under the harness's 5000. (The 127 GB is kvplan's own
    # budget, so the 1,800-2,100 band pins it; the bound below 5000 does not rest on it: all 206,141,652,992 B of
    # the card (rocm-smi) less 46.7e9 B of fp8 weights hold at most 159.4e9 / 65.4e6 = 2,437 such requests.)
    cases, _ = speed_cases()
    c = next(c for c in cases if c.id == "amd-8xmi300x_2xepyc_9575f-mixtral-8x7b-offline")
    assert c.max_seqs == 5000 and int(c.flags["max_num_batched_tokens"]) == 51200
    r = running(c, find_in_catalog("mixtral-8x7b-v0.1"), find_gpu("mi300x"))
    assert r.chunk == 51200 and 1800 < r.cap < 2100


def test_nvidia_harness_runtime_batch_size_overrides_the_build():
    # MLPerf Inference v5.1, Nebius 8x H200-SXM, Llama-3.1-405B Server and Interactive
    # (mlcommons/inference_results_v5.1@965182b0:closed/Nebius/configs/H200-SXM-141GBx8/Server/llama3_1-405b.py):
    # gpu_batch_size 512 builds the engine, but trtllm_runtime_flags sets 'max_batch_size': 64, which the executor core
    # passes to TensorRT-LLM's ExecutorConfig (closed/NVIDIA/code/llmlib/cores/trtllm_executor_core.py,
    # max_batch_size=int(runtime_flags['max_batch_size']); llmlib/config.py: runtime = runtime flag or build, asserted
    # <= build). The pool holds more: fp8 KV of 126 layers x 8 heads x 128 x 2 x 1 B = 258,048 B a token, 32,256 B on
    # each of tp 8's ranks; the fp8 weights, ~405e9 B / 8 = 51 GB a rank, leave ~90 GB of a 141 GB part, and even 50 GB
    # of it at the 0.9 fraction holds 45e9 / (32,256 x (9,428.64 + 656.36 / 2)) = 143 requests; so the runtime limit,
    # 64, binds (with the build's 512 the pool would).
    cases, _ = speed_cases()
    for scenario in ("server", "interactive"):
        c = next(c for c in cases if c.id == f"nebius-h200-sxm-141gbx8_trt-llama3_1-405b-{scenario}")
        assert c.max_seqs == 64 and c.flags["gpu_batch_size"] == "512" and c.tp == 8
        r = running(c, find_in_catalog("llama-3.1-405b"), find_gpu("h200-sxm"))
        assert r.cap == 64


def test_nvidia_harness_kv_fraction_reaches_the_engine():
    # NVIDIA's MLPerf harness names TensorRT-LLM's KV free-memory fraction kvcache_free_gpu_mem_frac (its
    # llmlib/config.py writes it into kv_cache_config free_gpu_memory_fraction): half the fraction leaves a smaller
    # pool, so fewer of
    # Llama-3.1-8B's 7,680 + 1,024 / 2 resident tokens run at once on one H100.
    h100 = find_gpu("h100-sxm")
    low = running(case("trtllm", version=None, flags={"kvcache_free_gpu_mem_frac": 0.5}), LLAMA, h100)
    high = running(case("trtllm", version=None, flags={"kvcache_free_gpu_mem_frac": 0.95}), LLAMA, h100)
    assert low.cap < high.cap


def test_trtllm_reserves_each_requests_whole_output_unless_the_run_says_max_utilization():
    # TensorRT-LLM's default capacity scheduler policy, GUARANTEED_NO_EVICT (LLM API SchedulerConfig, so trtllm-serve;
    # trtllm-bench throughput sets it too), keeps the blocks every running request needs to completion and admits a
    # new one only if its own prompt + max new tokens fit beside them (NVIDIA/TensorRT-LLM@02a10fed:cpp/tensorrt_llm/
    # batch_manager/capacityScheduler.cpp, GuaranteedNoEvictScheduler::impl). A request of 7,680 prompt and 1,024
    # output tokens so holds ceil((7,680 + 1,024) / 32) = 272 blocks of 32 from admission, where MAX_UTILIZATION (and
    # vLLM) takes blocks as tokens arrive: 7,680 + 1,024 / 2 = 8,192 tokens, 256 blocks, on average. One pool holds
    # 256 / 272 as many requests under the default as under max_util (NVIDIA's MLPerf harness's batch_scheduler_policy).
    assert resident_context("trtllm", "1.2.0", 7680, 1024) == 7680 + 1024
    assert resident_context("trtllm", None, 7680, 1024, "guaranteed_no_evict") == 7680 + 1024
    assert resident_context("trtllm", None, 7680, 1024, "max_util") == 7680 + 512
    assert resident_context("trtllm", None, 7680, 1024, "MAX_UTILIZATION") == 7680 + 512
    assert resident_context("vllm", "0.19.0", 7680, 1024) == 7680 + 512
    assert resident_context("vllm", "0.19.0", 7680, 1024, "guaranteed_no_evict") == 7680 + 512  # not vLLM's option
    with pytest.raises(KvplanError):
        resident_context("trtllm", None, 7680, 1024, "first_come_first_served")  # a chunking policy, not a capacity one
    h100 = find_gpu("h100-sxm")
    frac = {"kvcache_free_gpu_mem_frac": 0.95}
    default = running(case("trtllm", version=None, flags=frac), LLAMA, h100)
    util = running(case("trtllm", version=None, flags={**frac, "batch_scheduler_policy": "max_util"}), LLAMA, h100)
    assert default.cap < 2048 and util.cap < 2048  # the pool binds, not max_batch_size
    assert default.cap / util.cap == pytest.approx(256 / 272, rel=0.01)


def test_mlperf_v4_1_b200_preview_runs_fp8_weights_and_kv():
    # MLPerf Inference v4.1, NVIDIA B200-SXM-180GB x 1 (preview), Llama-2-70B: no config in the submission, and the
    # measurements json declares the checkpoint's fp16 with weight_transformations "quantization, affine fusion".
    # NVIDIA's calibration note says every linear layer's inputs and weights and the KV cache entries of Llama-2-70B are
    # quantized to FP8, selected ones to FP4 on an accelerator that has it (mlcommons/inference_results_v4.1@198fc467:
    # closed/NVIDIA/documentation/calibration.md, "LLM Quantization"), so fp8 / fp8 is the floor of what ran. The Server
    # run's own figures say the same (Little's law): 39.6 requests/s x (35.976 - 0.209) s of decoding = 1,416.4 requests
    # running at once. Each holds 222.33 + 274.03 / 2 = 359.3 tokens (MAX_UTILIZATION: blocks as tokens arrive) of
    # 80 layers x 8 KV heads x 128 x 2 = 163,840 elements, 163,840 B at FP8: 1,416 x 359.3 x 163,840 B = 83.4 GB of KV.
    # At fp16, Llama-2-70B's 68.98e9 parameters take 138 GB of the part's 191.5 GB (torch's 178.35 GiB), leaving at most
    # 53.5 GB, under 53.5e9 / (359.3 x 163,840 x 2 B at a 16-bit KV) = 454 requests: fp16 cannot hold what ran.
    cases, _ = speed_cases()
    mine = [c for c in cases if c.id.startswith("nvidia-b200-sxm-180gbx1_trt-llama2-70b-99-")]
    assert len(mine) == 2 and all((c.weight_dtype, c.kv_dtype) == ("fp8", "fp8") for c in mine)
    server = next(c for c in mine if c.id.endswith("-server"))
    running_at_once = server.load.rate * (server.targets["e2el"] - server.targets["ttft"])
    assert running_at_once == pytest.approx(1416.4, abs=0.5)
    b200, llama = find_gpu("b200"), find_in_catalog("llama-2-70b-hf")
    assert Built(server, running).load.cap >= running_at_once  # the fp8 pool holds what the run ran
    as_declared = replace(server, weight_dtype="fp16", kv_dtype=None)
    assert Built(as_declared, running).load.cap < 454 < running_at_once
    assert running(server, llama, b200).cap >= running_at_once
