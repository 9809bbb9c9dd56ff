"""vLLM's compressed-tensors W4A8 (int4 weights, 8-bit activations): CUTLASS W4A8's weights as loaded, or a refusal.

Why: such a checkpoint stores what a W4A16 one does (weight_packed int32 [N, K / 8], weight_scale in the model dtype
[N, K / 128]), so the reader's int4 bytes are its bytes on disk, but vLLM does not run it as W4A16. Read in the 0.19.0,
0.21.0, 0.24.0 and 0.33.0 wheels (`model_executor/layers/quantization/compressed_tensors/`):
* The scheme: `_get_scheme_from_parts` takes int4 weights with fp8 activations only through `_is_fp8_w4a8_sm90`
  (0.33.0 compressed_tensors.py L817-823, 0.19.0 L599-600): compute capability exactly 9.0 (`_check_scheme_supported(90,
  match_exact=True)`), int group weights and dynamic per-token fp8 activations, both symmetric (`_is_fp8_w4a8`, 0.33.0
  L619-645, 0.19.0 L496-516). Off 9.0 or off that shape a pack-quantized scheme with input activations matches nothing
  else and the load stops ("No compressed-tensors compatible scheme was found", 0.33.0 L946-949, 0.19.0 L680).
  CompressedTensorsW4A8Fp8
  takes groups of 128 only ("W4A8 kernels require group quantization with group size 128", 0.33.0
  `schemes/compressed_tensors_w4a8_fp8.py` L51-54). Integer activations go to other schemes (CompressedTensorsW4A8Int;
  from 0.33.0 CompressedTensorsWNA8Int on Humming, L838-851) whose layouts were not read: refused.
* The kernel: choose_mp_linear_kernel's CUDA list starts with CutlassW4A8LinearKernel (0.33.0 `kernels/linear/
  __init__.py` L539-548; prioritize_humming moves Humming ahead of Marlin only, `utils/humming/priority.py` L26-48),
  which takes a rank's shard where K % 128 and N % 128 are 0 and the output is bfloat16 (`mixed_precision/cutlass.py`
  can_implement L32-68). Elsewhere another kernel would be tried (not read): refused.
* As loaded (cutlass.py process_weights_after_loading L73-100; 0.19.0 L76-104): the weight is re-encoded in place
  (cutlass_encode_and_reorder_int4b: torch::empty_like, the same bytes); convert_bf16_scales_to_fp8 (`utils/
  quant_utils.py` L931-954) turns the [N, K / 128] group scales to fp8 and registers a per-channel fp32
  `weight_chan_scale` [N, 1]; cutlass_pack_scale_fp8 then packs each fp8 scale eight-wide (vllm-project/vllm@0065de94
  `csrc/quantization/cutlass_w4a8/w4a8_mm_entry.cu` pack_scale_fp8: torch::empty({scales.numel() * 8})). So a rank's
  linear of N outputs and K inputs holds 8 B a group where the checkpoint had 2, and 4 B an output more:
  6 x N x K / 128 + 4 x N bytes, booked with the weights as loaded (`weights_repack`).
Counted for the qkv, o, gate_up and down shards of kvplan.engines.marlin_shapes in the largest pipeline stage. A
checkpoint whose shards are not all read exactly (a role the counts do not give, heads that do not split) or whose
routed experts are W4A8 (CompressedTensorsW4A8Fp8MoEMethod, not read) is refused. Releases before 0.19.0 not read.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.marlin_shapes import rank_layer_shards
from kvplan.engines.versions import parse_version
from kvplan.engines.vllm.mxfp4 import nvidia_capability
from kvplan.planning.deploy import largest_stage
from kvplan.planning.plan_warnings import PlanWarning
from kvplan.readers.quantization import is_w4a8

FROM = (0, 19, 0)  # the first release whose W4A8 path was read
CUTLASS_CC = (9, 0)  # _is_fp8_w4a8_sm90: exactly 9.0
GROUP = 128  # CompressedTensorsW4A8Fp8's only group size, and CUTLASS's K and N tile
FP8_TOKEN = ("float", 8, "token", True, True)  # dynamic per-token symmetric fp8 activations


def _shards(model, dep):
    """A rank's shards per layer of the model, or None where they are not all read exactly."""
    shards = rank_layer_shards(model, dep.tp)
    return None if shards is None or shards[2] else shards[0]


