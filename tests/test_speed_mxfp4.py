"""The precision SGLang's, vLLM's and TensorRT-LLM's MXFP4 MoE kernels multiply in, by GPU and release
(kvplan.speed.mxfp4), and the GEMM rate a Shape reads with it. The rules are read in the sglang 0.5.1.post3,
0.5.4.post2, 0.5.6 and 0.5.23 wheels, the vllm 0.10.1.1, 0.10.2, 0.11.0 and 0.17.0 wheels and TensorRT-LLM's
model_config.py (the module's docstring); the rates are the GPU profiles' (their measured matmul rate, MAMF, as each
profile's comment states)."""

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.mxfp4 import mxfp4_precision
from kvplan.speed.shape import shape_for

GPT_OSS = find_in_catalog("gpt-oss-120b")


def test_sglang_runs_mxfp4_experts_at_bf16_off_blackwell_and_fp8_on_it():
    # Hopper and Ampere: triton_kernels (or the bf16 upcast) with bf16 activations (0.5.4.post2 server_args.py
    # L972-973 "use bf16 for mxfp4 triton kernels"); compute capability 10.x: flashinfer_mxfp4, its activations
    # quantized to MXFP8 (0.5.1.post3 mxfp4.py L639-640, 0.5.6 L636-637): an FP8 x FP4 MMA
    assert mxfp4_precision("sglang", find_gpu("h100-sxm"), "0.5.4.post2") == "bf16"
    assert mxfp4_precision("sglang", find_gpu("a100-sxm-80"), "0.5.4.post2") == "bf16"
    assert mxfp4_precision("sglang", find_gpu("b200"), "0.5.1.post3") == "fp8"
    assert mxfp4_precision("sglang", find_gpu("b200"), None) == "fp8"  # 0.5.23 gpt_oss.py L65-66: the same
    # compute capability 12.0: is_sm100_supported() only in 0.5.1.post3 (server_args.py L2259), is_blackwell_supported()
    # (10 or 12) from 0.5.4.post2 (L951)
    assert mxfp4_precision("sglang", find_gpu("rtx-5090"), "0.5.1.post3") == "bf16"
    assert mxfp4_precision("sglang", find_gpu("rtx-5090"), "0.5.6") == "fp8"
    assert mxfp4_precision("sglang", find_gpu("h100-sxm"), "0.4.9") is None  # before gpt-oss (0.5.0): no rule
    assert mxfp4_precision("llama.cpp", find_gpu("h100-sxm"), None) is None  # not read for llama.cpp here


def test_the_shape_reads_the_rate_of_that_precision():
    # H100 SXM's measured bf16 rate 794.5 T (its profile: 80% of the datasheet's 989 T); B200's measured fp8 rate
    # 3,432.5 T (76% of 4,500 T), not its FP4 one; an engine without a rule keeps the weight dtype's own (on H100,
    # no FP4: the fp8 rate, above the bf16 one)
    h100, b200 = find_gpu("h100-sxm"), find_gpu("b200")
    assert shape_for(GPT_OSS, h100, engine="sglang", version="0.5.3rc0").gemm_rate == 794.5e12
    assert shape_for(GPT_OSS, b200, engine="sglang", version="0.5.6").gemm_rate == 3432.5e12
    assert shape_for(GPT_OSS, h100).gemm_rate == 1402.6e12  # no engine: H100's measured fp8 rate
    # a dense bf16 model is not touched
    llama = find_in_catalog("llama-3.1-8b-instruct")
    assert shape_for(llama, h100, engine="sglang").gemm_rate == shape_for(llama, h100, engine="vllm").gemm_rate


def test_vllm_keeps_mxfp4_activations_bf16_on_every_nvidia_gpu_by_default():
    # get_mxfp4_backend, vllm 0.10.2 wheel mxfp4.py L54-102: Marlin (W4A16) on Ampere and on Hopper without
    # triton_kernels, Triton (bf16 activations) with it, and on 10.x with FlashInfer SM100_FI_MXFP4_BF16 unless
    # VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8 (envs.py L1006-1007, default "0"); its apply() asserts bf16 input (L812-815)
    for gpu, version in (("h100-sxm", "0.10.2"), ("a100-sxm-80", "0.11.0"), ("b200", "0.11.0"), ("b200", None)):
        assert mxfp4_precision("vllm", find_gpu(gpu), version) == "bf16"
    assert mxfp4_precision("vllm", find_gpu("h100-sxm"), "0.10.0") is None  # before gpt-oss (0.10.1): no rule


