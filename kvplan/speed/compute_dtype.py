"""The 16-bit dtype a run's GEMMs and attention compute in, and the profile's rates for it (datasheet and measured).

On most datacenter parts a float16 GEMM and a bfloat16 one run at one rate, but not everywhere: the MI100 multiplies
FP16 matrices at twice its BF16 rate (184.6 against 92.3 TFLOPS, kvplan/hardware/profiles/mi100.yaml), and Volta and
Turing have no BF16 at all. So the speed terms price a step's 16-bit FLOPs at the rate of the dtype the run computes
in (issue 21), which comes from, in order: a dtype the run states (vLLM's and SGLang's --dtype half / float16 /
bfloat16; a corpus run's `dtype` flag or its 16-bit weight dtype); else the model's dtype as the engine serves it
(config.json's torch_dtype, a float32 config cast by the engine's rule: kvplan.engines.served_dtype); and float16
wherever the GPU has no BF16 math, as the engines run it there: vLLM downcasts to the platform's first supported
dtype, float16 below compute capability 8.0 (vllm-project/vllm#18751, vllm/config/model.py _resolve_auto_dtype, and
CudaPlatformBase.supported_dtypes in vllm/platforms/cuda.py), and refuses an explicit bfloat16 there (vllm 0.8.0
wheel, v1/worker/gpu_worker.py L303, kvplan.report.text.run_dtype). A GPTQ or AWQ checkpoint computes in its
activations' dtype, the model dtype too: vLLM's AWQ kernel takes float16 alone (AWQConfig.get_supported_act_dtypes
`[torch.half]`, and from 256 tokens a step it dequantizes and multiplies with `torch.matmul` in that dtype:
vllm-project/vllm@92d756e9:vllm/model_executor/layers/quantization/awq.py), so such a checkpoint's config says
float16 or its run says --dtype half (vLLM refuses it otherwise: 'torch.bfloat16 is not supported for quantization
method awq'); both reach the rule above.

The rate (`sixteen_bit`) is the profile's `dense_flops` for that dtype, with one exception the profile states:
where its `fp16` figure is a GeForce card's FP16-accumulate headline (`fp16_accumulates_fp16: true`), an engine's
float16 GEMM accumulates in FP32 (cuBLAS's CUBLAS_COMPUTE_32F, which PyTorch's half matmul uses), which GeForce runs
at half that headline, the rate of its BF16 (also FP32-accumulate) figure. A rate the profile lacks is never taken
silently from another: bf16 falls back to fp16 only where the profile has no bf16 (Volta, Turing, whose engines run
fp16 anyway, and profiles whose vendor states fp16 alone), which kvplan.speed.coverage.rate_gaps says.
"""

from __future__ import annotations

from kvplan.core.errors import KvplanError
from kvplan.hardware.facts import runs_bf16

STATED = {"half": "fp16", "float16": "fp16", "fp16": "fp16", "bfloat16": "bf16", "bf16": "bf16"}
UNSTATED = ("", "auto")  # the engine's default: the model's dtype


def stated_dtype(flags: dict | None) -> str | None:
    """The --dtype a corpus run's flags state (its `dtype`), None where they state none."""
    value = (flags or {}).get("dtype")
    return None if value is None else str(value)


def compute_dtype(model_dtype: str | None, gpu, stated: str | None = None, ggml: bool = False) -> tuple[str, str]:
    """(the 16-bit dtype a run computes in, where it comes from, in words): `stated` (a --dtype or a 16-bit weight
    dtype, "auto"/None: none), else `model_dtype` (the model as served; float32 and anything else unknown: bf16,
    said), fp16 on a GPU without BF16 math. A stated dtype kvplan does not price (float32) is refused. `ggml`
    (llama.cpp): its weight GEMMs take their rates by kernel path (kvplan.speed.ggml), and its attention keeps the
    bf16 reading it had: it attends over an F16 cache by default (ggml-org/llama.cpp@001d906a:common/common.h,
    `cache_type_k = GGML_TYPE_F16`), but whether its attention kernels reach a GPU's matrix units (the MI100's FP16
    rate) is not read, so it is not changed; on a GeForce profile with both accumulators' rates, its attention
    takes half its FLOPs at each (kvplan.speed.ggml.attention_rate)."""
    if ggml:
        if split_accumulate(gpu):
            return "bf16", ("llama.cpp: weight GEMMs at its kernel paths' rates, attention's K.Q at the "
                            "FP32-accumulate (bf16) rate and V.softmax at the FP16-accumulate (fp16) one")
        return "bf16", ("llama.cpp: weight GEMMs at its kernel paths' rates, attention at the bf16 reading (which of "
                        "its attention kernels runs on this GPU is not modelled)")
    said = str(stated or "").strip().lower()
    if said not in UNSTATED and said not in STATED:
        raise KvplanError(f"a run computing in {stated!r} is not priced (the speed terms know float16 and bfloat16)",
                          param="dtype", value=stated, allowed=sorted(STATED))
    if said in STATED:
        dtype, why = STATED[said], f"stated ({stated})"
    elif model_dtype in ("fp16", "bf16"):
        dtype, why = model_dtype, f"the model's dtype as served ({model_dtype})"
    else:
        dtype, why = "bf16", f"the model's dtype is {model_dtype or 'unstated'}: priced at the 16-bit rate"
    if dtype == "bf16" and gpu is not None and not runs_bf16(gpu):
        dtype, why = "fp16", why + "; no BF16 math on this GPU, which the engines run in float16"
    return dtype, why


