"""SGLang's multimodal memory: the default mem_fraction_static scaled down for a vision model, and the GPU
embedding cache that lives in the headroom above it.

* Before 0.4.9 (kvplan's 0.4.0 and 0.4.3): `ModelRunner.__init__` (`srt/model_executor/model_runner.py`) did
  `if self.is_multimodal: self.mem_fraction_static *= 0.95` ("Automatically turn off --chunked-prefill-size and
  adjust --mem-fraction-static for multimodal models"), on whatever fraction is in force, the user's too.
  sgl-project/sglang#4826's Gemma 3 log (tp 1, H200-class, March 2025) bears it out: 131.08 GB free after
  weights, 139.21 before, 54.12 + 54.12 GB of K and V, so 131.08 - 139.21 x (1 - f) >= 108.24 needs f >= 0.836
  = 0.88 x 0.95, the 0.4.x default for one rank times the factor (0.88 alone would leave 114.4 GB for the pool).
  0.4.4.post4-0.4.8 multiply by 0.90 in the same place (FLAT below).
* `adjust_mem_fraction_for_vlm` (`srt/server_args.py` ServerArgs method with the (2.8/9.5/12 + tp) reserve table
  of 0.4.9; a function of `srt/arg_groups/memory_hook.py` in current main): only when --mem-fraction-static is
  not given and the model is multimodal with a `vision_config` (main also skips --language-only and a
  disaggregated decode server). SGLang reads the vision_config's `num_hidden_layers` (24 if absent) and
  `hidden_size` (1024 if absent) from the config object (kvplan reads the keys as config.json writes them: a
  transformers class that maps another key onto them, e.g. a ViT's `depth`, would differ) and sets
      ratio  = L x H^2 / (24 x 1024^2)                         (ViT-L/14 as the baseline)
      factor = 0.95 x clamp(1 - 0.1 x (ratio - 1), 0.8, 1.05)
      mem_fraction_static = default x factor
  (0.4.9-0.4.9.post2: a flat 0.90 there instead; the formula from 0.4.9.post3, wheels read),
  so a tower no larger than ViT-L keeps 0.95 to 0.9975 of the default and a larger one loses more: Pixtral's
  24 x 1024 gives 0.95, Gemma 3's SigLIP (27 x 1152) 0.9097, Llama 4's 34 x 1408 0.7906. The memory it frees
  is runtime headroom for the vision encoder's activations; it replaced the flat factors (kvplan applies it
  from 0.4.9.post3).
  Main adds a `post_capture_kv_sizing` mode that subtracts a flat 8 GiB instead; no release kvplan plans
  (0.5.23 and before) has it.
* The multimodal embedding cache (`srt/managers/mm_utils.py`: `embedding_cache.set(hash, embedding)` for
  each request's image embeddings; `MultiModalCache(SGLANG_VLM_CACHE_SIZE_MB)`, `srt/environ.py`
  `SGLANG_VLM_CACHE_SIZE_MB = EnvInt(100)`): GPU tensors filled at run time, outside the static pool, so it
  takes nothing from the KV budget but must fit the headroom SGLang leaves above the fraction, the free memory
  before the weights x (1 - mem_fraction_static) (kvplan.engines.sglang.req_pool.room), with the encoder's
  activations. That headroom is shared, and in SGLang's order: the request-slot pool (req_to_token) is allocated
  out of it at start-up, right after the token pool is sized (kvplan.engines.sglang.req_pool), while the cache
  allocates nothing until image embeddings arrive (a dict of the embeddings as computed: 0.4.9
  `mem_cache/multimodal_cache.py` L6-25 `put`; 0.5.23 L76-130, "this cache does not really pre-alloc"), wherever
  it is created (0.4.9 `managers/scheduler.py` L2715-2718 before the Scheduler; 0.5.3 L838-839 and 0.5.11
  L966-967 at the end of its cache set-up, after the model runner's pools; 0.5.15 and 0.5.23
  `mem_cache/kv_cache_builder.py` L249 and L480 after them). So what the cache can fill is the headroom less the
  request-slot pool (`left`); CUDA graphs and the encoder's activations share that rest too, not counted in it.
  `--engine-opt vlm_cache_size_mb=N` states the environment variable's value; kvplan prints it and warns when it
  exceeds what the request slots leave (a run-time failure once images fill it, not a start-up one: the plan still
  fits).
  From 0.5.18 SGLang reserves it out of the KV budget instead: `_profile_available_bytes` takes
  `mm_runtime_reservation_gb` off `rest` before the pool is sized ("Multimodal GPU memory allocated only after the KV
  pool is sized ...; reserve it out of the KV budget so it doesn't have to fit in the runtime slack": 0.5.18
  `mem_cache/kv_cache_configurator.py` L130-147 and L1785-1789, 0.5.23 L202-219 and L3034-3038; 0.5.17 L1625-1635
  has no such term; 0.5.19-0.5.22 not read, taken as 0.5.18 and 0.5.23 have it): SGLANG_VLM_CACHE_SIZE_MB MiB for a
  multimodal model, plus SGLANG_MM_FEATURE_CACHE_MB (1,024) where --mm-feature-transport is cuda_ipc or cuda_vmm,
  which a one-node server leaves at cpu (0.5.18 `server_args.py` L7861-7930; kvplan plans none, not counted).
  kvplan takes it off the budget there (`reserved`, beside the overhead as the OS's share is) and checks no headroom.
* Multimodal off by default (`ModelConfig.__init__`, `configs/model_config.py`: 0.4.6 L76-86, 0.5.1 L113-122,
  0.5.16 L309-323, 0.5.23 L690-717): where --enable-multimodal is not given and the config's first architecture is on
  `mm_disabled_models`, SGLang sets enable_multimodal False, logs "Multimodal is disabled for {model_type}. To enable
  it, set --enable-multimodal.", and `is_multimodal` is False: no VLM factor (either rule above), the prefill graph
  kept as for a text model (kvplan.engines.sglang.prefill_graph), no embedding cache. The list by release (wheels
  bisected): 0.4.5.post3 Llama 4 alone (`architectures[0] == "Llama4ForConditionalGeneration"`, its flag
  --enable-llama4-multimodal; 0.4.5.post1-post2 compared the whole list to the string, so nothing matched); Gemma 3
  and Llama 4 from 0.4.6; Step3-VL from 0.5.1; Inkling from 0.5.16 (0.5.15 without). Llama 4 then also leaves its
  vision tower unbuilt (`mllama4.py` `has_vision = has_vision_weights and enable_multimodal`, from 0.4.9.post4;
  0.5.23 L468; `without_tower`, the engine's view); Gemma 3's model builds it whatever the flag (`gemma3_mm.py`).
  Gemma-3-27B on an H100 at 0.5.23: 0.835 - 464 MiB of prefill graph = 0.830, where the VLM path gave 0.835 x 0.9097.
"""

