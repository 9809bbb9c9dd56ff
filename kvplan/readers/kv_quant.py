"""The KV-cache quantization a checkpoint declares, read from its quantization config (issue 22).

Where checkpoints state it (each engine's reading cited in kvplan.engines.checkpoint_kv and docs/engines.md):

* ModelOpt: `kv_cache_quant_algo` ("FP8", "NVFP4", null) in hf_quant_config.json's `quantization` block
  (nvidia/Llama-3.3-70B-Instruct-FP8, nvidia/DeepSeek-R1-FP4) or in config.json's flat `quantization_config`; newer
  flat exports state a `kv_cache_scheme` object instead, which vLLM's get_kv_cache_quant_algo_string reads first
  (vllm 0.14.0 wheel sdist, vllm/utils/torch_utils.py L239-298).
* compressed-tensors (llm-compressor, RedHatAI's "-FP8-KV" / "-FP8-dynamic" checkpoints): `kv_cache_scheme`,
  `{"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false, "symmetric": true}` or null.
* ModelOpt's `kv_cache_scheme` may be a string ("FP8", "NVFP4"): vLLM maps it as it maps a kv_cache_quant_algo
  string, lower-cased through MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP, anything else "auto" (0.19.0 wheel
  vllm/utils/torch_utils.py L275-297, 0.33.0 L456-491); SGLang's NVFP4 config maps "FP8"/"FLOAT8" and
  "FP4"/"FLOAT4"/"NVFP4" in config.json's flat form (0.5.23 wheel modelopt_quant.py L1629-1636): kept as
  `scheme_word`, each engine's rule by release in kvplan.engines.*.cache_dtype. Another producer's string is refused.
* Quark: a non-empty `kv_cache_group` (module names whose outputs are quantized); recorded, not read into a kind.
* Another quant_method's `kv_cache_quant_algo` (SGLang's Fp8Config reads one from 0.5.18): recorded as written.

Every value is checked before use: a string is a short identifier (ModelOpt's spelling), a scheme's fields of the
types their writers give them; anything else is a one-line usage error naming the key, never a guess. A
declaration kvplan cannot name a kind for is kept with its kind "" and said so by the engine rules.
"""

from __future__ import annotations

import re

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.checkpoint_kv import CheckpointKV
from kvplan.readers.modelopt import is_modelopt, modelopt_view

_ALGO = re.compile(r"[A-Za-z0-9_]{1,32}")
_WORD = re.compile(r"[A-Za-z0-9_\-]{1,32}")


def read_checkpoint_kv(cfg) -> CheckpointKV | None:
    """The KV-cache quantization `cfg`'s quantization_config declares, or None where it declares none."""
    q = cfg.raw("quantization_config")
    if not isinstance(q, dict):
        return None
    where = f"{cfg.where}: quantization_config"
    file_form = is_modelopt(q) and isinstance(q.get("producer"), dict) and isinstance(q.get("quantization"), dict)
    source = "hf_quant_config.json" if file_form else "config.json quantization_config"
    producer = "modelopt" if is_modelopt(q) else str(q.get("quant_method", "")).lower()[:32] or "unnamed"
    flat = modelopt_view(q)
    scheme = flat.get("kv_cache_scheme")
    if isinstance(scheme, str) and producer == "modelopt":  # a word, which vLLM and SGLang map (module docstring)
        if not _ALGO.fullmatch(scheme):  # vLLM lower-cases it unstripped: a name with spaces is refused, not guessed
            raise KvplanError(f"{where}.kv_cache_scheme must be a short name such as FP8 or an object, got "
                              f"{scheme!r:.40}", EXIT_USAGE)
        flat_form = not file_form and not isinstance(q.get("quantization"), dict)
        return CheckpointKV(producer, source, algo=_algo(flat, where), scheme_word=scheme.upper(),
                            flat_algo=str(flat.get("quant_algo") or "").upper()[:32] if flat_form else "")
    if scheme is not None:  # vLLM reads a scheme before an algorithm string (module docstring)
        return _scheme(scheme, producer, source, f"{where}.kv_cache_scheme")
    algo = _algo(flat, where)
    if algo:
        return CheckpointKV(producer, source, algo=algo)
    group = flat.get("kv_cache_group")
    if producer == "quark" and isinstance(group, list) and group:
        return CheckpointKV(producer, source)  # kind "": not read (module docstring)
    return None


def _algo(flat: dict, where: str) -> str:
    """The config's kv_cache_quant_algo, upper-cased ("" where it states none); a value not a short name refused."""
    algo = flat.get("kv_cache_quant_algo")
    if algo is None:
        return ""
    if not isinstance(algo, str) or not _ALGO.fullmatch(algo):
        raise KvplanError(f"{where}.kv_cache_quant_algo must be a short name such as FP8, got {algo!r:.40}",
                          EXIT_USAGE)
    return algo.upper()


def _scheme(scheme, producer: str, source: str, where: str) -> CheckpointKV:
    if not isinstance(scheme, dict):
        raise KvplanError(f"{where} must be an object (num_bits, type, strategy, ...) or null, got {scheme!r:.40}",
                          EXIT_USAGE)
    bits = scheme.get("num_bits")
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 64:
        raise KvplanError(f"{where}.num_bits must be an integer from 1 to 64, got {bits!r:.40}", EXIT_USAGE)
    words = {}
    for key in ("type", "strategy"):
        value = scheme.get(key)
        if value is not None and (not isinstance(value, str) or not _WORD.fullmatch(value)):
            raise KvplanError(f"{where}.{key} must be a short name, got {value!r:.40}", EXIT_USAGE)
        words[key] = (value or "").lower()
    flags = {}
    for key in ("dynamic", "symmetric"):
        value = scheme.get(key)
        if key == "dynamic" and value == "local":  # compressed-tensors' DynamicType.LOCAL: dynamic, per group
            value = True
        if value is not None and not isinstance(value, bool):
            raise KvplanError(f"{where}.{key} must be true or false, got {value!r:.40}", EXIT_USAGE)
        flags[key] = value
    return CheckpointKV(producer, source, scheme_type=words["type"], scheme_bits=bits,
                        scheme_strategy=words["strategy"], scheme_dynamic=flags["dynamic"],
                        scheme_symmetric=flags["symmetric"])
