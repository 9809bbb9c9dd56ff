"""A quantization_config's exclusion list read into parameter counts kept in the model dtype.

Checkpoints name the modules their method leaves unquantized: `modules_to_not_convert` (transformers'
fbgemm_fp8, bitsandbytes, AWQ, MXFP4 configs; bitsandbytes also `llm_int8_skip_modules`), `ignore`
(compressed-tensors), `ignored_layers` / `ignored_modules` (vLLM's fp8 config). vLLM gives every linear
layer whose prefix is listed an UnquantizedLinearMethod (`vllm/model_executor/layers/quantization/`
fbgemm_fp8.py FBGEMMFp8Config.get_quant_method, fp8.py Fp8Config.get_quant_method, mxfp4.py
Mxfp4Config.get_quant_method, all through `utils/quant_utils.py` is_layer_skipped, which also refuses a
fused layer whose shards are listed only in part). Meta's Llama-3.1-405B-Instruct-FP8 lists all four
attention projections of every layer and the MLP projections of layers 0 and 125 (vllm#6746 loads
57.75 GiB per rank at tp 8; without the list kvplan planned 47.8).

Each entry becomes (role, layers): a role of kvplan's ParamCounts and the layer indices it covers (all
layers when the entry has no index or a wildcard). Embeddings, the LM head, routers/gates and vision
towers are already kept in 16 bits by kvplan, so naming them changes nothing. A whole layer, its
attention or its MLP/MoE block, named by index, costs its share of the role only where that share is
the same for every layer (uniform layers; an all-dense or all-MoE stack); a projection counts only
as part of a complete set (q, k, v and o; gate, up and down). Anything else is refused with the entry
named, never guessed.

A Gated DeltaNet layer (Qwen3-Next, Qwen3.5: module `linear_attn`) is counted projection by projection, each
its exact size from the config (kvplan.readers.module_names): its published FP8 checkpoints keep in_proj_ba (Qwen3-Next:
`model.layers.N.linear_attn.in_proj_ba` of every such layer, sgl-project/sglang#23973, 2026-04-28) or in_proj_b
and in_proj_a (Qwen3.5/3.6, under `model.language_model.`) in 16 bits. The fused names (in_proj_qkvz, in_proj_ba)
stand for their two parts, so a list naming both spellings counts each once; one part of a pair alone is
refused, as vLLM refuses it (Qwen3.5's packed_modules_mapping fuses them, 0.33.0 wheel `models/qwen3_5.py`
L307-317; `quantization/utils/quant_utils.py` is_layer_skipped L664-683). conv1d (vLLM builds it with no
quant_config), A_log, dt_bias and norm are 16-bit already. The projections kept in every layer that holds
them are `kept_modules`, which the block-FP8 shard rule skips (kvplan.engines.fp8_linear).

A Gated DeltaNet module named whole (`linear_attn`, `model.layers.N.linear_attn`) keeps its five projections in the
layers that have one (a layer index naming a full-attention layer is refused), never the other layers' self_attn.
An entry under `mtp.` names the multi-token-prediction module, which the target model does not load (vLLM's
Qwen3-Next / Qwen3.5 mapper drops `mtp.` from the list): it changes nothing here and is recorded for a drafter
(kvplan.readers.mtp.mtp_entries; kvplan.planning.speculative refuses one built from a module kept in part).

A `re:` entry is a regular expression: compressed-tensors and vLLM test it with `re.match` against each
linear module's name (vLLM `model_executor/layers/quantization/compressed_tensors/utils.py`
should_ignore_layer -> check_equal_or_regex_match -> _is_equal_or_regex_match, v0.11-main 2026; a fused
layer is asked shard by shard). kvplan matches it the same way against the model's own module names
(`ModuleNames`: `model.layers.N.self_attn.q_proj`, `...mlp.gate_proj` of the dense layers,
`...mlp.experts.E.gate_proj` and `...mlp.shared_experts.gate_proj` of the MoE layers, under the text model's
prefixes), so Kimi-K2's `re:.*mlp\\.(gate|up|gate_up|down)_proj.*` keeps the dense layers' MLPs (not the
experts) and `re:.*\\.self_attn\\.g_proj$` matches nothing in a model without that projection. A
compressed-tensors scheme whose `targets` are regexes quantizes only the modules they match: the others
are kept the same way (`targets: ["Linear"]` is every linear module).
"""