def test_trtllm_runs_w4a8_from_sm100_and_w4a16_below():
    # NVIDIA/TensorRT-LLM@1a0dc5f7 tensorrt_llm/_torch/model_config.py get_mxfp4_quant_algo: get_sm_version() >= 100
    # -> W4A8_MXFP4_MXFP8 (W4A8_MXFP4_FP8 under the TRITON MoE), else W4A16_MXFP4
    assert mxfp4_precision("trtllm", find_gpu("h100-sxm"), "1.0.0") == "bf16"
    assert mxfp4_precision("trtllm", find_gpu("h200-sxm"), None) == "bf16"
    assert mxfp4_precision("trtllm", find_gpu("b200"), "1.2.0rc1") == "fp8"
    assert mxfp4_precision("trtllm", find_gpu("gb200"), None) == "fp8"
    assert mxfp4_precision("trtllm", find_gpu("rtx-5090"), None) == "fp8"  # SM 120 >= 100
    assert mxfp4_precision("trtllm", find_gpu("h100-sxm"), "0.21.0") is None  # before 1.0.0: no rule


def test_vllm_and_trtllm_shapes_read_those_rates():
    # measured rates from the GPU profiles: H100 SXM bf16 794.5 T (80% of 989 T); B200 bf16 1,745 T (78% of
    # 2,250 T), fp8 3,432.5 T (76% of 4,500 T); GB200 fp8 3,615.6 T (72% of 5,000 T). Without these rules gpt-oss
    # read H100's fp8 rate (1,402.6 T) and B200's fp4 one (9,000 T x 1,745 / 2,250 = 6,980 T)
    h100, b200, gb200 = find_gpu("h100-sxm"), find_gpu("b200"), find_gpu("gb200")
    assert shape_for(GPT_OSS, h100, engine="vllm", version="0.10.2").gemm_rate == 794.5e12
    assert shape_for(GPT_OSS, b200, engine="vllm").gemm_rate == 1745e12
    assert shape_for(GPT_OSS, h100, engine="trtllm", version="1.0.0").gemm_rate == 794.5e12
    assert shape_for(GPT_OSS, b200, engine="trtllm", version="1.2.0rc1").gemm_rate == 3432.5e12
    assert shape_for(GPT_OSS, gb200, engine="tensorrt-llm").gemm_rate == 3615.6e12
    assert shape_for(GPT_OSS, b200).gemm_rate == 9000e12 * 1745 / 2250


def test_an_older_eras_key_reads_its_engines_rule():
    """`fit --engine sglang --engine-version 0.5.6` prices with the `sglang<0.5.14` set (kvplan.speed.eras); that key
    is still SGLang, whose 0.5.6 runs MXFP4 experts with bf16 activations on an H100 (0.5.4.post2 server_args.py
    L972-973, the rule above), not at the generic fp8 rate an unknown key would get."""
    assert mxfp4_precision("sglang<0.5.14", find_gpu("h100-sxm"), "0.5.6") == "bf16"
    assert mxfp4_precision("trtllm<1.0", find_gpu("b200"), "1.0.0") == "fp8"  # the key's engine, the given release


def test_the_engines_release_reaches_every_plan_priced():
    """`--engine-version` reaches the MXFP4 rule wherever a plan is priced (fit, cheapest, sweep, simulate,
    check-bench), not only in the fit: SGLang 0.5.1.post3 on compute capability 12.0 runs gpt-oss's experts at bf16
    (is_sm100_supported() only, server_args.py L2259), 0.5.6 at FP8 (is_blackwell_supported(), 0.5.4.post2 L951).
    RTX PRO 6000 Workstation's rates: torch.mm bf16 417.98 T measured (zzc0721/torch-performance-test-data
    @9d828276, its profile), fp8 at that share of the datasheet's 1,007.6 T: 1,007.6 x 417.98 / 503.8 = 835.96 T."""
    from kvplan.compare.cheapest import calibrated_step
    from kvplan.engines import resolve_engine
    from kvplan.planning.deploy import Deployment
    from kvplan.planning.plan import Request
    from kvplan.simulator.adapter import sim_model
    from kvplan.speed.plan import DecodeSteps, plan_decode_seconds, plan_shape

    gpu = find_gpu("rtx-pro-6000-workstation")
    rates = {}
    for version in ("0.5.1.post3", "0.5.6"):
        engine = resolve_engine("sglang", version)
        plan = engine.plan(GPT_OSS, gpu, Deployment(1), Request(8192, batch=64))
        shape = plan_shape(plan, GPT_OSS, gpu, engine.speed_key, engine.version)
        sim = sim_model(plan, GPT_OSS, gpu, engine=engine.speed_key, version=engine.version)
        assert sim.speed.shape.gemm_rate == shape.gemm_rate  # simulate, disagg, sweep --workload, check-bench
        step = plan_decode_seconds(plan, GPT_OSS, gpu, engine.speed_key, version=engine.version)
        assert calibrated_step(plan, GPT_OSS, gpu, engine) == step  # cheapest
        assert abs(DecodeSteps(engine.speed_key, version=engine.version).seconds(plan, GPT_OSS, gpu) - step) < 1e-12
        rates[version] = shape.gemm_rate
    assert rates == {"0.5.1.post3": 417.98e12, "0.5.6": pytest.approx(835.96e12, rel=1e-9)}


