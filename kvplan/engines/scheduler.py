"""The scheduler limits an engine runs with: how many requests at once and how many tokens one step takes.

Read from the settings an engine's rules produce (EngineResult.settings), so a release's or a GPU's default
(vLLM's `max_num_seqs` / `max_num_batched_tokens` tiers, SGLang's `chunked_prefill_size` by memory,
TensorRT-LLM's `max_num_tokens`) is the one the engine module already cites. Where the settings carry no
running limit, the engine's documented default stands: SGLang sizes its request pool at
min(max(tokens / context x 512, 2048), 4096) requests (sgl-project/sglang python/sglang/srt/model_executor/
model_runner.py, init_memory_pool), read here as its ceiling 4,096; TensorRT-LLM's `max_batch_size` as
2,048, trtllm-build's and trtllm-serve's documented default (not re-checked release by release).
"""

from __future__ import annotations

RUNNING_KEYS = ("max_num_seqs", "max_running_requests", "max_batch_size")
CHUNK_KEYS = ("max_num_batched_tokens", "chunked_prefill_size", "max_num_tokens")
DEFAULT_RUNNING = {"sglang": 4096, "trtllm": 2048}


def limits(engine: str | None, settings: dict) -> tuple[int | None, int | None]:
    """(requests running at once, tokens per step) as `engine` runs with `settings`; None where not known."""
    running = next((int(settings[k]) for k in RUNNING_KEYS if settings.get(k)), None)
    chunk = next((int(settings[k]) for k in CHUNK_KEYS if settings.get(k)), None)
    return running or DEFAULT_RUNNING.get(engine or ""), chunk
