"""SGLang's piecewise (prefill) CUDA-graph reserve: what its default mem_fraction_static sets aside for it.

From 0.5.10 SGLang captures piecewise CUDA graphs by default (`disable_piecewise_cuda_graph: bool = False`; 0.5.9
still had `enable_piecewise_cuda_graph: bool = False`), and the default fraction's reserve counts them before the
10 GiB floor (0.5.10 wheel `srt/server_args.py` L1303-1310, 0.5.12 L1564-1571):

    if not self.disable_piecewise_cuda_graph:
        reserved_mem += len(self.piecewise_cuda_graph_tokens) * 8     # not MLA (MiB)
        or reserved_mem += 1.5 * 1024                                 # an MLA backend

The captured token counts (`_generate_piecewise_cuda_graph_tokens`, 0.5.12 L1657-1675): 4..32 by 4, 48..256 by 16,
288..512 by 32, 576..1024 by 64, 1280..4096 by 256, then by 512 up to `piecewise_cuda_graph_max_tokens`, which is
the chunked-prefill size (2048 for an MLA backend; 0.5.10 L1254-1261). At chunked prefill 16,384 that is 74 sizes,
592 MiB: SGLang's own reference start-up log (Qwen3-8B on an SM100 GPU, 2026-04-27) compiles 74 and its pool matches
a fraction of 0.854, not the 0.857 without the term.

SGLang turns the graphs off (`_handle_piecewise_cuda_graph`, 0.5.12 L1301-1370) under DP attention, pipeline
parallelism, on non-CUDA hardware, for multimodal models, with LoRA, host-cache offload, torch.compile and a few
other modes and model architectures; kvplan models the first four (the others are options kvplan does not plan).
0.5.23 (wheel read) keeps the rule under a new name, the "breakable" prefill CUDA graph:
  * on by default on CUDA only (`srt/model_executor/cuda_graph_config.py` L119-123 `default_prefill_backend`);
  * its captured token counts are the same list (`srt/arg_groups/cuda_graph_hook.py` L480-497
    `generate_prefill_cuda_graph_batch_sizes`) up to the chunked-prefill size, min(8192, it) for an MLA backend
    (`srt/arg_groups/memory_hook.py` L233-238); the "2048" of `cuda_graph_hook.py` L327 is only DeepEP's fallback
    before that is resolved, not the default;
  * the reserve is the same, before the 10 GiB floor (`memory_hook.py` `reserve_for_graph_mb` L380-389, called at
    L313): 8 MiB a size, 1.5 GiB flat for an MLA backend; on an H100 80 GB (chunked 8,192) 58 sizes, 464 MiB;
  * it is turned off (`cuda_graph_hook.py` `apply_cuda_graph_compatibility` L136-167,
    `disable_breakable_cudagraph_if_incompatible` L170-255) under pp > 1 and for multimodal models outside an
    allow-list (`configs/model_config.py` L2501), KDA hybrids, DeepSeek-V4, context parallelism, two-batch overlap
    and unvalidated all-to-all backends; no longer under DP attention. kvplan models pp, the vendor and VLMs (all
    VLMs off: the allow-list's architectures, e.g. Qwen3.5, are not modelled).
  * with --moe-a2a-backend deepep it adds 1 GiB before the floor (L391-397) and 2 GiB after it
    (`reserve_for_deepep_a2a_mb` L402-414); kvplan does not plan DeepEP and adds neither.
Releases 0.5.19-0.5.22 (arg_groups already) were not re-read for the DP-attention rule; kvplan keeps it off there.
"""

from __future__ import annotations

from kvplan.engines.sglang import multimodal as sglang_mm
from kvplan.engines.versions import parse_version
from kvplan.model.layers import Kind

FROM = (0, 5, 10)
DP_ATTENTION_KEEPS = (0, 5, 23)  # from 0.5.23 DP attention no longer turns the prefill graph off
MIB_PER_GRAPH = 8
MLA_MIB = 1536


def capture_sizes(max_tokens: int) -> list[int]:
    """The token counts SGLang captures piecewise graphs for, up to `max_tokens` (module docstring)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32)) + list(range(576, 1025, 64))
             + list(range(1280, 4097, 256)) + list(range(4608, max_tokens + 1, 512)))
    return [s for s in sizes if s <= max_tokens]


def enabled(model, gpu, dep, version: str, dp_attention: bool) -> bool:
    """Whether SGLang at `version` captures piecewise graphs for this model and layout (by default)."""
    v = parse_version(version)
    if v < FROM:
        return False
    if (dp_attention and v < DP_ATTENTION_KEEPS) or dep.pp > 1 or str(getattr(gpu, "vendor", "")).upper() != "NVIDIA":
        return False
    return not sglang_mm.is_vlm(model)


def reserve_mib(model, gpu, dep, version: str, chunked: int, dp_attention: bool) -> float:
    """MiB the default fraction reserves for piecewise CUDA graphs (0 where SGLang captures none)."""
    if not enabled(model, gpu, dep, version, dp_attention):
        return 0.0
    if any(layer.kind == Kind.MLA for layer in model.layers):
        return float(MLA_MIB)
    return float(MIB_PER_GRAPH * len(capture_sizes(chunked)))
