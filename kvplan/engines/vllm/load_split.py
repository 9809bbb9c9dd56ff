"""The caching allocator's split limit vLLM loads its weights under, and what it adds to "Model loading took".

From 0.21.0 `Worker.load_model` runs the model runner's `load_model` inside `_scoped_allocator_max_split(20)`, which
sets PyTorch's `max_split_size_mb:20` for the load and restores it after (`vllm/v1/worker/gpu_worker.py` 0.21.0
L215-237 and L338-345, 0.30.0 L336-357 and L500-506, 0.33.0 L420-444 and L590-599; absent from the 0.20.0, 0.20.1 and
0.20.2 wheels; vllm-project/vllm#41268, 2026-04-29: "Fix OOM by setting PyTorch `max_split_size_mb` during model
loading"). Through 0.30.x it acts on CUDA alone (`current_platform.is_cuda()`); from 0.31.0 on CUDA and ROCm
(`is_cuda_alike()`) with PyTorch's native allocator. Under the limit a tensor of 20 MiB or more is never split off
its segment (`should_split`, kvplan.core.caching_allocator), so the block it is handed is its whole segment, its size
rounded up to 2 MiB: "Model loading took" (`max_memory_allocated` after `empty_cache`) counts that tail, where the
default rule split it off when it was over 1 MiB. Qwen2.5-1.5B (tp 1, fp16): gate_up 52.5 MiB keeps its 54 MiB
segment, down 26.25 MiB its 28, so 28 x 3.25 = 91 MiB more than before (vllm-llmlab-qwen25-15b-t4-v030: "Model loading
took 2.98 GiB"). The replay lists the weights alone, in the constructor's order (kvplan.planning.tensors): the window
starts after an `empty_cache`, so no cached free block is assumed that a tensor of 20 MiB or more could take.
"""

from __future__ import annotations

from kvplan.core.caching_allocator import allocated_rounding
from kvplan.engines.base import parse_version
from kvplan.hardware.facts import vendor_of
from kvplan.planning.deploy import stage_ranges
from kvplan.planning.tensors import rank_tensors
from kvplan.readers.rope import rope_table_bytes

MIB = 2**20
SPLIT_LIMIT = 20 * MIB  # `_scoped_allocator_max_split(max_split_size_mb=20)`, PyTorch's minimum
# the first release that loads under it, by the profile's vendor (is_cuda through 0.30.x, is_cuda_alike from 0.31.0)
SPLIT_FROM = {"NVIDIA": (0, 21, 0), "AMD": (0, 31, 0)}
_UNNAMED = ("", "UNKNOWN")  # a GPU known by its memory alone: a CUDA run assumed (the log corpus's machines)


def split_limit(version: tuple[int, ...], gpu) -> int | None:
    """The split limit (bytes) the weights load under on `gpu` at `version`; None where vLLM sets none."""
    vendor = vendor_of(gpu)
    first = SPLIT_FROM["NVIDIA"] if vendor in _UNNAMED else SPLIT_FROM.get(vendor)
    return SPLIT_LIMIT if first is not None and version >= first else None


def assumed_cuda(version: tuple[int, ...], gpu) -> bool:
    """Whether `split_limit` applied the CUDA rule to a GPU whose vendor no profile names (the caller says so)."""
    return vendor_of(gpu) in _UNNAMED and split_limit(version, gpu) is not None


def load_tensors(model, dep, st) -> tuple[int, ...]:
    """The weights one rank allocates, in the constructor's order, RoPE table included (kvplan.planning.tensors)."""
    return rank_tensors(model, dep.tp, dep.ep, stage_ranges(model, dep), getattr(st, "weight_dtype", None),
                        rope_table_bytes(model))


def load_limit(st) -> int | None:
    """`split_limit` at the settings' release and GPU."""
    return split_limit(parse_version(st.version), getattr(st, "gpu", None))


def limit_tails(model, dep, st) -> int:
    """Bytes per GPU the split limit adds to "Model loading took" over PyTorch's default rule: the segment tails of
    1 MiB or more that tensors of 20 MiB or more keep (0 where vLLM sets no limit)."""
    limit = load_limit(st)
    if limit is None:
        return 0
    tensors = load_tensors(model, dep, st)
    return allocated_rounding(tensors, limit) - allocated_rounding(tensors)


def note(model, dep, st) -> str | None:
    """The plan's note where the limit adds bytes: what "Model loading took" counts beside the checkpoint, and the
    CUDA run assumed for a GPU whose vendor no profile names; None where it adds nothing."""
    tails = limit_tails(model, dep, st)
    if not tails:
        return None
    cuda = ", a CUDA run assumed: no profile names the GPU's vendor" if assumed_cuda(st.v, st.gpu) else ""
    return (f"weights as loaded: vLLM {st.version} loads under PyTorch's max_split_size_mb:20 (gpu_worker.py "
            f"load_model, 0.21.0+{cuda}), so a tensor of 20 MiB or more keeps its whole 2 MiB-rounded segment: "
            f"{tails / MIB:.2f} MiB of such tails counted beside the checkpoint")
