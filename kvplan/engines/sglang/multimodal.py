"""SGLang's multimodal memory: the default mem_fraction_static scaled down for a vision model, and the GPU
embedding cache that lives in the headroom above it.

* `adjust_mem_fraction_for_vlm` (`srt/server_args.py` ServerArgs method with the (2.8/9.5/12 + tp) reserve table
  of 0.4.9; a function of `srt/arg_groups/memory_hook.py` in current main): only when --mem-fraction-static is
  not given and the model is multimodal with a `vision_config` (main also skips --language-only and a
  disaggregated decode server). SGLang reads the vision_config's `num_hidden_layers` (24 if absent) and
  `hidden_size` (1024 if absent) and sets
      ratio  = L x H^2 / (24 x 1024^2)                         (ViT-L/14 as the baseline)
      factor = 0.95 x clamp(1 - 0.1 x (ratio - 1), 0.8, 1.05)
      mem_fraction_static = default x factor
  so a tower no larger than ViT-L keeps 0.95 to 0.9975 of the default and a larger one loses more: Pixtral's
  24 x 1024 gives 0.95, Gemma 3's SigLIP (27 x 1152) 0.9097, Llama 4's 34 x 1408 0.7906. The memory it frees is runtime headroom for the vision
  encoder's activations; kvplan applies it from 0.4.9 (0.4.3.post4's TP-only default is not read for it).
  Main adds a `post_capture_kv_sizing` mode that subtracts a flat 8 GiB instead; no release kvplan plans
  (0.5.23 and before) has it.
* The multimodal embedding cache (`srt/managers/mm_utils.py`: `embedding_cache.set(hash, embedding)` for
  each request's image embeddings; `MultiModalCache(SGLANG_VLM_CACHE_SIZE_MB)`, `srt/environ.py`
  `SGLANG_VLM_CACHE_SIZE_MB = EnvInt(100)`): GPU tensors filled at run time, outside the static pool, so it
  takes nothing from the KV budget but must fit the headroom (1 - mem_fraction_static) of the GPU with the
  encoder's activations. `--engine-opt vlm_cache_size_mb=N` states the environment variable's value; kvplan
  prints it and warns when it exceeds the headroom.
"""

from __future__ import annotations

from kvplan.engines.base import Figure, parse_version

BASE_LAYERS, BASE_HIDDEN = 24, 1024  # ViT-L/14, SGLang's baseline and its getattr defaults
DEFAULT_CACHE_MB = 100  # SGLANG_VLM_CACHE_SIZE_MB
MB = 2**20  # SGLang's "MB" here: * 1024 * 1024


def is_vlm(model) -> bool:
    """A model whose tower kvplan counts and whose config has a vision_config (the rule's two conditions)."""
    return bool(getattr(model.params, "vision", 0)) and bool(getattr(model, "vision_dims", ()))


def vlm_factor(model, version: str) -> float:
    """The factor SGLang applies to its default mem_fraction_static for this model (1.0: none)."""
    if not is_vlm(model) or parse_version(version) < (0, 4, 9):
        return 1.0
    layers, hidden = (tuple(model.vision_dims) + (0, 0))[:2]
    layers, hidden = layers or BASE_LAYERS, hidden or BASE_HIDDEN
    ratio = layers * hidden**2 / (BASE_LAYERS * BASE_HIDDEN**2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def rows(model, st, usable_bytes: int) -> list:
    """The engine table's multimodal rows (none for a text model)."""
    if not is_vlm(model):
        return []
    layers, hidden = (tuple(model.vision_dims) + (0, 0))[:2]
    out = [Figure("vision_config L x H (SGLang)", (layers or BASE_LAYERS, hidden or BASE_HIDDEN),
                  "a x b")]
    if st.vlm_factor != 1.0:
        out.append(Figure("VLM factor on the fraction", round(st.vlm_factor, 4), "number"))
    out.append(Figure("mm embedding cache (runtime)", st.vlm_cache_mb * MB, "bytes"))
    out.append(Figure("headroom above the fraction", int(usable_bytes * (1 - st.mem_fraction_static)), "bytes"))
    return out


def notes(model, st, usable_bytes: int) -> list[str]:
    """A warning when the embedding cache alone does not fit the headroom SGLang leaves above its pool."""
    if is_vlm(model) and st.vlm_cache_mb * MB > usable_bytes * (1 - st.mem_fraction_static):
        return [f"SGLANG_VLM_CACHE_SIZE_MB={st.vlm_cache_mb} exceeds the memory SGLang leaves above "
                "mem_fraction_static: image requests can run out of memory at run time"]
    return []
