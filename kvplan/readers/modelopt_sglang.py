"""NVIDIA ModelOpt checkpoints as SGLang reads them: the exclusion list's key by algorithm and each entry's match,
where they differ from vLLM's reading (kvplan.readers.modelopt), which every other engine plans.

Read in the 0.5.23 wheel, `sglang/srt/layers/quantization/modelopt_quant.py` (is_layer_excluded and the from_config
keys alike in the 0.5.10, 0.5.14 and 0.5.19 wheels, which compile the pattern inline instead of L309-313's cache):
  * the key. Config.json's flat form: FP8 (`ModelOptFp8Config.from_config`, L466-520) reads `ignore` alone; NVFP4
    (`ModelOptFp4Config.from_config`, L1653-1655) the first present of `ignore`, `modules_to_not_convert`,
    `exclude_modules`; MIXED_PRECISION (L873) `ignore`, else `exclude_modules`. The nested form (hf_quant_config.json)
    `exclude_modules` for each. vLLM reads `ignore`, else `exclude_modules` (kvplan.readers.exclusion_rules.KEYS);
    another algorithm's SGLang config is not read here, and its plan says so.
  * the match. A linear layer stays unquantized where `is_layer_skipped` (`utils.py`: the entry at dotted-path
    boundaries from 0.5.11, a substring in 0.5.10: kvplan.readers.exclusion_rules.sglang_matcher) or
    `is_layer_excluded` (L379-425) says so: the entry with `.` literal and `*` any run, matching the whole name or one
    dotted word of it (also after a leading `language_model.`), or a fused DeepSeek projection whose last word holds
    the entry's (q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj). The routed experts, a FusedMoE block named
    `...mlp.experts`, ask `is_layer_excluded` alone (L349-353). vLLM's is_layer_excluded takes a substring or an
    fnmatch of the whole name instead, so `attn` keeps `self_attn` projections there and not in SGLang, and an entry
    naming a layer's `mlp` keeps its experts there and not in SGLang.
  * MIXED_PRECISION's modules left out of `quantized_layers` stay unquantized in both (`_resolve_quant_algo`,
    L976-1015, the same prefixes as vLLM's): kvplan.readers.modelopt.unlisted serves both.
The names matched are kvplan's Hugging Face module names (kvplan.readers.module_names.ModuleNames); the weight-name
mapper SGLang applies to the list first (`apply_weight_name_mapper`, L365-377) renames the list and the modules
alike for the text decoders kvplan reads.
"""

from __future__ import annotations

import re
from dataclasses import replace

from kvplan.core.errors import KvplanError
from kvplan.readers.exclusion_rules import SGLANG_READINGS, Named, exclusion_list, sglang_matcher
from kvplan.readers.modelopt import unlisted
from kvplan.readers.mtp import mtp_entries
from kvplan.readers.module_names import module_names
from kvplan.readers.unquantized import kept_modules, kept_params, matched

# config.json's flat form: the keys each algorithm's SGLang config reads, the first present winning (module docstring)
FLAT_KEYS = {"FP8": ("ignore",), "NVFP4": ("ignore", "modules_to_not_convert", "exclude_modules"),
             "MIXED_PRECISION": ("ignore", "exclude_modules")}
NESTED_KEYS = ("exclude_modules",)  # hf_quant_config.json's `quantization` block
# every key a release reads a list from (not exclusion_rules.LIST_KEYS, every method's): the keys above, derived
_READ_KEYS = tuple(dict.fromkeys(k for keys in (*FLAT_KEYS.values(), NESTED_KEYS) for k in keys))
FUSED_TAILS = frozenset({"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj"})  # is_layer_excluded's fused words
# before 0.5.10 the matching differs again (0.5.8.post1: FP8 a substring, NVFP4 a fullmatch of the whole name, the
# experts never excluded; NVFP4's flat form `ignore` alone) and was not read release by release: said, vLLM's planned
UNREAD = "unread"


def key(q: dict, legacy: bool) -> str | None:
    """The key SGLang reads this ModelOpt config's list from (None: none present); KeyError for an algorithm whose
    SGLang config is not read."""
    order = NESTED_KEYS if legacy else FLAT_KEYS[str(q.get("quant_algo", "")).upper()]
    return next((k for k in order if k in q), None)