from __future__ import annotations

import dataclasses

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.engines.base import Figure, parse_version
from kvplan.engines.versions import release_post
from kvplan.model.weight_formats import PLAIN_BYTES
from kvplan.engines.sglang.req_pool import room
from kvplan.readers.towers.vision import COUNTED, TOWER_NOTICE

BASE_LAYERS, BASE_HIDDEN = 24, 1024  # ViT-L/14, SGLang's baseline and its getattr defaults
DEFAULT_CACHE_MB = 100  # SGLANG_VLM_CACHE_SIZE_MB
MB = 2**20  # SGLang's "MB" here: * 1024 * 1024
RESERVED_FROM = (0, 5, 18)  # mm_runtime_reservation_gb: the cache reserved out of the KV budget
# `mm_disabled_models` by (release, post) it is in from, newest first (module docstring)
_G3, _L4, _STEP3 = "Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration", "Step3VLForConditionalGeneration"
MM_OFF = ((((0, 5, 16), 0), frozenset((_G3, _L4, _STEP3, "InklingForConditionalGeneration"))),
          (((0, 5, 1), 0), frozenset((_G3, _L4, _STEP3))), (((0, 4, 6), 0), frozenset((_G3, _L4))),
          (((0, 4, 5), 3), frozenset((_L4,))), (((0, 0, 0), 0), frozenset()))
FLAG_FROM = (0, 4, 6)  # --enable-multimodal (0.4.5.post3's was --enable-llama4-multimodal, Llama 4 only)
TOWER_SKIPPED = {_L4: ((0, 4, 9), 4)}  # mllama4.py's has_vision: no vision tower built without multimodal


