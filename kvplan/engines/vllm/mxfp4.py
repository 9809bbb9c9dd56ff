"""vLLM's MXFP4 MoE backend by release and GPU, and what it adds to the experts as loaded (source-derived, not fitted).

Which backend (`vllm/model_executor/layers/quantization/mxfp4.py` get_mxfp4_backend; 0.10.1.1
Mxfp4MoEMethod._should_use_marlin L123-135, 0.10.2 L54-96, 0.11.0 L59-102, 0.11.2 L89-146, 0.12.0 L107-165):
  * compute capability 10.x with FlashInfer: FlashInfer (I/tp and H padded to 256);
  * 9.0 and 10.x otherwise: Triton (triton_kernels' matmul_ogs) when `has_triton_kernels()`, else Marlin.
    Up to 0.11.2 `has_triton_kernels` asks for the optional `triton_kernels` package only
    (0.11.0 `vllm/utils/__init__.py` L3431-3434), which neither the wheel's requirements
    (`requirements/cuda.txt`, `setup.py`) nor the CUDA image (`docker/Dockerfile`) install: a stock 0.10.1-0.11.2
    runs gpt-oss on Hopper in Marlin (vllm#23278's log: the marlin_utils_fp4 warning, 65.97 GiB loaded). From 0.12.0
    the build bundles it (`CMakeLists.txt` L1090-1092 `cmake/external_projects/triton_kernels.cmake`, and
    `utils/import_utils.py` L73-83 falls back to `vllm.third_party.triton_kernels`): Triton is the default.
    The SM90 FlashInfer path needs VLLM_USE_FLASHINFER_MOE_MXFP4_BF16=1 in every release: not a default.
  * anything else NVIDIA (Ampere, Ada, consumer Blackwell SM120): Marlin.
`--engine-opt mxfp4_backend=marlin|triton|flashinfer` names the one that runs (a log's "Using Triton backend").

What it adds (Mxfp4MoEMethod.create_weights, commit 007d5005; the same shapes in 0.11.0 L180-300): Marlin pads
I/tp to a multiple of 128 and H to 256; FlashInfer on SM100 both to 256; Triton I/tp to 64 only. A 4-bit value
and an 8-bit scale per 32 (0.53125 B per weight) fill the padding too, and the bf16 biases grow with it.
Hopper (Triton): process_weights_after_loading then swizzles each expert (quantization/utils/mxfp4_utils.py
_swizzle_mxfp4, num_warps 8, v0.11-v0.19) into triton_kernels' Hopper layouts (triton-lang/triton
python/triton_kernels/triton_kernels/tensor_details/layout_details/hopper_value.py
HopperMXValueLayoutTransformation._padded_shape, commit 000df03e; hopper_scale.py swizzle_data, commit 14dd7a19),
which pad again: the packed values [K/2, N] (K the contraction axis, 2 fp4 per byte) to K/2 % 64 and N % 256; the
scales [N, K/32] to N % (32 x num_warps) = 256 and K/32 % 2. The biases become fp32 (+2 B each). gpt-oss-20b on one
H100: +0.57 GiB (w13 1440x5760 -> 1472x5888 bytes, w2 1440x2880 -> 1472x3072, per expert-layer).
Marlin also runs its experts through fused_moe's intermediate caches in the profile run (the activation peak's
MoE workspace, kvplan.engines.vllm.overhead); Triton and FlashInfer do not.
The GPU facts read (kvplan/hardware/profiles/README.md): the vendor and the compute capability.
"""

from __future__ import annotations

from kvplan.core.intmath import round_up
from kvplan.engines.mxfp4_experts import stored_expert, triton_hopper_expert
from kvplan.engines.versions import dotted
from kvplan.hardware.facts import capability_of, vendor_of