def _pattern(entry: str) -> re.Pattern:
    """The entry as SGLang compiles it (`_compile_exclusion_pattern`): `.` literal, `*` any run, the rest regex."""
    return re.compile(entry.replace(".", r"\.").replace("*", r".*"))


def matcher(entry: str, dotted: bool) -> Named:
    """SGLang's test of one ModelOpt entry (module docstring): is_layer_skipped or is_layer_excluded for a linear
    layer, is_layer_excluded of its FusedMoE block for a routed expert."""
    pattern, tail = _pattern(entry), entry.rsplit(".", 1)[-1]
    skipped = sglang_matcher(entry, dotted)

    def excluded(prefix: str) -> bool:
        variants = (prefix, prefix.removeprefix("language_model.")) if prefix.startswith("language_model.") \
            else (prefix,)
        if any(pattern.fullmatch(p) or any(pattern.fullmatch(w) for w in p.split(".")) for p in variants):
            return True
        return tail in FUSED_TAILS and any(tail in p.rsplit(".", 1)[-1] for p in variants)

    def test(name: str) -> bool:
        at = name.find(".experts.")
        if at >= 0:
            return excluded(name[:at + len(".experts")])
        return skipped(name) or excluded(name)

    return Named(entry, test)


def readings(cfg, q: dict, legacy: bool, where: str, params, layers: tuple, quant) -> tuple:
    """((rule, Quantization or a one-line refusal), ...): the checkpoint as SGLang loads it by release, where that
    differs from vLLM's reading `quant` or has something to say, and UNREAD, what releases before 0.5.10 are planned
    by.
    `q`: the config in modelopt_view's flat form; `legacy`: it was hf_quant_config.json's nested form."""
    algo = str(q.get("quant_algo", "")).upper()
    rest = unlisted(q, where)
    if rest is None and not any(q.get(k) for k in _READ_KEYS):
        return ()  # nothing listed under any key, no per-layer map: every release quantizes what vLLM does
    unread = (UNREAD, _vllms(quant, "SGLang before 0.5.10 matches ModelOpt lists by rules not read here"))
    try:
        k = key(q, legacy)
    except KeyError:
        said = _vllms(quant, f"SGLang's ModelOpt {algo} config was not read")
        return (*((r, said) for r, _ in SGLANG_READINGS), unread)
    model_type = str(cfg.raw("model_type") or "")
    modules = module_names(cfg, model_type, params, layers)
    entries = [e for e in (exclusion_list(q, where, (k,)) if k else []) if isinstance(e, str)]
    out = []
    for r, dotted in SGLANG_READINGS:
        try:
            named = [matcher(e, dotted) for e in entries] + ([rest] if rest is not None else [])
            found = matched(named, len(layers), params, where, modules)
            kept = kept_params(named, params, layers, where, modules, found)
            mods = kept_modules(named, params, layers, where, modules, found)
        except (KvplanError, re.error) as exc:
            out.append((r, f"SGLang's reading of this ModelOpt exclusion list: {exc}"))
            continue
        if kept == quant.kept:
            continue  # as vLLM's reading keeps it: nothing to say
        how = "at dotted-path boundaries (0.5.11 on)" if dotted else "as a substring (0.5.10)"
        note = (f"exclusion list: SGLang's ModelOpt {algo} config reads " + (f"`{k}`" if k else "no list") +
                f", each entry matched by is_layer_skipped ({how}) or is_layer_excluded (a glob over the whole name "
                f"or one dotted word; the routed experts by their block): {sum(c for _, c in kept):,} parameters "
                f"kept in 16 bits (vLLM's reading: {sum(c for _, c in quant.kept):,})")
        out.append((r, replace(quant, kept=kept, kept_modules=mods, mtp_kept=mtp_entries(entries, model_type),
                               notes=(note,))))
    return (*out, unread)


def _vllms(quant, why: str):
    """vLLM's reading `quant`, with the note that SGLang plans it because `why`."""
    return replace(quant, notes=(*quant.notes, f"exclusion list: {why}; kvplan plans vLLM's reading of it "
                                 "(kvplan.readers.modelopt)"))
