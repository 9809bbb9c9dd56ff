"""`quantization_config` read into kvplan's Quantization, every value checked before it is used.

A malformed entry (`bits: "four"`, `group_size: [128]`, `config_groups: "x"`) is a one-line usage
error naming the key, never an internal error and never a guess.
"""

from __future__ import annotations

import math
from dataclasses import replace

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.model.spec import Quantization
from kvplan.readers.cfg import read_dtype, shown
from kvplan.readers.channel_scales import channel_parts, channel_scales, g_idx_bytes
from kvplan.readers.exclusion_rules import (LIST_KEYS, SGLANG_BOUNDARY, SGLANG_READINGS, chosen_keys, exclusion_list,
                                           rule, sglang_key, sglang_key_note, sglang_matcher, skipped_note)
from kvplan.readers import modelopt_sglang
from kvplan.readers.modelopt import glob_entry, modelopt_method, modelopt_view, unlisted
from kvplan.readers.mtp import mtp_entries, names_mtp
from kvplan.readers.module_names import module_names
from kvplan.readers.unquantized import kept_modules, kept_params, matched, name_words, tested_names, untargeted


def read_quantization(cfg, params=None, layers=()) -> Quantization:
    """The checkpoint's weight format from `quantization_config` (fp8, AWQ/GPTQ, MXFP4, ...), with the
    parameters its exclusion list (`modules_to_not_convert`, `ignore`, `ignored_layers`) keeps in the
    model dtype (kvplan.readers.unquantized; a list kvplan cannot map is refused).

    Every value is checked before use: a malformed entry (`bits: "four"`, `group_size: [128]`)
    is a one-line error naming the key, never a guess.
    """
    q = cfg.raw("quantization_config")
    if not isinstance(q, dict):
        return Quantization(_dtype(cfg))
    where = f"{cfg.where}: quantization_config"
    legacy = isinstance(q.get("quantization"), dict)  # hf_quant_config.json's form, read before it is flattened
    q = modelopt_view(q)
    method = normalised_method(q)
    quant = _method(cfg, q, where, method, tuple(layers))
    read, skipped = chosen_keys(q, method, legacy)  # only the keys the method's config reads (exclusion_rules)
    names = exclusion_list(q, where, read)
    notes = skipped_note(method, skipped, read, q) + sglang_key_note(q, method)
    quant = replace(quant, notes=notes)
    if method == "gptq":  # GPTQModel's per-module rules (vLLM reads no exclusion list for GPTQ)
        names += _gptq_dynamic(q, where)
    if method == "modelopt":  # wildcards, matched as vLLM matches them (kvplan.readers.modelopt)
        names = [glob_entry(n) for n in names]
    left_out = untargeted(_targets(q, method), where) if quant.method != _dtype(cfg) else None
    if left_out is None and method == "modelopt":
        left_out = unlisted(q, where)  # MIXED_PRECISION: modules its quantized_layers leave out
    if left_out is not None:
        names = [*names, left_out]
    if names and params is not None and quant.method != _dtype(cfg):
        modules = module_names(cfg, str(cfg.raw("model_type") or ""), params, tuple(layers))
        found = matched(names, len(layers), params, where, modules, rule(method))  # matched once, read twice
        quant = replace(quant, kept=kept_params(names, params, tuple(layers), where, modules, found),
                        kept_modules=kept_modules(names, params, tuple(layers), where, modules, found))
    mtp = mtp_entries(names, str(cfg.raw("model_type") or ""))
    if mtp:  # the MTP module's own entries: nothing of the target model (kvplan.readers.mtp)
        quant = replace(quant, mtp_kept=mtp)
    if method:
        quant = replace(quant, quant_method=method)
    if quant.quant_method == "fbgemm_fp8" and params is not None and params.experts:
        # fbgemm_fp8 quantizes LinearBase modules only: FusedMoE gets no method, so the routed experts load in the
        # model dtype (vLLM 0.33.0 fbgemm_fp8.py get_quant_method L79-90; SGLang 0.5.15 fpgemm_fp8.py L78-89)
        quant = replace(quant, experts_method=_dtype(cfg))
    experts = _channel_wise(q, where, method)
    parts = channel_parts(cfg, tuple(layers), params, experts) if experts is not None and layers else None
    if parts is not None:
        quant = replace(quant, channel_scales=channel_scales(parts, quant.kept, params))
    if params is None or not layers or quant.method == _dtype(cfg):
        return quant
    if method == "modelopt":  # SGLang's own key and match (kvplan.readers.modelopt_sglang)
        return replace(quant, readings=modelopt_sglang.readings(cfg, q, legacy, where, params, tuple(layers), quant))
    if method not in SGLANG_BOUNDARY:
        return quant
    readings = tuple((r, _sglang_reading(cfg, q, method, where, params, tuple(layers), quant, parts, dotted))
                     for r, dotted in SGLANG_READINGS)
    notes = quant.notes + _sglang_more(method, quant, readings[0][1])
    # a reading that keeps what the reader kept and has nothing to say is left out
    differ = tuple((r, x) for r, x in readings if isinstance(x, str) or x != quant or x.notes)
    return replace(quant, readings=differ, notes=notes)