from __future__ import annotations

import re

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.readers.exclusion_rules import boundary_matcher, component_matcher, exact_matcher
from kvplan.readers.mtp import names_mtp
from kvplan.readers.module_names import GDN, ModuleNames


_ALREADY_PLAIN = {  # modules kvplan keeps in the model dtype whatever the method: naming them is a no-op
    "lm_head", "output", "embed_tokens", "wte", "wpe", "embed", "embeddings", "word_embeddings", "tok_embeddings",
    "embed_in", "embed_out", "gate", "router", "shared_expert_gate", "norm", "final_layernorm", "visual",
    "vision", "vision_tower", "vision_model", "vision_encoder", "multi_modal_projector", "mm_projector",
    "merger", "audio_tower", "audio", "image_newline",
    # the router's score-correction bias (DeepSeek-V3 / MiniMax-M2 block_sparse_moe.e_score_correction_bias):
    # a vector beside the gate, never a quantized linear
    "e_score_correction_bias",
    # a Gated DeltaNet's depthwise conv1d (vLLM builds it with no quant_config: qwen_gdn_linear_attn.py L597-602 in
    # the 0.33.0 wheel), its A_log and dt_bias vectors: kvplan counts them 16-bit (kvplan.readers.params)
    "conv1d", "a_log", "dt_bias",
}
_LAYER_INDEX = re.compile(r"layers\.(\d{1,6})\.")
_LAYERS = {"layers", "h", "blocks", "layer", "block", "decoder"}
_ATTENTION = {"self_attn", "attn", "attention", "self_attention", "linear_attn", "mixer"}
_MLP = {"mlp", "feed_forward", "ffn", "block_sparse_moe", "moe"}
_SHARED = {"shared_expert", "shared_experts", "shared_mlp"}
_EXPERTS = {"experts"}
_COMPLETE = {  # projection sets that make up a whole module (vLLM fuses them; listed in part it refuses)
    "attention": ({"q_proj", "k_proj", "v_proj", "o_proj"}, {"qkv_proj", "o_proj"}, {"query_key_value", "dense"},
                  {"c_attn", "c_proj"}, {"wqkv", "out_proj"}, {"q_proj", "k_proj", "v_proj", "out_proj"},
                  # MLA (vLLM deepseek_v2.py DeepseekV2MLAAttention): with and without a q LoRA
                  {"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"},
                  {"q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"}),
    "mlp": ({"gate_proj", "up_proj", "down_proj"}, {"gate_up_proj", "down_proj"}, {"fc1", "fc2"},
            {"w1", "w2", "w3"}, {"c_fc", "c_proj"}, {"dense_h_to_4h", "dense_4h_to_h"}),
}

# A Gated DeltaNet layer's projections (module `linear_attn`) as kvplan counts them: Qwen3.5's checkpoints store
# in_proj_qkv, in_proj_z, in_proj_b, in_proj_a; Qwen3-Next's the two fused tensors in_proj_qkvz and in_proj_ba
# (interleaved by key-head group), which an entry may name as well: each stands for its two parts
_GDN_FUSED = {"in_proj_qkvz": ("in_proj_qkv", "in_proj_z"), "in_proj_ba": ("in_proj_b", "in_proj_a")}
_GDN_NAMES = {*_GDN_FUSED, *(p for parts in _GDN_FUSED.values() for p in parts)}
# projections vLLM loads as one fused layer: listed in part it refuses (is_layer_skipped); whole, or the layer's other
# projections alone (DeepSeek-R1-FP4-v2 quantizes o_proj and keeps the rest), kvplan counts them projection by
# projection (ModuleNames.sizes); a Gated DeltaNet's pairs are _GDN_FUSED's parts (vLLM 0.33.0 wheel
# models/qwen3_5.py L307-317 packed_modules_mapping)
_FUSED = ({"q_proj", "k_proj", "v_proj"}, {"q_a_proj", "kv_a_proj_with_mqa"}, *map(set, _GDN_FUSED.values()))


