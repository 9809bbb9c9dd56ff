"""vLLM's multimodal budget: `--limit-mm-per-prompt` (`--engine-opt limit_mm_per_prompt=N`) and the encoder profile.

Read in the v0.20.0 wheel (the same code in v0.22.0 and v0.25.0):
  * `model_executor/models/interfaces.py` `SupportsMultiModal._mark_tower_model`: a tower's modules are not
    built ("automatically skipped") when `--limit-mm-per-prompt` is 0 for every modality of the tower; the
    towers kvplan counts for an image-only architecture (`IMAGE_ONLY`: Gemma 3, Mistral 3 and LLaVA with Pixtral,
    Llama 4 build theirs under `_mark_tower_model(vllm_config, "image")`) are then neither loaded nor
    profiled. A tower that also serves video or audio (Qwen3.5, Gemma 4) needs every modality at 0, which
    one images-per-prompt number does not say: refused.
  * `multimodal/encoder_budget.py` `MultiModalBudget._get_max_items` and `v1/core/encoder_cache_manager.py`
    `compute_mm_encoder_budget`: the profile run holds K = max(1, min(budget // T, max_num_seqs x
    max(1, min(limit, max_model_len // T)))) items of T tokens, budget = max(max_num_batched_tokens, T)
    (SchedulerConfig: encoder_cache_size = max_num_encoder_input_tokens = max_num_batched_tokens). With
    any limit >= 1 and vLLM's max_num_seqs that is budget // T items, at most the budget: kvplan keeps its
    bound of the whole budget in the model dtype (kvplan.engines.vllm.overhead.encoder_profile_bytes).
"""

from __future__ import annotations

import dataclasses

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.base import Figure
from kvplan.model.spec import PLAIN_BYTES

IMAGE_ONLY = {"Gemma3ForConditionalGeneration", "Mistral3ForConditionalGeneration", "Llama4ForConditionalGeneration",
              "LlavaForConditionalGeneration"}
UNSET = -1  # vLLM's default limits (every supported modality allowed)


def without_towers(model, limit: int):
    """The model as vLLM loads it under `--limit-mm-per-prompt` `limit` (UNSET: as configured)."""
    if limit == UNSET or limit > 0 or not model.params.vision:
        return model
    if model.architecture not in IMAGE_ONLY:
        raise KvplanError(f"limit_mm_per_prompt 0 skips {model.architecture}'s tower only when every modality it "
                          "serves is 0 (vLLM _mark_tower_model); kvplan reads image-only towers (Gemma 3, Mistral 3, "
                          f"Llama 4). Leave {arg('engine_opt')} limit_mm_per_prompt unset", EXIT_USAGE)
    plain = PLAIN_BYTES.get(model.dtype, 2)  # the tower stays unquantized
    vision = model.params.vision
    params = dataclasses.replace(model.params, vision=0, vision_replicated=0)
    checkpoint = None if model.checkpoint_bytes is None else model.checkpoint_bytes - vision * plain
    note = (f"vision tower not built (limit_mm_per_prompt 0: vLLM skips it): {vision:,} parameters not loaded, "
            "no encoder profile")
    return dataclasses.replace(model, params=params, checkpoint_bytes=checkpoint, notes=(*model.notes, note))


def rows(model, st, encoder_bytes: int) -> list:
    """The engine table's multimodal rows: the limit, the tower's weights, the encoder profile (none for text)."""
    if not model.params.vision and st.mm_limit == UNSET:
        return []
    plain = PLAIN_BYTES.get(model.dtype, 2)  # the tower stays unquantized
    out = [] if st.mm_limit == UNSET else [Figure("limit_mm_per_prompt (images)", st.mm_limit, "count")]
    out.append(Figure("vision tower weights (whole model)", model.params.vision * plain, "bytes"))
    out.append(Figure("encoder profile (dummy image outputs)", encoder_bytes, "bytes"))
    return out


def serve_flag(limit: int) -> list[str]:
    """The `vllm serve` flag for an images-per-prompt limit (none when unset)."""
    return [] if limit == UNSET else ["--limit-mm-per-prompt", f'{{"image": {limit}}}']
