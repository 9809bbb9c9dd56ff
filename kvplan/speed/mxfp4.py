"""What an engine's MXFP4 MoE kernels run, by GPU and release (source-derived, not fitted): the precision they
multiply in, and the rows a block of vLLM's Marlin MoE takes (`moe_block_m`, at the end).

The GEMM term (kvplan.speed.terms.gemm_rate) runs MXFP4 weights at the GPU's FP4 rate, its FP8 one where it has no FP4:
what a kernel taking 4- or 8-bit activations reaches. An engine whose MXFP4 MoE kernel keeps its activations in 16 bits
(weight-only: the 4-bit weights widened in the kernel) multiplies at the bf16 rate instead, and one that quantizes
its activations to MXFP8 runs an FP8 x FP4 MMA at the FP8 rate. `MXFP4_MOE` names the engines whose path is read here
(their speed key, kvplan.speed.model.engine_key) by the GPU profile's vendor, each a function of (GPU capability,
release) giving the precision.

SGLang (gpt-oss from 0.5.0; read in the 0.5.1.post3, 0.5.4.post2, 0.5.6 and 0.5.23 wheels):
  * compute capability 10.x (and 12.x from 0.5.4): `moe_runner_backend` set to flashinfer_mxfp4 for an MXFP4
    checkpoint (0.5.1.post3 `srt/server_args.py` L2259-2260 `is_sm100_supported()`; 0.5.4.post2 L951-952 and 0.5.6
    L1108-1109 `is_blackwell_supported()`, capability 10 or 12, `utils/common.py` L226-231; 0.5.23
    `srt/arg_groups/model_overrides/gpt_oss.py` L65-71). Its apply() quantizes the activations to MXFP8 at the default
    `--flashinfer-mxfp4-moe-precision default` (`mxfp8_quantize(x, False, alignment=self.hidden_size)`: 0.5.1.post3
    `srt/layers/quantization/mxfp4.py` L639-640, 0.5.6 L636-637; 0.5.23 `_prepare_flashinfer_mxfp8_activations`
    L78-116) and runs
    trtllm_fp4_block_scale_moe, an MXFP8 x MXFP4 MMA: the FP8 rate (NVIDIA's B200 datasheet rates FP4 only for 4-bit
    operands on both sides).
  * every other NVIDIA GPU (Hopper, Ampere): the triton_kernels backend (`triton_kernel` where the package is
    installed, ep 1), whose matmul_ogs widens the 4-bit weights in the kernel, or without it the experts upcast to bf16
    once (`upcast_from_mxfp(..., dtype=torch.bfloat16)`, 0.5.4.post2 mxfp4.py L570-576) for Triton's fused_moe; either
    way the activations stay bf16 (server_args: "use bf16 for mxfp4 triton kernels", `self.dtype = "bfloat16"`,
    0.5.4.post2 L972-973): the bf16 rate. The bytes read are the checkpoint's MXFP4 (the triton_kernels path, which
    SGLang's images run; the upcast's bf16 copy is not priced).
vLLM (gpt-oss from 0.10.1; get_mxfp4_backend read in the 0.10.2 wheel, `model_executor/layers/quantization/mxfp4.py`
L54-102, the 0.11.0 wheel L59-107, and at vllm-project/vllm@afdb4a4f and @007d5005): at the default environment every
NVIDIA backend it picks keeps the activations bf16: Marlin (W4A16, Ampere and Hopper without triton_kernels), Triton
(triton_kernels' matmul_ogs, Hopper), and on compute capability 10.x with FlashInfer SM100_FI_MXFP4_BF16 ("Using
FlashInfer MXFP4 BF16 backend for SM100, For faster performance on SM100, consider setting
VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1", 0.10.2 L74-80; its apply() `assert x.dtype == torch.bfloat16`, `x_quant = x`,
0.10.2 L812-815, 0.11.0 L853). MXFP8 activations (mxfp8_quantize, 0.10.2 L818) only under
VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8 or ..._MXFP8_CUTLASS (envs.py default "0", 0.10.2 L1006-1015): not a default,
not read here. So the bf16 rate on every NVIDIA GPU.
vLLM on ROCm (AMD; read in the 0.10.1.1, 0.11.0 and 0.17.0 wheels and at vllm-project/vllm@001eda31): at the default
environment every MXFP4 MoE backend it picks there keeps the activations bf16: the bf16 rate on every AMD GPU too,
gfx950 (MI355X, FP4 MFMA) included. 0.10.1.1 runs triton_kernel_moe_forward off CUDA
(Mxfp4MoEMethod._should_use_marlin L123-135 is False on ROCm; apply L555-568); 0.11.0 get_mxfp4_backend `elif
current_platform.is_rocm() and has_triton_kernels(): return Mxfp4Backend.TRITON` (L103-105); 0.17.0 L173-183 the
same Triton (triton_kernels' matmul_ogs, the 4-bit weights widened in the kernel, `mxfp4_w4a16_moe_quant_config`,
L914-921) but on gfx950 with VLLM_ROCM_USE_AITER=1 (envs.py L913-915, default off), where it runs CK: aiter's
fused_moe on A16W4-shuffled weights with `activation_method` swiglu (L800-858, L1132-1151), which in aiter's
`fused_moe_` (ROCm/aiter@00062184 aiter/fused_moe.py, a later stored version) keeps bf16 activations below 512 tokens
on gfx950 and quantizes them to FP8 from 512: not a default, not read here. Without a backend the method asserts
(0.11.0 L165, 0.17.0 L262): no other fallback. From the MoE oracle on (@001eda31
vllm/model_executor/layers/fused_moe/oracle/mxfp4.py _get_priority_backends: "Only includes BF16 backends. MXFP8
backends are selected via env vars") the same. `moe_block_m` stays 0 off NVIDIA: its per-tile re-read was read in
Marlin, a CUDA kernel vLLM does not pick on ROCm, and is not priced for Triton's matmul_ogs on Hopper either. SGLang
and TensorRT-LLM have no AMD rule here: the weight dtype's own rate. SGLang's AMD MXFP4 points in the corpus run AMD
Quark's W4A4 checkpoint of DeepSeek-R1 (QuarkW4A4MXFp4MoE, sglang 0.5.9 wheel
`srt/layers/quantization/quark/schemes/quark_w4a4_mxfp4_moe.py` L196-212: aiter's fused_moe at per_1x32 with silu,
whose activations that `fused_moe_` quantizes to MXFP4), an FP4 x FP4 MMA: the FP4 rate the weight dtype gives.
TensorRT-LLM (PyTorch backend; NVIDIA/TensorRT-LLM@1a0dc5f7:tensorrt_llm/_torch/model_config.py
ModelConfig.get_mxfp4_quant_algo, called by load_hf_quant_config for `quant_method: mxfp4`): `get_sm_version() >= 100`
gives W4A8_MXFP4_MXFP8 (CUTLASS, TRTLLM MoE backends) or W4A8_MXFP4_FP8 (TRITON): 8-bit activations, the FP8 rate;
below 100 (Hopper: the TRITON or CUTLASS MoE) W4A16_MXFP4: the bf16 rate; OVERRIDE_QUANT_ALGO (an environment
variable, unset by default) alone changes it. The releases the corpus states (1.0.0, 1.2.0rc1) were not read
separately: the same function in every stored version of the file was (an assumption for those two).
The dense layers of such a checkpoint (attention, router, head: bf16 in gpt-oss) are priced at the same rate, as the
term has one. The grouped-GEMM term (kvplan.speed.terms, `grouped`) keeps the MXFP4 weights' own rate (FP4, FP8 where
the GPU has no FP4): its t0 x 2 x parameters / rate a touched expert stands for a few-token GEMM's read of the weights,
4-bit whatever the activations, so a weight-only kernel does not pay it at the bf16 rate.
"""

