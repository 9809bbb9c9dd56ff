"""The KV-cache quantization a checkpoint declares, read from its quantization config (issue 22).

Where checkpoints state it (each engine's reading cited in kvplan.engines.checkpoint_kv and docs/engines.md):

* ModelOpt: `kv_cache_quant_algo` ("FP8", "NVFP4", null) in hf_quant_config.json's `quantization` block
  (nvidia/Llama-3.3-70B-Instruct-FP8, nvidia/DeepSeek-R1-FP4) or in config.json's flat `quantization_config`; newer
  flat exports state a `kv_cache_scheme` object instead, which vLLM's get_kv_cache_quant_algo_string reads first
  (vllm 0.14.0 wheel sdist, vllm/utils/torch_utils.py L239-298).
* compressed-tensors (llm-compressor, RedHatAI's "-FP8-KV" / "-FP8-dynamic" checkpoints): `kv_cache_scheme`,
  `{"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false, "symmetric": true}` or null.
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
    if scheme is not None:  # vLLM reads a scheme before an algorithm string (module docstring)
        return _scheme(scheme, producer, source, f"{where}.kv_cache_scheme")
    algo = flat.get("kv_cache_quant_algo")
    if algo is not None:
        if not isinstance(algo, str) or not _ALGO.fullmatch(algo):
            raise KvplanError(f"{where}.kv_cache_quant_algo must be a short name such as FP8, got {algo!r:.40}",
                              EXIT_USAGE)
        return CheckpointKV(producer, source, algo=algo.upper())
    group = flat.get("kv_cache_group")
    if producer == "quark" and isinstance(group, list) and group:
        return CheckpointKV(producer, source)  # kind "": not read (module docstring)
    return None


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