def _sglang_reading(cfg, q, method, where, params, layers, quant, parts, dotted: bool):
    """The checkpoint as SGLang reads an fp8 / fbgemm_fp8 list (kvplan.readers.exclusion_rules: its key, its entries
    with and without `model.` for fp8, each matched at dotted-path boundaries or, `dotted` False, as a substring),
    with the notes saying so; the refusal that reading meets, as a line, where kvplan cannot plan it. An entry with a
    word no module name of the model holds (`lm_head`, a vision tower's) keeps kvplan's reading of its words."""
    model_type = str(cfg.raw("model_type") or "")
    key = sglang_key(q, method)
    names = exclusion_list(q, where, (key,)) if key else []
    literal = [n for n in names if not n.startswith("re:") and not names_mtp(n)]
    if method == "fp8":  # each entry with and without a leading `model.`
        literal = [v for n in literal for v in (n.removeprefix("model."), "model." + n.removeprefix("model."))]
    modules = module_names(cfg, model_type, params, layers)
    words, tested = name_words(modules), tested_names(modules, where)
    text = "\n".join(tested)  # an entry SGLang matches to any of these is a substring of one (sglang_matcher)
    moes = {t[:t.find(".experts.") + len(".experts")] for t in tested if ".experts." in t}
    try:
        entries = [_sglang_entry(n, dotted, words, (text, moes), len(layers), params, where, modules) for n in literal]
        found = matched(entries, len(layers), params, where, modules)
        kept = kept_params(entries, params, layers, where, modules, found)
        kept_mods = kept_modules(entries, params, layers, where, modules, found)
    except KvplanError as exc:
        return f"SGLang's reading of this {method} exclusion list: {exc}"
    left = [k for k in LIST_KEYS if k != key and q.get(k)]
    regex = len(names) > sum(not n.startswith("re:") for n in names)
    if kept == quant.kept and not left and not regex:
        return replace(quant, kept_modules=kept_mods, notes=())  # as the reader kept it: nothing to say
    notes = (f"exclusion list: SGLang's {method} config reads " + (f"`{key}`" if key else "no list") +
             (f" and not {', '.join(f'`{k}`' for k in left)}" if left else "") + ", each entry matched " +
             ("at dotted-path boundaries (_module_path_match, 0.5.11 on)" if dotted else "as a substring (0.5.10)") +
             f": {sum(c for _, c in kept):,} parameters kept in 16 bits (vLLM's reading: "
             f"{sum(c for _, c in quant.kept):,})",)
    if regex:
        notes += ("exclusion list: SGLang reads a `re:` entry as a literal module name: it keeps nothing",)
    return replace(quant, kept=kept, kept_modules=kept_mods, mtp_kept=mtp_entries(names, model_type), notes=notes,
                   channel_scales=channel_scales(parts, kept, params) if parts is not None else quant.channel_scales)


def _sglang_entry(entry: str, dotted: bool, words: set, tested: tuple[str, set], n: int, params, where: str,
                  modules):
    """One literal entry as SGLang matches it (kvplan.readers.exclusion_rules.sglang_matcher) where it holds only words
    of the model's module names or matches one of them; else the entry itself, read by its words (`lm_head` and the
    vision tower's stay plain, a name kvplan cannot place is refused). `tested`: the module names matched against,
    joined by newlines, and their FusedMoE prefixes; an entry that is a substring of none of them (its trailing dots
    dropped) and holds no prefix matches nothing, and is not matched module by module."""
    test = sglang_matcher(entry, dotted)
    if all(w in words or w.isdigit() for w in entry.split(".") if w):
        return test
    text, moes = tested
    if entry.rstrip(".") not in text and not ("experts" in entry and any(m in entry for m in moes)):
        return entry
    return test if any(matched([test], n, params, where, modules)) else entry


