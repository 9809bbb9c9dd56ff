"""Whether SGLang gives a model's sliding-window layers their own pool (the hybrid SWA memory), by release.

From 0.5 SGLang keeps sliding-window layers in a pool of their own (`swa_full_tokens_ratio` of the full pool's
tokens), unless `disable_hybrid_swa_memory` is set, and it sets it itself for some architectures:
  * Gemma 2, Gemma 3 and Gemma 3n (`Gemma2ForCausalLM`, `Gemma3ForCausalLM`, `Gemma3ForConditionalGeneration`,
    `Gemma3nForCausalLM`, `Gemma3nForConditionalGeneration`): "Disable hybrid SWA memory for {arch} as it is not
    yet supported" (FIXME: sgl-project/sglang#7367 "is not compatible with gemma2 model"). Read in the 0.5.3
    sdist (`srt/server_args.py` `_handle_model_specific_adjustments`, L792-804) and in the 0.5.23 wheel
    (`srt/arg_groups/model_overrides/gemma2_gemma3.py`, `{"disable_hybrid_swa_memory": True}`): every release
    kvplan plans from 0.5 on.
  * gpt-oss (`GptOssForCausalLM`) in 0.5.3 (`srt/server_args.py` L781, in the GptOssForCausalLM branch); by
    0.5.23 that line is gone and gpt-oss is a hybrid SWA architecture (`configs/model_config.py`
    `SWA_SINK_ARCHS`).
The model_runner then keeps `is_hybrid` off (0.5.3 `model_executor/model_runner.py` L348-355): every layer's
tokens go to the one full pool, a sliding-window layer holding a request's whole length like a full layer.
"""

from __future__ import annotations

from kvplan.engines.base import parse_version

NO_HYBRID_SWA = {"Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration",
                 "Gemma3nForCausalLM", "Gemma3nForConditionalGeneration"}
NO_HYBRID_SWA_BEFORE = {"GptOssForCausalLM": (0, 5, 23)}  # disabled in 0.5.3, hybrid in 0.5.23


def hybrid_swa(model, version: str) -> bool:
    """Whether `version` keeps the model's sliding-window layers in a pool of their own."""
    v, arch = parse_version(version), getattr(model, "architecture", None)
    if v < (0, 5, 0) or arch in NO_HYBRID_SWA:
        return False
    return not (arch in NO_HYBRID_SWA_BEFORE and v < NO_HYBRID_SWA_BEFORE[arch])


def note(model, version: str) -> str | None:
    """Said where a model with sliding-window layers is priced without SGLang's SWA pool from 0.5."""
    if parse_version(version) < (0, 5, 0) or hybrid_swa(model, version):
        return None
    return (f"SGLang {version} sets disable_hybrid_swa_memory for {model.architecture}: its sliding-window layers "
            "hold every token in the full pool, priced as full attention (kvplan.engines.sglang.swa)")