def _off_archs(at: tuple[tuple, int]) -> frozenset:
    """`mm_disabled_models` at (release, post) `at` (MM_OFF)."""
    return next(archs for since, archs in MM_OFF if at >= since)


def switched_off(model, version: str, enable: bool = False) -> bool:
    """Whether SGLang at `version` serves this vision model text-only by default (MM_OFF), --enable-multimodal not
    given (`enable`, refused before the release that has the flag)."""
    if enable and parse_version(version) < FLAG_FROM:
        raise KvplanError(f"enable_multimodal: SGLang {version} has no --enable-multimodal (from 0.4.6)", EXIT_USAGE)
    return is_vlm(model) and not enable and getattr(model, "architecture", "") in _off_archs(release_post(version))


def is_multimodal(model, version: str, enable: bool = False) -> bool:
    """SGLang's `is_multimodal` as kvplan reads it: a vision model (is_vlm) not switched off by default."""
    return is_vlm(model) and not switched_off(model, version, enable)


def tower_dropped(model, version: str, enable: bool = False) -> bool:
    """Whether SGLang builds no vision tower for this model (TOWER_SKIPPED): multimodal off by default."""
    since = TOWER_SKIPPED.get(getattr(model, "architecture", ""))
    return since is not None and release_post(version) >= since and switched_off(model, version, enable)


def is_vlm(model) -> bool:
    """A model whose tower kvplan counts and whose config has a vision_config (the rule's two conditions)."""
    return bool(getattr(model.params, "vision", 0)) and bool(getattr(model, "vision_dims", ()))


# The flat factors before the vision_config's size (wheels read): ModelRunner's `if self.is_multimodal:
# self.mem_fraction_static *= 0.95` on any fraction to 0.4.4.post3 (0.4.4.post3 `model_executor/model_runner.py`
# L254), 0.90 from 0.4.4.post4 (L273; 0.4.5 L274, 0.4.8 L415); then `server_args.py` on its own default only, 0.90
# in 0.4.9-0.4.9.post2 (0.4.9 L328-329), `adjust_mem_fraction_for_vlm` from 0.4.9.post3 (L349). (release, post).
FLAT = ((((0, 4, 9), 3), None), (((0, 4, 9), 0), 0.90), (((0, 4, 4), 4), 0.90), (((0, 0, 0), 0), 0.95))


def scales_any_fraction(version: str) -> bool:
    """Whether the release scales a fraction the user gives too (ModelRunner's flat factor, before 0.4.9)."""
    return parse_version(version) < (0, 4, 9)


SKIPPED = ("are not loaded: SGLang switches multimodal off by default for this architecture and builds no vision "
           "tower (engine option enable_multimodal=true loads it)")


def without_tower(model, version: str, enable: bool = False):
    """The model as SGLang loads it where it builds no vision tower (tower_dropped): the tower's parameters (kept
    unquantized, the model dtype) out of the weights, and a note saying so."""
    if not tower_dropped(model, version, enable):
        return model
    vision = model.params.vision
    params = dataclasses.replace(model.params, vision=0, vision_replicated=0)
    plain = PLAIN_BYTES.get(model.dtype, 2)
    checkpoint = None if model.checkpoint_bytes is None else model.checkpoint_bytes - vision * plain
    note = (f"SGLang {version} switches multimodal off by default for {model.architecture} (mm_disabled_models): "
            f"text only, no VLM factor on the fraction, and its vision tower ({vision:,} parameters) is not built")
    return dataclasses.replace(model, params=params, checkpoint_bytes=checkpoint, notes=(*model.notes, note))


def restated(model, version: str, enable: bool, notices) -> tuple[str, ...]:
    """The reader's tower notice where SGLang builds no tower (without_tower): not "counted in the weights"."""
    if not tower_dropped(model, version, enable):
        return tuple(notices)
    return tuple(n[:-len(COUNTED)] + SKIPPED if n.startswith(TOWER_NOTICE) and n.endswith(COUNTED) else n
                 for n in notices)


def vision_dims(model) -> tuple[int, int]:
    """The vision_config's (num_hidden_layers, hidden_size) as SGLang reads them: getattr with 24 and 1024 for a
    key the config leaves out."""
    layers, hidden = (tuple(model.vision_dims) + (0, 0))[:2]
    return layers or BASE_LAYERS, hidden or BASE_HIDDEN


