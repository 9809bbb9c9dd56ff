"""Each engine's context limit: what it derives from config.json's positions and `rope_scaling`, by
release, and what it does with a `--max-model-len` (`--context-length`, `max_seq_len`) past it.

The rules, restated from each engine's source (never copied), read `ModelSpec.max_context` (the
config's own position count: max_position_embeddings or the key kvplan.readers.geometry reads) and
`ModelSpec.rope_scaling` (kvplan.readers.rope.read_rope_scaling):

* vLLM (`_get_and_verify_max_len`: vllm/config.py through 0.10, vllm/config/model.py from 0.11; v0.33.0
  L2143-2175): a `rope_type` other than su, longrope and llama3 multiplies the limit by its `factor`
  (1 where none), and yarn starts from `original_max_position_embeddings` instead: Qwen3-32B with
  {yarn, factor 4, original 32,768} is 32,768 x 4 = 131,072. From the Gemma 3 release (v0.8.x; kvplan's
  0.8.5 on) a model_type containing "gemma3" is never scaled (its 128k is already scaled; the reader
  marks it, RopeScaling.prescaled). From PR
  #27431 (https://github.com/vllm-project/vllm/pull/27431, after v0.11.0: kvplan's 0.15.0 on) a
  LongRoPE model served without --max-model-len gets the config's top-level
  original_max_position_embeddings (Phi-3.5-mini: 4,096), the limit staying 131,072. A larger
  --max-model-len is refused ("User-specified max_model_len ... is greater than the derived
  max_model_len") unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set. Not modelled: the minimum over
  several position keys and tokenizer_config's model_max_length (kvplan reads no tokenizer).
* SGLang (`get_context_length`, python/sglang/srt/hf_transformers_utils.py, later
  srt/utils/hf_transformers_utils.py; unchanged over kvplan's 0.4.0-0.5.23): the first of
  max_sequence_length, seq_length, max_seq_len, model_max_length, max_position_embeddings, times the
  rope_scaling `factor` unless rope_scaling has original_max_position_embeddings or rope_type llama3:
  so a YaRN config keeps max_position_embeddings (Qwen3-32B: 40,960; Qwen's docs pass
  --context-length 131072 with SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1), and Gemma 3's linear factor 8
  inflates its 131,072 to 1,048,576 (https://github.com/sgl-project/sglang/pull/20387 proposed vLLM's
  exemption and was closed): kvplan plans what the engine accepts and says so. A larger --context-length
  is refused (`ModelConfig._derive_context_length`, https://github.com/sgl-project/sglang/pull/1778)
  unless that variable is set. Some 2025 releases read it with default "True" until
  https://github.com/sgl-project/sglang/pull/9388 (merged 2025-08-20) set it back off; which of kvplan's
  releases did is not pinned down, so kvplan refuses for all and --allow-long-context plans as they did.
* TensorRT-LLM (PyTorch backend, tensorrt_llm/_torch/models/modeling_utils.py `infer_max_seq_len`,
  0.20 and 1.2): max_position_embeddings times the factor of any rope type but su, longrope, llama3 and
  yarn, rounded up; a larger max_seq_len is taken, with the builder's warning that "the model accuracy
  might be affected" (tensorrt_llm/builder.py `_init_max_seq_len`).
* llama.cpp: n_ctx_train is the GGUF's `<arch>.context_length`, which convert_hf_to_gguf.py writes
  from max_position_embeddings (YaRN goes to the rope.scaling.* keys, not into the length); a larger
  n_ctx is allowed with "n_ctx_seq (...) > n_ctx_train (...) -- possible training context overflow"
  (src/llama-context.cpp), and llama-server caps each slot at n_ctx_train ("the slot context ...
  exceeds the training context of the model ... - capping"): no request gets past it.
* kvplan's own planner and transformers: vLLM's current rule, and a longer --max-model-len is planned
  with a warning (transformers recomputes RoPE past the table; no engine refuses it).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.units import parse_tokens
from kvplan.engines.served_dtype import served

UNSCALED = ("su", "longrope", "llama3")  # vLLM: the limit already counts their scaling


class ContextLimit(NamedTuple):
    """An engine's context limit for one model, and how it got there."""

    tokens: int  # the longest request the engine accepts without an override
    rule: str  # how, in words
    default: int  # the length the engine serves without a flag (vLLM's LongRoPE: the original positions)
    longer: str  # a longer --max-model-len: "refuse" (unless `override`), "allow" (with a warning), "cap"
    override: str = ""  # what lets the engine go past `tokens` ("" where nothing does or nothing needs to)


def _scaled(model, factor: float, start: int, how: str, rounding=int) -> tuple[int, str]:
    if factor == 1.0 and start == model.max_context:
        return model.max_context, f"the config's {model.max_context:,} positions"
    tokens = rounding(start * factor)
    how = f"{start:,} {how} × {model.rope_scaling.kind} factor {factor:g} = {tokens:,}"
    if model.rope_scaling.prescaled:  # Gemma 3: its positions already count the factor
        how += (f"; the model's {model.max_context:,} positions already count that factor (an inflated limit, "
                "https://github.com/sgl-project/sglang/pull/20387): set the length it was trained for")
    return tokens, how


