"""vLLM's "non-torch forward increase memory" per GPU: calibrated constants and the two source-derived terms.

vLLM measures it as the growth of (CUDA memory in use - PyTorch's reserved memory) from the worker's
initial snapshot (taken after NCCL is set up) to the end of the profile window (`vllm/utils/mem_utils.py`
memory_profiling: non_torch_increase = after_profile - before_create; `v1/worker/gpu_worker.py`
determine_available_memory). Whatever the CUDA driver, NCCL, FlashInfer or cuBLAS allocate outside
PyTorch's allocator in that window counts. Two terms appear by release, from the source:

1. CUDA-graph profiling residue, vLLM >= 0.18.0. 0.18.0 added `profile_cudagraph_memory` inside the
   memory_profiling window (gpu_worker.py determine_available_memory, 0.18.0 L387-399; vllm#30515),
   run whenever graphs will be captured (`not enforce_eager and not is_rocm()`), even when the estimate
   is not subtracted (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0, the 0.18/0.19 default). It captures
   two graphs per mode on a profiling pool, then frees them (CUDAGraphWrapper.clear_all_graphs,
   empty_cache); what the capture leaves outside PyTorch's allocator (driver-side graph and module
   memory) stays in the non-torch figure. 0.17.0 -> 0.18.0 changes nothing else in the window
   (mem_utils.py only renames current_platform calls; gpu_model_runner.py profile_run and
   _dummy_sampler_run are identical, _dummy_run only gains the capture's profile_seq_lens; torch 2.10.0
   in both). The residue's size is not derived: it is the gap of two fits. llm-d's version sweep
   of Qwen3-14B on one H100 prints 0.13 GiB on 0.15/0.16/0.17 and 0.25 GiB on 0.18 (held out, not
   fitted): the jump of the two fitted single-GPU constants (246 - 133 = 113 MiB) at 0.18.0.
   --enforce-eager skips the capture, but it also drops torch.compile, and the one eager 0.18+ log in
   the corpus (Gemma-4-26B-A4B on an A100, training split, version inferred 0.19.0) balances with the
   0.18+ constant (its budget misses by its unpriced vision tower alone), so kvplan keeps the 0.18+
   constant under eager too: the residue's cause is inferred, the release boundary is what the logs show.
2. FlashInfer all-reduce fusion workspace, vLLM >= 0.17.0, tensor parallel. -O2 (the default) turns on
   `fuse_allreduce_rms` where `enable_allreduce_rms_fusion` holds (config/vllm.py, 0.17.0-0.19.0: tp > 1,
   CUDA, FlashInfer installed, SM90 or SM100 (0.19.0: the SM10x family), dp == 1, pp == 1; 0.16.0 had it
   off at every level), and not under --enforce-eager (which turns torch.compile off: no pass runs).
   AllReduceFusionPass (compilation/passes/fusion/allreduce_rms_fusion.py) sizes T = min(max_size /
   (H x dtype bytes), max_num_batched_tokens), max_size from FI_ALLREDUCE_FUSION_MAX_SIZE_MB by capability
   and tp (tp 2, 4, 8 only), and creates FlashInfer's trtllm workspace (flashinfer 0.6.4/0.6.6
   comm/trtllm_ar.py trtllm_create_ipc_workspace_for_all_reduce_fusion): three buffers per rank, data
   tp x T x H x 2 B, barrier flags tp x 256 x 4 B, Lamport 3 x tp x T x H x 2 B (4 B for an fp32
   model), each rounded to 2 MiB and allocated as a SymmDeviceMemory (comm/mnnvl.py
   _get_allocation_prop: + a 2 KiB signal pad, rounded up to the multicast granularity), which is
   512 MiB where NVSwitch multicast exists: sglang#18341's log of the same workspace maps buffers of 24,
   2 and 68 MiB at a 512 MiB stride. So 3 x 512 MiB in the usual cases whatever the model (H100 tp 2:
   128 MiB of data, 384 of Lamport); B300 at tp 4 (64 MiB limit) reaches 1,024 MiB of Lamport buffer.
   Without NVSwitch (PCIe H100, H100 NVL) the multicast query fails and vLLM goes on without it
   ("expected on GPUs without NVSwitch"), as across nodes outside multi-node NVLink (across_nodes). This is why
   tp 2 and tp 4 print the same ~2.1 GiB on v0.19 H100 while v0.11 printed 0.55 GiB.
   The same pass's quant fusions (AllReduceFusedRMSNormStaticQuantFP8Pattern, the NVFP4 ones) take a second
   workspace slot, `_fi_ar_quant_workspace`, created for every model (FP8 checkpoint or not) right after the first
   (0.17.0 allreduce_rms_fusion.py L756-786; 0.24.0 L988-996), always on trtllm, and it is the first workspace when
   that is trtllm too (`distributed/device_communicators/flashinfer_all_reduce.py`: 0.17.0 L108-111, "If primary
   workspace is already trtllm, reuse it", the primary's VLLM_FLASHINFER_ALLREDUCE_BACKEND defaulting to trtllm,
   envs.py L171; 0.19.0 L188-190 and 0.24.0 L191-193, where `auto` resolves to trtllm on one node, L98-107 and
   L101-110). So through 0.24.x one workspace per rank, never two: nothing more is booked. From 0.25.0 `auto`
   resolves to MNNVL on one node (0.25.0 L116), one block of 3 Lamport buffers sized by kvplan.engines.vllm.mnnvl,
   while the quant slot still creates its own trtllm workspace (0.25.0 L206-214: both booked), and 0.26.0 makes the
   quant slot follow the primary's backend (0.26.0 L211-215, 0.33.0 L279-282: the MNNVL block alone); for a tp group
   over nodes `auto` is MNNVL from 0.19.0 (0.19.0 L98-101) and the quant slot stays empty (L181-186; 0.25.0 L200-205),
   the MNNVL block alone, with the pass's tp 16 entry from 0.25.0 (FI_ALLREDUCE_FUSION_MAX_SIZE_MB 16: 64 MiB on
   capability 10.0 and 10.3, allreduce_rms_fusion.py 0.25.0 L90-108; none before it: no workspace at tp 16).

3. From 0.27.0 the residue is out of the budget. `determine_available_memory` closes the `memory_profiling` window
   after `profile_run` and only then calls `profile_cudagraph_memory` (gpu_worker.py 0.27.0 L500-517, 0.30.0
   L568-585, 0.33.0 L686-717; 0.26.0 L484-506 still called it inside the window), and the non-KV memory becomes the
   free-memory drop from the start-up snapshot to that closing snapshot plus the transient torch peak
   (utils/mem_utils.py 0.27.0 L317-326, 0.33.0 L312-321). Whatever the capture leaves behind happens after the
   closing snapshot, so 0.27+ takes the constants fitted on releases without the capture in the window (v0.11's),
   not the 0.18+ ones. Training check (the one 0.27+ record kvplan predicts, Qwen2.5-1.5B on a T4, vLLM 0.30.0,
   eslam-ahmed43/llm-lab@0f01b470 logs/vllm_server.log L8, L15): consumed 3.24 GiB - weights 2.98 = 0.26 GiB of
   non-torch memory and runner states; kvplan 0.39 GiB with the 0.18+ constant, 0.28 with v0.11's.

The constants are fitted by `benchmarks/budget_corpus.py --calibrate` on the training split with the
source-derived terms taken out (tests/test_budget_corpus.py re-fits them).
"""

