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
  * The encoder cache on the GPU is that same budget: `SchedulerConfig.encoder_cache_size` ("Multimodal encoder
    cache size, only used in V1. NOTE: This is not currently configurable. It will be overridden by
    max_num_batched_tokens in case max multimodal embedding size is larger", config/scheduler.py) is set by
    `compute_mm_encoder_budget` to max(max_num_batched_tokens, tokens per item); the runner keeps the encoder
    outputs in `gpu_model_runner.encoder_cache` (a dict of tensors, allocated at run time), and the profile run's
    dummy outputs are what reserve room for it. No flag sets it but --max-num-batched-tokens: kvplan prints it as
    a row ("encoder cache (GPU) = max(max_num_batched_tokens, one item's tokens)", overhead.encoder_budget) beside
    the encoder profile's bytes.
  * `--mm-processor-cache-gb` (`config/multimodal.py` MultiModalConfig.mm_processor_cache_gb: float = 4, "The
    size (in GiB) of the multi-modal processor cache ... duplicated for each API process and engine core
    process, resulting in a total memory usage of mm_processor_cache_gb * (api_server_count +
    data_parallel_size)"; 0 disables it) caches preprocessed inputs in host memory, not on the GPU: it moves no
    KV byte. `--engine-opt mm_processor_cache_gb=N` is printed as an assumption row and emitted as the flag. The
    flag arrived with vllm-project/vllm#22441 (first release v0.10.1: in its sdist's `engine/arg_utils.py`, not in
    v0.10.0's); before it (v0.8.5, v0.10.0 read) `disable_mm_preprocessor_cache` and `VLLM_MM_INPUT_CACHE_GIB`: refused.
"""

from __future__ import annotations

import dataclasses

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.base import Figure
from kvplan.engines.vllm.overhead import encoder_budget
from kvplan.model.weight_formats import PLAIN_BYTES
from kvplan.readers.towers.vision import COUNTED, TOWER_NOTICE

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


SKIPPED = ("are skipped: vLLM does not build the tower under limit_mm_per_prompt 0, so they are not in the weights "
           "(0 B) and there is no encoder profile")


def restated(model, limit: int, notices) -> tuple[str, ...]:
    """What resolving `model` noticed, as vLLM loads it under `--limit-mm-per-prompt` `limit`: at 0 an image-only
    tower the reader counted (its notice ends "are counted in the weights") is skipped (without_towers), so the
    notice says so; any other limit, tower or notice stands as read."""
    if limit != 0 or not model.params.vision or model.architecture not in IMAGE_ONLY:
        return tuple(notices)
    return tuple(n[:-len(COUNTED)] + SKIPPED if n.startswith(TOWER_NOTICE) and n.endswith(COUNTED) else n
                 for n in notices)


DEFAULT_CACHE_GB = 4.0  # MultiModalConfig.mm_processor_cache_gb


CACHE_GB_SINCE = (0, 10, 1)  # vllm-project/vllm#22441: in the v0.10.1 sdist's engine/arg_utils.py, not v0.10.0's


def cache_gb(opts: dict, v: tuple = CACHE_GB_SINCE) -> float:
    """--mm-processor-cache-gb as asked (-1.0: unset); a negative size is refused, and so is the option for a
    release `v` older than the flag (v0.10.0's EngineArgs has disable_mm_preprocessor_cache and the environment's
    VLLM_MM_INPUT_CACHE_GIB, v0.8.5's too; v0.10.1 adds mm_processor_cache_gb, #22441)."""
    if "mm_processor_cache_gb" not in opts:
        return -1.0
    text = str(opts["mm_processor_cache_gb"])
    if tuple(v) < CACHE_GB_SINCE:
        raise KvplanError(f"{arg('engine_opts')} mm_processor_cache_gb: vLLM {'.'.join(map(str, v))} has no "
                          "mm_processor_cache_gb (it arrived in 0.10.1, vllm-project/vllm#22441): leave the option out "
                          "(v0.8.5 to v0.10.0 size that host cache by VLLM_MM_INPUT_CACHE_GIB and turn it off with "
                          "disable_mm_preprocessor_cache; it moves no KV byte)", EXIT_USAGE, param="engine_opts",
                          value={"mm_processor_cache_gb": text})
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise KvplanError(f"{arg('engine_opts')} mm_processor_cache_gb must be GiB of host memory, 0 or more, "
                          f"got {text!r}",
                          EXIT_USAGE, param="engine_opts", value={"mm_processor_cache_gb": text})
    return value


def rows(model, st, encoder_bytes: int) -> list:
    """The engine table's multimodal rows: the limit, the tower's weights, the encoder profile and the encoder
    cache it reserves, the host processor cache (none for a text model with no multimodal option)."""
    cache = getattr(st, "mm_cache_gb", -1.0)
    if not model.params.vision and st.mm_limit == UNSET and cache < 0:
        return []
    plain = PLAIN_BYTES.get(model.dtype, 2)  # the tower stays unquantized
    out = [] if st.mm_limit == UNSET else [Figure("limit_mm_per_prompt (images)", st.mm_limit, "count")]
    if model.params.vision or st.mm_limit != UNSET:
        out.append(Figure("vision tower weights (whole model)", model.params.vision * plain, "bytes"))
        out.append(Figure("encoder profile (dummy image outputs)", encoder_bytes, "bytes"))
        if encoder_bytes:
            out.append(Figure("encoder cache (GPU) = max(max_num_batched_tokens, one item's tokens)",
                              encoder_budget(model, st.max_num_batched_tokens), "tokens"))
    gib = DEFAULT_CACHE_GB if cache < 0 else cache
    out.append(Figure("mm processor cache (host RAM per process)", int(gib * 2**30), "bytes"))
    return out


def serve_flag(limit: int, cache: float = -1.0) -> list[str]:
    """The `vllm serve` flags for an images-per-prompt limit and a processor cache size (none when unset)."""
    out = [] if limit == UNSET else ["--limit-mm-per-prompt", f'{{"image": {limit}}}']
    return out + ([] if cache < 0 else ["--mm-processor-cache-gb", f"{cache:g}"])
