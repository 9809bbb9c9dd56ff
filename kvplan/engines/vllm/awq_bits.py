"""vLLM's AWQ configs by release and GPU: an AWQ checkpoint refused where the config vLLM picks for it cannot load it.

A checkpoint whose `quant_method` is `awq` loads as AWQMarlinConfig where AWQMarlinConfig.is_awq_marlin_compatible says
Marlin runs it, else as AWQConfig (through 0.23.0; AutoAWQConfig from 0.24.0, kvplan.engines.vllm.gdn_ba). Read in
the wheels (vllm/model_executor/layers/quantization/):
* AWQConfig takes 4 bits only ("Currently, only 4-bit weight quantization is supported for AWQ", raised in __init__:
  0.5.0-0.11.2 awq.py, 0.11.2 L51-55, 0.8.0 L35-38, 0.19.0 L51-55) and a compute capability of 7.5 or more
  (get_min_capability 75: 0.5.4 L49, 0.8.0 L56, 0.11.2 L73-75). vLLM builds the config before it compares the
  capability (0.11.2 config/vllm.py _get_quantization_config L251-262, 0.5.4 model_loader/loader.py L92-100: "The
  quantization method awq is not supported for the current GPU. Minimum capability: 75"), so an 8-bit checkpoint meets
  the bits error first.
* AWQ Marlin: none in 0.5.0-0.5.2 (no awq_marlin.py). 0.5.3: bits {4, 8} (utils/marlin_utils.py
  MARLIN_SUPPORTED_NUM_BITS L16), groups -1/32/64/128 (L17), the device's capability >= 80 (L20-28). 0.5.4: the same
  types ([uint4, uint8] with zero points, marlin_utils.py L28-39), but is_awq_marlin_compatible passes Marlin's own
  minimum (80) where the device's capability belongs (awq_marlin.py L127-130), so every such checkpoint becomes
  awq_marlin and AWQMarlinConfig's minimum, 80, refuses it below sm80 (loader.py L96-100). 0.5.5-0.8.5.post1: the
  device's capability again (0.6.0 marlin_utils.py L28-36), [uint4, uint8] with zero points (0.6.0 L38-40, 0.8.0
  L43-45, 0.8.5.post1 L43-45). 0.9.0-0.11.2: zero-point types [uint4] only (0.9.0 L58-60, 0.10.0 L59-61, 0.11.2
  L61-63) though AWQMarlinConfig.TYPE_MAP keeps 8 (0.11.2 L70-73): an 8-bit checkpoint is not Marlin-compatible and
  falls to AWQConfig. From 0.12.0 TYPE_MAP is {4} (0.12.0 L72-74; 0.19.0 L154-156; AutoAWQConfig {4}, 0.33.0
  auto_awq.py L182-184). From 0.7.0 is_awq_marlin_compatible returns False off CUDA (0.7.0 awq_marlin.py L138,
  0.11.2 L225).
So 8-bit AWQ loads only in 0.5.3 and 0.5.5-0.8.5.post1, on an NVIDIA GPU of compute capability 8.0+, at a Marlin group.
Read from the GPU profile's compute_capability (kvplan.hardware.facts.capability_of, never a name); a profile without
one is planned at the assumed 8.0 and the plan says so (overhead.missing_facts). A checkpoint without `zero_point` or
with `zero_point: false` is not Marlin-compatible either; kvplan reads AWQ as AutoAWQ writes it (zero points), not
that key. Below 7.5, 4-bit AWQ is refused in every release kvplan plans: AWQConfig.get_min_capability is 75 after
0.11.2 too (0.12.0 awq.py L73-75, 0.14.0 L73-75, 0.17.0 L73-75, 0.19.0 L73-75, 0.21.0 L75-77, 0.23.0 L75-77), and so is
AutoAWQConfig's, which every AWQ checkpoint loads as on CUDA from 0.24.0 (`get_name` "auto_awq"; 0.24.0-0.29.0
auto_awq.py L229-231, 0.30.0 L230-231, 0.33.0 L233-234); vLLM raises before loading ("The quantization method
{awq|auto_awq} is not supported for the current GPU. Minimum capability: 75. Current capability: 70.", config/vllm.py
0.14.0 L406-412, 0.24.0 L623-629, 0.33.0 L930-936).
SGLang keeps 8 bits in its AWQ Marlin map (0.5.15 wheel sglang/srt/layers/quantization/awq/awq.py L218-221), but its
Marlin takes zero-point weights as uint4 alone, so it refuses 8-bit AWQ from 0.5.3 (kvplan.engines.sglang.awq_rules).

At `group_size: -1` under tensor parallelism no release read here runs AWQ (`check_tp`): a row-parallel layer (o_proj,
down_proj: inputs split, input_size_per_partition = K / tp) normalizes the group to the whole input, K, and sizes its
scales and zero points (K / tp) // K = 0 rows in AWQ Marlin (0.7.0 awq_marlin.py L204, 0.8.0 L221, 0.11.2 L314,
0.19.0 L426; AutoAWQ's Marlin method 0.30.0 auto_awq.py L465, 0.33.0 L469), so the checkpoint's one row is narrowed
to nothing on load and the Marlin GEMM runs on no scales; GPTQ Marlin keeps such scales whole on every rank
(marlin_repeat_scales_on_all_ranks, 0.11.2 gptq_marlin.py L369-370), AWQ Marlin has no such branch. The plain AWQ
method refuses the shape outright (K / tp % K != 0: "The input size is not aligned with the quantized weight shape.
This can be caused by too large tensor parallel size.", 0.7.0 awq.py L102, 0.8.0 L105, 0.11.2 L190-195, 0.19.0 L193,
0.33.0 auto_awq.py L819-824).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.marlin_shapes import marlin_groups
from kvplan.engines.versions import parse_version
from kvplan.engines.vllm.mxfp4 import nvidia_capability

FIRST_MARLIN = (0, 5, 3)  # the first release with AWQ Marlin
BLIND = (0, 5, 4)  # the release whose Marlin test reads Marlin's own minimum, not the GPU's
LAST_EIGHT = (0, 8, 5)  # 0.8.5.post1: the last release whose Marlin takes 8-bit zero-point weights
NO_EIGHT_MAP = (0, 12, 0)  # the first release whose AWQ Marlin TYPE_MAP is {4}
CUDA_ONLY = (0, 7, 0)  # from here is_awq_marlin_compatible is False off CUDA
LAST_READ = (0, 11, 2)  # the last release whose AWQ Marlin rules (bits, 0.5.4's blind test) are read here
AUTO_AWQ = (0, 24, 0)  # from here an AWQ checkpoint loads as AutoAWQConfig ("auto_awq"), minimum 75 too
MARLIN_CC, AWQ_CC = (8, 0), (7, 5)  # AWQMarlinConfig.get_min_capability 80; AWQConfig's 75
RELEASES = "0.5.3 or 0.5.5-0.8.5.post1"  # the releases that load 8-bit AWQ (with Marlin, on sm80+)
WHERE = f"{RELEASES} on an NVIDIA GPU of compute capability 8.0 or more"
AWQ_4BIT = "AWQConfig: \"only 4-bit weight quantization is supported for AWQ\""


def _awq(model) -> bool:
    return model.quantization.quant_method == "awq"


def check(model, version: str) -> None:
    """A one-line refusal where `model` is an 8-bit AWQ checkpoint that vLLM `version` loads on no GPU."""
    if not _awq(model) or model.quantization.method != "int8":
        return
    v = parse_version(version)
    if v >= NO_EIGHT_MAP:
        why = "AWQ Marlin's TYPE_MAP is {4} from 0.12.0"
    elif v > LAST_EIGHT:
        why = "from 0.9.0 Marlin takes zero-point weights at 4 bits only (query_marlin_supported_quant_types: uint4)"
    elif v < FIRST_MARLIN:
        why = "no AWQ Marlin before 0.5.3"
    else:
        return
    raise KvplanError(f"vLLM {version} loads AWQ at 4 bits only and refuses this 8-bit AWQ checkpoint at start-up "
                      f"({why}; {AWQ_4BIT}); {arg('engine_version')} {WHERE} loads it",
                      EXIT_USAGE, param="engine_version", value=version, allowed=(WHERE,))


def check_tp(model, dep, version: str) -> None:
    """A one-line refusal where an AWQ checkpoint at group_size -1 runs under tensor parallelism (the module
    docstring: zero-row scales in AWQ Marlin, a refused shape in the plain AWQ method)."""
    q = model.quantization
    if not _awq(model) or not q.per_row or dep.tp <= 1:
        return
    raise KvplanError(f"vLLM {version} cannot run an AWQ checkpoint at group_size -1 under tensor parallelism "
                      f"({arg('tp')} {dep.tp}): a row-parallel layer (o_proj, down_proj) gets (K/tp) // K = 0 rows of "
                      "scales in AWQ Marlin (0.11.2 awq_marlin.py L314, 0.33.0 auto_awq.py L469), and the AWQ method "
                      "refuses the shape: \"The input size is not aligned with the quantized weight shape. This can be "
                      "caused by too large tensor parallel size.\" (0.11.2 awq.py L190-195; read in 0.7.0-0.33.0); "
                      f"plan it at {arg('tp')} 1 ({arg('pp')} or {arg('dp')} for more GPUs)",
                      EXIT_USAGE, param="tp", value=dep.tp, allowed=(1,))


def check_gpu(model, version: str, gpu) -> None:
    """A one-line refusal where vLLM `version` picks, on `gpu`, an AWQ config that refuses `model`: the Marlin and
    8-bit rules through 0.11.2 (`check` holds what no GPU changes), the 7.5 minimum in every release."""
    q, v = model.quantization, parse_version(version)
    if not _awq(model) or q.method not in ("int4", "int8"):
        return
    cap = nvidia_capability(gpu)  # None off NVIDIA
    if v <= LAST_READ:
        _check_marlin_era(q, v, version, gpu, cap)
    if cap is not None and cap < AWQ_CC:
        name = "auto_awq" if v >= AUTO_AWQ else "awq"
        _refuse(gpu, f"vLLM {version} refuses AWQ below compute capability 7.5 ({gpu.name}'s compute capability "
                     f"{cap[0]}.{cap[1]}): \"The quantization method {name} is not supported for the current GPU. "
                     f"Minimum capability: 75\" ({'AutoAWQConfig' if v >= AUTO_AWQ else 'AWQConfig'})")


def _check_marlin_era(q, v: tuple, version: str, gpu, cap) -> None:
    """check_gpu's rules for releases through 0.11.2: 8-bit off CUDA and below 8.0, 0.5.4's blind Marlin test."""
    if cap is None and q.method == "int8":
        why = ("is_awq_marlin_compatible is False off CUDA, so AWQConfig loads it" if v >= CUDA_ONLY else
               "AWQ Marlin off CUDA is not modelled before 0.7.0")
        _refuse(gpu, f"vLLM {version} refuses this 8-bit AWQ checkpoint on {gpu.name}: {why} ({AWQ_4BIT})")
    if cap is None or cap >= MARLIN_CC:
        return
    seen = f"{gpu.name}'s compute capability {cap[0]}.{cap[1]}"
    if v == BLIND and marlin_groups(q):
        _refuse(gpu, f"vLLM 0.5.4 converts this AWQ checkpoint to awq_marlin whatever the GPU (its Marlin test reads "
                     "Marlin's own minimum, 80, as the device's) and then refuses it at start-up: \"The quantization "
                     f"method awq_marlin is not supported for the current GPU. Minimum capability: 80\" ({seen}); "
                     f"{arg('engine_version')} 0.5.3 or 0.5.5+ loads it with AWQConfig")
    if q.method == "int8":
        _refuse(gpu, f"vLLM {version} refuses this 8-bit AWQ checkpoint below compute capability 8.0 ({seen}): AWQ "
                     f"Marlin needs 8.0, so AWQConfig loads it ({AWQ_4BIT}); a GPU of 8.0+ "
                     f"with {arg('engine_version')} {RELEASES}")


def _refuse(gpu, why: str) -> None:
    raise KvplanError(why, EXIT_USAGE, param="gpu", value=getattr(gpu, "key", None))


def reads_capability(model, version: tuple[int, ...]) -> bool:
    """Whether check_gpu read a compute capability (an AWQ checkpoint: 4-bit in every release, 8-bit through 0.11.2,
    where a later release refuses it by release alone): where the profile leaves it out, the plan says what it
    assumed (kvplan.engines.vllm.overhead.missing_facts)."""
    return _awq(model) and (version <= LAST_READ or model.quantization.method == "int4")