from __future__ import annotations

import dataclasses

from kvplan.core.intmath import round_up
from kvplan.engines.versions import parse_version
from kvplan.engines.vllm import custom_ar
from kvplan.engines.vllm.mnnvl import mnnvl_bytes
from kvplan.model.weight_formats import PLAIN_BYTES
from kvplan.planning.deploy import NODE_GPUS, node_size, nvlink_reaches

MIB = 2**20

# --- calibrated on the training split (benchmarks/budget_corpus.py --calibrate) --------------------
# v0.19.0 logs (DEBUG breakdown, H100) for 0.18+, llm-d's v0.11 H100 table for 0.11-0.17 (no training
# record in between; the boundaries are the source changes above), the printed budget's residual before.
NON_TORCH_SINGLE = 246 * MIB  # one GPU, v0.18+
NON_TORCH_SINGLE_V011 = 133 * MIB  # one GPU, v0.11-v0.17 (and before)
NON_TORCH_TP = 620 * MIB  # tensor parallel > 1, v0.18+, without the FlashInfer workspace below
NON_TORCH_TP_V011 = 563 * MIB  # tensor parallel > 1, v0.11-v0.17, without the FlashInfer workspace
NON_TORCH_TP_LEGACY = 143 * MIB  # tensor parallel > 1 before 0.11 (residual of the printed budget)
V0_NON_TORCH_SINGLE = 160 * MIB  # the legacy V0 engine (< 0.8), not fitted: its logs print 0.01-0.35 GiB