def _attention_hits(m: ModuleNames, i: int, hit) -> list[str]:
    """Layer i's attention projections an entry names (a Gated DeltaNet's fused names stand for both their parts)."""
    mixer = m.mixers[i] if i < len(m.mixers) else "self_attn"
    found = [p for p in m.attention[i] if hit(i, f"{mixer}.{p}")]
    if mixer == GDN:
        found += [p for fused, parts in _GDN_FUSED.items() if hit(i, f"{mixer}.{fused}") for p in parts]
    return list(dict.fromkeys(found))


def _regex_entries(matches, m: ModuleNames, name: str, where: str, only=None) -> list[tuple[str, set[int], str]]:
    """(role, layer indices, projection or '') of the modules whose names `matches` accepts (of layer `only`)."""
    def hit(i: int, rest: str) -> bool:
        return any(matches(f"{p}{i}.{rest}") for p in m.prefixes)

    out = []
    for i in range(len(m.attention)):
        if only is not None and i != only:
            continue
        out += [("attention", {i}, p) for p in _attention_hits(m, i, hit)]
        if i in m.dense:
            out += [("mlp", {i}, p) for p in m.mlp if hit(i, f"mlp.{p}")]
        if i not in m.moe:
            continue
        groups = [("experts", [f"{m.block}.experts.{e}.{p}" for e in {0, m.num_experts - 1} for p in m.mlp])]
        if m.shared:
            groups.append(("shared_experts", [f"{m.block}.{s}.{p}" for s in ("shared_experts", "shared_expert")
                                              for p in m.mlp]))
        for role, names in groups:
            hits = [hit(i, n) for n in names]
            if role == "shared_experts":  # either spelling: DeepSeek's shared_experts, Qwen's shared_expert
                hits = [a or b for a, b in zip(hits[:len(m.mlp)], hits[len(m.mlp):])]
            if all(hits):
                out.append((role, {i}, ""))
            elif any(hits):
                raise KvplanError(f"{where}: entry {name!r} matches only some of layer {i}'s {role.replace('_', ' ')} "
                                  "projections; kvplan counts whole modules (refused rather than guessed)", EXIT_USAGE)
    return out


def tested_names(m: ModuleNames, where: str) -> tuple[str, ...]:
    """Every module name _regex_entries asks a matcher about, in its order (a matcher that accepts none of them
    matches nothing there)."""
    seen: list[str] = []
    _regex_entries(lambda s: seen.append(s) or False, m, "", where)
    return tuple(seen)


def _literal_layer(test) -> int | None:
    """The one layer whose modules a literal matcher (`Named.literal`: SGLang's) can accept, where its entry names
    one `layers.N.`: every name asked is `{prefix}{i}.{rest}` with a prefix ending `layers.`, so a name holding the
    entry holds `layers.i.` with i = N. None: every layer is asked (a regex, a glob, no or several layers). Asking
    each of Llama-3.1-405B-FP8's 508 entries only its own layer, not all 126, keeps the list linear."""
    found = set(_LAYER_INDEX.findall(test.label)) if getattr(test, "literal", False) else set()
    return int(found.pop()) if len(found) == 1 else None


def _compiled(name: str, where: str):
    try:
        return re.compile(name[3:]).match
    except (re.error, RecursionError, OverflowError) as exc:
        raise KvplanError(f"{where}: entry {name[:80]!r} is not a regular expression ({exc})", EXIT_USAGE) from None


def untargeted(targets: list[str], where: str):
    """A matcher of the module names a compressed-tensors scheme's `targets` leave out, or None when they
    name every linear module (`Linear`) or only module classes kvplan cannot tell apart."""
    if not targets or any(not t.startswith("re:") for t in targets):
        return None
    pats = [_compiled(t, where) for t in targets]
    return lambda s: not any(p(s) for p in pats)


