"""Counting a multimodal model's vision (and audio) towers and projectors from its config.

A config that declares a tower (`vision_config`, `audio_config`, ... not null: `tower_keys`) is
priced here or refused (`price_towers`): vLLM loads every declared tower, so a tower counted as 0
would overstate the KV budget by its weights. The one exception is an architecture class vLLM
registers as text-only (`TEXT_ONLY`), which builds no tower whatever the config says; the spec then
carries a note saying so. Only towers whose every tensor kvplan knows are counted, each checked
against transformers' own classes on the meta device (tests/test_vision_params.py):

* Gemma 3 (`siglip_vision_model`, transformers SiglipVisionModel + Gemma3MultiModalProjector):
  a conv patch embedding 3 x P x P -> D with bias, a learned position table of (image/P)^2 x D,
  per layer two LayerNorms (weight + bias), q/k/v/o D x D with bias and an MLP D -> I -> D with
  biases, a post LayerNorm, the attention-pooling head only when `vision_use_head`; the projector
  is a D x text-hidden matrix plus an RMSNorm of D. gemma-3-27b-it: 416,866,032 + 6,194,304.
  vLLM 0.19 gemma3_mm.py keeps the projector's matrix a plain nn.Parameter: whole on every tp rank.
* Llama 4 (`llama4_vision_model`, Llama4VisionModel + Llama4MultiModalProjector): a bias-free
  patch linear 3 x P x P -> D, a class embedding D, a position table ((image/P)^2 + 1) x D, pre/post
  LayerNorms, per layer q/k/v/o D x D with bias, an MLP D -> I -> D with biases and two LayerNorms;
  the pixel-shuffle adapter's bias-free MLP I -> projector_input_dim and projector_output_dim ->
  projector_output_dim, and a bias-free projector vision_output_dim -> text hidden. Llama-4-Scout:
  850,960,896 + 20,971,520.
* Gemma 4 (`gemma4_vision` / `gemma4_audio`): kvplan.readers.towers.gemma4.
* Qwen3.5 (`qwen3_5` / `qwen3_5_moe` vision_config) and Kimi-K2.5 (MoonViT): kvplan.readers.towers.vit.
* Mistral 3 (`mistral3` with a `pixtral` vision_config: Mistral Small 3.1/3.2, Magistral, Devstral) and
  Pixtral-12B in the transformers format (`llava` with a `pixtral` vision_config): kvplan.readers.towers.pixtral.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.readers.towers import gemma4 as towers_gemma4
from kvplan.readers.towers import pixtral as towers_pixtral
from kvplan.readers.towers import vit as towers_vit
from kvplan.readers.towers.parts import Towers, _int, vit_block

# Top-level keys that declare an encoder vLLM builds beside the language model (Gemma 3n/4 audio,
# Qwen2.5-Omni/Qwen3-Omni thinker/talker, Phi-3-vision/Phi-4-multimodal embd_layer/img_processor,
# Qwen-VL's visual, Molmo's vision_backbone spell them this way).
TOWER_KEYS = ("vision_config", "audio_config", "vision_tower_config", "audio_tower_config", "speech_config",
              "visual_config", "vit_config", "thinker_config", "talker_config", "embd_layer", "audio_processor",
              "img_processor", "visual", "vision_backbone")

# Architecture classes vLLM 0.19 registers in _TEXT_GENERATION_MODELS (vllm/model_executor/models/
# registry.py lines 112-151: gemma3.py, gemma3n.py, gemma4.py, llama4.py): the language model alone,
# whatever towers the config declares; those tensors of a checkpoint are skipped at load.
# The notice of a tower priced here (price_towers); an engine setting that skips the tower restates its end
# (kvplan.engines.vllm.multimodal.restated: vLLM's limit_mm_per_prompt 0).
TOWER_NOTICE = "multimodal config: planning the language model's cache; the "
COUNTED = "are counted in the weights"
TEXT_ONLY = {"Gemma3ForCausalLM", "Gemma3nForCausalLM", "Gemma4ForCausalLM", "Llama4ForCausalLM"}


def tower_keys(config: dict) -> list[str]:
    """The encoder configs `config` declares (present and not null/empty)."""
    return [k for k in TOWER_KEYS if config.get(k) not in (None, {}, [], "", False)]


def towers(config: dict, text_hidden: int) -> Towers | None:
    """The towers `config` declares, counted; None when kvplan cannot count every one of them exactly."""
    keys = tower_keys(config)
    vc = config.get("vision_config")
    if not keys or not isinstance(vc, dict):
        return None
    kind, top = vc.get("model_type"), config.get("model_type")
    if keys == ["vision_config"] and kind == "siglip_vision_model" and top == "gemma3":
        t = _siglip(vc, text_hidden)
        return None if t is None else Towers(t[0] + t[1], t[1])
    if keys == ["vision_config"] and kind == "llama4_vision_model":
        n = _llama4(vc, text_hidden)
        return None if n is None else Towers(n)
    if top == "gemma4":
        return towers_gemma4.towers(config, text_hidden)
    if keys == ["vision_config"] and top in ("qwen3_5", "qwen3_5_moe"):
        n = towers_vit.qwen3_5(vc)
        return None if n is None else Towers(n)
    if keys == ["vision_config"] and top == "mistral3" and kind == "pixtral":
        return towers_pixtral.mistral3(config, text_hidden)
    if keys == ["vision_config"] and top == "llava" and kind == "pixtral":
        return towers_pixtral.llava(config, text_hidden)
    if keys == ["vision_config"] and top == "kimi_k25":
        t = towers_vit.moonvit(vc, text_hidden)
        return None if t is None else Towers(t[0] + t[1], t[1])
    return None


def vision_params(config: dict, text_hidden: int) -> int | None:
    """Parameters of the towers plus projectors, or None when kvplan cannot count them exactly."""
    t = towers(config, text_hidden)
    return None if t is None else t.params


def price_towers(config: dict, architecture: str, text_hidden: int, source: str,
                 in_checkpoint: bool = False) -> tuple[Towers, list[str], str]:
    """(towers, spec notes, user notice) for a config; refuses a declared tower kvplan cannot count,
    unless `in_checkpoint` (the published safetensors bytes, which carry it, replace the count).

    A config with no tower gives Towers(0) and no words."""
    keys = tower_keys(config)
    if not keys:
        nested = any(isinstance(config.get(k), dict) for k in ("text_config", "language_config", "llm_config"))
        if nested and "ForConditionalGeneration" in architecture:
            note = (f"multimodal config without a vision_config: the tower vLLM builds for {architecture} "
                    "(its class's default) is not counted")
            return Towers(0), [note], note
        return Towers(0), [], ""
    if architecture in TEXT_ONLY:
        note = (f"{', '.join(keys)} not loaded: vLLM 0.19 registers {architecture} as a text-only model "
                "(model_executor/models/registry.py), which builds no tower")
        return Towers(0), [note], note
    t = towers(config, text_hidden)
    if t is None:
        vc = config.get("vision_config")
        kind = vc.get("model_type") if isinstance(vc, dict) else None
        what = f"{', '.join(keys)}" + (f" (model_type {kind!r})" if kind else "")
        if in_checkpoint:
            note = (f"{what}: not counted from the config; the checkpoint's tensor bytes carry it (split over "
                    "tensor-parallel ranks like the rest)")
            return Towers(0), [note], note
        raise KvplanError(f"{source}: the config declares {what}, an encoder vLLM loads beside the language model, "
                          "whose weights kvplan cannot count exactly; refused rather than counted as 0. To plan a "
                          "text-only serve (vLLM --language-model-only), remove those keys from a copy of the "
                          "config", EXIT_USAGE)
    whole = f", {t.replicated:,} of them whole on every tensor-parallel rank" if t.replicated else ""
    notice = f"{TOWER_NOTICE}{t.what} ({t.params:,} parameters{whole}) {COUNTED}"
    return t, [], notice


def _siglip(vc: dict, text_hidden: int) -> tuple[int, int] | None:
    """(tower, projector) of Gemma 3's SigLIP."""
    d, i, n = _int(vc, "hidden_size"), _int(vc, "intermediate_size"), _int(vc, "num_hidden_layers")
    image, patch, ch = _int(vc, "image_size"), _int(vc, "patch_size"), _int(vc, "num_channels", 3)
    if None in (d, i, n, image, patch, ch) or not patch:
        return None
    if vc.get("vision_use_head", True):
        return None  # SigLIP's attention-pooling head: Gemma 3 ships without it; not counted
    tower = ch * patch * patch * d + d + (image // patch) ** 2 * d + n * vit_block(d, i) + 2 * d
    projector = d * text_hidden + d  # mm_input_projection_weight + mm_soft_emb_norm
    return tower, projector


def _llama4(vc: dict, text_hidden: int) -> int | None:
    d, i, n = _int(vc, "hidden_size"), _int(vc, "intermediate_size"), _int(vc, "num_hidden_layers")
    image, patch, ch = _int(vc, "image_size"), _int(vc, "patch_size"), _int(vc, "num_channels", 3)
    p_in, p_out = _int(vc, "projector_input_dim"), _int(vc, "projector_output_dim")
    out = _int(vc, "vision_output_dim")
    if None in (d, i, n, image, patch, ch, p_in, p_out, out) or not patch:
        return None
    if vc.get("multi_modal_projector_bias"):
        return None
    positions = (image // patch) ** 2 + 1
    tower = ch * patch * patch * d + d + positions * d + 2 * 2 * d + n * vit_block(d, i)
    adapter = i * p_in + p_out * p_out  # Llama4VisionMLP2: fc1 I -> p_in, fc2 p_out -> p_out, no biases
    return tower + adapter + out * text_hidden