# --- source-derived ---------------------------------------------------------------------------------
MULTICAST_GRANULARITY = 512 * MIB  # SymmDeviceMemory's allocation unit on NVSwitch systems (see above)
FI_AR_WORKSPACE = 3 * MULTICAST_GRANULARITY  # the usual total: each buffer under 512 MiB
_MAX_COMM_SIZE = 2147483647 & ~(2 * MIB - 1)  # trtllm_ar.py MAX_COMM_SIZE: the Lamport comm size's cap
# FI_ALLREDUCE_FUSION_MAX_SIZE_MB (allreduce_rms_fusion.py, 0.17.0-0.19.0; 103 from 0.19.0), MiB by tp; tp 16 is the
# table's multi-node MNNVL entry, there from MNNVL_SINCE (0.25.0; docstring, 2.). By release (the PyPI sdists'
# allreduce_rms_fusion.py L104-127): 107 (the SM 10.7 row) from 0.27.0; 103's tp 8 row 2 MiB up to 0.28.x, 4 MiB from
# 0.29.0 (0.33.0 L116-121).
_FUSION_MAX_SIZE_MIB = {90: {2: 64, 4: 2, 8: 0.5}, 100: {2: 64, 4: 32, 8: 1, 16: 64},
                        103: {2: 64, 4: 64, 8: 2, 16: 64}, 107: {2: 64, 4: 64, 8: 2}}
SM107_SINCE = (0, 27, 0)  # the table's 107 row
SM103_TP8_4MIB_SINCE = (0, 29, 0)  # 103: {8: 4}, was 2
MNNVL_SINCE = (0, 25, 0)  # `auto` resolves to FlashInfer's MNNVL workspace on one node (docstring, 2.)
MNNVL_SPANNING_SINCE = (0, 19, 0)  # `auto` is MNNVL for a tp group over nodes (0.19.0 L98-101)
QUANT_SHARES_MNNVL_SINCE = (0, 26, 0)  # the quant slot shares the MNNVL workspace (0.26.0 L211-215)
# The log corpus's machine, an HGX H100: the fabric facts assumed for a GPU a log does not name (corpus_gpu).
CORPUS_CAPABILITY, CORPUS_FABRIC = "9.0", "nvswitch"


def era(version: tuple[int, ...]) -> str:
    """Which calibrated constants apply: v0 (< 0.8), legacy (< 0.11), v011 (< 0.18), v018 (whose non-torch
    figures hold the graph-profiling residue only up to 0.26.x: graph_profile_residue)."""
    if version < (0, 8, 0):
        return "v0"
    if version < (0, 11, 0):
        return "legacy"
    return "v011" if version < (0, 18, 0) else "v018"


def graph_profile_residue(version: tuple[int, ...]) -> bool:
    """Whether the release profiles CUDA graphs inside the memory-profiling window: 0.18.0 up to 0.26.x. From 0.27.0
    `profile_cudagraph_memory` runs after `memory_profiling` has taken its closing snapshot (module docstring, 3.)."""
    return (0, 18, 0) <= version < (0, 27, 0)


def workspace_possible(version: tuple[int, ...], tp: int, pp: int = 1, dp: int = 1, eager: bool = False) -> bool:
    """Whether vLLM may create the FlashInfer all-reduce fusion workspace, whatever the GPU (the rule's
    release and layout half; the GPU half is multicast_sm)."""
    return version >= (0, 17, 0) and tp >= 2 and pp == 1 and dp == 1 and not eager


