"""`--backend transformers`: the model's own Hugging Face class, its real cache, kvplan's prediction.

The model is built from its config.json by `AutoModelForCausalLM.from_config` (random init; the
first N layers; with --shrink, smaller MLP/expert widths, experts and vocabulary), `generate`
decodes greedily, and the bytes of every tensor in the returned cache are compared with kvplan's
prediction for transformers' own layout (kvplan.engines.hf_transformers.engine): a DynamicCache holds
every fed token in full-attention layers; sliding ones show W - 1 tokens as a view on W tokens of
storage (both are checked: memory held, and what the tensors show), and it caches MLA's latent from
5.15.0 (expanded per-head K/V before). Weights are checked against kvplan's parameter count of
the same (reduced) config, which is an independent check of kvplan.readers.params against HF's classes.
Needs the `[transformers]` extra.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.base import parse_version
from kvplan.engines.hf_transformers.engine import DynamicRules, Settings as HfSettings, hf_layers
from kvplan.model.spec import ModelSpec
from kvplan.model.weights import weight_bytes
from kvplan.planning.profile import kv_profile
from kvplan.readers.configs import spec_from_config
from kvplan.sources import hub
from kvplan.sources.resolve import looks_like_path, read_config_file
from kvplan.validate.compare import PLANNER_WEIGHTS_TOLERANCE, Check, all_ok
from kvplan.validate.measure import storage_bytes
from kvplan.validate.run import (
    TORCH_DTYPES, Settings, check_memory, check_settings, device_info, option_dtype, resolve_device,
)

_LAYER_LISTS = ("layer_types", "layers_block_type", "no_rope_layers")  # layers_block_type: Nemotron-H in transformers 5


def _config_dict(model_arg: str, spec: ModelSpec) -> dict:
    if looks_like_path(model_arg):
        return read_config_file(Path(model_arg).expanduser())
    if not spec.hf_repo:
        raise KvplanError(f"{arg('backend')} transformers needs a config.json: {spec.name} has no Hub repo; pass a "
                          "path", EXIT_USAGE, param="backend", value="transformers")
    return hub.fetch_config(spec.hf_repo).config


def reduced_config(config: dict, n: int, shrink: bool) -> dict:
    """The config of the first n layers (and, with shrink, small MLP / experts / vocabulary)."""
    out = dict(config)
    text = dict(out["text_config"]) if isinstance(out.get("text_config"), dict) else out
    text["num_hidden_layers"] = n
    for key in _LAYER_LISTS:
        if isinstance(text.get(key), list):
            text[key] = text[key][:n]
    if isinstance(text.get("hybrid_override_pattern"), str):
        text["hybrid_override_pattern"] = text["hybrid_override_pattern"][:n]
    if shrink:
        for key, small in (("intermediate_size", 256), ("moe_intermediate_size", 128),
                           ("shared_expert_intermediate_size", 128),
                           ("vocab_size", 1024)):
            if isinstance(text.get(key), int):
                text[key] = min(text[key], small)
        for key in ("pad_token_id", "bos_token_id", "eos_token_id"):  # must lie inside the smaller vocabulary
            for d in {id(text): text, id(out): out}.values():
                if key in d:
                    d[key] = 0
        for key in ("num_local_experts", "num_experts", "n_routed_experts"):
            if isinstance(text.get(key), int) and text[key] > 4:
                text[key] = 4
                if text.get("num_experts_per_tok", 0) > 4:
                    text["num_experts_per_tok"] = 4
    text.pop("quantization_config", None)
    out.pop("quantization_config", None)
    if text is not out:
        out["text_config"] = text
    return out


CACHE_FIELDS = ("keys", "values", "conv_states", "recurrent_states", "key_cache", "value_cache", "ssm_states")


def cache_tensors(cache) -> list[torch.Tensor]:
    """The cached values a transformers cache holds: per-layer keys/values and conv/recurrent states.

    Bookkeeping tensors (a sliding layer's token counter, 8 B) are not cache and are left out.
    """
    found = []
    layers = getattr(cache, "layers", None)
    for obj in (layers if layers is not None else [cache]):
        for name in CACHE_FIELDS:
            value = getattr(obj, name, None)
            items = value if isinstance(value, (list, tuple)) else [value]
            found.extend(t for t in items if isinstance(t, torch.Tensor) and t.numel())
    return found


def validate_transformers(full: ModelSpec, s: Settings, model_arg: str) -> tuple[dict, list[Check]]:
    try:
        import transformers
    except ImportError:
        raise KvplanError(f"{arg('backend')} transformers needs transformers: pip install 'kvplan[transformers]'",
                          EXIT_USAGE, param="backend", value="transformers") from None

    check_settings(full, s)
    dev = resolve_device(s.device)
    n = s.layers or full.num_layers
    kv = option_dtype(s.kv_dtype, full.dtype, "kv_dtype")
    if kv.name not in ("fp32", "bf16", "fp16"):
        raise KvplanError(f"{arg('backend')} transformers: a DynamicCache is in the model's dtype; use "
                          f"{arg('kv_dtype')} fp32, bf16 or fp16", EXIT_USAGE, param="kv_dtype", value=kv.name)
    cfg_dict = reduced_config(_config_dict(model_arg, full), n, shrink=s.widths.changed())
    spec, _ = spec_from_config(cfg_dict, full.name)
    config = transformers.AutoConfig.for_model(**cfg_dict)
    version = transformers.__version__
    hf = HfSettings(version, parse_version(version) >= (5, 15, 0))
    prof = kv_profile(hf_layers(spec, hf), 1, kv, kv, 1, DynamicRules())
    predicted_kv = s.batch * prof.sequence_bytes(s.ctx)  # memory held: W tokens per sliding layer
    predicted_weights = weight_bytes(spec, kv.name).total
    check_memory(dev, {"weights": predicted_weights, "KV cache": predicted_kv})
    torch.manual_seed(s.seed)
    model = transformers.AutoModelForCausalLM.from_config(config).to(device=dev, dtype=TORCH_DTYPES[kv.name]).eval()
    measured_weights = storage_bytes(list(model.parameters()))
    prompt = s.ctx - s.steps + 1  # generate feeds prompt + steps - 1 tokens: the cache ends holding ctx
    gen = torch.Generator().manual_seed(s.seed)
    vocab = spec.vocab_size
    ids = torch.randint(0, vocab, (s.batch, prompt), generator=gen).to(dev)
    cached_tokens, ref, measured_kv, logical_kv, seconds = _generate(model, ids, s.steps)
    shown = kv_profile(hf_layers(spec, hf), 1, kv, kv, 1, DynamicRules(visible=True))
    predicted_visible = s.batch * shown.sequence_bytes(s.ctx)  # what the tensors show: W - 1
    checks = [Check("kv_cache", predicted_kv, measured_kv, 0.0),
              Check("kv_cache_visible", predicted_visible, logical_kv, 0.0),
              Check("weights_planner_spec", predicted_weights, measured_weights, PLANNER_WEIGHTS_TOLERANCE)]
    tokens_match = bool(torch.equal(cached_tokens, ref))
    notes = [f"transformers {version}: {type(model).__name__} from config (random init); prediction for "
             "transformers' own cache layout (kvplan.engines.hf_transformers.engine)"]
    if n < full.num_layers:
        notes.insert(0, f"reduced model: the first {n} of {full.num_layers} layers; predictions are for the same "
                        "reduced model")
    record = {
        "backend": "transformers", "transformers_version": version, "torch_version": torch.__version__,
        **device_info(dev), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "model": full.name,
        "layers": n, "layers_total": full.num_layers, "batch": s.batch, "ctx": s.ctx, "prompt_tokens": prompt,
        "decode_steps": s.steps, "kv_dtype": kv.name, "state_dtype": kv.name, "compute_dtype": kv.name,
        "seed": s.seed, "shrunk": ["MLP/expert widths, experts, vocabulary"] if s.widths.changed() else [],
        "notes": notes, "predicted_kv_bytes": predicted_kv, "measured_kv_bytes": measured_kv,
        "measured_kv_visible_bytes": logical_kv, "predicted_kv_bytes_paged16": predicted_kv,
        "predicted_weights_bytes": predicted_weights,
        "measured_weights_bytes": measured_weights, "tokens_match": tokens_match, "decode_seconds": round(seconds, 4),
        "checks": [c.to_dict() for c in checks], "ok": all_ok(checks, tokens_match),
    }
    return record, checks


def _generate(model, ids, steps: int) -> tuple:
    """Greedy generation with transformers' own cache, then without: (cached tokens, uncached tokens,
    bytes the cache holds, bytes its tensors show, seconds)."""
    prompt = ids.shape[1]
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(ids, max_new_tokens=steps, min_new_tokens=steps, do_sample=False, use_cache=True,
                             return_dict_in_generate=True, pad_token_id=0, eos_token_id=None)
        cached_tokens = out.sequences[:, prompt:]
        held = cache_tensors(out.past_key_values)
        measured_kv = storage_bytes(held)  # memory held: a sliced view keeps its whole storage alive
        logical_kv = sum(t.nbytes for t in held)  # what the tensors show
        ref = model.generate(ids, max_new_tokens=steps, min_new_tokens=steps, do_sample=False, use_cache=False,
                             pad_token_id=0, eos_token_id=None)[:, prompt:]
    return cached_tokens, ref, measured_kv, logical_kv, time.perf_counter() - t0