def vllm_rule(model, version: tuple) -> ContextLimit:
    """vLLM's derived max_model_len (`_get_and_verify_max_len`) and its default length."""
    rope, tokens, how = model.rope_scaling, model.max_context, f"the config's {model.max_context:,} positions"
    exempt = version >= (0, 8, 5) and rope is not None and rope.prescaled
    if rope is not None and rope.kind not in UNSCALED and not exempt:
        start = rope.original if rope.kind == "yarn" and rope.original else model.max_context
        what = "original_max_position_embeddings" if start != model.max_context else "positions"
        tokens, how = _scaled(model, rope.factor, start, what)
    elif rope is not None and exempt and rope.factor != 1.0:
        how += " (Gemma 3: already scaled, vLLM applies no factor)"
    default = tokens
    if rope is not None and rope.kind == "longrope" and version >= (0, 15, 0) and rope.top_original:
        default = min(rope.top_original, tokens)  # PR #27431: LongRoPE's default length
    return ContextLimit(tokens, how, default, "refuse", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")


def sglang_rule(model) -> ContextLimit:
    """SGLang's derived context_length (`get_context_length`)."""
    rope, tokens, how = model.rope_scaling, model.max_context, f"the config's {model.max_context:,} positions"
    if rope is not None and rope.factor != 1.0:
        if rope.original or rope.kind == "llama3":
            how += " (SGLang applies no factor where rope_scaling has original_max_position_embeddings or is llama3)"
        else:
            tokens, how = _scaled(model, rope.factor, model.max_context, "positions")
    return ContextLimit(tokens, how, tokens, "refuse", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")


def trtllm_rule(model) -> ContextLimit:
    """TensorRT-LLM's inferred max_seq_len (`infer_max_seq_len`)."""
    rope, tokens, how = model.rope_scaling, model.max_context, f"the config's {model.max_context:,} positions"
    if rope is not None and rope.kind not in (*UNSCALED, "yarn") and rope.factor != 1.0:
        tokens, how = _scaled(model, rope.factor, model.max_context, "positions", math.ceil)
    elif rope is not None and rope.factor != 1.0:
        how += f" (TensorRT-LLM applies no {rope.kind} factor)"
    return ContextLimit(tokens, how, tokens, "allow")


def llamacpp_rule(model) -> ContextLimit:
    """llama.cpp's n_ctx_train (the GGUF's context_length: max_position_embeddings)."""
    how = f"n_ctx_train = the config's {model.max_context:,} positions"
    return ContextLimit(model.max_context, how, model.max_context, "cap")


def neutral_rule(model) -> ContextLimit:
    """kvplan's own: vLLM's current derivation, a longer length planned with a warning."""
    lim = vllm_rule(model, (99,))
    return lim._replace(default=lim.tokens, longer="allow", override="")


def limited(engine, model, max_model_len: int | str | None = None, allow_longer: bool = False):
    """(`model` with `max_context` set to the engine's limit or to `max_model_len`, notes for stderr, the
    context a plan takes when none is asked for). A `max_model_len` past the limit is refused where the
    engine refuses it (a one-line error naming its override) unless `allow_longer`; where the engine caps
    each request, the limit stays. `max_model_len` is tokens or what a person types (`32k`): the one
    reading of it for the CLI's --max-model-len and the Python API's keyword alike. A float32 config is first put
    in the dtype the engine serves it in (kvplan.engines.served_dtype), with its note."""
    model, notes = served(engine, model)
    if max_model_len is not None:
        max_model_len = parse_tokens(max_model_len, "max_model_len")
    lim = engine.context_limit(model)
    who = engine.label or "kvplan"
    if max_model_len is None:
        rule = f"{who}: {lim.rule}"
        if lim.tokens != model.max_context:
            notes.append(f"context limit {lim.tokens:,} tokens ({rule}), not the config's {model.max_context:,}")
        elif (other := neutral_rule(model).tokens) != lim.tokens:  # a rope_scaling factor this engine skips
            notes.append(f"context limit {lim.tokens:,} tokens ({rule}); vLLM and kvplan's own rules take {other:,}")
        if lim.default != lim.tokens:
            notes.append(f"{who} serves {lim.default:,} tokens without {arg('max_model_len')} (LongRoPE's original "
                         f"positions); the limit is {lim.tokens:,}")
        return replace(model, max_context=lim.tokens, context_rule=rule), notes, lim.default
    rule = f"{arg('max_model_len')} {max_model_len:,}"
    if max_model_len > lim.tokens:
        past = f"{arg('max_model_len')} {max_model_len:,} is past {who}'s limit of {lim.tokens:,} tokens ({lim.rule})"
        if lim.longer == "cap":
            notes.append(f"{past}: it caps each request there, so the limit stays {lim.tokens:,}")
            return replace(model, max_context=lim.tokens, context_rule=f"{who}: {lim.rule}"), notes, lim.tokens
        if lim.longer == "refuse" and not allow_longer:
            raise KvplanError(f"{past}: {who} refuses it unless {lim.override} is set; pass "
                              f"{arg('allow_long_context')} to plan it as if it were", EXIT_USAGE,
                              param="max_model_len", value=max_model_len, allowed=(1, lim.tokens))
        rule += f", past {who}'s limit of {lim.tokens:,}" + (f" ({lim.override})" if lim.override else "")
        serve = f"; serve it with {lim.override} set" if lim.override else ""
        notes.append(f"{past}: planned as asked{serve}; positions past it may give wrong output")
    return replace(model, max_context=max_model_len, context_rule=rule, max_model_len=max_model_len), notes, \
        max_model_len


def engine_length(model, req) -> int:
    """The max_model_len the engine starts with for this plan: the --max-model-len asked for (`limited`), else the
    plan's context, which kvplan emits as --max-model-len. What the engine sizes by it (vLLM's V0 profile batch, its
    host token table, the command line) follows this, not a shorter --ctx."""
    return model.max_model_len or req.context
