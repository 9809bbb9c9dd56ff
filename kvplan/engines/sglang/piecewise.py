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
0.5.23 keeps the same term (`srt/arg_groups/memory_hook.py` `reserve_for_graph_mb` L380-389) over a prefill graph
list whose default size it documents as 2048 (`cuda_graph_hook.py` L327); kvplan applies the rule above from 0.5.10
up to, not including, 0.5.23, whose default it leaves as it was (defaults.py's note).
"""

from __future__ import annotations

from kvplan.engines.sglang import multimodal as sglang_mm
from kvplan.engines.versions import parse_version
from kvplan.model.layers import Kind

FROM, UNTIL = (0, 5, 10), (0, 5, 23)
MIB_PER_GRAPH = 8
MLA_MIB = 1536


def capture_sizes(max_tokens: int) -> list[int]:
    """The token counts SGLang captures piecewise graphs for, up to `max_tokens` (module docstring)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32)) + list(range(576, 1025, 64))
             + list(range(1280, 4097, 256)) + list(range(4608, max_tokens + 1, 512)))
    return [s for s in sizes if s <= max_tokens]


def enabled(model, gpu, dep, version: str, dp_attention: bool) -> bool:
    """Whether SGLang at `version` captures piecewise graphs for this model and layout (by default)."""
    if not FROM <= parse_version(version) < UNTIL:
        return False
    if dp_attention or dep.pp > 1 or str(getattr(gpu, "vendor", "")).upper() != "NVIDIA":
        return False
    return not sglang_mm.is_vlm(model)


def reserve_mib(model, gpu, dep, version: str, chunked: int, dp_attention: bool) -> float:
    """MiB the default fraction reserves for piecewise CUDA graphs (0 where SGLang captures none)."""
    if not enabled(model, gpu, dep, version, dp_attention):
        return 0.0
    if any(layer.kind == Kind.MLA for layer in model.layers):
        return float(MLA_MIB)
    return float(MIB_PER_GRAPH * len(capture_sizes(chunked)))
