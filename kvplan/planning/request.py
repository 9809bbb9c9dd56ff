"""What a person asks of a model, read into a Request: a context, concurrent requests, dtypes, memory.

The one reading of those inputs, for the CLI's flags and the Python API's keywords alike (numbers, or
text as people type them: '32k', '2GiB', '0.9'). Block size and utilisation default to vLLM's.
"""

from __future__ import annotations

from kvplan.core.dtypes import canonical_kv_dtype, canonical_weight_dtype
from kvplan.core.errors import out_of_range
from kvplan.core.units import parse_bytes, parse_fraction, parse_tokens
from kvplan.planning.lora import parse_lora
from kvplan.model.spec import ModelSpec
from kvplan.planning.plan import DEFAULT_BLOCK_SIZE, DEFAULT_GPU_MEMORY_UTILIZATION, Request

MAX_BATCH = 1_000_000  # concurrent requests: far beyond any deployment, small enough to stay meaningful


def read_request(model: ModelSpec, *, context: int | str | None = None, batch: int = 1, kv_dtype: str = "auto",
                 weight_dtype: str | None = None, block_size: int | None = None,
                 gpu_memory_utilization: float | str | None = None, overhead: int | str | None = None,
                 kv_cache_memory: int | str | None = None, lora=None, default_context: int | None = None) -> Request:
    """`context` tokens (default: `default_context`, else the model's limit, and the Request says so: an
    engine's own default length, kvplan.engines.context.limited) for each of `batch` requests,
    the cache and weight dtypes ('auto': the model's), the page size, the utilisation, an overhead in
    place of the estimate and an exact KV budget (bytes or sizes such as '2GiB'); LoRA adapters the engine
    keeps room for ('4:16:q,k,v,o', kvplan.planning.lora)."""
    if not 1 <= batch <= MAX_BATCH:
        raise out_of_range("batch", batch, 1, MAX_BATCH)
    tokens = None if context is None else parse_tokens(context, "context")
    return Request(
        context=(default_context or model.max_context) if tokens is None else tokens,
        context_from_model=tokens is None,
        batch=batch,
        kv_dtype=canonical_kv_dtype(kv_dtype, model.dtype),
        kv_auto=str(kv_dtype).strip().lower() == "auto",
        weight_dtype=None if weight_dtype is None or weight_dtype.strip().lower() == "auto"
        else canonical_weight_dtype(weight_dtype),
        block_size=DEFAULT_BLOCK_SIZE if block_size is None else block_size,
        gpu_memory_utilization=parse_fraction(
            DEFAULT_GPU_MEMORY_UTILIZATION if gpu_memory_utilization is None else gpu_memory_utilization,
            "gpu_memory_utilization"),
        overhead_bytes=None if overhead is None else parse_bytes(overhead, "overhead", allow_zero=True),
        kv_cache_memory_bytes=None if kv_cache_memory is None else parse_bytes(kv_cache_memory, "kv_cache_memory"),
        lora=parse_lora(lora),
    )