def _sglang_more(method: str, quant, theirs) -> tuple[str, ...]:
    """The note, for every other engine, where SGLang's dotted reading keeps more of the model in 16 bits than the
    exact one kvplan plans; () where it keeps as much or less (kvplan.readers.exclusion_rules.sglang_key_note says
    where its key hides a list) or meets a refusal."""
    more = -1 if isinstance(theirs, str) else sum(c for _, c in theirs.kept) - sum(c for _, c in quant.kept)
    if more <= 0:
        return ()
    return (f"exclusion list: kvplan reads this {method} list as vLLM does (is_layer_skipped, exact names); SGLang "
            f"matches at dotted-path boundaries (sglang#23467) and keeps {more:,} more parameters in 16 bits, which "
            f"{arg('engine')} sglang plans",)


def _gptq_dynamic(q: dict, where: str) -> list[str]:
    """GPTQModel's `dynamic` rules as vLLM reads them (0.33.0 wheel `quantization/utils/gptq_utils.py`
    get_dynamic_override L85-103, asked by get_linear_quant_method L188-195): a `-:` key is a regular expression
    (re.match) of the modules left unquantized, read here as the `re:` entry it is; a `+:` (or bare) key overrides
    the base `bits` / `group_size` of the modules it matches, which kvplan's one format for every quantized module
    cannot hold: refused, named, unless it repeats the base."""
    dynamic = q.get("dynamic")
    if dynamic is None:
        return []
    if not isinstance(dynamic, dict) or not all(isinstance(k, str) and isinstance(v, dict) for k, v in dynamic.items()):
        raise KvplanError(f"{where}.dynamic must be an object of pattern -> overrides, got {dynamic!r:.60}", EXIT_USAGE)
    base = {"bits": _q_int(q, where, "bits", default=4), "group_size": _q_int(q, where, "group_size", default=128,
                                                                                minimum=-1)}
    out = []
    for key, over in dynamic.items():
        if key.startswith("-:"):
            out.append("re:" + key[2:])
            continue
        changed = sorted(k for k in base if k in over and over[k] != base[k])
        if changed:
            raise KvplanError(f"{where}.dynamic: {key[:60]!r} sets {', '.join(f'{k} {over[k]!r}' for k in changed)} "
                              "for the modules it matches; kvplan reads one format for every quantized module "
                              "(refused rather than guessed)", EXIT_USAGE)
    return out


def _channel_wise(q: dict, where: str, method: str) -> bool | None:
    """Whether the checkpoint's weights carry a scale per output channel, and whether its routed experts do too
    (True), or only its linear layers (False: vLLM's FBGEMMFp8Config gives FusedMoE no method, 0.33.0 fbgemm_fp8.py
    L79-90, and ModelOptFp8MoEMethod allocates per-tensor scales, 0.19.0 modelopt.py L726-740); None: no channel
    scales. compressed-tensors `strategy: channel` (int8 W8A8, llm-compressor's FP8_DYNAMIC), fbgemm_fp8 and
    ModelOpt FP8_PER_CHANNEL_PER_TOKEN are channel-wise; fp8's per-tensor scales (a few per layer) and its block
    scales (kvplan.model.weight_formats.linear_bytes) are not."""
    if method == "fbgemm_fp8":
        return False
    if method == "modelopt":
        return False if str(q.get("quant_algo", "")).upper() == "FP8_PER_CHANNEL_PER_TOKEN" else None
    if method != "compressed-tensors":
        return None
    for group in (q.get("config_groups") or {}).values():  # the scheme _method reads: the first with weight bits
        weights = group.get("weights") or {}
        bits = _q_int(weights, where, "num_bits", default=0, minimum=0) if isinstance(weights, dict) else 0
        if bits:
            return True if bits == 8 and weights.get("strategy") == "channel" else None
    return None


def _targets(q: dict, method: str) -> list[str]:
    """Every compressed-tensors scheme's `targets` (module classes such as Linear, or `re:` names)."""
    groups = q.get("config_groups") if method == "compressed-tensors" else None
    out: list[str] = []
    for group in (groups or {}).values() if isinstance(groups, dict) else ():
        targets = group.get("targets") if isinstance(group, dict) else None
        if isinstance(targets, list) and all(isinstance(t, str) for t in targets):
            out += targets
    return out