def matched(names: list, n: int, params, where: str, modules: ModuleNames | None, rule: str = ""
            ) -> tuple[dict[str, set[int]], dict[tuple[str, int], set[str]]]:
    """({role: whole modules' layers}, {(role, layer): projections}) the names keep in the model dtype: what
    kept_params and kept_modules read (a caller that wants both matches the names once and passes it as `found`).
    `rule` 'exact': a literal entry keeps only the modules it names in full (kvplan.readers.exclusion_rules: fp8,
    fbgemm_fp8, compressed-tensors as vLLM matches them); 'component': bitsandbytes' dotted words; SGLang's readings
    pass matchers instead (kvplan.readers.quantization)."""
    covered: dict[str, set[int]] = {}
    parts: dict[tuple[str, int], set[str]] = {}
    for name in names:
        if modules is not None and (callable(name) or name.startswith("re:")):
            found = _regex_entries(name if callable(name) else _compiled(name, where), modules,
                                   getattr(name, "label", "the scheme's targets") if callable(name) else name, where,
                                   _literal_layer(name))
        elif names_mtp(name):  # the MTP module's: the target model has no such module (vLLM drops them)
            continue
        elif rule and modules is not None and _own_prefix(name, modules):
            layer = _LAYER_INDEX.search(name)  # a full name is matched against its own layer's modules only
            test = exact_matcher(name) if rule == "exact" else component_matcher(name)
            found = _regex_entries(test, modules, name, where, int(layer.group(1)) if layer else None)
            if not found and not (GDN in modules.mixers and name.split(".")[-1] in {GDN, *_GDN_NAMES}):
                _entries(name, n, params, where)  # a name kvplan cannot place is refused whatever the rule
        elif _whole_gdn(name, modules):  # a Gated DeltaNet module, whole: its five projections, each counted
            found = _regex_entries(boundary_matcher(name), modules, name, where)  # at dotted boundaries
            if not found:
                raise KvplanError(f"{where}: exclusion entry {name!r} names a linear-attention module no layer of "
                                  "this model has (a full-attention layer's is self_attn); refused", EXIT_USAGE)
        else:  # a module's exact name (compressed-tensors' `ignore`), else the names' words (kvplan's reading)
            layer = _LAYER_INDEX.search(name) if modules is not None else None
            found = layer and _regex_entries(name.__eq__, modules, name, where, int(layer.group(1)))
            if not layer and modules is not None and GDN in modules.mixers and name.split(".")[-1] in _GDN_NAMES:
                # a Gated DeltaNet projection named without its layer: that module of every such layer
                found = _regex_entries(lambda s, e=name: s.endswith(f".{e}"), modules, name, where)
            found = found or _entries(name, n, params, where)
        for role, idx, proj in found:
            if proj:
                for i in idx:
                    parts.setdefault((role, i), set()).add(proj)
            else:
                covered.setdefault(role, set()).update(idx)
    return covered, parts


def _own_prefix(name: str, modules: ModuleNames) -> bool:
    """Whether an entry is read by the exact rule: a bare name (it names no module in full), or a full name under one
    of the model's own prefixes; a full name under another prefix (a family's own: `transformer.h.0.attn`) keeps
    kvplan's reading of its words."""
    return not _LAYER_INDEX.search(name) or name.startswith(modules.prefixes)


def name_words(modules: ModuleNames) -> set[str]:
    """Every dotted word of the module names `modules` gives but the layer indices: an entry holding another word
    names none of them at any dotted boundary."""
    words = {w for p in modules.prefixes for w in p.split(".") if w} | {*modules.mixers, *modules.mlp, modules.block}
    words |= {p for projections in modules.attention for p in projections} | {*_GDN_FUSED, "self_attn"}
    return words | ({"experts", "shared_experts", "shared_expert"} if modules.moe else set())


