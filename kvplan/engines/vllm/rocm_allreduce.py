"""vLLM's tensor-parallel all-reduce on an AMD GPU by release: the plan's note where the custom kernel is off.

Why: vLLM through 0.8.2 turns its custom all-reduce off on ROCm (ParallelConfig._verify_args, "Disabled the custom
all-reduce kernel because it is not supported on AMD GPUs": PyPI wheels 0.6.3 vllm/config.py L914-918, 0.8.2
L1550-1554), so every tensor-parallel all-reduce is RCCL's, a ring of 2(n - 1) hops a call where the custom kernel
reads every peer at once; vllm-project/vllm#14125 enabled it for MI300-class GPUs in 0.8.3 (config.py L1632-1635,
platforms/rocm.py `use_custom_allreduce`, gfx94*). The speed terms price the release's choice
(kvplan.speed.model.runs_custom_allreduce_on_amd, which also knows the AMD fork builds read that keep the kernel on);
the note says which the plan assumed.
"""

from __future__ import annotations

from kvplan.engines.versions import dotted
from kvplan.hardware.facts import vendor_of
from kvplan.speed.model import CUSTOM_ALLREDUCE_AMD_SINCE, runs_custom_allreduce_on_amd

ENGINE = "vllm"


def note(gpu, tp: int, version: str | None) -> str | None:
    """The plan's line where vLLM `version` on an AMD `gpu` runs its `tp` ranks' all-reduces on RCCL alone (None
    elsewhere, and at one GPU: no all-reduce)."""
    if tp <= 1 or vendor_of(gpu) != "AMD" or runs_custom_allreduce_on_amd(ENGINE, version):
        return None
    return (f"vLLM {version} on an AMD GPU: its custom all-reduce is off on ROCm before "
            f"{dotted(CUSTOM_ALLREDUCE_AMD_SINCE[ENGINE])} (config.py, 'not "
            f"supported on AMD GPUs'), so the speed figures price every tensor-parallel all-reduce on RCCL's ring; "
            f"AMD's own vLLM builds (rocm/vllm images) keep the custom kernel on and run faster than this")