def across_nodes(gpu, tp: int, node: int) -> bool:
    """Whether FlashInfer can build the workspace for a tp group of `tp` ranks on nodes of `node` GPUs: on one node,
    or across nodes where the profile's NVSwitch domain reaches past the node and holds them (a GB200 NVL72 rack's
    trays: nvlink_past_node). Neither the fusion pass nor its enable rule looks at nodes (0.17.0
    `compilation/passes/fusion/allreduce_rms_fusion.py` AllReduceFusionPass.__init__ L707-784, `config/vllm.py`
    enable_allreduce_rms_fusion L113-132; no node test in the later forms either, vllm-project/vllm@889b02f9), but
    FlashInfer's symmetric buffers are shared by fabric handles only on multi-node NVLink, else by a file
    descriptor passed by pidfd, which reaches no other host (flashinfer `comm/mnnvl.py` SymmDeviceMemory): the
    creation fails, vLLM warns ("Failed to initialize FlashInfer All Reduce workspace", L778-784) and runs without
    the pass. What a failed attempt leaves allocated was not read: kvplan books none."""
    return nvlink_reaches(gpu, tp, node)


def multicast_sm(gpu) -> int | None:
    """The SM number (90, 100, 103, ...) of a GPU whose profile puts it on NVSwitch, where CUDA multicast
    exists; None elsewhere: the PCIe and NVL-bridge H100s and GH200 NVL2 (two GPUs, no switch) fail vLLM's
    multicast query, and a profile without interconnect.kind or compute_capability is assumed to (a plan
    warning: kvplan.engines.vllm.engine.Vllm.assumptions)."""
    cap = getattr(gpu, "capability", None)
    if getattr(gpu, "interconnect_kind", None) != "nvswitch" or cap is None:
        return None
    return 10 * cap[0] + cap[1]


def corpus_gpu(gpu):
    """`gpu` (known only by its memory: a log that names no GPU) with the HGX H100's compute capability and
    fabric, the machine of kvplan's log corpus, for the workspace rule alone (its vendor stays unknown, so
    no kernel choice reads them). The caller states the assumption (kvplan.engines.vllm.reconcile)."""
    return dataclasses.replace(gpu, compute_capability=CORPUS_CAPABILITY, interconnect_kind=CORPUS_FABRIC)


