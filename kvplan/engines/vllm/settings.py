"""vLLM's settings for one plan: release, utilisation, block size, batch limits, the switches that move memory.

Made by kvplan.engines.vllm.engine.settings (the release's defaults for the GPU, then the user's
flags); read by the pool, the start-up budget and the auto-fit beside it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

from kvplan.engines.base import parse_version


@dataclass(frozen=True)
class Settings:
    version: str
    gpu_memory_utilization: float
    block_size: int
    max_num_batched_tokens: int
    max_num_seqs: int
    cudagraphs: bool  # CUDA-graph memory subtracted from the budget (v0.20.0+ unless enforce_eager)
    async_scheduling: bool  # doubles the sliding-window in-flight term from v0.30.0
    v1: bool  # the V1 engine (default from v0.8.0 unless the release falls back: kvplan.engines.vllm.v0_fallback)
    # the GPU it runs on: its facts (compute capability, fabric) pick the kernels whose weights load padded and
    # the all-reduce workspace (kvplan.engines.vllm.overhead); reported by its key only (as_dict)
    gpu: object = None
    # speculative decoding: a Mamba-style state keeps 1 + num_speculative_tokens pages per request
    # (MambaSpec.num_speculative_blocks: kv_cache_interface.py v0.33.0 L1141, mamba/abstract.py L86)
    spec_state_blocks: int = 0
    # multi-module MTP keeps num_speculative_tokens - 1 more tokens below every sliding window
    # (SlidingWindowSpec.extra_retained_tokens: v0.33.0 kv_cache_planning.py L1634-1641, kv_cache_interface.py
    # L903-945; absent in 0.25.0, 0.30.0 not read)
    swa_retained: int = 0
    eager: bool = False  # --enforce-eager: no torch.compile, no CUDA graphs (vllm_non_torch: what that saves)
    mm_limit: int = -1  # --limit-mm-per-prompt images per prompt (-1: unset); 0 skips an image tower (vllm.multimodal)
    # FlashInfer's top-k/top-p ran (None: by release; vllm.overhead.sort_sampler)
    flashinfer_sampler: bool | None = None
    mm_cache_gb: float = -1.0  # --mm-processor-cache-gb (-1: unset, vLLM's 4); host RAM, no GPU bytes (vllm.multimodal)
    # the run fell back from the V2 model runner to V1 (engine option model_runner=v1; kvplan.engines.vllm.runner)
    v1_fallback: bool = False
    # the MXFP4 MoE kernel named (None: the release's choice, kvplan.engines.vllm.mxfp4)
    mxfp4_backend: str | None = None
    weight_dtype: str | None = None  # the weights' format as asked (None: the checkpoint's): the caching allocator's
    # rounding of each tensor as loaded reads its element size (kvplan.engines.vllm.overhead, `weights_repack`)
    # a unified-memory GPU (kvplan.engines.vllm.uma): what the OS and other processes hold when the worker starts
    # (None: not stated, the plan says how much its start-up check leaves them), and what the node's processes
    # allocate on the host during start-up, which vLLM counts as non-KV memory where it reads MemAvailable
    os_memory: int | None = None
    host_growth: int = 0
    # the checkpoint's page cache counted as non-KV where vLLM reads the device's own free count on a unified GPU
    # (None: the whole checkpoint, a cold load; kvplan.engines.vllm.uma.page_cache_bytes)
    page_cache: int | None = None
    # the max_model_len the engine starts with (kvplan.engines.context.engine_length): the host token table's length
    # (kvplan.engines.vllm.uma.token_table_bytes, issue 22)
    max_model_len: int = 0
    # --mamba-cache-dtype and --mamba-ssm-cache-dtype as given ('auto': not; kvplan.engines.vllm.ssm_dtype)
    mamba_cache_dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"
    # V0's chunked prefill, on by the engine's own rule or off despite it, in words (kvplan.engines.vllm.v0_chunked)
    v0_chunk_note: str = ""
    chunked_prefill_asked: bool | None = None  # engine option enable_chunked_prefill (None: not given; V0 only)
    v0_chunked: bool = False  # V0 with its chunked prefill on (v0_chunked.chunk_budget gave a budget)
    # which engine a 0.8.0-0.10.x release runs and why, in words (kvplan.engines.vllm.v0_fallback.note)
    engine_note: str = ""
    # an MLA model's layers decompressed before vLLM's MLA kernel, in words (kvplan.engines.vllm.pre_mla.note)
    mla_note: str = ""
    use_v1: bool | None = None  # VLLM_USE_V1 as the engine option use_v1 sets it (None: unset); the command sets it
    # the CUDA-graph capture shape a start-up log states, ((mode, graphs, largest), ...) (() : kvplan's counts from
    # max_num_seqs; kvplan.engines.vllm.cudagraphs.cudagraph_estimate); check-log's plan runs at it
    graph_shape: tuple = ()
    # --max-cudagraph-capture-size as the engine option max_cudagraph_capture_size gives it (None: vLLM's default,
    # kvplan.engines.vllm.capture_list)
    max_capture: int | None = None
    # AWQ's own kernel forced (engine option awq_kernel=awq, vLLM's --quantization awq): its fp16 weight copy in the
    # first CUDA-graph capture (kvplan.engines.vllm.awq_dequant)
    awq_forced: bool = False
    ssm_dtype_read: str = ""  # the reader's temporal-state type (the speed fit prices vLLM's corpus runs in it)

    @cached_property  # (read for every block count of a max-context search: parsed once)
    def v(self) -> tuple[int, ...]:
        return parse_version(self.version)

    @cached_property
    def in_flight_tokens(self) -> int:
        if self.v >= (0, 30, 0) and self.async_scheduling:
            return 2 * self.max_num_batched_tokens
        return self.max_num_batched_tokens

    def as_dict(self) -> dict:
        """The settings as fit --json reports them, the GPU by its key (a label: no rule reads it)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {**{("gpu_key" if k == "gpu" else k): (getattr(v, "key", "") or "" if k == "gpu" else v)
                   for k, v in d.items()}, "in_flight_tokens": self.in_flight_tokens}
