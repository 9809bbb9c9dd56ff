"""SGLang's AWQ / GPTQ configs by GPU: an AWQ checkpoint refused where the config SGLang picks for it cannot load it.

Why: SGLang resolves an `awq` checkpoint to AWQMarlinConfig only where `is_awq_marlin_compatible` holds, else to
AWQConfig, and compares the chosen config's minimum compute capability before building the model ("The quantization
method awq is not supported for the current GPU. Minimum capability: 75. Current capability: 70.", `model_loader/
loader.py` _get_quantization_config: 0.4.0 wheel L110-119, 0.4.9 L132-141, 0.5.3 L178-187, 0.5.23 L255-265). Read in
the 0.5.3 and 0.5.8-0.5.23 wheels (`layers/quantization/marlin_utils.py`, `awq.py`, from 0.5.11 `awq/awq.py`):
* Marlin's quant types are empty below compute capability 8.0 (query_marlin_supported_quant_types: `if
  device_capability < 80: return []`, 0.5.3 L73-74, 0.5.10 L89-90, 0.5.23 L78-79), so below 8.0 no AWQ checkpoint is
  Marlin-compatible and AWQConfig loads it: minimum 75 (get_min_capability "The AWQ kernel only supports Turing or
  newer GPUs", 0.5.3 awq.py L120, 0.5.10 L150, 0.5.23 awq/awq.py L116; 0.4.9's own AWQConfig L73; 0.4.0-0.4.3 take
  vLLM's AWQConfig, also 75, kvplan.engines.vllm.awq_bits). Below 7.5 (V100) an AWQ checkpoint is refused in every
  release kvplan plans.
* The zero-point types Marlin takes are [uint4] alone (`if has_zp: return [scalar_types.uint4]`, 0.5.3 L88-90, 0.5.10
  L104-106, 0.5.23 L93-95), though AWQMarlinConfig.TYPE_MAP keeps 8 bits (0.5.23 L249-252): an 8-bit AWQ checkpoint
  is never Marlin-compatible, falls to AWQConfig, and AWQConfig raises "Currently, only 4-bit weight quantization is
  supported for AWQ, but got 8 bits." (0.5.3 L93-97, 0.5.10 L118-122, 0.5.23 L84-88): refused on every GPU from
  0.5.3. Before 0.5.3 AWQ Marlin is whichever vLLM is installed beside SGLang (0.4.0 `quantization/__init__.py` L8,
  L38; 0.4.9 L12-14), not read here: planned as before.
GPTQ's configs need 6.0 (GPTQConfig) or, for GPTQ Marlin, 8.0, which is taken only where Marlin supports the device
(0.5.23 gptq/gptq.py L140, L387, L459-481): no GPU kvplan profiles is below 6.0, so nothing is refused for GPTQ.

Not priced, and why: SGLang pads neither dense GPTQ / AWQ / WNA16 linears nor their MoE experts for Marlin, in any
release read (0.5.3-0.5.23; 0.4.x load vLLM's classes, from releases before its padding, 0.24.0). Its
`verify_marlin_supports_shape` keeps the strict tile test (N % 64, K % 128; 0.5.23 marlin_utils.py L161-193) and
`check_moe_marlin_supports_layer` gained `allow_tile_padding` in 0.5.14 (0.5.23 L227-263) for MXFP4 Marlin MoE alone
(`mxfp4.py` 0.5.23 L656, `mxfp4_marlin_moe.py` L163); AWQ falls back to its own kernel for a dense shard that fails the
test and to MoeWNA16 for experts (awq/awq.py 0.5.23 L368-392), neither repacked, so nothing is added to the checkpoint's
bytes (vLLM's padding, kvplan.engines.vllm.marlin_dense_pad and marlin_moe_pad, does not apply). A GPTQ Marlin or WNA16
shard that fails the test is not refused by SGLang's config: the kernel calls check_marlin_supports_shape and drops its
answer, and the repack stops the load where N % 64 or K % 16 fails (kvplan.engines.sglang.gptq_marlin refuses those
plans).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.engines.versions import parse_version
from kvplan.hardware.facts import capability_of, vendor_of

AWQ_CC = (7, 5)  # AWQConfig.get_min_capability: 75, in every release
FOUR_BITS_FROM = (0, 5, 3)  # SGLang's own AWQ Marlin, zero-point types [uint4]: 8-bit AWQ refused from here


def _awq(model) -> bool:
    return model.quantization.quant_method == "awq"


def check_gpu(model, gpu, version: str) -> None:
    """A one-line refusal where SGLang `version` cannot load this AWQ checkpoint on `gpu` (module docstring): 8 bits
    from 0.5.3 on any GPU, any AWQ below compute capability 7.5 on NVIDIA."""
    q = model.quantization
    if not _awq(model) or q.method not in ("int4", "int8"):
        return
    if q.method == "int8" and parse_version(version) >= FOUR_BITS_FROM:
        raise KvplanError(f"SGLang {version} loads AWQ at 4 bits only and refuses this 8-bit AWQ checkpoint at "
                          "start-up: Marlin takes zero-point weights as uint4 alone "
                          "(query_marlin_supported_quant_types), so AWQConfig loads it and raises \"Currently, only "
                          "4-bit weight quantization is supported for AWQ, but got 8 bits.\"", EXIT_USAGE,
                          param="engine", value="sglang")
    cap = capability_of(gpu) if vendor_of(gpu) == "NVIDIA" else None
    if cap is not None and cap < AWQ_CC:
        raise KvplanError(f"SGLang {version} refuses AWQ below compute capability 7.5 ({gpu.name}'s compute "
                          f"capability {cap[0]}.{cap[1]}): \"The quantization method awq is not supported for the "
                          "current GPU. Minimum capability: 75\" (AWQConfig; Marlin needs 8.0)", EXIT_USAGE,
                          param="gpu", value=getattr(gpu, "key", None))


def reads_capability(model) -> bool:
    """Whether check_gpu read a compute capability (a 4-bit AWQ checkpoint): where the profile leaves it out, the
    plan says what it assumed."""
    return _awq(model) and model.quantization.method == "int4"