def fi_allreduce_workspace(version: tuple[int, ...], tp: int, hidden: int, dtype_bytes: int = 2,
                           max_tokens: int = 8192, pp: int = 1, dp: int = 1, eager: bool = False,
                           gpu=None, node: int = NODE_GPUS) -> int:
    """Bytes per rank of FlashInfer's all-reduce fusion workspaces (0 where vLLM creates none): trtllm's, or MNNVL's
    where `auto` resolves to it (with trtllm's for the quant slot in 0.25.x; docstring, 2.). `node`: GPUs per node
    (kvplan.planning.deploy.node_size); a tp group larger gets one only inside multi-node NVLink (across_nodes)."""
    if not workspace_possible(version, tp, pp, dp, eager) or not across_nodes(gpu, tp, node):
        return 0
    cap = multicast_sm(gpu)
    if cap is None or (cap == 103 and version < (0, 19, 0)):  # 0.17/0.18 test capability 10.0 exactly
        return 0
    max_mib = fusion_max_mib(version, cap, tp)
    if not max_mib:
        return 0
    tokens = min(int(max_mib * MIB) // (hidden * dtype_bytes), max_tokens)
    spans = tp > node
    if version >= MNNVL_SINCE or (spans and version >= MNNVL_SPANNING_SINCE):
        quant = not spans and version < QUANT_SHARES_MNNVL_SINCE
        return (mnnvl_bytes(version, tp, tokens, hidden, dtype_bytes, MULTICAST_GRANULARITY)
                + (trtllm_workspace(tp, tokens, hidden, dtype_bytes) if quant else 0))
    return trtllm_workspace(tp, tokens, hidden, dtype_bytes)


def fusion_max_mib(version: tuple[int, ...], cap: int, tp: int) -> float | None:
    """FI_ALLREDUCE_FUSION_MAX_SIZE_MB[cap][tp] as `version` ships it (MiB; None where the table has no entry)."""
    if (tp == 16 and version < MNNVL_SINCE) or (cap == 107 and version < SM107_SINCE):
        return None
    if cap == 103 and tp == 8 and version >= SM103_TP8_4MIB_SINCE:
        return 4
    return _FUSION_MAX_SIZE_MIB.get(cap, {}).get(tp)


def trtllm_workspace(tp: int, tokens: int, hidden: int, dtype_bytes: int) -> int:
    """FlashInfer's trtllm workspace for `tokens` of `hidden` elements over `tp` ranks: data, flags and Lamport
    buffers, each a SymmDeviceMemory at the multicast granularity (docstring, 2.)."""
    data = tp * tokens * hidden * 2
    lamport = 3 * min(tp * tokens * hidden * (4 if dtype_bytes == 4 else 2), _MAX_COMM_SIZE)
    flags = tp * 256 * 4
    return sum(round_up(round_up(round_up(size, 2 * MIB) + 2048, 2 * MIB), MULTICAST_GRANULARITY)
               for size in (data, flags, lamport))


def fi_workspace(model, dep, st, gpu=None) -> int:
    """fi_allreduce_workspace for a plan: its model, deployment and engine settings; `gpu` in place of st.gpu (a
    stand-in, kvplan.engines.vllm.reconcile)."""
    gpu = gpu or st.gpu
    return fi_allreduce_workspace(st.v, dep.tp, model.hidden_size, dtype_bytes(model), st.max_num_batched_tokens,
                                  dep.pp, dep.dp, st.eager, gpu, node_size(dep, gpu))


def non_torch(tp: int, pp: int, version: tuple[int, ...] | str, eager: bool = False, gpu=None,
              dp: int = 1, model=None, max_tokens: int = 8192, v1: bool | None = None, node: int = NODE_GPUS) -> int:
    """vLLM's non-torch increase on one rank (bytes); `model` (hidden size, dtype) and `max_tokens`
    (max_num_batched_tokens) size the FlashInfer workspace, which is left out without a model. `v1` False: a
    0.8-0.10 run on the V0 fallback, whose worker measures as V0's does (kvplan.engines.vllm.v0_fallback). `node`: GPUs
    per node (kvplan.planning.deploy.node_size); before 0.11.0 a tp group larger has no custom all-reduce buffers in
    the window, nor on an AMD GPU before 0.8.3 (kvplan.engines.vllm.custom_ar; `version` as named, a string, tells an
    AMD fork build)."""
    legacy_tp = NON_TORCH_TP_LEGACY - custom_ar.unbuilt_bytes(tp, node, version, gpu, pp)
    version = parse_version(version) if isinstance(version, str) else version
    e = "v0" if v1 is False else era(version)
    if e == "v0":
        # tp 1 with pipeline stages: the legacy figure less the buffers a group of one never builds (custom_ar)
        return V0_NON_TORCH_SINGLE if tp == 1 and pp == 1 else legacy_tp
    graphs = graph_profile_residue(version)
    if tp > 1:
        if e == "legacy":
            return legacy_tp
        base = NON_TORCH_TP if graphs else NON_TORCH_TP_V011
        if model is None:
            return base
        return base + fi_allreduce_workspace(version, tp, model.hidden_size, dtype_bytes(model), max_tokens,
                                             pp, dp, eager, gpu, node)
    # pipeline parallel alone runs no all-reduce (no training record): the one-GPU figure of its release, the
    # graph-profiling residue in it only where the capture runs inside the window (0.18.0-0.26.x; docstring, 1. and 3.)
    return NON_TORCH_SINGLE if graphs else NON_TORCH_SINGLE_V011


def dtype_bytes(model) -> int:
    """Bytes of one activation of the model's dtype (the workspace's element size)."""
    return PLAIN_BYTES.get(getattr(model, "dtype", "bf16"), 2)
