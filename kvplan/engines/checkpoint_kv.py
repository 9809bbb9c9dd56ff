"""The KV cache dtype a plan uses for a checkpoint that declares a quantized KV cache (issue 22).

A checkpoint may declare its KV cache's quantization (kvplan.readers.kv_quant: ModelOpt's `kv_cache_quant_algo`,
compressed-tensors' `kv_cache_scheme`). Whether an engine's 'auto' cache dtype follows it depends on the engine and
its release; each engine says so in `Engine.checkpoint_kv_rule` (a `KvRule`, its source cited: vllm/cache_dtype.py,
sglang/cache_dtype.py, trtllm/cache_dtype.py; docs/engines.md "A checkpoint's declared KV cache"). `resolve` applies
it to a request:

* the dtype left to the engine ('auto'): the declared cache where the rule follows it, the model dtype where not;
  a followed kind kvplan has no cache dtype for (NVFP4) is refused with the reason, never planned at another;
* a dtype asked for by name: honoured, with a note where it differs from the declaration (or refused where the
  engine has no setting that runs it, TensorRT-LLM's 16-bit cache of an FP8-KV checkpoint).

Every case is said in a plan warning: what the cache is, what the checkpoint declares, and the engine's rule; its
topic (kvplan.planning.plan.KV_TOPICS) says which case, for a sweep's rows and notes (kvplan.report.text).
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from kvplan.core.dtypes import KV_DTYPES
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.planning.plan import KV_ASKED, KV_FOLLOWED, KV_NOT_FOLLOWED, PlanWarning, Request, cache_dtypes


class KvRule(NamedTuple):
    """What an engine release's 'auto' does with one checkpoint's declaration, in words with its source (`why`).
    `unsized`: the engine follows a kind kvplan cannot size for it (refused); `refuse_16bit`: why a 16-bit cache
    asked for by name has no setting in the engine for this checkpoint ("" where it has one); `hint`: the declared
    dtype is one the engine's own cache-dtype setting can name (a warning then says so); `reads_as`: the kind the engine
    makes of the declaration where it reads it its own way (SGLang's NVFP4 config: a string kv_cache_scheme "FLOAT8"
    is FP8), "" where it reads the declared kind (CheckpointKV.kind)."""

    follows: bool
    why: str
    unsized: bool = False
    refuse_16bit: str = ""
    hint: bool = True
    reads_as: str = ""


def _as_read(rule: KvRule, ckv):
    """`ckv` with the kind the engine reads it as (KvRule.reads_as), for its kind and dtype; its text as written."""
    return replace(ckv, algo=rule.reads_as, scheme_word="") if rule.reads_as else ckv


def auto_dtype(rule: KvRule, model) -> str | None:
    """The cache dtype the engine's 'auto' gives this checkpoint where it is not the model's own (the declared
    one it follows), else None: what an emitted command must override to run another."""
    ckv = model.checkpoint_kv and _as_read(rule, model.checkpoint_kv)
    return ckv.dtype if ckv is not None and rule.follows and ckv.dtype else None


def resolve(rule: KvRule, model, req: Request) -> tuple[Request, tuple[PlanWarning, ...]]:
    """`req` with the cache dtype the engine uses for this checkpoint, and the warning that says why."""
    ckv = model.checkpoint_kv
    if ckv is None:
        return req, ()
    declared = ckv.describe()
    ckv = _as_read(rule, ckv)
    kind = ckv.kind or "quantized"
    if req.kv_auto:
        if not rule.follows:
            own = cache_dtypes(req, model)[0].name
            named = rule.hint and ckv.dtype and ckv.dtype != own
            hint = f"; {arg('kv_dtype')} {ckv.dtype} plans the declared cache" if named else ""
            return req, (PlanWarning.literal((f"KV cache {own}: the checkpoint declares {declared}, but {rule.why}"
                                              f"{hint}"), topic=KV_NOT_FOLLOWED),)
        if rule.unsized or not ckv.dtype:
            raise KvplanError(f"the checkpoint declares a {kind} KV cache ({declared}) and {rule.why}; kvplan has no "
                              f"{kind} cache dtype to size it: pass {arg('kv_dtype')} with a dtype the engine runs",
                              EXIT_USAGE, param="kv_dtype", value="auto")
        dt = KV_DTYPES[ckv.dtype]
        return (replace(req, kv_dtype=dt),
                (PlanWarning.literal((f"KV cache {dt.name}: the checkpoint declares {declared} and {rule.why}"),
                                     topic=KV_FOLLOWED, note=True),))  # the engine's 'auto' as it ships: a note
    asked = cache_dtypes(req, model)[0]
    if rule.refuse_16bit and asked.name in ("bf16", "fp16", "fp32"):
        raise KvplanError(f"{arg('kv_dtype')} {asked.name}: {rule.refuse_16bit}", EXIT_USAGE, param="kv_dtype",
                          value=asked.name, allowed=("auto", ckv.dtype) if ckv.dtype else ("auto",))
    if asked.name == ckv.dtype:
        return req, ()
    return req, (PlanWarning.literal((f"KV cache {asked.name} as asked, not the {kind} cache the checkpoint declares "
                                      f"({declared})"), topic=KV_ASKED),)


def default_rule(engine: str) -> KvRule:
    """An engine whose reading of a declared KV cache kvplan has not made: its cache is the model dtype (or its own
    cache-type setting's), the declaration unread."""
    return KvRule(False, f"{engine} does not read it here: its cache is the model dtype or its own cache-type setting")