def test_the_grouped_term_keeps_the_mxfp4_weights_own_rate():
    """The grouped-GEMM term (t0 x 2 x an expert's parameters / rate a touched expert) stands for a few-token GEMM's
    read of its weights, 4-bit whatever the activations, so it reads the MXFP4 weights' own rate, not the wider one the
    engine's kernel multiplies in (kvplan.speed.terms, `grouped`)."""
    from kvplan.speed.terms import TERMS, features
    h100, b200 = find_gpu("h100-sxm"), find_gpu("b200")
    hop = shape_for(GPT_OSS, h100, engine="trtllm", version="1.0.0")  # W4A16_MXFP4: GEMMs at bf16, 794.5 T
    assert (hop.gemm_rate, hop.grouped_rate) == (794.5e12, 1402.6e12)  # H100 has no FP4: its measured fp8 rate
    bw = shape_for(GPT_OSS, b200, engine="trtllm", version="1.2.0rc1")  # W4A8_MXFP4_MXFP8: fp8, 3,432.5 T
    assert (bw.gemm_rate, bw.grouped_rate) == (3432.5e12, 9000e12 * 1745 / 2250)  # FP4 at the measured bf16 share
    # one decode token: top 4 of 128 experts touched in each of 36 layers; one expert's weights over the layers
    # 36 x 24,883,200 = 895,795,200 plus its 36 x 8,640 biases = 896,106,240; grouped = 4 x 2 x 896,106,240 / 1,402.6e12
    f = features(hop, 1, 1, 0, 0)
    assert hop.expert_params == 896_106_240
    assert f[TERMS.index("grouped")] == pytest.approx(4 * 2 * 896_106_240 / 1402.6e12)
    # no rule (no engine): the kernel's precision is the weights' own, one rate for both (0: the GEMM rate's)
    plain = shape_for(GPT_OSS, h100)
    assert (plain.gemm_rate, plain.grouped_rate) == (1402.6e12, 0.0)


def test_vllm_keeps_mxfp4_activations_bf16_on_amd_gpus():
    """At the default environment vLLM on ROCm runs triton_kernels' matmul_ogs (0.10.1.1 apply L555-568; 0.11.0
    get_mxfp4_backend L103-105; 0.17.0 L179-181: CK only on gfx950 under VLLM_ROCM_USE_AITER=1, envs.py L913-915
    default off) with bf16 activations (`mxfp4_w4a16_moe_quant_config`, 0.17.0 L914-921): the bf16 rate, on a GPU with
    FP4 (MI355X) as on one without (MI300X), and no Marlin (a CUDA kernel): no per-tile re-read."""
    from kvplan.speed.mxfp4 import moe_block_m
    mi300x, mi355x = find_gpu("mi300x"), find_gpu("mi355x")
    for gpu, version in ((mi300x, "0.17.0"), (mi300x, "0.11.0"), (mi355x, "0.17.0"), (mi355x, None)):
        assert mxfp4_precision("vllm", gpu, version) == "bf16"
        assert moe_block_m("vllm", gpu, version) == 0
    assert mxfp4_precision("vllm-inprocess", mi300x, "0.17.0") == "bf16"  # a harness's set reads its engine's rule
    assert mxfp4_precision("vllm", mi300x, "0.10.0") is None  # before gpt-oss (0.10.1): no rule
    assert mxfp4_precision("sglang", mi300x, "0.5.6") is None  # SGLang's and TensorRT-LLM's: no AMD rule read
    assert mxfp4_precision("trtllm", mi355x, None) is None


def test_vllm_on_amd_reads_the_bf16_rate_and_the_grouped_term_the_weights_own():
    # the profiles' measured rates: MI300X bf16 668.4 T (MAMF, 51% of 1,307.4 T), fp8 1,273 T (AMD's hipBLASLt MAF;
    # no FP4); MI355X bf16 1,565 T (63% of 2,500 T), FP4 at that share: 10,100 x 1,565 / 2,500 = 6,322.6 T.
    # Before the AMD rule vLLM's gpt-oss GEMMs read MI300X's fp8 rate (1,273 T) and MI355X's FP4 one (6,322.6 T)
    from kvplan.speed.terms import TERMS, features
    mi300x = shape_for(GPT_OSS, find_gpu("mi300x"), engine="vllm", version="0.17.0")
    assert (mi300x.gemm_rate, mi300x.grouped_rate) == (668.4e12, 1273e12)
    mi355x = shape_for(GPT_OSS, find_gpu("mi355x"), engine="vllm", version="0.17.0")
    assert (mi355x.gemm_rate, mi355x.grouped_rate) == (1565e12, pytest.approx(6322.6e12))
    # one decode token: 4 experts touched x 2 x 896,106,240 parameters (36 layers' expert weights and biases, the
    # test above) / 1,273e12 = 5.631e-06 s
    f = features(mi300x, 1, 1, 0, 0)
    assert f[TERMS.index("grouped")] == pytest.approx(4 * 2 * 896_106_240 / 1273e12)
    sglang = shape_for(GPT_OSS, find_gpu("mi300x"), engine="sglang", version="0.5.6")  # no AMD rule: fp8, one rate
    assert (sglang.gemm_rate, sglang.grouped_rate) == (1273e12, 0.0)
