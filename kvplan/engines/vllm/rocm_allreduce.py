"""vLLM's tensor-parallel all-reduce on an AMD GPU by release and gfx target: the plan's note where the kernel is off.

Why: vLLM through 0.8.2 turns its custom all-reduce off on ROCm (ParallelConfig._verify_args, "Disabled the custom
all-reduce kernel because it is not supported on AMD GPUs": PyPI wheels 0.6.3 vllm/config.py L914-918, 0.8.2
L1550-1554), so every tensor-parallel all-reduce is RCCL's, a ring of 2(n - 1) hops a call where the custom kernel
reads every peer at once; vllm-project/vllm#14125 enabled it in 0.8.3 on gfx94x GPUs alone (config.py L1632-1636,
platforms/rocm.py L307-311 `use_custom_allreduce`), gfx95x joining in 0.9.0 (L374-375), so an MI250X (gfx90a), an
MI100 or an RDNA card stays on RCCL at every release; AMD's fork builds read keep it on but on an MI250 at tp > 1 and
Navi at tp <= 2. The speed terms price the release's choice on the profile's
gfx target (kvplan.speed.amd_allreduce, which also knows the AMD fork builds read that keep the kernel on); the
note says which the plan assumed.
"""

from __future__ import annotations

from kvplan.engines.versions import dotted
from kvplan.hardware.facts import ASSUMED_TARGET, vendor_of
from kvplan.speed.amd_allreduce import CUSTOM_ALLREDUCE_AMD_TARGETS, FORK_OFF, amd_targets, fork_build, turned_on_on_amd

ENGINE = "vllm"


def note(gpu, tp: int, version: str | None) -> str | None:
    """The plan's line where vLLM `version` on an AMD `gpu` turns its custom all-reduce off, by release or gfx target,
    so its `tp` ranks' all-reduces are RCCL's alone (None elsewhere; at one GPU, no all-reduce; and where the fabric
    does not link every pair, as on a PCIe box of any vendor: amd_allreduce.runs_custom_allreduce_on_amd)."""
    if tp <= 1 or vendor_of(gpu) != "AMD" or turned_on_on_amd(ENGINE, version, gpu, tp):
        return None
    archs = amd_targets(ENGINE, version)
    tail = "so the speed figures price every tensor-parallel all-reduce on RCCL's ring"
    if fork_build(ENGINE, version):
        off = " and ".join(f"on {prefix}* at " + ("tp > 1" if most is None else f"tp <= {most}")
                           for prefix, most in FORK_OFF[ENGINE])
        gfx = getattr(gpu, "compute_capability", None) or f"{ASSUMED_TARGET['AMD']} (assumed)"
        return (f"vLLM {version}, an AMD fork build: its custom all-reduce is off {off} (config.py's gcnArchName "
                f"tests): off at tp {tp} on {gfx}, {tail}")
    if not archs:
        since = CUSTOM_ALLREDUCE_AMD_TARGETS[ENGINE][0][0]
        return (f"vLLM {version} on an AMD GPU: its custom all-reduce is off on ROCm before {dotted(since)} "
                f"(config.py, 'not supported on AMD GPUs'), {tail}; AMD's own vLLM builds (rocm/vllm images) keep the "
                "custom kernel on and run faster than this")
    targets = " and ".join(f"gfx{major}{minor}x" for major, minor in archs)
    target = (getattr(gpu, "compute_capability", None)
              or f"a GPU whose profile gives no gfx target (taken as {ASSUMED_TARGET['AMD']})")
    return (f"vLLM {version} on an AMD GPU: its custom all-reduce runs on {targets} alone (platforms/rocm.py "
            f"use_custom_allreduce), not on {target}, {tail}")
