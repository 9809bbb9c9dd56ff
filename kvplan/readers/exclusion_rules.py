"""Each quantization method's own reading of a literal exclusion entry: which module names it keeps in 16 bits.

The engines do not match every method's list alike (read in the vLLM 0.33.0 wheel,
`vllm/model_executor/layers/quantization/`):

* fp8 (`fp8.py` Fp8Config.get_quant_method L176-198, `ignored_layers_match_mode = "exact"` L118-120), fbgemm_fp8
  (`fbgemm_fp8.py` L79-90, is_layer_skipped's default mode) and compressed-tensors (`compressed_tensors/utils.py`
  should_ignore_layer L53-70 -> `utils/config_utils.py` find_matching_patterns / is_equal_or_regex_match L384-452)
  keep a linear layer only where an entry is its full name (`model.layers.0.self_attn.q_proj`), or a fused layer's
  name (`...self_attn.qkv_proj`: its shards), or (compressed-tensors) a `re:` expression that re.match-es it
  (`utils/quant_utils.py` is_layer_skipped L619-693). A bare `self_attn`, `linear_attn` or `in_proj_ba` names no
  layer there, so vLLM quantizes it. fp8's routed experts (one RoutedExperts module per layer, prefix
  `model.layers.N.mlp.experts`) are skipped when that prefix is a substring of an entry that says `experts`
  (is_layer_skipped L684-688): `exact_matcher` is that test.
* SGLang reads fp8 / fbgemm_fp8 lists its own way (`sglang_matcher`, `sglang_key`), which kvplan plans as a reading of
  its own (`Quantization.readings`, chosen by release in kvplan.engines.sglang.quant_methods). From 0.5.11 an entry
  matches at dotted-path boundaries (sgl-project/sglang#23467, merged 2026-04-22, commit bfec0134; 0.5.23 wheel
  `srt/layers/quantization/utils.py` `_module_path_match` L48-59, 0.5.11 L46-57: the entry equal to the name, a dotted
  prefix of it, or a dotted run inside it), so a bare `linear_attn` keeps every Gated DeltaNet projection there;
  0.5.10 tests a substring (`ignored in prefix`, 0.5.10 wheel utils.py L68, L80). Either way a fused layer is asked by
  its shards (the model class's packed_modules_mapping, or from 0.5.11 the fallback qkv_proj / gate_up_proj shards,
  L62-67, L83-105), and a FusedMoE (`model.layers.N.mlp.experts`) is also skipped by an entry saying `experts` that
  holds its prefix (L115-122). A `re:` entry is a literal there (nothing in fp8.py or utils.py reads the form): it
  names no module. fp8's config reads the first of `ignored_layers`, `modules_to_not_convert` present, empty or not
  (get_from_keys_or, 0.5.23 fp8.py L354-356, base_config.py L257-271) and keeps each entry with and without a leading
  `model.` (L357-364); fbgemm_fp8's reads `modules_to_not_convert` (0.5.15 fpgemm_fp8.py L74). compressed-tensors
  reads the same in both engines (SGLang's should_ignore_layer is vLLM's), and so does AWQ (SGLang 0.5.23 awq/awq.py
  is_layer_skipped_awq L61-62, a substring; `modules_to_not_convert`, L131-132).
* bitsandbytes (vLLM 0.27.1 wheel `quantization/bitsandbytes.py` is_layer_skipped_bnb L178-192, asked by
  get_quant_method L160-169; SGLang 0.5.23 `bitsandbytes.py` L170-184 and L156-167, the same rule) keeps a linear
  layer where an entry is one dotted word of its name or a leading run of its words (`self_attn`, `model.layers.1.mlp`;
  not `mlp.down_proj`, not `layers.1.mlp`), tested on the layer the engine builds: q, k, v as one qkv_proj and gate, up
  as one gate_up_proj (so `q_proj` alone names none); the routed experts are never left out (RoutedExperts / FusedMoE
  get BitsAndBytesMoEMethod unasked): `component_matcher`. vLLM 0.28.0 on registers no bitsandbytes method
  (kvplan.engines.vllm.quant_methods).
* Every other method keeps kvplan's reading of a name's words (kvplan.readers.unquantized._entries), which agrees
  with theirs on the lists kvplan reads: AWQ (`auto_awq.py` L294-299, match_mode "substring") tests an entry as a
  substring of the name; MXFP4 quantizes only its experts (`mxfp4.py` L91-105; from_config reads no list); ModelOpt's
  wildcards are kvplan.readers.modelopt's; GPTQ reads no list but its `dynamic` rules (kvplan.readers.quantization).

Which key each method reads (`from_config`, same wheel; `KEYS`): fp8 `ignored_layers`, and `modules_to_not_convert`
only where that is empty or absent (`fp8.py` L162-168); fbgemm_fp8 `modules_to_not_convert` (`fbgemm_fp8.py` L75);
AWQ `modules_to_not_convert` (`auto_awq.py` L246-248); compressed-tensors `ignore` (`compressed_tensors/
compressed_tensors.py` L254); ModelOpt's hf_quant_config.json `quantization.exclude_modules` (`modelopt.py` L342), its
config.json form `ignore`, else `exclude_modules` when `ignore` is absent (L359); GPTQ none but `dynamic`
(`auto_gptq.py` L191). A key the method's config does not read is left out and named in a note. MXFP4 reads none
(`mxfp4.py` L67-68) but quantizes no linear layer anyway, so its list (gpt-oss: attention, router) only restates
what stays 16-bit and is still read; bitsandbytes `llm_int8_skip_modules` alone (vLLM 0.27.1 from_config L140-142,
SGLang 0.5.23 L136-138: a `modules_to_not_convert` beside it is read by neither); any method not listed
keeps every key merged, as before.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError

LIST_KEYS = ("modules_to_not_convert", "ignore", "ignored_layers", "ignored_modules", "llm_int8_skip_modules",
             "exclude_modules")  # the last ModelOpt's hf_quant_config.json (wildcards: kvplan.readers.modelopt)
# the methods whose literal entries vLLM matches exactly (module docstring)
EXACT = frozenset({"fp8", "fbgemm_fp8", "compressed-tensors"})
# the methods whose SGLang reading differs from vLLM's exact one (dotted-path boundaries, sglang#23467)
SGLANG_BOUNDARY = frozenset({"fp8", "fbgemm_fp8"})
# fused layer names a checkpoint may list, and the shards vLLM tests for them (packed_modules_mapping's common
# entries; a Gated DeltaNet's in_proj_qkvz / in_proj_ba are kvplan.readers.unquantized._GDN_FUSED's)
_FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


def rule(quant_method: str) -> str:
    """'exact' where vLLM keeps only a module an entry names in full (fp8, fbgemm_fp8, compressed-tensors),
    'component' for bitsandbytes' dotted words (`component_matcher`), else '' (kvplan's reading of the name's words)."""
    return "exact" if quant_method in EXACT else "component" if quant_method == "bitsandbytes" else ""


