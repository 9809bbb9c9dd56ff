"""NVIDIA ModelOpt checkpoints' quantization read as vLLM reads it: the algorithm, its exclusion wildcards, and
MIXED_PRECISION's per-layer algorithms.

A ModelOpt export states its quantization in one of two forms, both read here (vLLM
vllm-project/vllm@00155cde:vllm/model_executor/layers/quantization/modelopt.py, ModelOptQuantConfigBase.from_config):

* `hf_quant_config.json` beside config.json (older exports: nvidia/DeepSeek-R1-FP4, Llama-3.3-70B-Instruct-FP4),
  `{"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16,
  "kv_cache_quant_algo": ..., "exclude_modules": [...]}}`; kvplan.sources puts it in as config.json's
  `quantization_config` where config.json has none, as vLLM and SGLang do (SGLang
  sgl-project/sglang model_config.py ModelConfig._parse_quant_hf_config reads the file from the model's folder);
  the same nested form inside config.json's `quantization_config` is read alike;
* config.json's `quantization_config` in the compressed-tensors style: `{"quant_method": "modelopt",
  "quant_algo": ..., "ignore": [...], "quantized_layers": {...}}`.

Exclusion entries are wildcards. vLLM's ModelOptQuantConfigBase.is_layer_excluded keeps a module unquantized when
an entry equals its name, is a substring of it (its legacy clause for exports before ModelOpt 0.39, a substring after
a leading `language_model.`, adds nothing to that), or matches it as an fnmatch pattern
(`model.layers.*.self_attn*`, `*.mlp.gate`); `glob_entry` is that test, asked of each module name
kvplan.readers.module_names.ModuleNames gives (experts, shared experts, attention and MLP projections), so
`lm_head` or a router's `*.mlp.gate` change nothing and `model.layers.61*` (DeepSeek's MTP layer, not a decoder
layer) matches none.

MIXED_PRECISION (ModelOptMixedPrecisionConfig) gives each module listed in `quantized_layers` its own
`quant_algo` (FP8, NVFP4 or W4A16_NVFP4) and leaves every linear module not listed unquantized
(`_resolve_quant_algo` returns None -> UnquantizedLinearMethod); a RoutedExperts block is quantized when any key
lies under its prefix. kvplan reads it where one format covers the dense modules and one the routed experts
(Quantization.method and experts_method); more formats than that among the dense modules is refused, named.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.spec import Quantization
from kvplan.readers.exclusion_rules import Named

# quant_algo -> (kvplan's weight format, group or block size): NVFP4 packs 16 e2m1 values per fp8 scale
# (ModelOptNvFp4LinearMethod.create_weights); FP8 is per tensor, FP8_PER_CHANNEL_PER_TOKEN one fp32 scale per
# output row (kvplan.readers.quantization counts them), FP8_PB_WO fp32 scales per 128 x 128 block
# (ModelOptFp8PbWoLinearMethod._WEIGHT_BLOCK_SIZE)
_FORMATS = {"NVFP4": ("nvfp4", 16), "W4A16_NVFP4": ("nvfp4", 16), "FP8": ("fp8", 0),
            "FP8_PER_CHANNEL_PER_TOKEN": ("fp8", 0), "FP8_PB_WO": ("fp8", 128)}


def is_modelopt(q: dict) -> bool:
    """Whether a quantization_config is ModelOpt's: its quant_method says so (modelopt, modelopt_fp4,
    modelopt_mixed), or it is hf_quant_config.json's text with `producer.name` modelopt."""
    producer = q.get("producer")
    return (str(q.get("quant_method", "")).lower().startswith("modelopt")
            or isinstance(producer, dict) and producer.get("name") == "modelopt")


def modelopt_view(q: dict) -> dict:
    """A ModelOpt quantization_config in one flat form (`quant_method: modelopt`, the algorithm and its lists at
    the top: a nested `quantization` block lifted); any other config unchanged."""
    if not is_modelopt(q):
        return q
    inner = q.get("quantization")
    flat = {**inner} if isinstance(inner, dict) else {k: v for k, v in q.items() if k != "quantization"}
    flat["quant_method"] = "modelopt"
    return flat


def _format(algo, where: str, key: str = "quant_algo") -> tuple[str, int]:
    name = str(algo or "").upper()
    if name not in _FORMATS:
        raise KvplanError(f"{where}: ModelOpt {key} {name or '(none)'!r} is not read ({', '.join(_FORMATS)} or "
                          "MIXED_PRECISION of them)", EXIT_USAGE)
    return _FORMATS[name]


