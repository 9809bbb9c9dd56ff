"""vLLM's AWQ bit widths by release: an 8-bit AWQ checkpoint is refused where vLLM's AWQ configs take 4 bits only.

A checkpoint whose `quant_method` is `awq` loads as AWQMarlinConfig where Marlin runs it, else AWQConfig (through
0.23.0), and as AutoAWQConfig from 0.24.0 (kvplan.engines.vllm.gdn_ba). Read in the wheels:
* AWQConfig raises on any width but 4 ("only 4-bit weight quantization is supported for AWQ", 0.19.0 wheel
  vllm/model_executor/layers/quantization/awq.py L51-55; 0.8.0 L35-38).
* AWQMarlinConfig.TYPE_MAP is {4, 8} through 0.11.2 (awq_marlin.py 0.10.2 L44-47, 0.11.0 L46-49, 0.11.2 L70-73),
  {4} from 0.12.0 (0.12.0 L72-74, 0.13.0 L71-73, 0.14.0 L72-74; 0.19.0 L154-156, raising on any other width at
  L176-180); AutoAWQConfig.TYPE_MAP is {4} in 0.24.0-0.33.0 (0.33.0 auto_awq.py L182-184, raising at L204-211): an
  8-bit checkpoint is not Marlin-compatible from 0.12.0, falls to AWQConfig and is refused.
Where Marlin cannot run (compute capability below 8.0) an 8-bit checkpoint falls to AWQConfig in every release and is
refused there too; kvplan plans it on <= 0.11.2 as Marlin-compatible (not modelled by GPU).
SGLang keeps 8 bits in its AWQ Marlin map (0.5.15 wheel sglang/srt/layers/quantization/awq/awq.py L218-221).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.versions import parse_version

LAST_EIGHT = (0, 11, 2)  # the last release whose AWQ Marlin map takes 8 bits (0.12.0 is the next one)


def check(model, version: str) -> None:
    """A one-line refusal where `model` is an 8-bit AWQ checkpoint that vLLM `version` will not load."""
    q = model.quantization
    if q.quant_method != "awq" or q.method != "int8":
        return
    v = parse_version(version)
    if v <= LAST_EIGHT:
        return
    why = (f"vLLM {version} loads AWQ at 4 bits only and refuses this 8-bit AWQ checkpoint at start-up "
           "(AWQ Marlin's TYPE_MAP is {4} from 0.12.0; AWQConfig: \"only 4-bit weight quantization is "
           "supported for AWQ\")")
    raise KvplanError(f"{why}; SGLang loads it, or {arg('engine_version')} 0.11.2 or earlier",
                      EXIT_USAGE, param="engine_version", value=version, allowed=("<= 0.11.2",))
