"""vLLM's drafter rules by release: which drafters it serves, its MTP LM-head copies, pool terms, the flag.

The drafter itself (its layers and weights beside the target's) is kvplan.planning.speculative's;
these are what a vLLM release does with it (docs/engines.md section 1.6).
"""

from __future__ import annotations

import dataclasses
import json

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.versions import dotted


def vllm_flag(info) -> list[str]:
    return ["--speculative-config", json.dumps(info.config(), separators=(",", ":"))]


# --- vLLM releases --------------------------------------------------------------------------------
# Checked in the wheels: the V1 engine refuses method "draft_model" in 0.11.0 (engine/arg_utils.py L1485-1488)
# and has DraftModelProposer from 0.15.0 (v1/worker/gpu_model_runner.py L450); an MTP layer's own
# shared_head.head (a ParallelLMHead of vocab x hidden) stays loaded through 0.15.0 (v1/spec_decode/eagle.py
# 0.11.0 L883-889, 0.15.0 L1235-1245 share only the drafter's `lm_head`), and is replaced by the target's
# head from 0.20.0 (llm_base_proposer.py 0.20.0 L1511-1527); 0.16-0.19 were not read.
DRAFT_MODEL_FROM = (0, 15, 0)
MTP_FROM = (0, 11, 0)  # the oldest release whose MTP drafter was read
MTP_HEAD_SHARED_FROM = (0, 20, 0)


def check_vllm(method: str, v: tuple) -> None:
    """A one-line refusal where vLLM release v does not serve the drafter `method` kvplan models."""
    if method == "draft_model" and v < DRAFT_MODEL_FROM:
        raise KvplanError(f"{arg('speculative')} draft with vLLM {dotted(v)}: the V1 engine serves draft "
                          f"models from 0.15.0 (0.11.0 refuses them); choose {arg('engine_version')} 0.15.0 or later",
                          EXIT_USAGE, param="engine_version", value=dotted(v))
    if method == "mtp" and v < MTP_FROM:
        raise KvplanError(f"{arg('speculative')} mtp with vLLM {dotted(v)}: releases before 0.11.0 are "
                          "not modelled for MTP", EXIT_USAGE, param="engine_version", value=dotted(v))


def vllm_view(model, v: tuple):
    """The model as a vLLM release loads its drafter: before 0.20.0 every MTP layer keeps its own copy of
    the LM head (vocab x hidden, split over tp like the head)."""
    info = model.speculative
    if info is None or info.method != "mtp" or v >= MTP_HEAD_SHARED_FROM:
        return model
    extra = info.layers * model.vocab_size * model.hidden_size
    params = dataclasses.replace(model.params, lm_head=model.params.lm_head + extra)
    plain = 4 if model.dtype == "fp32" else 2
    checkpoint = None if model.checkpoint_bytes is None else model.checkpoint_bytes + extra * plain
    return dataclasses.replace(model, params=params, checkpoint_bytes=checkpoint)


def vllm_pool_terms(model, v: tuple) -> tuple[int, int]:
    """(extra pages per Mamba-style state, tokens retained below each sliding window) for vLLM release v:
    num_speculative_tokens pages (MambaSpec.num_speculative_blocks), and num_speculative_tokens - 1 tokens
    when more than one MTP module drafts, from 0.33.0 (num_prefill_lookahead_tokens - 1: config/vllm.py
    L653-675, kv_cache_planning.py L1634-1641)."""
    info = model.speculative
    if info is None:
        return 0, 0
    multi_module = info.method == "mtp" and min(info.layers, info.num_speculative_tokens) > 1
    return info.num_speculative_tokens, info.num_speculative_tokens - 1 if multi_module and v >= (0, 33, 0) else 0