def _layers(q: dict, where: str) -> dict:
    layers = q.get("quantized_layers")
    if not isinstance(layers, dict) or not layers or not all(
            isinstance(k, str) and isinstance(v, dict) for k, v in layers.items()):
        raise KvplanError(f"{where}: MIXED_PRECISION needs `quantized_layers`, an object of module name -> "
                          f"{{quant_algo}}, got {layers!r:.60}", EXIT_USAGE)
    return layers


def modelopt_method(q: dict, where: str) -> Quantization:
    """The weight format of a ModelOpt config (modelopt_view's form); MIXED_PRECISION as one dense and one
    routed-expert format, or refused with the formats it mixes named."""
    group = q.get("group_size")
    if group is not None and group != 16 and str(q.get("quant_algo", "")).upper() in ("NVFP4", "W4A16_NVFP4"):
        raise KvplanError(f"{where}: NVFP4 group_size {group!r} is not read (16: one fp8 scale per 16 values)",
                          EXIT_USAGE)
    if str(q.get("quant_algo", "")).upper() != "MIXED_PRECISION":
        method, size = _format(q.get("quant_algo"), where)
        return Quantization(method, size)
    dense: set = set()
    experts: set = set()
    for name, info in _layers(q, where).items():
        (experts if ".experts." in name else dense).add(_format(info.get("quant_algo"), where, f"{name}: quant_algo"))
    if len(dense) > 1 or len(experts) > 1:
        shown = ", ".join(sorted({m for m, _ in dense | experts}))
        raise KvplanError(f"{where}: MIXED_PRECISION mixes {shown} among its "
                          f"{'dense modules' if len(dense) > 1 else 'routed experts'}; kvplan reads one format for "
                          "the dense modules and one for the experts (refused rather than guessed)", EXIT_USAGE)
    (method, size), = dense or experts
    own = next(iter(experts))[0] if experts else ""
    return Quantization(method, size, experts_method=own if own != method else "")


def glob_entry(entry: str) -> Named:
    """An exclude_modules / ignore entry as vLLM's is_layer_excluded matches it (module docstring)."""
    def test(name: str) -> bool:
        # vLLM's legacy clause (the entry within the name less a leading `language_model.`) is implied by the first
        return entry in name or fnmatchcase(name, entry)

    return Named(entry, test)


def _tail(name: str) -> str:
    """A module name from its `layers.` on: the text model's prefix (model., model.language_model.,
    language_model.model.) set aside, as _quantized_layer_prefix_candidates tries each."""
    at = name.find("layers.")
    return name[at:] if at >= 0 else name


def unlisted(q: dict, where: str) -> Named | None:
    """For MIXED_PRECISION, a test of the module names its `quantized_layers` leave unquantized (vLLM
    ModelOptMixedPrecisionConfig._resolve_quant_algo: the name itself under any of the text model's prefixes, or for
    an expert any key under its RoutedExperts prefix); None for a single-algorithm config. kvplan.readers.unquantized
    asks it of each module under each prefix and keeps a module when any answer is yes: so it answers for the
    module, whatever the prefix."""
    if str(q.get("quant_algo", "")).upper() != "MIXED_PRECISION":
        return None
    keys = {_tail(k) for k in _layers(q, where)}
    blocks = {k[:k.index(".experts.") + len(".experts")] for k in keys if ".experts." in k}

    def left_out(name: str) -> bool:
        n = _tail(name)
        return n not in keys and not (".experts." in n and n[:n.index(".experts.") + len(".experts")] in blocks)

    return Named("modules MIXED_PRECISION's quantized_layers leave out", left_out)


QUANT_FILE = "hf_quant_config.json"


def with_quant_file(config: dict, quant: dict | None) -> dict:
    """config.json with the `hf_quant_config.json` beside it as its quantization_config, where it states none and
    the file is ModelOpt's (vLLM and SGLang read that file only then: module docstring); else config unchanged."""
    if not isinstance(quant, dict) or config.get("quantization_config") is not None or not (
            is_modelopt(quant) or isinstance(quant.get("quantization"), dict)):
        return config
    return {**config, "quantization_config": {**quant, "quant_method": "modelopt"}}