BACKENDS = ("marlin", "triton", "flashinfer")
_BACKEND_PADDING = {"marlin": (128, 256), "triton": (64, 1), "flashinfer": (256, 256)}
TRITON_BUNDLED = (0, 12, 0)  # the first release whose build installs triton_kernels (vllm/third_party)


def nvidia_capability(gpu) -> tuple[int, int] | None:
    """The compute capability an NVIDIA GPU's kernels are chosen by (8.0 assumed where its profile gives none:
    a plan warning); None off NVIDIA (AMD Instinct, Gaudi) and for a GPU known only by its memory."""
    if vendor_of(gpu) != "NVIDIA":
        return None
    return capability_of(gpu)


def backend_for(gpu, version: tuple[int, ...] | None = None, named: str | None = None) -> str | None:
    """The MXFP4 MoE backend vLLM `version` (None: a current release) picks on this GPU, or the one `named`;
    None off NVIDIA or for a GPU known only by its memory."""
    cap = nvidia_capability(gpu)
    if cap is None:
        return None
    if named:
        return named
    if cap[0] == 10:
        return "flashinfer"
    if cap[0] == 9:
        return "triton" if version is None or version >= TRITON_BUNDLED else "marlin"
    return "marlin"


def unbundled_hopper(model, gpu, version: tuple[int, ...], named: str | None) -> bool:
    """Whether the plan assumed Marlin for want of triton_kernels (an MXFP4 MoE model on compute capability 9.x,
    a release before 0.12.0, no backend named): the plan says so."""
    cap = nvidia_capability(gpu)
    return (not named and cap is not None and cap[0] == 9 and version < TRITON_BUNDLED
            and model.quantization.method == "mxfp4" and bool(model.params.num_experts))


def unbundled_note(version: tuple[int, ...]) -> str:
    release = dotted(version)
    return (f"vLLM {release} runs MXFP4 experts on compute capability 9.x in Marlin unless the optional triton_kernels "
            "package is installed (bundled from 0.12.0): planned with Marlin's padding and MoE workspace; "
            "engine option mxfp4_backend=triton where the log says \"Using Triton backend\"")


def _hopper_swizzle_extra(per_rank: int, hidden: int) -> int:
    """Bytes one expert of one layer gains over the checkpoint in triton_kernels' Hopper layouts, at vLLM's own I/tp
    padding to 64 for the Triton backend."""
    return triton_hopper_expert(round_up(per_rank, 64), hidden) - stored_expert(per_rank, hidden)


def _padded_expert_extra(per_rank: int, hidden: int, i_mult: int, h_mult: int) -> int:
    """Bytes one expert of one layer gains when Mxfp4MoEMethod.create_weights pads I/tp to i_mult and H
    to h_mult (vllm mxfp4.py, commit 007d5005): the padded shapes, bf16 biases, less the checkpoint's."""
    return stored_expert(round_up(per_rank, i_mult), round_up(hidden, h_mult)) - stored_expert(per_rank, hidden)


def weights_repack_extra(model, tp: int, gpu, backend: str | None = None,
                         version: tuple[int, ...] | None = None) -> int:
    """Bytes per rank the MXFP4 experts gain over the checkpoint in the backend vLLM `version` picks on the GPU
    (None: a current release), or in `backend` ("marlin", "triton", "flashinfer")."""
    q, p = model.quantization, model.params
    chosen = backend_for(gpu, version, backend)
    if q.method != "mxfp4" or not chosen or not p.num_experts or not p.experts_per_token or not p.num_moe_layers:
        return 0
    width = model.intermediate_size // p.experts_per_token  # one expert's intermediate size
    per_rank, hidden = width // tp, model.hidden_size
    if chosen == "triton" and nvidia_capability(gpu)[0] == 9:
        return _hopper_swizzle_extra(per_rank, hidden) * p.num_experts * p.num_moe_layers
    return _padded_expert_extra(per_rank, hidden, *_BACKEND_PADDING[chosen]) * p.num_experts * p.num_moe_layers