class Named:
    """A module-name test with the entry it stands for (kvplan.readers.unquantized names it in a refusal). `literal`:
    every name it accepts holds the entry's `layers.N.` (a plain substring test, no wildcard or regex), so only layer
    N's modules need asking."""

    def __init__(self, label: str, test, literal: bool = False):
        self.label, self._test, self.literal = label, test, literal

    def __call__(self, name: str) -> bool:
        return self._test(name)


def exact_matcher(entry: str) -> Named:
    """vLLM's is_layer_skipped in its exact mode (module docstring): `entry` is the module's full name, or a fused
    layer's name whose shard this is, or for a routed expert an entry saying `experts` that holds its layer's
    RoutedExperts prefix (`model.layers.3.mlp.experts.0.w1` keeps layer 3's experts, all of them)."""
    head, _, tail = entry.rpartition(".")
    shards = {f"{head}.{s}" for s in _FUSED.get(tail, ())}

    def test(name: str) -> bool:
        if name == entry or name in shards:
            return True
        at = name.find(".experts.")
        return at >= 0 and "experts" in entry and name[:at + len(".experts")] in entry

    return Named(entry, test)


# the fused layer vLLM's and SGLang's decoders load a projection into (QKVParallelLinear, MergedColumnParallelLinear)
_FUSED_INTO = {shard: fused for fused, shards in _FUSED.items() for shard in shards}


def component_matcher(entry: str) -> Named:
    """bitsandbytes' is_layer_skipped_bnb (module docstring): `entry` is one dotted word of the fused layer's name, or
    the name or a leading run of its words; a routed expert's name never matches (the experts are always quantized)."""
    def test(name: str) -> bool:
        if ".experts." in name:
            return False
        head, _, tail = name.rpartition(".")
        name = f"{head}.{_FUSED_INTO.get(tail, tail)}"
        return entry in name.split(".") or name == entry or name.startswith(entry + ".")

    return Named(entry, test)


def boundary_matcher(entry: str) -> Named:
    """SGLang's _module_path_match (sglang#23467): the entry is the name, a dotted prefix of it or a dotted run in it
    (`linear_attn` keeps `model.layers.0.linear_attn.in_proj_qkv`; `mlp.gate` does not keep `mlp.gate_up_proj`)."""
    return Named(entry, lambda name: f".{entry.strip('.')}." in f".{name}.")


def sglang_key(q: dict, method: str) -> str | None:
    """The key SGLang's fp8 / fbgemm_fp8 config reads its list from (module docstring): fp8 the first of
    `ignored_layers`, `modules_to_not_convert` the config holds, whatever its value; None: neither."""
    keys = ("ignored_layers", "modules_to_not_convert") if method == "fp8" else ("modules_to_not_convert",)
    return next((k for k in keys if k in q), None)


# SGLang's readings of an exclusion list, by the `dotted` flag of sglang_matcher: the key each is kept under in
# `Quantization.readings`, which kvplan.engines.sglang.quant_methods.reading picks by release
SGLANG_READINGS = (("dotted", True), ("substring", False))


