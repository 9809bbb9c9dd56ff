"""trtllm-bench's own max_batch_size and max_num_tokens (kvplan.engines.trtllm.bench), a corpus point run by
trtllm-bench priced at them (kvplan.bench.running), the KV dtype the perf overviews' Llama 3.3 70B points are read
at (the most a bf16 cache allows against what they measured), and the dev-guide page's GPT-OSS points read at OpenAI's
MXFP4 checkpoint. Hand arithmetic from TensorRT-LLM's tuning.py
(NVIDIA/TensorRT-LLM@04cba882084a25665e7f80f5bda71b35b9790b6f:tensorrt_llm/bench/build/tuning.py) and the GPU
profiles' datasheet figures."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import read_point
from kvplan.bench.running import harness_limits, running
from kvplan.engines.trtllm.bench import BenchSettings, bench_settings, finetune
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.corpus import case_of
from kvplan.speed.fit import Built

LLAMA = find_in_catalog("llama-3.1-8b-instruct")  # 32 layers, 8 KV heads of 128, 8,030,261,248 parameters
CORPUS = Path(__file__).parent / "fixtures" / "speed"
H100 = find_gpu("h100-sxm")  # NVML total (memory_smi_bytes) 85,520,809,984 B = 79.6475 GiB


def test_finetune_rounds_as_tuning_py():
    # raw batch 266.04 (>= 256, < 1024): up to 128s -> 384; raw tokens 266.04 x (1 + 1000/1000) = 532 < 4096:
    # up to 256s, at least 2048 -> 2048
    assert finetune(266.04, 1000, 1000) == BenchSettings(384, 2048)
    # raw batch 100 (< 256): up to 32s, at least 64 -> 128; tokens 100 x 11 = 1100 -> 2048
    assert finetune(100, 5000, 500) == BenchSettings(128, 2048)
    # requests over 4,096 are capped (decoder buffers), then / pp 2 = 2048 (>= 1024: up to 256s) -> 2048;
    # tokens 2048 x 2 = 4096 (< 8192: up to 512s) -> 4096
    assert finetune(9000, 128, 128, pp=2) == BenchSettings(2048, 4096)
    # tokens capped at 32,768 (>= 8192: up to 1024s)
    assert finetune(4096, 2048, 128) == BenchSettings(4096, 32768)


def test_llama_8b_fp8_on_h100():
    # weights 8,030,261,248 x 1 B (FP8) = 7.4787 GiB; room 79.6475 - 7.4787 = 72.1688 GiB, x 0.90 = 64.9519 GiB.
    # KV auto (2 B): 2 x 32 layers x max(tp 1, 8 heads) x 128 x 2 B = 131,072 B a token = 1.2207e-4 GiB.
    # 1000/1000: 64.9519 / (1.2207e-4 x 2000) = 266.04 requests -> (384, 2048); with chunked prefill off the
    # tokens stay >= ISL + max_batch_size = 1,384.
    assert bench_settings(LLAMA, H100.memory_smi_bytes, tp=1, pp=1, isl=1000, osl=1000, weight_dtype="fp8",
                          kv_dtype=None) == BenchSettings(384, 2048)
    # 128/128: 64.9519 / (1.2207e-4 x 256) = 2078.5 requests (>= 1024: up to 256s) -> 2304;
    # tokens 2078.5 x 2 = 4157 (< 8192: up to 512s) -> 4608
    assert bench_settings(LLAMA, H100.memory_smi_bytes, tp=1, pp=1, isl=128, osl=128, weight_dtype="fp8",
                          kv_dtype=None) == BenchSettings(2304, 4608)
    # 20000/2000: 64.9519 / (1.2207e-4 x 22000) = 24.2 -> 64; tokens 24.2 x 11 = 266 -> 2048, but chunked
    # prefill off: at least 20,000 + 64 = 20,064
    assert bench_settings(LLAMA, H100.memory_smi_bytes, tp=1, pp=1, isl=20000, osl=2000, weight_dtype="fp8",
                          kv_dtype=None) == BenchSettings(64, 20064)
    # an FP8 KV cache halves a request's bytes: 532.1 requests (< 1024: up to 128s) -> 640
    assert bench_settings(LLAMA, H100.memory_smi_bytes, tp=1, pp=1, isl=1000, osl=1000, weight_dtype="fp8",
                          kv_dtype="fp8").max_batch_size == 640


def test_not_one_request_refused():
    assert bench_settings(LLAMA, 8 << 30, tp=1, pp=1, isl=1000, osl=1000, weight_dtype=None, kv_dtype=None) is None


def point(flags=None, harness="trtllm-bench", isl=1000, osl=1000):
    p = {"engine": "trtllm", "version": "1.0", "gpu": "h100-sxm", "isl": isl, "osl": osl, "request_rate": "inf",
         "num_prompts": 3000, "kvplan_model": "llama-3.1-8b-instruct", "gpus": 1, "tp": 1, "weight_dtype": "fp8",
         "harness": harness, "flags": dict(flags or {}), "metrics": {"output_throughput": 15220}}
    return read_point(p)


def test_a_trtllm_bench_point_runs_at_the_tools_settings():
    # trtllm-bench throughput runs TensorRT-LLM's GUARANTEED_NO_EVICT (--scheduler_policy default
    # "guaranteed_no_evict", NVIDIA/TensorRT-LLM@000a01de:tensorrt_llm/bench/benchmark/throughput.py), so a request
    # reserves its prompt and whole output from admission (kvplan.engines.scheduler.resident_context). 128/128: 256
    # tokens, 8 blocks of 32, a request; the pool as the engine sizes it (after the activations of the tool's 4,608-
    # token step) holds fewer than the tool's max_batch_size 2,304 (its own estimate above, from NVML's total less the
    # weights, rounded up), so the pool binds; under max_utilization a request holds 128 + 128 / 2 = 192 tokens, 6
    # blocks, the pool 8 / 6 as many, and the tool's 2,304 binds. Its max_num_tokens 4,608 is the step's chunk.
    default = running(point(isl=128, osl=128), LLAMA, H100)
    assert default.chunk == 4608 and 0.8 * 2304 < default.cap < 2304
    assert running(point(isl=128, osl=128, flags={"scheduler_policy": "max_utilization"}), LLAMA, H100)[:2] \
        == (2304, 4608)
    # 1000/1000: the pool at 1,000 + 1,000 tokens a request (63 blocks; about 257 requests) binds under the tool's
    # 384; the chunk is the tool's 2,048 (the engine's memory plan made at it: a little more room than at 8,192)
    r = running(point(), LLAMA, H100)
    assert r.chunk == 2048 and 240 < r.cap < 384
    assert r.cap > running(point(harness=None), LLAMA, H100).cap
    # another tool, or a run that states its own max_num_tokens: the engine's defaults (trtllm-serve's 8,192)
    assert running(point(harness=None), LLAMA, H100).chunk == 8192
    assert running(point(flags={"max_num_tokens": 4096}), LLAMA, H100).chunk == 4096
    assert running(point(flags={"max_batch_size": 128}), LLAMA, H100).cap == 128


def test_the_stated_fraction_is_the_tools():
    # --kv_cache_free_gpu_mem_fraction 0.5: 64.9519 / 0.9 x 0.5 = 36.084 GiB / 0.24414 = 147.8 requests -> 160
    r = running(point(flags={"kv_cache_free_gpu_mem_fraction": 0.5}), LLAMA, H100)
    assert r.cap <= 160
    assert bench_settings(LLAMA, H100.memory_smi_bytes, tp=1, pp=1, isl=1000, osl=1000, weight_dtype="fp8",
                          kv_dtype=None, fraction=0.5).max_batch_size == 160


def test_a_tensorrt_engine_runs_at_the_limits_its_build_tuned_at_0_95():
    # Before 1.0 (0.20.0, the oldest release kvplan's TensorRT-LLM rules size; older points take the plain estimate)
    # trtllm-bench runs an engine that `trtllm-bench build --dataset` tuned: get_benchmark_engine_settings
    # is called with no fraction, so calc_engine_setting's default 0.95 (kvplan.engines.trtllm.bench.BUILD_FRACTION),
    # whatever `throughput --kv_cache_free_gpu_mem_fraction` later says. Llama 3.1 8B FP8, FP8 KV, H100, 128/2048:
    # a token 2 x 32 x 8 x 128 x 1 B = 65,536 B = 6.1035e-5 GiB, a request x 2176 = 0.13281 GiB; room 72.1688 GiB.
    # At 0.95: 68.5604 / 0.13281 = 516.2 requests (< 1024: up to 128s) -> 640; at 0.90: 64.9519 / 0.13281 = 489.1
    # -> 512 (the 1.0 PyTorch flow, which tunes at the run's fraction, default 0.90). Tokens 516.2 x (1 + 128/2048) =
    # 548 -> 2048 either way.
    def case(version, flags=None):
        p = {"engine": "trtllm", "version": version, "gpu": "h100-sxm", "isl": 128, "osl": 2048, "num_prompts": 3000,
             "request_rate": "inf", "kvplan_model": "llama-3.1-8b-instruct", "gpus": 1, "tp": 1, "weight_dtype": "fp8",
             "kv_dtype": "fp8", "harness": "trtllm-bench", "flags": dict(flags or {}),
             "metrics": {"output_throughput": 19000}}
        return read_point(p)

    assert harness_limits(case("0.20.0"), LLAMA, H100) == (640, 2048)
    assert harness_limits(case("0.20.0", {"kv_cache_free_gpu_mem_fraction": 0.9}), LLAMA, H100) == (640, 2048)
    assert harness_limits(case("1.0"), LLAMA, H100) == (512, 2048)
    assert harness_limits(case("1.0", {"kv_cache_free_gpu_mem_fraction": 0.95}), LLAMA, H100) == (640, 2048)


QWEN_MOE = find_in_catalog("qwen3-30b-a3b")  # 48 layers, 4 KV heads of 128, 128 experts


def dep_point(flags, tp=None):
    p = {"engine": "trtllm", "version": "1.0", "gpu": "h100-sxm", "isl": 1000, "osl": 1000, "request_rate": "inf",
         "num_prompts": 3000, "kvplan_model": "qwen3-30b-a3b", "gpus": 4, "weight_dtype": "fp8",
         "harness": "trtllm-bench", "flags": dict(flags), "metrics": {"output_throughput": 20000}}
    if tp:
        p["tp"] = tp
    return read_point(p)


def test_trtllm_bench_attention_dp_ranks_each_run_the_tools_limit():
    # A DEP4 point (enable_attention_dp on 4 GPUs, no tp: 4 attention ranks, the experts over 4) is sized rank by
    # rank: trtllm-bench computes its max_batch_size and max_num_tokens with --tp 4 (its tuning knows no attention
    # DP) and TensorRT-LLM runs them on each attention rank ("max-bs applies per attention-rank", NVIDIA's MLPerf
    # harness, as kvplan.speed.corpus.PER_RANK_LIMIT cites it), so a rank's chunk is the tool's max_num_tokens at
    # tp 4 and its cap at most the tool's max_batch_size and what a rank's own pool holds (kvplan.engines.trtllm.layout:
    # whole KV heads, the attention and LM head whole, a quarter of the experts).
    dep = dep_point({"enable_attention_dp": True})
    assert (dep.tp, dep.dp, dep.ep) == (1, 4, 4)
    tool = bench_settings(QWEN_MOE, H100.memory_smi_bytes, tp=4, pp=1, isl=1000, osl=1000, weight_dtype="fp8",
                          kv_dtype=None)
    r = running(dep, QWEN_MOE, H100)
    assert r is not None and r.chunk == tool.max_num_tokens and r.cap <= tool.max_batch_size
    group = running(dep_point({}, tp=4), QWEN_MOE, H100)  # the same GPUs as one tp 4 group
    assert r.cap < group.cap / 4 + 1  # a rank's own pool: 4 x the bytes a token of a tp 4 rank, more weights whole


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the speed corpus (tests/fixtures/speed) is absent")
@pytest.mark.parametrize("page, point, gpus, kind, ceiling_bf16", [
    # nvidia/Llama-3.3-70B-Instruct-FP8, one H200 SXM, 128/4096, measured 2,872 tok/s. NVML's total 150,754,820,096 B
    # (143,771 MiB) less every parameter at one byte (70,553,706,496) = 80,201,113,600 B of KV room at most; a request
    # holds ISL + OSL = 4,224 tokens x 327,680 B (80 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes, bf16) under
    # GUARANTEED_NO_EVICT: 57.94 requests; a step reads 70,553,706,496 + 57.94 x 2,176 x 327,680 = 111.87e9 B at the
    # datasheet's 4.8e12 B/s, 23.31 ms, so 57.94 / 0.02331 = 2,486 tok/s with a bf16 cache < 2,872.
    ("trtllm-perf-overview-v1.0", "llama33-70b-h200-sxm-tp1-fp8-128-4096", 1, "h200-sxm", 2_486),
    # nvidia/Llama-3.3-70B-Instruct-FP4, one GB200 (no NVML total in its profile: its usable 198,674,743,296 B),
    # 1024/8192, measured 3,805 tok/s/GPU. Room 198,674,743,296 - 70,553,706,496 x 0.5 = 163,397,890,048 B; a request
    # 9,216 x 327,680 B: 54.11 requests; a step 35,276,853,248 + 54.11 x 5,120 x 327,680 = 126.06e9 B at 8.0e12 B/s,
    # 15.76 ms: 3,434 tok/s < 3,805.
    ("trtllm-perf-overview-devguide-03e27c7", "llama33-70b-gb200-tp1-fp4-1024-8192", 1, "gb200", 3_434),
])
def test_a_trtllm_bench_70b_point_over_what_a_bf16_cache_allows_at_any_batch(page, point, gpus, kind, ceiling_bf16):
    """TensorRT-LLM's 1.0 and dev-guide perf overviews state no KV dtype for Llama 3.3 70B, and its figures stay under
    the ceiling the 8B test above uses (bandwidth / (mean context x KV bytes a token), at any batch). A finite batch
    bounds them: trtllm-bench runs GUARANTEED_NO_EVICT, so a running request holds its ISL + OSL tokens of KV, at most
    (the GPUs' whole memory less the weights) / that requests run at once, and a decode step of B of them reads at least
    the weights and B x (ISL + OSL / 2) cached tokens at the datasheet bandwidth; prefill is left out (a higher
    ceiling). A bf16 cache cannot reach the measured figures, so the Llama 3.3 70B points are read at FP8 (both
    checkpoints). The same bound on Llama 3.1 405B, Qwen3-235B and Maverick is not reached (not read as FP8)."""
    doc = yaml.safe_load((CORPUS / f"{page}.yaml").read_text())
    (p,) = [q for q in doc["points"] if q["id"] == point]
    assert p["kv_dtype"] == "fp8" and p["kvplan_model"] == "llama-3.3-70b-instruct"
    measured = p["metrics"].get("output_throughput") or p["metrics"]["per_gpu_output_throughput"] * gpus
    spec, gpu = find_in_catalog(p["kvplan_model"]), find_gpu(kind)
    per_token = 2 * 80 * 8 * 128 * 2  # bf16 K and V, every layer (Llama 3.3 70B's config)
    assert (len(spec.layers), spec.params.total) == (80, 70_553_706_496)
    weights = spec.params.total * {"fp8": 1.0, "fp4": 0.5}[p["weight_dtype"]]
    memory = (gpu.memory_smi_bytes or gpu.memory_usable_bytes) * gpus
    batch = (memory - weights) / (per_token * (p["isl"] + p["osl"]))
    step = (weights + batch * (p["isl"] + p["osl"] / 2) * per_token) / (gpu.bandwidth_bytes_per_s * gpus)
    ceiling = batch / step
    assert ceiling == pytest.approx(ceiling_bf16, abs=1)
    assert ceiling < measured


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the speed corpus (tests/fixtures/speed) is absent")
def test_the_dev_guide_gpt_oss_points_read_as_openais_mxfp4_checkpoint():
    """The dev-guide page's GPT-OSS columns say FP4 (Blackwell) and FP8 (Hopper), but its FP4 / FP8 model lists name no
    GPT-OSS checkpoint and its GPT-OSS options quantize nothing: the runs loaded OpenAI's MXFP4 checkpoint
    (TensorRT-LLM's GPT-OSS deployment guide: MXFP4 weights, MXFP8 activations on B200/GB200, BF16 on H200; the page's
    `inferred:`)."""
    doc = yaml.safe_load((CORPUS / "trtllm-perf-overview-devguide-03e27c7.yaml").read_text())
    oss = [p for p in doc["points"] if p["kvplan_model"].startswith("gpt-oss")]
    assert len(oss) == 44 and {p["weight_dtype"] for p in oss} == {"mxfp4"}
    assert "MXFP4 model: GPT-OSS-120B" in doc["inferred"]["weight_dtype"]
    (h200,) = [p for p in oss if p["id"] == "gpt-oss-120b-h200-sxm-tp1-fp8-1024-1024"]
    spec = find_in_catalog("gpt-oss-120b")
    case, _ = case_of({**doc["defaults"], **h200}, doc["source"]["id"], None)
    built = Built(case, running)
    # gpt-oss-120b's experts: 36 layers x 128 experts x (gate_up 2 x 2,880 x 2,880 + down 2,880 x 2,880 = 24,883,200
    # weights at 17 / 32 byte = 13,219,200 B, plus 5,760 + 2,880 bf16 biases = 17,280 B) = 60,993,699,840 B; read at
    # one byte a weight, as the FP8 label had it, 36 x 128 x (24,883,200 + 17,280) = 114,741,411,840 B
    assert built.shape.expert_bytes == 36 * 128 * (24_883_200 * 17 // 32 + 17_280) == 60_993_699_840
    assert (len(spec.layers), spec.params.num_experts) == (36, 128)
    # H200: W4A16_MXFP4 (kvplan.speed.mxfp4), the GEMMs at its measured bf16 rate, 794.5 T
    assert built.shape.gemm_rate == 794.5e12


def perf_overview_015(point_id):
    doc = yaml.safe_load((CORPUS / "trtllm-perf-overview-v0.15.yaml").read_text())
    (p,) = [q for q in doc["points"] if q["id"] == point_id]
    return case_of({**doc["defaults"], **p}, doc["source"]["id"], None)[0]


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the speed corpus (tests/fixtures/speed) is absent")
def test_a_pre_1_0_point_runs_its_runtime_pool_within_the_tools_batch():
    """TensorRT-LLM 0.15 (era trtllm<1.0), which kvplan's TensorRT-LLM memory rules (0.20.0 on) do not take: the C++
    runtime pools 0.90 of the memory free after the engine loads (KvCacheConfig::kDefaultGpuMemFraction), within the
    max_batch_size `trtllm-bench build` tuned the engine at (0.95 of NVML's total less the parameters)."""
    # Llama 3.1 8B, FP16 weights and KV, one H100 SXM, 2048/2048 (the page's 'Mixed' column). The tool: 8,030,261,248
    # x 2 B = 14.9574 GiB; (79.6475 - 14.9574) x 0.95 = 61.4556 GiB over 2 x 32 x 8 x 128 x 2 B = 1.2207e-4 GiB a
    # token x 4096 = 0.5 GiB a request: 122.9 requests (< 256: up to 32s) -> 128 (at tuning.py's older param_count /
    # 1000**3, 16.0605: 120.8 -> 128 as well); tokens 122.9 x 2 = 246 -> 2048, with chunked prefill off at least 2048
    # + 128 = 2176. The pool: 0.90 x (usable 85,018,877,624 - the 15,009,849,344 B of weights a step reads (the fit's
    # weights: the 1,050,673,152 B embedding table not among them) - 2 GiB) = 61,075,390,168.8 B over 131,072 x 4096 =
    # 536,870,912 B a request: 113.76 requests, which binds within 128.
    case = perf_overview_015("llama31-8b-h100-sxm-fp16-tp1-2048-2048")
    assert case.era == "trtllm<1.0" and harness_limits(case, LLAMA, H100) == (128, 2176)
    r = running(case, LLAMA, H100)
    assert (r.cap, r.chunk, r.limit, r.free_share) == (None, None, 128, 0.90)
    assert Built(case, running).load.cap == pytest.approx(0.9 * (85_018_877_624 - 15_009_849_344 - 2**31) / 536_870_912)
    # Mixtral 8x7B, FP8 weights and KV, 4 x H100, 128/128: (4 x 79.6475 - 46,702,792,704 x 1 B = 43.4953 GiB) x 0.95 =
    # 261.3412 GiB over 2 x 32 x 8 x 128 x 1 B = 6.1035e-5 GiB a token x 256: 16,726 requests, capped at 4,096 ->
    # 4,096 (>= 1024: up to 256s); the pool holds more (a rank's 16,384 B a token x 256, over 58 GiB of room: about
    # 15,000), so 4,096 runs where the plain estimate's 2,048 default stood
    mixtral = perf_overview_015("mixtral-8x7b-h100-sxm-fp8-tp4-128-128")
    assert harness_limits(mixtral, find_in_catalog("mixtral-8x7b-v0.1"), H100)[0] == 4096
    assert Built(mixtral, running).load.cap == 4096


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the speed corpus (tests/fixtures/speed) is absent")
def test_a_pre_1_0_runs_stated_fraction_is_its_pool_share():
    # The 0.15 page's GH200 column: engines from trtllm-bench build, run by gptManagerBenchmark with
    # --kv_cache_free_gpu_mem_fraction 0.95. Llama 3.1 8B FP8 (KV FP8), 2048/2048: 0.95 x (usable 102,005,473,280 -
    # 8,030,527,488 B of weights a step reads - 2 GiB) = 87,236,089,036.8 B over 65,536 x 4096 = 268,435,456 B a
    # request: 324.98 requests
    case = perf_overview_015("llama31-8b-gh200-fp8-tp1-2048-2048")
    r = running(case, LLAMA, find_gpu("gh200"))
    assert r.free_share == 0.95
    pool = 0.95 * (102_005_473_280 - 8_030_527_488 - 2**31)
    assert Built(case, running).load.cap == pytest.approx(pool / 268_435_456)
