"""SGLang's weights as loaded: what its "Load weight end ... mem usage" holds beyond the checkpoint's tensors.

SGLang measures the free-memory drop over `ModelRunner.load_model` (`model_executor/model_runner.py`:
`before_avail_memory - get_available_gpu_memory()`, logged as "Load weight end. ... avail mem=X GB, mem
usage=Y GB"; 0.4.3.post4 through 0.5.x), so everything the model's constructor builds on the GPU is in it,
and the KV budget `rest = free_after_weights - free_before_weights x (1 - fraction)` leaves it out too.
Besides the weights that is the RoPE cos/sin cache: `layers/rotary_embedding.py` RotaryEmbedding.__init__
registers `cos_sin_cache` [max_position_embeddings, rotary_dim] and keeps it in fp32 on CUDA ("NOTE(ByronHsu):
cache needs to be in FP32 for numerical stability"; `if not _is_cuda: cache = cache.to(dtype)`), in the model
dtype elsewhere (ROCm, unless SGLANG_ROPE_CACHE_FP32, sgl-project/sglang#29729). One table per distinct
rotary embedding, the rows kvplan.readers.rope counts (as vLLM's get_rope caches them).
"""

from __future__ import annotations

from kvplan.readers.rope import rope_table_bytes


def loaded_extra(model, gpu) -> int:
    """Bytes per GPU SGLang's loading adds to the checkpoint's weights: the RoPE tables, fp32 on NVIDIA GPUs
    (and on a GPU known only by its memory, as SGLang's CUDA build), the model dtype on others."""
    vendor = str(getattr(gpu, "vendor", "") or "NVIDIA").upper()
    return rope_table_bytes(model, fp32=vendor in ("NVIDIA", "UNKNOWN", ""))