def sglang_matcher(entry: str, dotted: bool) -> Named:
    """SGLang's is_layer_skipped for one entry (module docstring): a linear layer by its own (shard) name, at
    dotted-path boundaries (`dotted`: 0.5.11 on) or as a substring (0.5.10); a routed expert by its layer's FusedMoE
    prefix (`model.layers.3.mlp.experts`), which an entry saying `experts` that holds it also keeps."""
    ignored = entry.rstrip(".")

    def hit(name: str) -> bool:
        return f".{ignored}." in f".{name}." if dotted else entry in name

    def test(name: str) -> bool:
        at = name.find(".experts.")
        if at < 0:
            return hit(name)
        moe = name[:at + len(".experts")]
        return hit(moe) or ("experts" in entry and moe in entry)

    return Named(entry, test, literal=True)


# the list keys each method's vLLM config reads, in its order of precedence (module docstring); fp8 falls back to the
# next key where the first is empty or absent, ModelOpt's config.json form only where it is absent
KEYS = {"fp8": ("ignored_layers", "modules_to_not_convert"), "fbgemm_fp8": ("modules_to_not_convert",),
        "awq": ("modules_to_not_convert",), "compressed-tensors": ("ignore",),
        "modelopt": ("ignore", "exclude_modules"), "gptq": (), "bitsandbytes": ("llm_int8_skip_modules",)}
# where each method's keys were read, for the note on the keys left out (vLLM 0.33.0 registers no bitsandbytes)
_KEYS_READ_IN = {"bitsandbytes": "vLLM 0.27.1 and SGLang 0.5.23 from_config"}
_LEGACY_MODELOPT = ("exclude_modules",)  # hf_quant_config.json's nested `quantization` block (modelopt.py L342)


def read_keys(method: str, legacy_modelopt: bool = False) -> tuple[str, ...] | None:
    """The keys `method`'s config reads, in order (None: every key, kvplan's merge)."""
    return _LEGACY_MODELOPT if method == "modelopt" and legacy_modelopt else KEYS.get(method)


def chosen_keys(q: dict, method: str, legacy_modelopt: bool = False) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The list keys kvplan reads for this config and the ones it carries that its method's config does not read
    (empty lists count as absent only where the engine falls back on them: fp8's `not ignored_layers`)."""
    order = read_keys(method, legacy_modelopt)
    present = tuple(k for k in LIST_KEYS if q.get(k) is not None)
    if order is None:
        return present, ()
    read = ()
    for key in order:
        if q.get(key) is not None:
            read = (key,)
            if method != "fp8" or q[key]:
                break
    return read, tuple(k for k in present if k not in read and q.get(k))


def skipped_note(method: str, skipped: tuple[str, ...], read: tuple[str, ...], q: dict) -> tuple[str, ...]:
    """The note naming each listed key the method's config does not read, and how many entries it holds."""
    if not skipped:
        return ()
    counts = {k: len(q[k]) if isinstance(q[k], list) else 0 for k in skipped}
    shown = ", ".join(f"`{k}`" + (f" ({n} entr{'y' if n == 1 else 'ies'})" if n else "") for k, n in counts.items())
    by = f"reads `{read[0]}`" if read else "reads no exclusion list"
    return (f"exclusion list: {method}'s config {by} ({_KEYS_READ_IN.get(method, 'vLLM 0.33.0 from_config')}), so "
            f"kvplan leaves out {shown}: "
            "what it lists is planned as the method quantizes it",)


def sglang_key_note(q: dict, method: str) -> tuple[str, ...]:
    """SGLang's fp8 reads the first of `ignored_layers`, `modules_to_not_convert` that is present, empty or not
    (sgl-project/sglang@00563d36 `python/sglang/srt/layers/quantization/fp8.py` Fp8Config.from_config:
    get_from_keys_or with both keys), so an empty `ignored_layers` hides the second list there, where vLLM falls back
    to it: the note says so."""
    second = q.get("modules_to_not_convert")
    if method != "fp8" or q.get("ignored_layers") != [] or not isinstance(second, list) or not second:
        return ()
    return (f"exclusion list: `ignored_layers` is empty, so vLLM reads `modules_to_not_convert` ({len(second)} "
            "entries), which kvplan plans; SGLang's fp8 config reads the first key present and keeps none of them in "
            "16 bits",)


def exclusion_list(q: dict, where: str, keys: tuple[str, ...] = LIST_KEYS) -> list[str]:
    """Every module name the config's exclusion keys (`keys`: chosen_keys' first) list (a malformed list is a
    one-line error)."""
    names: list[str] = []
    for key in keys:
        value = q.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise KvplanError(f"{where}.{key} must be a list of module names, got {value!r:.60}", EXIT_USAGE)
        if len(value) > 100_000:
            raise KvplanError(f"{where}.{key} lists {len(value)} modules (at most 100,000)", EXIT_USAGE)
        names += value
    return names
