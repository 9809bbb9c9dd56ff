"""The 16-bit dtype a run computes in, and the GEMM rate the speed terms price it at (issue 21)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.bench.running import running
from kvplan.core.errors import KvplanError
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.compute_dtype import compute_dtype, compute_line, sixteen_bit
from kvplan.speed.corpus import case_of
from kvplan.speed.fit import Built
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import features

LLAMA2 = find_in_catalog("llama-2-7b-hf")  # config.json torch_dtype float16
LLAMA3 = find_in_catalog("llama-3.1-8b-instruct")  # bfloat16


def gemm_term(shape, tokens: int) -> float:
    """The GEMM term (coefficient 1) of one prefill step of `tokens` tokens, no logits computed."""
    return features(shape, tokens, 1, 0, 0, sampled=0)[2]


def test_mi100_prefill_of_a_7b_model_at_its_fp16_rate_not_its_bf16_one():
    # Llama-2-7B: 32 layers x (4 x 4096^2 attention + 3 x 4096 x 11008 MLP) = 32 x 202,375,168 = 6,476,005,376
    # linear weights, plus 65 RMSNorm vectors of 4096 (2 a layer and the final one) = 266,240: 6,476,271,616,
    # 2 FLOPs each a token = 12,952,543,232. A 2,048-token prefill: 26,526,808,539,136 FLOPs. The MI100's matrix
    # FP16 rate is 184.6 TFLOPS, its BF16 92.3 (ROCm docs/conceptual/gpu-arch/mi100.md, 'Peak-performance
    # capabilities of MI100'); rocblas-bench measured FP16 at about 90 (ROCm/Tensile#2087), 90 / 184.6 of the
    # datasheet, and BF16 runs at that share of its own: 92.3 x 90 / 184.6 = 45 TFLOPS. 26,526,808,539,136 / 90e12 =
    # 0.29474 s in float16, / 45e12 = 0.58948 s in bfloat16: float16 still twice as fast.
    mi100 = find_gpu("mi100")
    fp16 = shape_for(LLAMA2, mi100, engine="vllm")  # the config's float16, --dtype auto
    assert fp16.flops_per_token == 12_952_543_232
    assert gemm_term(fp16, 2048) == pytest.approx(26_526_808_539_136 / 90e12)
    assert gemm_term(fp16, 2048) == pytest.approx(0.29474, abs=5e-5)
    bf16 = shape_for(LLAMA2, mi100, engine="vllm", compute="bfloat16")  # --dtype bfloat16
    assert gemm_term(bf16, 2048) == pytest.approx(0.58948, abs=5e-5)
    assert bf16.bf16_rate == pytest.approx(45e12) and fp16.bf16_rate == 90e12  # attention and kept modules likewise


def test_a_stated_half_runs_a_bf16_config_in_fp16():
    mi100 = find_gpu("mi100")
    # the MI100's measured fp16 90 T and bf16 at its share, 92.3 x 90 / 184.6 = 45 T (the test above)
    assert shape_for(LLAMA3, mi100, engine="vllm").gemm_rate == pytest.approx(45e12)
    assert shape_for(LLAMA3, mi100, engine="vllm", compute="half").gemm_rate == 90e12
    assert shape_for(LLAMA3, mi100, engine="vllm", weight_dtype="fp16").gemm_rate == 90e12


def test_corpus_flag_dtype_reaches_the_shape():
    # a corpus run's `dtype: half` (vLLM --dtype half) is the compute dtype its point is priced in
    point = {"engine": "vllm", "gpu": "mi100", "version": "0.11.0", "isl": 1024, "osl": 128, "concurrency": 4,
             "kvplan_model": "llama-3.1-8b-instruct", "gpus": 1, "tp": 1, "metrics": {"tpot_ms": 20}}
    half, why = case_of({**point, "flags": {"dtype": "half"}}, "test", "")
    auto, _ = case_of({**point, "flags": {}}, "test", "")
    assert half is not None, why
    assert Built(half, running).shape.gemm_rate == 90e12  # the MI100's measured fp16; bf16 at its share, 45 T
    assert Built(auto, running).shape.gemm_rate == pytest.approx(45e12)


def test_trtllm_serve_kv_fraction_spelling_reaches_the_engine():
    # trtllm-serve's --kv_cache_free_gpu_memory_fraction is KvCacheConfig's free_gpu_memory_fraction
    # (NVIDIA/TensorRT-LLM@00209af1:tensorrt_llm/commands/serve.py get_llm_args): half the fraction, a smaller pool,
    # fewer of Llama-3.1-8B's 7,680 + 1,024 / 2 resident tokens at once on one H100
    point = {"engine": "trtllm", "gpu": "h100-sxm", "isl": 7680, "osl": 1024, "concurrency": 1024,
             "kvplan_model": "llama-3.1-8b-instruct", "gpus": 1, "tp": 1, "metrics": {"tpot_ms": 20}}
    h100 = find_gpu("h100-sxm")
    low, high = (running(case_of({**point, "flags": {"kv_cache_free_gpu_memory_fraction": f}}, "test", "")[0],
                         LLAMA3, h100) for f in (0.5, 0.95))
    assert low.cap < high.cap


def test_no_bf16_math_runs_fp16():
    # Turing has no BF16: vLLM serves a bfloat16 config in float16 there; the T4's one rate is its FP16 65 T, or the
    # 41.93 T torch.mm measured in float16 (its achieved_dense_flops, tests/test_geforce_matmul.py)
    t4 = find_gpu("t4")
    assert compute_dtype("bf16", t4)[0] == "fp16"
    assert shape_for(LLAMA3, t4, engine="vllm").gemm_rate == 41.93e12
    bare = replace(t4, achieved_dense_flops={}, achieved_dense_flops_source=None)
    assert shape_for(LLAMA3, bare, engine="vllm").gemm_rate == 65e12


def test_geforce_fp16_is_priced_at_its_fp32_accumulate_rate():
    # RTX 4090: FP16 with FP16 accumulate 330.3 T, with FP32 accumulate (and BF16) 165.2 T (NVIDIA Ada whitepaper,
    # the profile's notes); an engine's float16 GEMM accumulates in FP32, so a float16 model runs at 165.2
    rtx = find_gpu("rtx-4090")
    assert sixteen_bit(rtx, "fp16") == (165.2e12, "bf16")
    bare = replace(rtx, achieved_dense_flops={}, achieved_dense_flops_source=None)
    assert shape_for(LLAMA2, bare, engine="vllm").gemm_rate == 165.2e12
    assert shape_for(LLAMA2, rtx, engine="vllm").gemm_rate == 164.81e12  # the measured torch.mm bf16 rate
    assert "FP16-accumulate" in compute_line("fp16", rtx)
    # the RTX 3090 states only its FP16-accumulate figure; without a measured rate it is priced at it, and the line
    # says the FP32 rate is missing; with the bundled measurement (76.58 T) the line says so
    r3090 = find_gpu("rtx-3090")
    assert "not in the profile" in compute_line("fp16", replace(r3090, achieved_dense_flops={}))
    assert "measured FP32-accumulate rate, 76.6 TFLOP/s" in compute_line("fp16", r3090)
    assert "not in the profile" in compute_line("fp16", r3090, ggml=True)  # llama.cpp keeps the headline


def test_equal_rates_leave_datacenter_parts_alone():
    h100 = find_gpu("h100-sxm")
    assert shape_for(LLAMA2, h100, engine="vllm").gemm_rate == shape_for(LLAMA3, h100, engine="vllm").gemm_rate


def test_a_dtype_kvplan_does_not_price_is_refused():
    with pytest.raises(KvplanError):
        compute_dtype("bf16", find_gpu("h100-sxm"), "float32")
    assert compute_dtype("fp16", find_gpu("h100-sxm"), "auto") == ("fp16", "the model's dtype as served (fp16)")


def test_the_line_names_the_measured_rate_the_terms_run_at():
    # H100 SXM: datasheet bf16 989 T dense; stas00/ml-engineering's MAMF table measures 794.5 T (the profile's
    # achieved_dense_flops), which read_flops prices; the printed assumption names both. fp16 on H100 is the same
    # silicon rate (989 T), so it runs at the measured bf16 figure too. The A10's profile has no measurement.
    h100 = find_gpu("h100-sxm")
    for dtype in ("bf16", "fp16"):
        line = compute_line(dtype, h100)
        assert "989.0 TFLOP/s dense" in line and "run at its measured 794.5 TFLOP/s" in line
    assert "measured" not in compute_line("bf16", find_gpu("a10"))
    bare = replace(h100, achieved_dense_flops={}, achieved_dense_flops_source=None)
    assert "measured" not in compute_line("bf16", bare)


def test_bf16_apart_is_one_reading_for_the_measured_rate_and_llama_cpps_attention():
    # Datasheets: the MI100 rates bf16 92.3 T and fp16 184.6 T (apart); the H100 SXM 989.4 T for both (alike); Gaudi 2
    # states bf16 (432 T) and no fp16 (apart: no fp16 rate stands in for bf16's)
    from kvplan.speed.compute_dtype import bf16_apart, read_flops
    from kvplan.speed.ggml import attention_rate

    mi100, h100, gaudi = (find_gpu(k) for k in ("mi100", "h100-sxm", "gaudi2"))
    assert [bf16_apart(g) for g in (mi100, h100, gaudi)] == [True, False, True]
    # the MI100's measured fp16 rate (90 T, rocBLAS) is not read as its bf16 one; llama.cpp's attention takes fp16's
    assert read_flops(mi100, "bf16") != mi100.achieved_dense_flops["fp16"]
    assert attention_rate(mi100, lambda p: read_flops(mi100, p)) == read_flops(mi100, "fp16")
    # a part whose datasheet gives no fp16 keeps the bf16 reading where no fp16 rate is read (none is priced at 0)
    assert attention_rate(gaudi, lambda p: read_flops(gaudi, p)) == read_flops(gaudi, "bf16") > 0