def normalised_method(q: dict) -> str:
    """The config's `quant_method` as vLLM reads it, every branch here comparing this one spelling: lower-cased, and
    `compressed_tensors` spelled `compressed-tensors` (0.33.0 wheel `transformers_utils/model_arch_config_convertor.py`
    L272-281); "" where there is none or it is not a string."""
    raw = q.get("quant_method")
    return raw.lower().replace("compressed_tensors", "compressed-tensors") if isinstance(raw, str) else ""


def _method(cfg, q: dict, where: str, method: str, layers=()) -> Quantization:
    """The method (`method`, normalised) and its scope, before the exclusion list."""
    if method == "mxfp4":
        # vLLM's Mxfp4Config.get_quant_method gives every LinearBase an UnquantizedLinearMethod (listed or
        # not: "MXFP4 linear layer is not implemented"); only FusedMoE experts are MXFP4
        return Quantization("mxfp4", 32, experts_only=True)
    if method == "fbgemm_fp8":
        _fbgemm_keys(q, where)
    if method in ("fp8", "fbgemm_fp8"):
        block = q.get("weight_block_size")
        if block is not None and (not isinstance(block, list) or len(block) not in (0, 2)):
            raise KvplanError(f"{where}.weight_block_size must be a list of two integers, got {block!r}", EXIT_USAGE)
        sizes = [_q_int({"weight_block_size": b}, where, "weight_block_size", default=0) for b in block or []]
        return Quantization("fp8", sizes[0] if sizes else 0)
    if method == "modelopt":  # NVIDIA ModelOpt, either file's form (kvplan.readers.modelopt)
        return modelopt_method(q, where)
    if method in ("awq", "gptq", "autoround"):
        # AWQ and GPTQ store a packed zero point per group whatever `sym` says (qzeros int32 [K/g, N/8]);
        # GPTQ adds g_idx (int32 [K]) to every quantized linear, act-order (`desc_act`) or not (AutoGPTQ
        # QuantLinear; vLLM gptq.py GPTQLinearMethod.create_weights loads it as a parameter)
        bits = _q_int(q, where, "bits", "w_bit", default=4)
        group = _q_int(q, where, "group_size", "q_group_size", default=128, minimum=-1)
        desc_act, sym = q.get("desc_act", False), q.get("sym", True) if method == "gptq" else True
        for key, value in (("desc_act", desc_act), ("sym", sym)):
            if not isinstance(value, bool):
                raise KvplanError(f"{where}.{key} must be true or false, got {value!r}", EXIT_USAGE)
        return Quantization(_int_format(bits, where), group if group > 0 else 128, input_groups=bits == 8,
                            index_bytes=g_idx_bytes(cfg, layers) if method == "gptq" else 0,
                            act_order=method == "gptq" and desc_act and group != -1, per_row=group == -1,
                            asym=method == "gptq" and not sym)
    if method == "bitsandbytes":
        # NF4/FP4 blocks of 64 with an absmax each and no zero point (bitsandbytes functional.quantize_4bit;
        # transformers saves weight.absmax fp32, or uint8 + nested_absmax with bnb_4bit_use_double_quant)
        if q.get("load_in_4bit") is True:
            return Quantization("int4", 64, symmetric=True,
                                scale_bytes=1 if q.get("bnb_4bit_use_double_quant") is True else 4)
        return Quantization("int8")
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        if not isinstance(groups, dict) or not all(isinstance(g, dict) for g in groups.values()):
            raise KvplanError(f"{where}.config_groups must be an object of objects, got {groups!r:.60}", EXIT_USAGE)
        for group in groups.values():
            weights = group.get("weights") or {}
            if not isinstance(weights, dict):
                raise KvplanError(f"{where}.config_groups: weights must be an object, got {weights!r:.60}", EXIT_USAGE)
            bits = _q_int(weights, where, "num_bits", default=0, minimum=0)
            if bits == 4 and weights.get("type") == "float":  # nvfp4-pack-quantized: e2m1 + fp8 scale per 16
                return Quantization("nvfp4", 16)
            if bits == 4:  # pack-quantized: weight_packed, weight_scale, and weight_zero_point unless symmetric
                return Quantization("int4", _q_int(weights, where, "group_size", default=128),
                                    symmetric=weights.get("symmetric") is True, input_quant=_input_quant(group, where))
            if bits == 8:  # a "block" strategy stores an fp32 scale per block_structure tile (FP8-block checkpoints)
                block = weights.get("block_structure") if weights.get("strategy") == "block" else None
                tile = _q_int({"block_structure": block[0]}, where, "block_structure", default=0) if (
                    isinstance(block, list) and len(block) == 2 and block[0] == block[1]) else 0
                acts, fp8 = _input_quant(group, where), weights.get("type") == "float"
                return Quantization("fp8" if fp8 else "int8", tile, input_quant=acts, weight_only=fp8 and not acts)
            if bits:
                raise KvplanError(f"{where}: {bits}-bit weights are not supported (4 or 8)", EXIT_USAGE)
    return Quantization(_dtype(cfg))


