"""An engine's custom all-reduce on an AMD GPU: whether it runs, by release and the GPU's gfx target
(`runs_custom_allreduce_on_amd`), and up to what message size (`amd_custom_bytes`).

vLLM through 0.8.2 turns it off on ROCm whatever the GPU ("Disabled the custom all-reduce kernel because it is not
supported on AMD GPUs": ParallelConfig._verify_args, PyPI wheels 0.6.3 vllm/config.py L914-918, 0.8.2 L1550-1554).
vllm-project/vllm#14125 enabled it and #16010 keyed it on the architecture: from 0.8.3 `_verify_args` sets
`disable_custom_all_reduce` wherever `current_platform.use_custom_allreduce()` is False (0.8.3 config.py L1632-1636;
0.11.0 config/parallel.py L515, 0.24.0 L985, 0.33.0 L1167), and ROCm answers by a substring of the device's
gcnArchName: `supported_archs = ['gfx94']` in 0.8.3 and 0.8.5 (platforms/rocm.py L307-311, L340-341: MI300X,
MI300A, MI325X), `['gfx94', 'gfx95']` from 0.9.0 (L374-375; 0.9.2 L405, 0.11.0 L412: MI355X too), the same pair
in every release read since (`_GCN_ARCH`: 0.17.0 L744, 0.24.0 L889, 0.26.0 L902, 0.33.0 L1273). So an MI250X
(gfx90a), an MI100 (gfx908) or an RDNA card (gfx1100) runs every tensor-parallel all-reduce on RCCL at every
release, and with `disable_custom_all_reduce` set the CUDA communicator builds none of the kernels that follow it
either (0.33.0 cuda_communicator.py L59-88: quick reduce and AITER's custom all-reduce are gated on it). The gfx
target is the profile's `compute_capability` as torch reports it, gfx94x as (9, 4), gfx95x as (9, 5)
(kvplan.hardware.facts.capability_of: a profile without one is taken as gfx90a, which the plan says).

AMD's own fork (rocm/vllm images) enabled the kernel earlier (ROCm/vllm#27, 2024-05-30): a version whose local git
hash is one of its builds read (AMD_FORK_BUILDS) keeps it (ROCm/vllm@21f6ca217b8af3b1864ce9734bfdd8f0bed926d6,
branch deepseek_v3_dev, 2025-02-17, the rocm/vllm-dev vllm-ds3-staging-0217 image's "0.7.3.dev138+g21f6ca217"),
and turns it off on two GPU families (ParallelConfig.__post_init__, vllm/config.py L1388-1398, the same two tests
again at L1400-1410): `is_mi250() and tensor_parallel_size > 1` and `is_navi() and tensor_parallel_size <= 2`, where
is_mi250 is "gfx90a" in the device's gcnArchName and is_navi "gfx1" in it (vllm/utils.py L495-501, L1700-1707;
FORK_OFF, read on the profile's gfx target), and with pipeline stages (`_verify_args`, L1434-1439:
`world_size > 1 and pipeline_parallel_size > 1`; upstream dropped that test in vllm-project/vllm#6117, 2024-07, the
fork kept it: FORK_OFF_PP). Its CustomAllreduce then builds none for more than two ranks that are not fully
connected (custom_all_reduce.py L135-141, `world_size > 2 and not full_nvlink`, where ROCm's `is_full_nvlink` asks
one xGMI hop between every pair: platforms/rocm.py L139-159), which the profile's fabric answers
(kvplan.hardware.facts.fully_connected: an RDNA card on PCIe at tp 4 or more runs none either; a profile that does
not say is taken to pass, as the memory side takes it). So such a build runs it on a gfx908, gfx94x or gfx95x group
of two or fully linked on xGMI, with one pipeline stage, and takes a message below 16 MiB on ROCm (`_MAX_CAR_SIZE =
2 * 8192 * 1024`, "crossover is at 16MB buffer size for ROCm", custom_all_reduce.py L53-56, the default `max_size`
L61 no caller overrides, cuda_communicator.py L47-50; `inp_size < self.max_size` L289: FORK_CUSTOM_BYTES); any other
version is read as the upstream release it names. (Every upstream release read tests gcnArchName against its
`supported_archs` instead, and the same fabric rule.)

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
from kvplan.hardware.facts import ASSUMED_TARGET, capability_of, fully_connected
from kvplan.speed.eras import padded

# {engine: ((the first release, the gfx targets it runs the kernel on as torch's (major, minor)), ...)}, oldest first
CUSTOM_ALLREDUCE_AMD_TARGETS = {"vllm": (((0, 8, 3), ((9, 4),)), ((0, 9, 0), ((9, 4), (9, 5))))}
AMD_FORK_BUILDS = {"vllm": ("21f6ca217",)}
# The fork builds' GPU test (module docstring): {engine: ((gfx target prefix, the largest tp it is off at), ...)}
FORK_OFF = {"vllm": (("gfx90a", None), ("gfx1", 2))}  # MI250 at every tp > 1; Navi at tp <= 2
FORK_OFF_PP = ("vllm",)  # the fork builds that turn it off with more than one pipeline stage
FORK_CUSTOM_BYTES = {"vllm": 2 * 8192 * 1024}  # the fork's ROCm `_MAX_CAR_SIZE`: messages below 16 MiB
# {engine: ((first release, bytes from which RCCL takes the call), ...)}, oldest first; an engine not listed keeps the
# CUDA table's limit (kvplan.speed.model.CUSTOM_ALLREDUCE)
CUSTOM_ALLREDUCE_AMD = {"sglang": (((0, 0, 0), 2 * 8192 * 1024),  # its own CustomAllreduce on ROCm: below 16 MiB
                                   ((0, 5, 6), 8192 * 8192 + 1))}  # aiter's: at most 64 MiB


def by_release(rules: tuple, version: str | None, before=()):
    """The value of the newest row of `rules` ((first release, value), ... oldest first) that release `version` (None,
    or one not read as a release: the current one) has reached; `before` where it precedes them all."""
    rel = release_of(version)
    if not rel:
        return rules[-1][1]
    return next((value for since, value in reversed(rules) if padded(rel) >= since), before)


def amd_targets(key: str, version: str | None) -> tuple | None:
    """The gfx targets ((major, minor)) on which release `version` of the engine whose rules are `key` runs its custom
    all-reduce on ROCm; () before its first such release; None where no rule keys it (every AMD GPU: SGLang's)."""
    rules = CUSTOM_ALLREDUCE_AMD_TARGETS.get(key)
    return by_release(rules, version) if rules else None


def fork_build(key: str, version: str | None) -> bool:
    """Whether `version` names one of AMD's fork builds read (AMD_FORK_BUILDS), which keep the kernel on."""
    build = str(version).rpartition("+g")[2].split(".")[0] if "+g" in str(version) else ""
    return bool(build) and any(build.startswith(b) for b in AMD_FORK_BUILDS.get(key, ()))


def fork_turns_off(key: str, gpu, tp: int, pp: int = 1) -> bool:
    """Whether a fork build of engine `key` turns its custom all-reduce off for `tp` ranks of `gpu` (FORK_OFF: the
    profile's gfx target by prefix, as the fork's substring test reads gcnArchName) in a run of `pp` pipeline stages
    (FORK_OFF_PP)."""
    gfx = str(getattr(gpu, "compute_capability", None) or ASSUMED_TARGET["AMD"])
    if pp > 1 and key in FORK_OFF_PP:
        return True
    return any(gfx.startswith(prefix) and (most is None or tp <= most) for prefix, most in FORK_OFF.get(key, ()))


def turned_on_on_amd(key: str, version: str | None, gpu, tp: int, pp: int = 1) -> bool:
    """Whether release `version` (None: the current one) of the engine whose rules are `key` leaves its custom
    all-reduce on for `tp` ranks and `pp` pipeline stages of the AMD GPU of profile `gpu`: its release and gfx-target
    rule, or a fork build's (module docstring), before the fabric is asked."""
    archs = amd_targets(key, version)
    if archs is None:
        return True
    if fork_build(key, version):
        return not fork_turns_off(key, gpu, tp, pp)
    cap = capability_of(gpu)
    return cap is not None and tuple(cap) in archs


def runs_custom_allreduce_on_amd(key: str, version: str | None, gpu, tp: int, pp: int = 1) -> bool:
    """Whether that engine runs its custom all-reduce among `tp` ranks of `gpu` at all: left on (turned_on_on_amd)
    and built, which more than two ranks are only where the profile's fabric links every pair (fully_connected; a
    profile that does not say is taken to)."""
    if tp > 2 and fully_connected(gpu, tp) is False:
        return False
    return turned_on_on_amd(key, version, gpu, tp, pp)


def amd_custom_bytes(key: str, version: str | None, cuda_limit: int) -> int:
    """The message size from which engine `key` (kvplan.speed.model.rules_key) at release `version` (None: the current
    one) hands a tensor-parallel all-reduce on an AMD GPU to RCCL, where its custom kernel runs there at all: a fork
    build's ROCm limit (FORK_CUSTOM_BYTES), else the release's (CUSTOM_ALLREDUCE_AMD), else `cuda_limit`."""
    if fork_build(key, version) and key in FORK_CUSTOM_BYTES:
        return FORK_CUSTOM_BYTES[key]
    rules = CUSTOM_ALLREDUCE_AMD.get(key)
    return by_release(rules, version) if rules else cuda_limit