def _whole_gdn(name, modules) -> bool:
    """Whether a literal entry names a Gated DeltaNet module whole (`linear_attn`, `model.layers.0.linear_attn`) in a
    model that has one: kvplan keeps its five projections (as `re:.*linear_attn.*` keeps them), never all attention."""
    return (isinstance(name, str) and not name.startswith("re:") and modules is not None and GDN in modules.mixers
            and name.split(".")[-1] == GDN)


def kept_modules(names: list, params, layers, where: str, modules: ModuleNames | None = None, found=None
                 ) -> tuple[str, ...]:
    """The attention projections ("mixer.projection", a Gated DeltaNet's fused names split into their parts) the
    names keep in the model dtype in every layer that holds them: an engine's block-FP8 shard rule does not check
    them (kvplan.engines.fp8_linear)."""
    if modules is None:
        return ()
    covered, parts = found or matched(names, len(layers), params, where, modules)
    whole = covered.get("attention", set()) | covered.get("layer", set())
    held: dict[str, set[int]] = {}
    for i, (mixer, sizes) in enumerate(zip(modules.mixers, modules.sizes)):
        for p in sizes:
            held.setdefault(f"{mixer}.{p}", set()).add(i)
    kept = {f"{modules.mixers[i]}.{p}" for (role, i), projs in parts.items() if role == "attention" for p in projs}
    return tuple(sorted(m for m in kept if all(i in whole or m.split(".", 1)[1] in parts.get(("attention", i), ())
                                               for i in held.get(m, ()))))


def kept_params(names: list, params, layers, where: str, modules: ModuleNames | None = None, found=None
                ) -> tuple[tuple[str, int], ...]:
    """((role, parameters kept in the model dtype), ...) for the names a config leaves unquantized; with
    `modules`, a `re:` name (or a matcher: a callable) is matched against the model's module names."""
    n = len(layers)
    covered, parts = found or matched(names, n, params, where, modules)
    covered = {role: set(idx) for role, idx in covered.items()}  # added to below; `found` is the caller's
    some: dict[str, int] = {}  # parameters of attention projections kept without their whole set
    for (role, i), projs in parts.items():
        sizes = modules.sizes[i] if modules is not None and role == "attention" and i < len(modules.sizes) else {}
        split = [g for g in _FUSED if g <= set(sizes) and 0 < len(g & projs) < len(g)]
        if not any(full <= projs for full in _COMPLETE[role]) and projs <= set(sizes) and not split:
            some[role] = some.get(role, 0) + sum(sizes[p] for p in projs)  # the rest of that layer's set quantized
            continue
        if split and role == "attention" and modules is not None and modules.mixers[i:i + 1] == (GDN,):
            raise KvplanError(f"{where}: the exclusion list keeps {', '.join(sorted(split[0] & projs))} of layer {i}'s "
                              f"linear attention in 16 bits but not {', '.join(sorted(split[0] - projs))}, which vLLM "
                              "loads with it as one fused layer and refuses (is_layer_skipped); refused", EXIT_USAGE)
        if not any(full <= projs for full in _COMPLETE[role]):
            raise KvplanError(f"{where}: the exclusion list keeps only {', '.join(sorted(projs))} of layer {i}'s "
                              f"{role} in 16 bits; kvplan counts whole modules, not single projections (refused)",
                              EXIT_USAGE)
        covered.setdefault(role, set()).add(i)
    out = []
    for role, idx in sorted(covered.items()):
        for part, total in _role_parts(role, params):
            out.append((part, _share(part, total, idx, n, params, layers, where, modules)))
    merged: dict[str, int] = {}
    for part, count in [*out, *some.items()]:
        merged[part] = min(merged.get(part, 0) + count, getattr(params, part))
    return tuple(sorted((k, v) for k, v in merged.items() if v))


def _role_parts(role: str, params) -> list[tuple[str, int]]:
    """The ParamCounts fields a named role covers: an MLP block of a MoE model is its experts."""
    if role == "layer":
        return _role_parts("attention", params) + _role_parts("mlp", params)
    if role == "mlp":
        return [(f, getattr(params, f)) for f in ("mlp", "experts", "shared_experts") if getattr(params, f)]
    return [(role, getattr(params, role))]


