"""vLLM's GPTQ act-order by release: from 0.30.0 it refuses `desc_act` with groups and does not load g_idx.

Read in the wheels (vllm/model_executor/layers/quantization/):
* 0.30.0 utils/gptq_utils.py normalize_and_validate_gptq_desc_act L23-50: `desc_act` with group_size -1 is a no-op
  (L29-31), any other `desc_act: true` raises "GPTQ group activation ordering (desc_act=True) is no longer supported"
  (L32-37); AutoGPTQConfig.__init__ calls it (auto_gptq.py L118). 0.29.0's auto_gptq.py has no such check.
* 0.30.0 base_config.py get_checkpoint_weight_mapper L244-249 maps every `.g_idx` tensor to None ("Discard
  activation-order metadata unused by supported kernels"; models/utils.py L437 applies it), and auto_gptq.py
  registers no g_idx parameter; 0.29.0 auto_gptq.py creates and registers one (L395, L443): weights as loaded lose
  GPTQ's g_idx (int32 [K] a linear, Quantization.index_bytes) from 0.30.0. 0.22.0-0.29.0 and 0.21.0's gptq.py load it.
The releases 0.29.1+ before 0.30.0, if any, were not read; kvplan puts the change at 0.30.0.
"""

from __future__ import annotations

import dataclasses

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.versions import parse_version

FROM = (0, 30, 0)  # the first release read that refuses act-order and discards g_idx


def check(model, version: str) -> None:
    """A one-line refusal where `model` is a GPTQ checkpoint with act-order (groups) and vLLM `v` refuses it."""
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
