"""The KV-cache quantization a checkpoint declares (`CheckpointKV`, read by kvplan.readers.kv_quant), as written, with
the kind engines name it by and kvplan's cache dtype for it; kvplan.engines.checkpoint_kv says which engine and release
follows it. Kept apart from `spec.py`, which holds one as `ModelSpec.checkpoint_kv`."""

from __future__ import annotations

from dataclasses import dataclass

# a declared KV scheme's (type, bits) -> the kind engines name it by (ModelOpt's kv_cache_quant_algo spelling)
_SCHEME_KINDS = {("float", 8): "FP8", ("float", 4): "NVFP4", ("int", 8): "INT8"}
# a declared kind -> kvplan's KV cache dtype for it (kvplan.core.dtypes.KV_DTYPES); a kind not here has none
KV_KIND_DTYPES = {"FP8": "fp8", "INT8": "int8"}


@dataclass(frozen=True)
class CheckpointKV:
    """The KV-cache quantization a checkpoint declares (kvplan.readers.kv_quant), as written: what an engine's 'auto'
    cache dtype may follow (kvplan.engines.checkpoint_kv says which engine and release does).

    `producer`: whose config declares it (modelopt, compressed-tensors, quark, or another quant_method); `source`:
    where (hf_quant_config.json, or config.json's quantization_config) and the key. A string declaration (ModelOpt's
    `kv_cache_quant_algo`) is `algo`, upper-cased; an object (`kv_cache_scheme`) is its `scheme_*` fields, None or
    "" for a field it leaves out; a ModelOpt `kv_cache_scheme` written as a string ("FP8", "NVFP4") is `scheme_word`,
    upper-cased, beside any `algo`, and `flat_algo` is the config's top-level `quant_algo` where it is
    config.json's flat form (SGLang reads such a string in that form alone, by its algorithm's config). `kind` names
    the declaration as vLLM reads it (a scheme before an algorithm: FP8, NVFP4, INT8, a word as written; "" where
    unread), `dtype` is kvplan's cache dtype for it ("" where kvplan has none).
    """

    producer: str
    source: str
    algo: str = ""
    scheme_type: str = ""
    scheme_bits: int = 0
    scheme_strategy: str = ""
    scheme_dynamic: bool | None = None
    scheme_symmetric: bool | None = None
    scheme_word: str = ""
    flat_algo: str = ""

    @property
    def is_scheme(self) -> bool:
        """A kv_cache_scheme object (not a string, not an algorithm)."""
        return not self.algo and not self.scheme_word

    @property
    def kind(self) -> str:
        return self.scheme_word or self.algo or _SCHEME_KINDS.get((self.scheme_type, self.scheme_bits), "")

    @property
    def dtype(self) -> str:
        return KV_KIND_DTYPES.get(self.kind, "")

    @property
    def static_per_tensor(self) -> bool:
        """A static, symmetric, per-tensor scheme (what SGLang's compressed-tensors KV method loads scales for)."""
        return (self.scheme_strategy == "tensor" and self.scheme_symmetric is not False
                and self.scheme_dynamic is not True)

    def describe(self) -> str:
        """The declaration as written, in one line: `kv_cache_quant_algo FP8 in hf_quant_config.json`."""
        if self.scheme_word:
            beside = f" (and kv_cache_quant_algo {self.algo})" if self.algo else ""
            return f"kv_cache_scheme \"{self.scheme_word}\"{beside} in {self.source}"
        if self.algo:
            return f"kv_cache_quant_algo {self.algo} in {self.source}"
        if not self.scheme_bits:  # Quark's kv_cache_group: modules named, no kind read
            return f"a {self.producer} kv_cache_group in {self.source}"
        parts = [f"type {self.scheme_type or '?'}", f"num_bits {self.scheme_bits}"]
        parts += [f"strategy {self.scheme_strategy}"] if self.scheme_strategy else []
        parts += [f"dynamic {str(self.scheme_dynamic).lower()}"] if self.scheme_dynamic is not None else []
        parts += [f"symmetric {str(self.scheme_symmetric).lower()}"] if self.scheme_symmetric is not None else []
        return f"kv_cache_scheme ({', '.join(parts)}) in {self.source}"