def sixteen_bit(gpu, compute: str = "bf16") -> tuple[float, str]:
    """(datasheet FLOP/s, precision name for read_flops) of a 16-bit GEMM computing in
    `compute`: fp16's own rate where the profile gives one that is not an FP16-accumulate headline, else the bf16
    rate (the fp16 one where the profile gives no bf16: read_flops' "bf16")."""
    flops = gpu.dense_flops
    if compute == "fp16" and flops.get("fp16") and not getattr(gpu, "fp16_accumulates_fp16", None):
        return float(flops["fp16"]), "fp16"
    return float(flops.get("bf16") or flops.get("fp16") or 0), "bf16"


def read_flops(gpu, precision: str) -> float:
    """FLOP/s the speed terms run a `precision` GEMM at (gemm_rate's precision: "bf16" is the bf16 rate, the fp16
    one where the profile gives no bf16): the profile's `achieved_dense_flops` (a published matmul benchmark on that
    part) where it measured that precision (a measured fp16 rate stands for bf16 only where the datasheet rates the
    two alike or gives no bf16: the MI100's bf16 is half its fp16); where it measured only bf16 (or fp16), another
    precision's rate is the datasheet's at the measured share (fp8, fp4 and int8 kernels, and the MI100's bf16, assumed
    to reach the share the measured ones do); the datasheet's `dense_flops` otherwise (parts with no published
    measurement: kvplan/hardware/profiles/README.md, "Achieved matmul rate")."""
    datasheet, measured = gpu.dense_flops, gpu.achieved_dense_flops
    names = ("bf16", "fp16") if precision == "bf16" else (precision,)
    if bf16_apart(gpu):
        names = names[:1]  # a measured fp16 rate is not bf16's where the datasheet rates them apart
    for name in names:
        if measured.get(name):
            return float(measured[name])
    rate = datasheet_flops(gpu, precision)
    base = next((n for n in ("bf16", "fp16") if measured.get(n) and datasheet.get(n)), None)
    if base:  # the measured share; the measured rate itself where the datasheet's is the same
        return float(measured[base]) if rate == datasheet[base] else rate * measured[base] / datasheet[base]
    return rate


def measured_only(gpu) -> str:
    """Where the datasheet states no 16-bit rate but the profile measured one (GB10: NVIDIA states FP4 with sparsity
    alone), the rate the speed terms run 16-bit GEMMs and attention at, in words, said to be a measurement and not a
    datasheet peak; "" elsewhere. read_flops reads it; the roofline, on the datasheet's rates, prices them at zero."""
    measured = getattr(gpu, "achieved_dense_flops", None) or {}
    if datasheet_flops(gpu, "bf16") or not (measured.get("bf16") or measured.get("fp16")):
        return ""
    name = "bf16" if measured.get("bf16") else "fp16"
    return (f"its measured {name} rate, {measured[name] / 1e12:,.1f} TFLOP/s (achieved_dense_flops: a matmul "
            "benchmark's figure standing in where the datasheet states no 16-bit rate, not a datasheet peak; the "
            "roofline prices these FLOPs at zero)")


def bf16_apart(gpu) -> bool:
    """Whether the datasheet rates bf16 apart from fp16: it states a bf16 rate, and no fp16 rate or another one (the
    MI100's 92.3 against 184.6 T; Gaudi's bf16 alone). read_flops then reads no measured fp16 rate as bf16's, and
    llama.cpp's attention takes the fp16 rate where there is one (kvplan.speed.ggml.attention_rate)."""
    sheet = gpu.dense_flops
    return bool(sheet.get("bf16")) and sheet.get("bf16") != sheet.get("fp16")


