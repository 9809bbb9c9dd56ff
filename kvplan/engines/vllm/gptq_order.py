"""vLLM's GPTQ by release: act-order refused and g_idx not loaded from 0.30.0, `sym: false` refused from 0.22.0.

Read in the wheels (vllm/model_executor/layers/quantization/):
* 0.30.0 utils/gptq_utils.py normalize_and_validate_gptq_desc_act L23-50: `desc_act` with group_size -1 is a no-op
  (L29-31), any other `desc_act: true` raises "GPTQ group activation ordering (desc_act=True) is no longer supported"
  (L32-37); AutoGPTQConfig.__init__ calls it (auto_gptq.py L118). 0.29.0's auto_gptq.py has no such check.
* 0.30.0 base_config.py get_checkpoint_weight_mapper L244-249 maps every `.g_idx` tensor to None ("Discard
  activation-order metadata unused by supported kernels"; models/utils.py L437 applies it), and auto_gptq.py
  registers no g_idx parameter; 0.29.0 auto_gptq.py creates and registers one (L395, L443): weights as loaded lose
  GPTQ's g_idx (int32 [K] a linear, Quantization.index_bytes) from 0.30.0. 0.22.0-0.29.0 and 0.21.0's gptq.py load it.
The releases 0.29.1+ before 0.30.0, if any, were not read; kvplan puts the change at 0.30.0.

Asymmetric GPTQ (`sym: false`, Quantization.asym): from 0.22.0 `gptq` is AutoGPTQConfig (0.22.0 `quantization/
__init__.py` L154-155), whose TYPE_MAP holds (4, True) and (8, True) alone and whose __init__ raises "Unsupported
quantization config: bits=4, sym=False" (0.22.0 auto_gptq.py L99-102, L155-158; 0.33.0 L99-102, L152-155): refused.
Through 0.21.0 GPTQMarlinConfig.is_gptq_marlin_compatible turns it down (the same TYPE_MAP, 0.21.0 gptq_marlin.py
L103-106, L295-296) and GPTQConfig loads it (`__init__.py` L157) on the exllama kernel, which keeps the checkpoint's
qweight, qzeros and scales and is no Marlin (gptq.py L366-374; 0.19.0 the same): the checkpoint's bytes, no Marlin
padding (kvplan.engines.vllm.marlin_dense_pad starts at 0.24.0, marlin_moe_pad at 0.25.0).
"""

from __future__ import annotations

import dataclasses

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.versions import parse_version

FROM = (0, 30, 0)  # the first release read that refuses act-order and discards g_idx
SYM_ONLY_FROM = (0, 22, 0)  # AutoGPTQConfig: GPTQ's sym: false refused


def check(model, version: str) -> None:
    """A one-line refusal where `model` is a GPTQ checkpoint with act-order (groups) or `sym: false` and vLLM `version`
    refuses it (module docstring)."""
    if model.quantization.asym and parse_version(version) >= SYM_ONLY_FROM:
        bits = 4 if model.quantization.method == "int4" else 8
        raise KvplanError(f"vLLM {version} refuses asymmetric GPTQ (sym: false): AutoGPTQConfig takes sym: true only "
                          f"(\"Unsupported quantization config: bits={bits}, sym=False\", auto_gptq.py from 0.22.0); "
                          f"{arg('engine_version')} 0.21.0 or earlier loads it on GPTQ's exllama kernel",
                          EXIT_USAGE, param="engine_version", value=version, allowed=("<= 0.21.0",))
    if model.quantization.act_order and parse_version(version) >= FROM:
        raise KvplanError(f"vLLM {version} refuses GPTQ act-order (desc_act: true with group_size > 0): \"GPTQ group "
                          "activation ordering (desc_act=True) is no longer supported\" (from 0.30.0, gptq_utils.py "
                          f"L32-37); {arg('engine_version')} 0.29.0 or earlier loads it",
                          EXIT_USAGE, param="engine_version", value=version, allowed=("<= 0.29.0",))


def view(model, v: tuple):
    """The model as vLLM `v` loads it: from 0.30.0 without GPTQ's g_idx tensors (`checkpoint_bytes`, the files'
    own bytes on disk, keeps them: they are read, then discarded)."""
    if not model.quantization.index_bytes or v < FROM:
        return model
    return dataclasses.replace(model, quantization=dataclasses.replace(model.quantization, index_bytes=0))
