"""SGLang's quantization methods by release: a checkpoint whose `quant_method` the release does not register is refused.

SGLang resolves a checkpoint's `quant_method` against its QUANTIZATION_METHODS and raises on any other ("Unknown
quantization method: ...", `configs/model_config.py` ModelConfig._verify_quantization, 0.5.16 wheel L1466-1471).
fbgemm_fp8 (Meta's Llama-3.1-405B-Instruct-FP8) is registered with SGLang's own FBGEMMFp8Config through 0.5.15
(`layers/quantization/__init__.py`: 0.5.3 wheel L51, L88; 0.5.15 L95) and before that taken from vLLM (0.4.9 L23, L93,
VLLM_QUANTIZATION_METHODS); none of the 0.5.16-0.5.23 wheels has fbgemm anywhere under `srt/`, so a release from
0.5.16 on cannot load such a checkpoint.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.versions import parse_version

DROPPED = {"fbgemm_fp8": "0.5.16"}  # quant_method -> the first release without it
LAST = {"fbgemm_fp8": "0.5.15"}  # the last release that loads it


def check_release(model, version: str, defaulted: bool = False) -> None:
    """A one-line refusal where `model`'s checkpoint names a quant_method SGLang `version` does not register;
    `defaulted`: no release was asked, `version` is kvplan's default, and the line says which release to pass."""
    method = model.quantization.quant_method
    if method not in DROPPED or parse_version(version) < parse_version(DROPPED[method]):
        return
    which = f"{version} (kvplan's default; none was given)" if defaulted else version
    raise KvplanError(f"SGLang {which} registers no {method} quantization method (dropped in {DROPPED[method]}) and "
                      f"refuses this checkpoint at start-up (\"Unknown quantization method\"); {arg('engine_version')} "
                      f"{LAST[method]} or earlier loads it", EXIT_USAGE, param="engine_version", value=version,
                      allowed=(f"<= {LAST[method]}",))
