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

Where SGLang keeps a prefill graph and where it turns one off, by release (the torch.compile piecewise graph to
0.5.14, the breakable one from 0.5.15, the allow-listed VLMs, DP attention, pp), is
kvplan.engines.sglang.prefill_graph. 0.5.23 (wheel read) keeps the reserve under the breakable graph's name:
  * its captured token counts are the same list (`srt/arg_groups/cuda_graph_hook.py` L480-497
    `generate_prefill_cuda_graph_batch_sizes`) up to the chunked-prefill size, min(8192, it) for an MLA backend
    (`srt/arg_groups/memory_hook.py` L233-238); the "2048" of `cuda_graph_hook.py` L327 is only DeepEP's fallback
    before that is resolved, not the default;
  * the reserve is the same for any prefill backend that is not disabled, before the 10 GiB floor
    (`memory_hook.py` `reserve_for_graph_mb` L380-389, called at L313; 0.5.14 `server_args.py` L3300-3303, 0.5.19
    `memory_hook.py` L315-321): 8 MiB a size, 1.5 GiB flat for an MLA backend; on an H100 80 GB (chunked 8,192)
    58 sizes, 464 MiB. Under DP attention SGLang re-clamps the captured sizes to each rank's chunk only after the
    reserve is sized (0.5.19 `arg_groups/parallel_hook.py` L209-225), so the reserve counts the server's chunk;
  * with --moe-a2a-backend deepep it adds 1 GiB before the floor (L391-397) and 2 GiB after it
    (`reserve_for_deepep_a2a_mb` L402-414); kvplan does not plan DeepEP and adds neither.
"""

from __future__ import annotations

from kvplan.engines.sglang import prefill_graph
from kvplan.model.layers import has_mla

MIB_PER_GRAPH = 8
MLA_MIB = 1536


def capture_sizes(max_tokens: int) -> list[int]:
    """The token counts SGLang captures piecewise graphs for, up to `max_tokens` (module docstring)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32)) + list(range(576, 1025, 64))
             + list(range(1280, 4097, 256)) + list(range(4608, max_tokens + 1, 512)))
    return [s for s in sizes if s <= max_tokens]


def graph_mib(model, chunked: int) -> float:
    """MiB the default fraction reserves for a prefill CUDA graph SGLang keeps (module docstring): 1.5 GiB on MLA,
    else 8 MiB a captured size up to the chunked-prefill size."""
    if has_mla(model.layers):
        return float(MLA_MIB)
    return float(MIB_PER_GRAPH * len(capture_sizes(chunked)))


def reserve_mib(model, gpu, dep, version: str, chunked: int, dp_attention: bool, enable_mm: bool = False) -> float:
    """MiB the default fraction reserves for piecewise CUDA graphs (0 where SGLang captures none, prefill_graph;
    `enable_mm`: --enable-multimodal given)."""
    if prefill_graph.decide(model, gpu, dep, version, dp_attention, enable_mm)[0] is None:
        return 0.0
    return graph_mib(model, chunked)
