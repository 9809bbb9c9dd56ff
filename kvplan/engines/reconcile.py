"""Reconciling a start-up log with kvplan: each printed number next to kvplan's, with the difference.

Rounded figures are handled as intervals: "Available KV cache memory: 28.20 GiB" means a budget in
[28.195, 28.205) GiB, so kvplan reports the range of tokens and concurrency that interval allows and
says whether the engine's printed number lies in it. Where the engine prints an exact count (vLLM's
block count, SGLang's #tokens, TensorRT-LLM's estimated max tokens) the check from it is exact. From the
log's budget, kvplan infers the engine's non-KV overhead and shows what the same deployment holds at
other contexts.

This module is the entry point (`reconcile`): it hands the log to the check of the engine that
wrote it, kvplan.engines.<engine>.reconcile; the rows they return and the helpers they share are
kvplan.engines.logcheck's.
"""

from __future__ import annotations

from kvplan.core.dtypes import canonical_kv_dtype, canonical_weight_dtype
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines import resolve_engine
from kvplan.engines.llamacpp.reconcile import reconcile_llamacpp
from kvplan.engines.logcheck import Reconciliation
from kvplan.engines.logparse import LogRecord
from kvplan.engines.sglang.reconcile import reconcile_sglang
from kvplan.engines.trtllm.reconcile import reconcile_trtllm
from kvplan.engines.vllm.reconcile import reconcile_vllm


def reconcile(rec: LogRecord, model=None, gpu=None, version: str | None = None, kv_dtype: str | None = None,
              tp: int | None = None, weight_dtype: str | None = None) -> Reconciliation:
    """The log's printed figures next to kvplan's, by the engine that wrote it (one module each:
    kvplan.engines.<engine>.reconcile); `weight_dtype` overrides the weights' format (kvplan.engines.log_weights)."""
    if rec.engine == "vllm":
        fn = reconcile_vllm
    elif rec.engine == "sglang":
        fn = reconcile_sglang
    elif rec.engine == "llama.cpp":
        fn = reconcile_llamacpp
    elif rec.engine == "trtllm":
        fn = reconcile_trtllm
    else:
        raise KvplanError(f"a {rec.engine} log: kvplan reads its figures but does not check them yet", EXIT_USAGE)
    if kv_dtype is not None:  # a bad value refused in one line, also where no model is given and nothing reads it
        canonical_kv_dtype(kv_dtype)
    if model is not None:  # the engine's own refusals, as `fit --engine` applies them (issue 25: Falcon-H1's
        resolve_engine(rec.engine).check_layers(model)  # layers under llama.cpp were an internal error)
    if weight_dtype is None:
        return fn(rec, model, gpu, version, kv_dtype, tp)
    if fn is reconcile_llamacpp:  # its figures are the KV cache's alone: no row would read the weights
        raise KvplanError(f"a llama.cpp log's check prices no weights (its figures are the KV cache's); "
                          f"{arg('weight_dtype')} does not apply", EXIT_USAGE, param="weight_dtype", value=weight_dtype)
    canonical_weight_dtype(weight_dtype)  # a bad value refused in one line before any arithmetic
    return fn(rec, model, gpu, version, kv_dtype, tp, weight_dtype)