def vlm_factor(model, version: str, enable: bool = False) -> float:
    """The factor SGLang applies to mem_fraction_static for this model (1.0: none, multimodal off included): flat
    (FLAT) before 0.4.9.post3, the vision_config's size from it (to its own default only: the caller decides)."""
    if not is_multimodal(model, version, enable):
        return 1.0
    flat = next(f for since, f in FLAT if release_post(version) >= since)
    if flat is not None:
        return flat
    layers, hidden = vision_dims(model)
    ratio = layers * hidden**2 / (BASE_LAYERS * BASE_HIDDEN**2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def reserved(st) -> int:
    """Bytes SGLang takes off the KV budget for the embedding cache before sizing the pool: its cache size for a
    multimodal model from 0.5.18 (module docstring); 0 before, where the cache fills the headroom instead (`left`)."""
    return st.vlm_cache_mb * MB if st.multimodal and parse_version(st.version) >= RESERVED_FROM else 0


def left(st, slots: int) -> int:
    """What the request-slot pool (`slots` bytes, allocated at start-up) leaves of the headroom above the fraction
    for the run-time embedding cache (module docstring); 0 where the pool overruns it (the plan then does not fit)."""
    return max(0, room(st) - slots)


def rows(model, st, slots: int) -> list:
    """The engine table's multimodal rows (none for a text model, nor where SGLang switches multimodal off: a note);
    the headroom is the memory SGLang leaves above the fraction, free before the weights x (1 - fraction)
    (kvplan.engines.sglang.req_pool.room, from `profile_max_num_token`'s `rest = free_after_weights -
    free_before_weights x (1 - mem_fraction_static)`, 0.4.3.post4 `model_executor/model_runner.py` L608-633, 0.5.23
    `mem_cache/kv_cache_configurator.py` L2990-3060): not the GPU's usable memory, which counts the CUDA context
    SGLang's free memory has already lost; and what the request-slot pool (`slots` bytes) leaves of it (`left`)."""
    if not is_vlm(model) or not st.multimodal:
        return []
    out = [Figure("vision_config L x H (SGLang)", vision_dims(model), "a x b")]
    if st.vlm_factor != 1.0:
        out.append(Figure("VLM factor on the fraction", round(st.vlm_factor, 4), "number"))
    where = "reserved from the budget" if reserved(st) else "runtime"
    out.append(Figure(f"mm embedding cache ({where})", st.vlm_cache_mb * MB, "bytes"))
    out.append(Figure("headroom above the fraction", room(st), "bytes"))
    out.append(Figure("headroom after request slots", left(st, slots), "bytes"))
    return out


def _off_note(model, st) -> str | None:
    """Where SGLang switches multimodal off by default (`model` may be the view without_tower left): that it does."""
    at, arch = release_post(st.version), getattr(model, "architecture", "")
    dropped = at >= TOWER_SKIPPED.get(arch, ((999,), 0))
    if st.multimodal or arch not in _off_archs(at) or not (is_vlm(model) or dropped):
        return None
    tower = ", and no vision tower built (its weights not loaded)" if dropped else ""
    return (f"SGLang {st.version} switches multimodal off by default for {arch} (mm_disabled_models): text only, no "
            f"VLM factor on the fraction{tower}; engine option enable_multimodal=true plans it with images")


def notes(model, st, slots: int) -> list[str]:
    """A warning when the embedding cache alone does not fit what the request-slot pool (`slots` bytes) leaves of
    the headroom above the fraction (`left`); where SGLang switches multimodal off by default, that it serves the
    model text-only."""
    off = _off_note(model, st)
    if off:
        return [off]
    if reserved(st):
        return [f"SGLang {st.version} reserves its multimodal embedding cache (SGLANG_VLM_CACHE_SIZE_MB="
                f"{st.vlm_cache_mb}) out of the KV budget before sizing the pool (mm_runtime_reservation_gb): counted "
                "beside the overhead"]
    if is_vlm(model) and st.vlm_cache_mb * MB > left(st, slots):  # the headroom of rows()
        return [f"SGLANG_VLM_CACHE_SIZE_MB={st.vlm_cache_mb} exceeds the memory SGLang leaves above "
                "mem_fraction_static after its request-slot pool: image requests can run out of memory at run time"]
    return []
