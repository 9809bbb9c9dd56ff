"""SGLang's custom all-reduce size limit on an AMD GPU by release: the message size from which its tensor-parallel
all-reduce leaves the one-kernel custom all-reduce for RCCL's ring (`amd_custom_bytes`), which
kvplan.speed.model.custom_allreduce_bytes reads in place of the CUDA limit on an AMD profile.

SGLang's own CustomAllreduce sets `_MAX_CAR_SIZE = 2 * 8192 * 1024` on ROCm ("crossover is at 16MB buffer size for
ROCm": sglang 0.5.5 wheel `srt/distributed/device_communicators/custom_all_reduce.py` L59, still there in 0.5.19 L45),
and through 0.5.5 the tp group builds that class (0.5.5 `srt/distributed/parallel_state.py` L374). From 0.5.6 the
group builds the class `dispatch_custom_allreduce` returns (0.5.6 parallel_state.py L374; 0.5.19 L475), which on ROCm
is aiter's CustomAllreduce unless SGLANG_USE_AITER_AR is turned off (default "true") or a 1-stage / deterministic
all-reduce is asked for (SGLANG_USE_1STAGE_ALLREDUCE, SGLANG_ENABLE_DETERMINISTIC_INFERENCE, both off by default:
0.5.6 custom_all_reduce.py L423-437; 0.5.19 L344-411, `environ.py` L1186, L1191), and aiter's class takes a message
of at most 64 MiB on a fully connected group or two ranks (ROCm/aiter@c16d44b93a528b2a4bfd6d8d3409116d465872a9, the
commit SGLang's ROCm Dockerfile pins as AITER_COMMIT_DEFAULT for its 0.5.17-era images:
aiter/dist/device_communicators/custom_all_reduce.py L118 `_DEFAULT_CAR_MAX_SIZE = 8192 * 8192`, L1145-1148
`inp_size <= self._car_max_size`, `fully_connected = True` L858; world sizes 2, 4, 6, 8 L716. Earlier aiter kept the
same 64 MiB: `max_size=8192 * 1024 * 8 * 2` with `inp_size <= self.max_size / 2` at @46bb1155 (2026-02), and
`max_size=8192 * 1024 * 8` with `inp_size < self.max_size` when the class was added, @6b3f33f9 (2025-01): one size
apart, not modelled). The fused all-reduce + RMSNorm of --enable-aiter-allreduce-fusion keeps the same bound (0.5.19
`srt/layers/communicator.py` `apply_aiter_all_reduce_fusion` L208-220: `total_bytes <= 8 * 1024 * 8192`). Quick
all-reduce, which GroupCoordinator tries after it, is off unless ROCM_QUICK_REDUCE_QUANTIZATION names a level
(default "NONE": 0.5.19 `quick_all_reduce.py` L176-192), so past the limit the call is RCCL's (pynccl).
"""

from __future__ import annotations

from kvplan.core.releases import release_of
from kvplan.speed.eras import padded

# {engine: ((first release, bytes from which RCCL takes the call), ...) newest first}; a release before them all keeps
# the CUDA table's limit (kvplan.speed.model.CUSTOM_ALLREDUCE) or, where given, OWN_CLASS's
CUSTOM_ALLREDUCE_AMD = {"sglang": (((0, 5, 6), 8192 * 8192 + 1),)}  # aiter's: at most 64 MiB
OWN_CLASS = {"sglang": 2 * 8192 * 1024}  # SGLang's own CustomAllreduce on ROCm: below 16 MiB


def amd_custom_bytes(key: str, version: str | None, cuda_limit: int) -> int:
    """The message size from which engine `key` (kvplan.speed.model.rules_key) at release `version` (None: the current
    one) hands a tensor-parallel all-reduce on an AMD GPU to RCCL, where its custom kernel runs there at all."""
    rel = release_of(version)
    for first, nbytes in CUSTOM_ALLREDUCE_AMD.get(key, ()):
        if rel is None or padded(rel) >= first:
            return nbytes
    return OWN_CLASS.get(key, cuda_limit)