from __future__ import annotations

from kvplan.core.releases import release_of
from kvplan.hardware.facts import capability_of, vendor_of
from kvplan.speed.eras import engine_of, padded

SGLANG_FIRST = (0, 5, 0)  # gpt-oss's first SGLang release (sgl-project/sglang#8833)
SGLANG_SM120_FLASHINFER = (0, 5, 4)  # is_blackwell_supported() (10.x and 12.x) picks flashinfer_mxfp4 (0.5.4.post2)
VLLM_FIRST = (0, 10, 1)  # gpt-oss's first vLLM release (kvplan.engines.vllm.mxfp4 reads 0.10.1.1's backends)
TRTLLM_FIRST = (1, 0, 0)  # the first TensorRT-LLM release the corpus states running gpt-oss (GPUStack, 1.0.0)


def _since(first: tuple[int, ...], version) -> bool:
    rel = release_of(version)
    return rel is None or padded(rel) >= first  # None: a current release


def _sglang(cap: tuple[int, int], version) -> str | None:
    if not _since(SGLANG_FIRST, version):
        return None
    if cap[0] == 10 or (cap[0] == 12 and _since(SGLANG_SM120_FLASHINFER, version)):
        return "fp8"  # flashinfer_mxfp4: MXFP8 activations x MXFP4 weights
    return "bf16"  # triton_kernels / upcast: bf16 activations