def _share(part: str, total: int, idx: set[int], n: int, params, layers, where: str,
           modules: ModuleNames | None = None) -> int:
    """Parameters of `part` in layers `idx`: all of it, or an equal share per layer where layers are alike
    (the dense MLPs among the dense layers, the experts among the MoE layers, where the layout is known)."""
    if len(idx) >= n or not total:
        return total
    held = None if modules is None else modules.dense if part == "mlp" else modules.moe if part != "attention" else None
    if held:  # every dense MLP of a model is alike, and every MoE layer's experts
        return total if held <= idx else total * len(held & idx) // len(held)
    if part == "attention":
        uniform = len(set(layers)) == 1
    elif part == "mlp":
        uniform = params.num_moe_layers == 0
    else:  # experts, shared experts: every layer a MoE layer
        uniform = params.num_moe_layers == n
    if not uniform:
        raise KvplanError(f"{where}: the exclusion list keeps the {part} of layers {_shown(idx)} in 16 bits, and "
                          f"this model's layers do not all hold the same {part}; refused rather than guessed",
                          EXIT_USAGE)
    return total * len(idx) // n


def _entries(name: str, n: int, params, where: str) -> list[tuple[str, set[int], str]]:
    """(role, layer indices, projection or '') an exclusion entry names; [] for modules already plain."""
    text = name[3:] if name.startswith("re:") else name
    words = [w for w in re.split(r"[.\\^$*+?()\[\]|/]+", text.lower()) if w]
    words = [w for w in words if w not in ("model", "language_model", "text_model", "transformer", "weight")]
    if not words or any(_plain(w) for w in words[-2:]) or _plain(words[0]):
        return []
    idx: set[int] = set(range(n))
    rest = words
    if words[0] in _LAYERS:
        rest = words[1:]
        if rest and name.startswith("re:") and rest[0] == "d":  # re:layers.\\d+.x : every layer
            rest = rest[1:]
        elif rest and rest[0].isdigit():
            i = int(rest[0])
            if i >= n:
                raise KvplanError(f"{where}: exclusion entry {name!r} names layer {i}, past the model's {n} layers",
                                  EXIT_USAGE)
            idx, rest = {i}, rest[1:]
        if not rest:
            return [("layer", idx, "")]
    head, tail = rest[0], rest[1:]
    if head in _ATTENTION:
        return [("attention", idx, _projection(tail, "attention", name, where))]
    if head in _SHARED or (head in _MLP and tail[:1] and tail[0] in _SHARED):
        return [("shared_experts", idx, "")]
    if head in _EXPERTS or (head in _MLP and tail[:1] == ["experts"]):
        return [("experts", idx, "")]
    if head in _MLP:
        proj = _projection(tail, "mlp", name, where)
        if proj and params.num_moe_layers:
            raise KvplanError(f"{where}: exclusion entry {name!r} names an MLP projection of a MoE model; refused "
                              "rather than guessed which layers are dense", EXIT_USAGE)
        return [("mlp", idx, proj)]
    raise KvplanError(f"{where}: exclusion entry {name!r} names a module kvplan cannot map to its parameter groups "
                      "(attention, MLP, experts, embeddings, LM head, routers, vision); refused rather than guessed",
                      EXIT_USAGE)


def _projection(tail: list[str], role: str, name: str, where: str) -> str:
    """'' for the whole module, else the projection named (one of a complete set in _COMPLETE)."""
    if not tail:
        return ""
    known = set().union(*_COMPLETE[role])
    if tail[0] in known and len(tail) == 1:
        return tail[0]
    raise KvplanError(f"{where}: exclusion entry {name!r} names part of a layer's {role} kvplan cannot map; "
                      "refused rather than guessed", EXIT_USAGE)


def _plain(word: str) -> bool:
    return word in _ALREADY_PLAIN or word.endswith("norm")


def _shown(idx: set[int]) -> str:
    s = sorted(idx)
    return ", ".join(map(str, s[:6])) + (", ..." if len(s) > 6 else "")
