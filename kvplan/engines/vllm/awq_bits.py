"""vLLM's AWQ bit widths by release: an 8-bit AWQ checkpoint is refused where vLLM's AWQ configs take 4 bits only.

A checkpoint whose `quant_method` is `awq` loads as AWQMarlinConfig where Marlin runs it, else AWQConfig (through
0.23.0), and as AutoAWQConfig from 0.24.0 (kvplan.engines.vllm.gdn_ba). Read in the wheels:
* AWQConfig raises on any width but 4 ("only 4-bit weight quantization is supported for AWQ", 0.19.0 wheel
  vllm/model_executor/layers/quantization/awq.py L51-55; 0.8.0 L35-38).
* AWQMarlinConfig.TYPE_MAP is {4, 8} through 0.10.2 (awq_marlin.py L44-47), {4} in 0.18.0-0.23.0 (0.19.0 L154-156,
  raising on any other width at L176-180); AutoAWQConfig.TYPE_MAP is {4} in 0.24.0-0.33.0 (0.33.0 auto_awq.py
  L182-184, raising at L204-211): an 8-bit checkpoint is not Marlin-compatible, falls to AWQConfig and is refused.
The releases between 0.10.2 and 0.18.0 were not read: a plan on one is refused as unread rather than guessed.
SGLang keeps 8 bits in its AWQ Marlin map (0.5.15 wheel sglang/srt/layers/quantization/awq/awq.py L218-221).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.versions import parse_version

LAST_EIGHT = (0, 10, 2)  # the last release read whose AWQ Marlin map takes 8 bits
FIRST_FOUR_ONLY = (0, 18, 0)  # the first release read whose AWQ configs take 4 bits only


def check(model, version: str) -> None:
    """A one-line refusal where `model` is an 8-bit AWQ checkpoint that vLLM `version` will not load (or whose
    release kvplan has not read)."""
    q = model.quantization
    if q.quant_method != "awq" or q.method != "int8":
        return
    v = parse_version(version)
    if v <= LAST_EIGHT:
        return
    if v >= FIRST_FOUR_ONLY:
        why = (f"vLLM {version} loads AWQ at 4 bits only and refuses this 8-bit AWQ checkpoint at start-up "
               "(AWQ Marlin's TYPE_MAP is {4} from 0.18.0; AWQConfig: \"only 4-bit weight quantization is "
               "supported for AWQ\")")
    else:
        why = (f"vLLM {version}: whether its AWQ Marlin takes 8 bits was not read (0.10.2 does, 0.18.0 does not); "
               f"this 8-bit AWQ checkpoint is refused rather than guessed")
    raise KvplanError(f"{why}; SGLang loads it, or {arg('engine_version')} 0.10.2 or earlier",
                      EXIT_USAGE, param="engine_version", value=version, allowed=("<= 0.10.2",))