def datasheet_flops(gpu, precision: str) -> float:
    """FLOP/s of a `precision` GEMM by the datasheet alone (read_flops' names, no measured rate)."""
    names = ("bf16", "fp16") if precision == "bf16" else (precision,)
    return float(next((gpu.dense_flops[n] for n in names if gpu.dense_flops.get(n)), 0))


def ggml_rate_of(gpu):
    """The FLOP/s reader llama.cpp's kernel paths take (kvplan.speed.ggml): read_flops, except on a GeForce profile
    whose `fp16` is the FP16-accumulate headline (`fp16_accumulates_fp16`), where they keep the datasheet's rates. Such
    a profile's measured rate is torch.matmul's, cuBLAS with FP32 accumulate, a path llama.cpp's GEMMs do not take
    there: its cuBLAS calls ask CUBLAS_COMPUTE_16F, its MMQ kernels int8 MMA, its FlashAttention one accumulator of
    each (docs/speed-history.md, round 34); no measurement of those paths is cited, so none is read for them."""
    if getattr(gpu, "fp16_accumulates_fp16", None):
        return lambda p: datasheet_flops(gpu, p)
    return lambda p: read_flops(gpu, p)


def split_accumulate(gpu) -> bool:
    """Whether an NVIDIA profile gives a GeForce card's two accumulators apart: an FP16-accumulate `fp16` headline
    and an FP32-accumulate `bf16` rate (llama.cpp's CUDA attention runs half its FLOPs at each: kvplan.speed.ggml)."""
    flops = gpu.dense_flops if gpu is not None else {}
    nvidia = str(getattr(gpu, "vendor", "") or "").upper() == "NVIDIA"
    return bool(nvidia and getattr(gpu, "fp16_accumulates_fp16", None) and flops.get("bf16") and flops.get("fp16"))


def compute_line(model_dtype: str | None, gpu, stated: str | None = None, ggml: bool = False) -> str:
    """The printed assumption: which dtype the step's 16-bit FLOPs are priced in, why, at which datasheet rate, and
    the measured rate the speed terms run them at where the profile has one (read_flops)."""
    dtype, why = compute_dtype(model_dtype, gpu, stated, ggml)
    rate, name = sixteen_bit(gpu, dtype)
    flops = gpu.dense_flops
    if ggml and split_accumulate(gpu):
        both = 2.0 / (1.0 / flops["bf16"] + 1.0 / flops["fp16"])
        return (f"16-bit attention priced ({why}) on {gpu.key} at {both / 1e12:,.1f} TFLOP/s dense, half its FLOPs at "
                f"{flops['bf16'] / 1e12:,.1f} and half at {flops['fp16'] / 1e12:,.1f}")
    used = "fp16" if name == "fp16" or not flops.get("bf16") else "bf16"  # the figure the rate is
    at = (f"its {used} rate, {rate / 1e12:,.1f} TFLOP/s dense" if rate
          else measured_only(gpu) or "no 16-bit rate in its profile")
    how = (" (its fp16 figure is an FP16-accumulate headline; engines accumulate in FP32, at the bf16 rate)"
           if dtype == "fp16" and used == "bf16" else "")
    measured = (getattr(gpu, "achieved_dense_flops", None) or {}).get("bf16")
    headline = getattr(gpu, "fp16_accumulates_fp16", None) and not flops.get("bf16")  # its only 16-bit figure
    at_measured = bool(headline and measured and not ggml)  # `at` names the measured rate itself
    if at_measured:
        at = f"the profile's measured FP32-accumulate rate, {measured / 1e12:,.1f} TFLOP/s (achieved_dense_flops)"
        how = f" (its fp16 figure, {rate / 1e12:,.1f}, is an FP16-accumulate headline; engines accumulate in FP32)"
    elif headline:
        how = (" (an FP16-accumulate headline: the FP32-accumulate rate engines' 16-bit GEMMs run at, half it on "
               "GeForce, is not in the profile, so prefill is priced up to 2x fast)")
    ran = ggml_rate_of(gpu)(name) if ggml else read_flops(gpu, name)  # the rate the speed terms run it at
    if rate and ran != rate and not at_measured:
        how += f", run at its measured {ran / 1e12:,.1f} TFLOP/s (achieved_dense_flops)"
    return f"16-bit GEMMs and attention priced in {dtype} ({why}) on {gpu.key} at {at}{how}"