def problem(model, dep, gpu, version: str) -> str | None:
    """Why vLLM `version` cannot load this W4A8 checkpoint on `gpu` as kvplan prices it (module docstring); None
    where CUTLASS W4A8 takes every linear, or the checkpoint is not W4A8."""
    if not is_w4a8(model.quantization):
        return None
    q, cap, head = model.quantization, nvidia_capability(gpu), f"vLLM {version} and this W4A8 checkpoint"
    kind, bits = q.input_quant[0], q.input_quant[1]
    if kind != "float":
        return (f"{head} ({kind}{bits} activations): int4 x integer activation schemes (CompressedTensorsW4A8Int, "
                "WNA8Int on Humming) were not read; refused rather than planned as W4A16")
    if q.input_quant != FP8_TOKEN or not q.symmetric or q.group_size != GROUP:
        return (f"{head}: vLLM's W4A8 FP8 scheme takes symmetric int4 groups of 128 with dynamic per-token symmetric "
                "fp8 activations (_is_fp8_w4a8); this one finds no scheme (\"No compressed-tensors compatible scheme "
                "was found\")")
    if cap != CUTLASS_CC:
        seen = f"compute capability {cap[0]}.{cap[1]}" if cap else "a GPU off CUDA"
        return (f"{head}: W4A8 FP8 runs on compute capability 9.0 only (_is_fp8_w4a8_sm90, match_exact); on {seen} "
                "no compressed-tensors scheme takes it (\"No compressed-tensors compatible scheme was found\")")
    if parse_version(version) < FROM:
        return f"{head}: the W4A8 path was read from 0.19.0; {version}'s was not"
    if model.params.num_experts and model.quantization.kept_of("experts") < model.params.experts:
        return f"{head}: the routed experts' W4A8 method (CompressedTensorsW4A8Fp8MoEMethod) was not read"
    if model.dtype != "bf16":
        return (f"{head}: CUTLASS W4A8 writes bfloat16 only (can_implement); the kernel a {model.dtype} model gets "
                "was not read")
    shards = _shards(model, dep)
    if shards is None:
        return (f"{head}: the linears' per-rank shapes do not follow exactly from the counts, so CUTLASS's tiles "
                "cannot be checked")
    odd = next((x for layer in shards for x in layer if x.n % GROUP or x.k % GROUP), None)
    if odd:
        return (f"{head}: a rank's {odd.name} is {odd.n} outputs x {odd.k} inputs at {arg('tp')} {dep.tp}, not "
                "whole 128-tiles, which CUTLASS W4A8 does not take (can_implement); the kernel tried next was not read")
    return None


def check(model, dep, gpu, version: str) -> None:
    """A one-line refusal where `problem` finds one."""
    why = problem(model, dep, gpu, version)
    if why:
        raise KvplanError(why, EXIT_USAGE)


def linear_bytes(n: int, k: int) -> int:
    """Bytes one rank's linear of N outputs and K inputs gains as CUTLASS W4A8 loads it: 6 B a group, 4 B an output."""
    return 6 * n * (k // GROUP) + 4 * n


def loaded_bytes(model, dep, v: tuple, gpu) -> int:
    """Bytes per rank of the largest stage CUTLASS W4A8 adds to the checkpoint's (module docstring); 0 where it does
    not run (a plan it cannot load is refused before: `check`)."""
    if not is_w4a8(model.quantization) or v < FROM or nvidia_capability(gpu) != CUTLASS_CC:
        return 0
    shards = _shards(model, dep)
    if shards is None:
        return 0
    return largest_stage([sum(linear_bytes(x.n, x.k) for x in layer) for layer in shards], dep)


def note(model, dep, st) -> tuple:
    """The CUTLASS W4A8 repack said with its bytes where counted."""
    b = loaded_bytes(model, dep, st.v, st.gpu)
    if not b:
        return ()
    return (PlanWarning(f"vLLM {st.version} runs this W4A8 checkpoint on CUTLASS W4A8 (compute capability 9.0): each "
                        "group scale packed eight-wide in fp8 (8 B for the checkpoint's 2) and an fp32 scale an output "
                        "channel: {} per GPU more weights, counted", (b,), ("MiB",)),)