def _vllm(cap: tuple[int, int], version) -> str | None:
    return "bf16" if _since(VLLM_FIRST, version) else None  # Marlin / Triton / FlashInfer MXFP4 BF16: bf16 activations


def _trtllm(cap: tuple[int, int], version) -> str | None:
    if not _since(TRTLLM_FIRST, version):
        return None
    return "fp8" if cap[0] >= 10 else "bf16"  # W4A8_MXFP4_(MX)FP8 from SM100, W4A16_MXFP4 below


MXFP4_MOE = {"NVIDIA": {"sglang": _sglang, "vllm": _vllm, "trtllm": _trtllm},
             "AMD": {"vllm": _vllm}}  # by the profile's vendor: on ROCm vLLM's Triton / CK A16W4, bf16 activations


def mxfp4_precision(engine_key: str | None, gpu, version=None) -> str | None:
    """The precision ("bf16" or "fp8") `engine_key`'s MXFP4 MoE kernels multiply in on `gpu` at `version` (None: a
    current release), or None where this module has no rule (another engine, another vendor's GPU, one known only by
    its memory): the weight dtype's own rate then (kvplan.speed.terms.gemm_rate). An older era's or a harness's key
    ("sglang<0.5.14", what `fit --engine sglang --engine-version 0.5.6` prices with) reads its engine's rule."""
    return _rule(MXFP4_MOE, engine_key, gpu, version)


def _rule(tables: dict, engine_key: str | None, gpu, version):
    """The rule of `tables` for `gpu`'s vendor and the engine of `engine_key` (an era's or a harness's key reads its
    engine's) at `gpu`'s compute capability (AMD: its gfx target's, "gfx942" -> (9, 4)) and `version`; None where
    there is none, or the GPU is known only by its memory."""
    rule = tables.get(vendor_of(gpu), {}).get(engine_of(engine_key or ""))
    if rule is None:
        return None
    cap = capability_of(gpu)
    return rule(cap, version) if cap is not None else None


MARLIN_BLOCK_M = 64  # the largest block_size_m fused_marlin_moe picks (its 8, 16, 32, 48, 64 ladder)
VLLM_TRITON_BUNDLED = (0, 12, 0)  # vLLM's first release whose build installs triton_kernels: Triton on Hopper


def _vllm_block(cap: tuple[int, int], version) -> int:
    if cap[0] == 10 or not _since(VLLM_FIRST, version):
        return 0  # FlashInfer on compute capability 10.x; no gpt-oss before 0.10.1
    if cap[0] == 9 and _since(VLLM_TRITON_BUNDLED, version):
        return 0  # Triton's matmul_ogs on Hopper from 0.12.0 (or a current release)
    return MARLIN_BLOCK_M


MOE_BLOCK = {"NVIDIA": {"vllm": _vllm_block}}  # Marlin is CUDA's: no AMD rule


def moe_block_m(engine_key: str | None, gpu, version=None) -> int:
    """Expert rows per tile of the MoE kernel an engine runs an MXFP4 checkpoint's experts in on `gpu` at `version`
    (None: a current release) where that kernel re-reads each expert's weights per tile
    (kvplan.speed.terms.reread_bytes, in the `experts` term), 0 elsewhere. vLLM's Marlin (`MOE_BLOCK`): its
    fused_marlin_moe takes block_size_m, the first of 8, 16, 32, 48, 64 at which M x top-k / E / block < 0.9, so 64
    at a prefill step's rows
    (vllm-project/vllm@129ab7c60cbb8eb11e875373e67f7e521b74aa30:
    vllm/model_executor/layers/fused_moe/fused_marlin_moe.py, a later stored version than the corpus's 0.10-0.11, the
    one the code index holds), run on every NVIDIA GPU but compute capability 10.x (FlashInfer) and 9.x from 0.12.0
    (triton_kernels bundled), as kvplan.engines.vllm.mxfp4 restates get_mxfp4_backend by release."""
    return _rule(MOE_BLOCK, engine_key, gpu, version) or 0
