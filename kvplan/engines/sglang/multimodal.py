"""SGLang's multimodal memory: the default mem_fraction_static scaled down for a vision model, and the GPU
embedding cache that lives in the headroom above it.

* Before 0.4.9 (kvplan's 0.4.0 and 0.4.3): `ModelRunner.__init__` (`srt/model_executor/model_runner.py`) did
  `if self.is_multimodal: self.mem_fraction_static *= 0.95` ("Automatically turn off --chunked-prefill-size and
  adjust --mem-fraction-static for multimodal models"), on whatever fraction is in force, the user's too.
  sgl-project/sglang#4826's Gemma 3 log (tp 1, H200-class, March 2025) bears it out: 131.08 GB free after
  weights, 139.21 before, 54.12 + 54.12 GB of K and V, so 131.08 - 139.21 x (1 - f) >= 108.24 needs f >= 0.836
  = 0.88 x 0.95, the 0.4.x default for one rank times the factor (0.88 alone would leave 114.4 GB for the pool).
* `adjust_mem_fraction_for_vlm` (`srt/server_args.py` ServerArgs method with the (2.8/9.5/12 + tp) reserve table
  of 0.4.9; a function of `srt/arg_groups/memory_hook.py` in current main): only when --mem-fraction-static is
  not given and the model is multimodal with a `vision_config` (main also skips --language-only and a
  disaggregated decode server). SGLang reads the vision_config's `num_hidden_layers` (24 if absent) and
  `hidden_size` (1024 if absent) from the config object (kvplan reads the keys as config.json writes them: a
  transformers class that maps another key onto them, e.g. a ViT's `depth`, would differ) and sets
      ratio  = L x H^2 / (24 x 1024^2)                         (ViT-L/14 as the baseline)
      factor = 0.95 x clamp(1 - 0.1 x (ratio - 1), 0.8, 1.05)
      mem_fraction_static = default x factor
  so a tower no larger than ViT-L keeps 0.95 to 0.9975 of the default and a larger one loses more: Pixtral's
  24 x 1024 gives 0.95, Gemma 3's SigLIP (27 x 1152) 0.9097, Llama 4's 34 x 1408 0.7906. The memory it frees
  is runtime headroom for the vision encoder's activations; it replaced the flat 0.95 above (kvplan applies it
  from 0.4.9).
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


def scales_any_fraction(version: str) -> bool:
    """Whether the release scales a fraction the user gives too (ModelRunner's flat 0.95, before 0.4.9)."""
    return parse_version(version) < (0, 4, 9)


def vlm_factor(model, version: str) -> float:
    """The factor SGLang applies to mem_fraction_static for this model (1.0: none): a flat 0.95 before 0.4.9, the
    vision_config's size from 0.4.9 (to its own default only: the caller decides)."""
    if not is_vlm(model):
        return 1.0
    if scales_any_fraction(version):
        return 0.95
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