def is_w4a8(q: Quantization) -> bool:
    """Whether checkpoint quantization `q` is compressed-tensors int4 with quantized input activations (W4A8): what
    vLLM loads on CUTLASS W4A8 or refuses (kvplan.engines.vllm.w4a8) and SGLang refuses
    (kvplan.engines.sglang.quant_methods)."""
    return q.quant_method == "compressed-tensors" and q.method == "int4" and bool(q.input_quant)


def _input_quant(group: dict, where: str) -> tuple:
    """A compressed-tensors scheme's `input_activations` as (type, num_bits, strategy, dynamic, symmetric), each with
    QuantizationArgs' default where the config leaves it out (type int, symmetric true, dynamic false); () where the
    scheme quantizes no activations (weight-only: W4A16, W8A16)."""
    acts = group.get("input_activations")
    if acts is None:
        return ()
    if not isinstance(acts, dict):
        raise KvplanError(f"{where}.config_groups: input_activations must be an object, got {acts!r:.60}", EXIT_USAGE)
    return (str(acts.get("type") or "int"), _q_int(acts, where, "num_bits", default=8), str(acts.get("strategy") or ""),
            acts.get("dynamic") is True, acts.get("symmetric", True) is not False)


def _fbgemm_keys(q: dict, where: str) -> None:
    """A one-line refusal of an fbgemm_fp8 config vLLM and SGLang cannot load, instead of a default: FBGEMMFp8Config.
    from_config reads `modules_to_not_convert` and `activation_scale_ub` with get_from_keys, which raises without them
    ("Cannot find any of [...] in the model's quantization config"; vLLM 0.33.0 fbgemm_fp8.py L75-76, 0.8.3 L58-59;
    SGLang 0.5.15 fpgemm_fp8.py L74-75), and the bound must be a number (0.33.0 L142-145); a `weight_block_size` is
    refused: FBGEMMFp8LinearMethod allocates one scale per output channel (0.33.0 L133-134) and reads no block size,
    so a block-scaled checkpoint is not one these configs load."""
    missing = [k for k in ("modules_to_not_convert", "activation_scale_ub") if k not in q]
    if missing:
        raise KvplanError(f"{where}: an fbgemm_fp8 config needs {' and '.join(f'`{k}`' for k in missing)}: vLLM's and "
                          "SGLang's FBGEMMFp8Config.from_config stop at start-up without it (get_from_keys); refused "
                          "rather than defaulted", EXIT_USAGE)
    bound = q["activation_scale_ub"]
    if isinstance(bound, bool) or not isinstance(bound, (int, float)):  # torch.tensor(input_scale_ub) as it loads
        raise KvplanError(f"{where}.activation_scale_ub must be a number (fbgemm_fp8's bound on activation scales, "
                          f"which the engine makes a tensor of), got {shown(bound)}", EXIT_USAGE)
    if q.get("weight_block_size") is not None:
        raise KvplanError(f"{where}: fbgemm_fp8 scales each output channel (FBGEMMFp8LinearMethod) and reads no "
                          f"`weight_block_size` (got {shown(q['weight_block_size'])}); refused rather than planned "
                          "with block scales", EXIT_USAGE)


def _q_int(q: dict, where: str, *names: str, default: int, minimum: int = 1) -> int:
    """An integer from a quantization_config entry, or a one-line error naming it."""
    for name in names:
        value = q.get(name)
        if value is None:
            continue
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or (isinstance(value, float) and not math.isfinite(value)) or value != int(value)
                or not minimum <= value <= (1 << 20)):
            raise KvplanError(f"{where}.{name} must be an integer, got {_shown(value)}", EXIT_USAGE)
        return int(value)
    return default


def _int_format(bits: int, where: str) -> str:
    if bits not in (4, 8):
        raise KvplanError(f"{where}: {bits}-bit weights are not supported (4 or 8)", EXIT_USAGE)
    return "int4" if bits == 4 else "int8"


def _dtype(cfg) -> str:
    return read_dtype(cfg)


def _shown(value) -> str:
    return shown(value)
