"""A GGUF file's metadata as the config.json the common decoder reads: which llama.cpp architectures kvplan plans,
and the keys each one's layout is read from.

llama.cpp names its keys `{arch}.block_count`, `{arch}.attention.head_count_kv`, ... (ggml-org/llama.cpp@00395eb2
src/llama-arch.cpp LLM_KV_NAMES) and reads them per architecture in llama_model::load_hparams (src/llama-model.cpp).
The layout planned is the one llama.cpp runs (ggml-org/llama.cpp@00342301 src/llama-model.cpp load_hparams): a
`llama` file of a Mistral model has no sliding window there (convert_hf_to_gguf.py writes none and LLM_ARCH_LLAMA sets
no swa_type); Gemma 2, Gemma 3, Cohere 2 (Command R7B) and gpt-oss slide on every layer but each 2nd / 6th / 4th / 2nd
(set_swa_pattern(n): layer il slides when il % n < n - 1), with the file's `attention.sliding_window`; Phi-3 files
(phi3: Phi-3, Phi-4) run without their window ("Phi SWA is currently disabled", swa_type LLAMA_SWA_TYPE_NONE, PR
13676), so every layer is full there; Command R (command-r) has none. DeepSeek's deepseek2 files are read by
kvplan.readers.gguf_mla (MLA). An architecture not listed, or a key or tensor
this module does not read that changes the layout (per-layer head counts that differ, a value width other than the
key width, Phi-3's LongRoPE factor tensors), is refused naming it, never planned as something else.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.readers.gguf_mla import deepseek2_config

# llama.cpp architecture -> the model_type of the config.json it was converted from (convert_hf_to_gguf.py)
ARCHS = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "qwen3moe": "qwen3_moe", "gemma2": "gemma2",
         "gemma3": "gemma3_text", "phi3": "phi3", "command-r": "cohere", "cohere2": "cohere2", "gpt-oss": "gpt_oss",
         "deepseek2": "deepseek_v3"}  # deepseek2: DeepSeek-V2 (softmax router) or V3/R1 (sigmoid), readers.gguf_mla
_SWA_PATTERN = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2}  # load_hparams: hparams.set_swa_pattern(n)
# tensors whose presence means a layout this module does not plan: Phi-3's LongRoPE factors (Phi-3.5, Phi-3 128k)
_UNREAD_TENSORS = ("rope_factors_long.weight", "rope_factors_short.weight")
# keys whose presence means a layout this module does not plan (MLA widths, recurrent layers, a sliding-window
# pattern or per-layer widths written into the file), refused rather than ignored
_UNREAD = ("attention.kv_lora_rank", "attention.key_length_mla", "attention.sliding_window_pattern",
           "attention.key_length_swa", "attention.shared_kv_layers", "ssm.state_size", "full_attention_interval",
           "expert_shared_count", "leading_dense_block_count", "embedding_length_per_layer_input")
# general.file_type (llama.cpp include/llama.h enum llama_ftype) -> kvplan's weight dtype, where kvplan has one
# (38, MXFP4_MOE: the routed experts in MXFP4, the rest kept, as gpt-oss ships: kvplan's experts-only mxfp4)
FILE_TYPES = {0: "fp32", 1: "fp16", 32: "bf16", 2: "q4_0", 3: "q4_1", 7: "q8_0", 8: "q5_0", 9: "q5_1", 10: "q2_k",
              12: "q3_k_m", 15: "q4_k_m", 17: "q5_k_m", 18: "q6_k", 19: "iq2_xxs", 20: "iq2_xs", 23: "iq3_xxs",
              24: "iq1_s", 25: "iq4_nl", 26: "iq3_s", 28: "iq2_s", 30: "iq4_xs", 31: "iq1_m", 38: "mxfp4"}
# llama_ftype names (llama-quantize's), for what a file says it is
FILE_TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
                   11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M",
                   18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S",
                   25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M",
                   32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0"}


def config_from_gguf(meta: dict, tensors: dict[str, tuple[int, ...]], where: str) -> dict:
    """The config.json `meta` (a GGUF's metadata) stands for, for kvplan.readers.configs; `tensors`: name -> dims."""
    arch = meta.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise KvplanError(f"{where}: no general.architecture in its metadata", EXIT_USAGE)
    if arch not in ARCHS:
        raise KvplanError(f"{where}: llama.cpp architecture {arch!r} is not one kvplan reads from a GGUF file yet "
                          f"({', '.join(ARCHS)}); plan the model it was converted from (its config.json, catalog name "
                          f"or Hub id) with {arg('weight_dtype')} and the file's type", EXIT_USAGE)
    k = Keys(meta, arch, where)
    config = deepseek2_config(k, tensors) if arch == "deepseek2" else _decoder_config(k, tensors)
    scaling = _rope_scaling(k)
    return {**config, "rope_scaling": scaling} if scaling else config


def _decoder_config(k: "Keys", tensors: dict[str, tuple[int, ...]]) -> dict:
    """config_from_gguf's config for every architecture but deepseek2 (kvplan.readers.gguf_mla)."""
    meta, arch, where = k.meta, k.arch, k.where
    unread = [f"{arch}.{key}" for key in _UNREAD if f"{arch}.{key}" in meta]
    unread += [f"tensor {name}" for name in _UNREAD_TENSORS if name in tensors]
    if unread:
        raise KvplanError(f"{where}: {unread[0]} declares a layout kvplan does not read from a GGUF file "
                          f"({arch}); refused rather than planned without it", EXIT_USAGE)
    hidden, layers, experts = k.int("embedding_length"), k.int("block_count"), k.int("expert_count", 0)
    heads = k.per_layer("attention.head_count", layers)
    key_len = k.int("attention.key_length", hidden // heads if heads else 0)
    if k.int("attention.value_length", key_len) != key_len:
        raise KvplanError(f"{where}: {arch}.attention.value_length differs from {arch}.attention.key_length, a "
                          "layout kvplan does not read from a GGUF file", EXIT_USAGE)
    config = {
        "model_type": ARCHS[arch], "architectures": [f"gguf:{arch}"],
        "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": k.per_layer("attention.head_count_kv", layers, heads), "head_dim": key_len,
        "intermediate_size": k.int("feed_forward_length", 0 if experts else ...), **k.common(tensors),
    }
    if experts:
        width = k.int("expert_feed_forward_length", config["intermediate_size"] or ...)
        config.update(num_experts=experts, num_local_experts=experts, num_experts_per_tok=k.int("expert_used_count"),
                      moe_intermediate_size=width, decoder_sparse_step=1, mlp_only_layers=[])
        if arch == "llama":  # a Mixtral converted as llama: every layer's MLP is its experts
            config.update(model_type="mixtral", intermediate_size=width)
        if arch == "gpt-oss":  # its config's intermediate_size is the expert width (convert writes only that)
            config.update(intermediate_size=width, num_local_experts=experts, experts_per_token=config[
                "num_experts_per_tok"], attention_bias="blk.0.attn_q.bias" in tensors)
    if arch in _SWA_PATTERN:
        n = _SWA_PATTERN[arch]
        config["sliding_window"] = k.int("attention.sliding_window", 4096 if arch == "gemma2" else None)
        config["layer_types"] = ["sliding_attention" if i % n < n - 1 else "full_attention" for i in range(layers)]
    if arch == "command-r" and "blk.0.attn_q_norm.weight" in tensors:  # Command R+: per-head q and k norms
        config["use_qk_norm"] = True
    return config


def _rope_scaling(k: "Keys") -> dict | None:
    """`{arch}.rope.scaling.type` / `.factor` / `.original_context_length` as config.json's rope_scaling."""
    kind = k.meta.get(f"{k.arch}.rope.scaling.type")
    if kind in (None, "none"):
        return None
    if kind not in ("linear", "yarn"):
        raise KvplanError(f"{k.where}: {k.arch}.rope.scaling.type {kind!r} is not one kvplan reads from a GGUF file "
                          "(linear, yarn)", EXIT_USAGE)
    out = {"rope_type": kind, "type": kind, "factor": k.number("rope.scaling.factor", 1.0)}
    orig = k.int("rope.scaling.original_context_length", 0)
    if orig:
        out["original_max_position_embeddings"] = orig
    return out


class Keys:
    """`{arch}.<key>` values read with their types checked; a missing required key is a one-line error naming it."""

    def __init__(self, meta: dict, arch: str, where: str):
        self.meta, self.arch, self.where = meta, arch, where

    def _bad(self, key: str, why: str) -> KvplanError:
        return KvplanError(f"{self.where}: {self.arch}.{key} {why}", EXIT_USAGE)

    def common(self, tensors: dict[str, tuple[int, ...]]) -> dict:
        """The config keys every architecture reads alike: the vocabulary (the token_embd rows where no
        `vocab_size`), the context, a tied head (no output.weight) and the RoPE base."""
        embd = tensors.get("token_embd.weight")
        return {"vocab_size": self.int("vocab_size", embd[1] if embd and len(embd) == 2 else ...),
                "max_position_embeddings": self.int("context_length"),
                "tie_word_embeddings": "output.weight" not in tensors,
                "rope_theta": self.number("rope.freq_base", 10000.0)}

    def int(self, key: str, default=...) -> int:
        v = self.meta.get(f"{self.arch}.{key}")
        if v is None:
            if default is ... or default is None:
                raise self._bad(key, "is missing (needed to size the model)")
            return default
        return self.int_value(key, v)

    def number(self, key: str, default: float) -> float:
        v = self.meta.get(f"{self.arch}.{key}", default)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v < 1e12:
            raise self._bad(key, f"must be a positive number, got {v!r}")
        return float(v)

    def per_layer(self, key: str, layers: int, default=...) -> int:
        """A head count written as one number or one per layer (llama.cpp accepts both: get_key_or_arr); a per-layer
        array whose entries differ is a layout the config cannot state, so refused."""
        v = self.meta.get(f"{self.arch}.{key}")
        if isinstance(v, list):
            if len(v) != layers or not v:
                raise self._bad(key, f"has {len(v)} entries for {layers} layers")
            if len(set(v)) != 1:
                raise self._bad(key, f"differs by layer ({sorted(set(v))}), a layout kvplan does not read from a "
                                     "GGUF file yet")
            return self.int_value(key, v[0])
        return self.int(key, default)

    def int_value(self, key: str, v) -> int:
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2**40:
            raise self._bad(key, f"must be a whole number, got {v!r}")
        return v
