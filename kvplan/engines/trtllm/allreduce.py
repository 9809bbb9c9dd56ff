"""TensorRT-LLM's custom all-reduce workspace per rank (PyTorch backend): IpcMemory buffers, inside the KV budget.

What it allocates. Each `AllReduce` module of a tp > 1 model asks `get_allreduce_workspace(mapping)` at model
construction (`tensorrt_llm/_torch/distributed/ops.py`, NVIDIA/TensorRT-LLM@9e776418150235c761d2d737dc8290ff49a4eb9f:
one workspace per mapping, cached), which calls `CustomAllReduceHelper.allocate_allreduce_fusion_workspace(mapping,
max_workspace_size_auto(tp, support_deterministic=False))`: three IpcMemory buffers per rank, `size x tp` (data),
`256 x tp` (barriers) and `3 x size x tp` (Lamport), plus two small torch tensors (flags) left out here
(`tensorrt_llm/_torch/distributed/allreduce_helper.py` @4fb601b9e5bc0528db0d7b88837e0509edda1b72 L122-131).
`IpcMemory.open_ipc_memory` rounds each to 2 MiB (`align_size(size, 1 << 21)`) before `cudaMalloc`, and
`IpcMemory.__init__` opens nothing where the tp group is larger than a node (`open_ipc and mapping.tp_size <=
mapping.gpus_per_node`) or peer access fails (`can_access_peer`) (`tensorrt_llm/_ipc_utils.py`
@c89653021e66ca78c55f02b366f404455bc12e8d): across nodes the all-reduce runs on NCCL and nothing is allocated.

Under attention DP (kvplan's tp 1 x dp N: `enable_attention_dp`, tensor_parallel_size N, kvplan.engines.trtllm.layout)
the model's Mapping has tp_size N, and what opens a workspace on it changed with TensorRT-LLM#9542 ("Skip Allreduce
init for Attention DP", merged into main 2025-12-01, while main still cut the 1.2.0 release candidates: 1.2.0rc8 on
2026-01-15, triton-inference-server/tensorrtllm_backend#837; so in 1.2.0):
  * before it, modules are built on that Mapping whatever the layout: DeepseekV3DecoderLayer's `AllReduce(mapping=
    model_config.mapping)` and `MoEAllReduce(self.mapping)` in every layer, Deepseekv3MoE's `AllReduce` (`_torch/
    models/modeling_deepseekv3.py` @a43cf9e363d5657061b5ce0e12f3d993a08d8158), the fused-MoE base class's
    `AllReduce(mapping=self.mapping)` that every MoE model's experts build (`_torch/modules/fused_moe/interface.py`,
    code-index forms before #9542), Qwen3MoE's (`modeling_qwen3_moe.py`, the same). They all pass the one model
    Mapping, so `get_allreduce_workspace`'s cache opens one workspace a rank, over the whole group of N ranks, never
    used (the attention, MLP and MoE all-reduces are off under attention DP). kvplan books it for tp x dp ranks.
  * from it, DeepSeek-V3 / V3.2 (`DeepseekV3ForCausalLM`, `DeepseekV32ForCausalLM`) build none under attention DP:
    `if not self.enable_attention_dp and self.mapping.tp_size > 1` guards the decoder layer's AllReduce and
    MoEAllReduce, Deepseekv3MoE's (`if not self.use_dp and ...`) and the fused-MoE base class's; the attention
    projections run on a tp-1 Mapping (`modules/attention.py`), and the embedding and LM head are built without
    the model's Mapping (`DeepseekV3Model`, `DecoderModelForCausalLM` under attention DP): no AllReduce over tp
    > 1 is left, so no workspace (code-index forms of modeling_deepseekv3.py after #9542). kvplan books 0. The other
    model classes #9542 may have changed were not read: kvplan books them the whole group's workspace, the form
    before it (the safe side), and says so (`note`). A 1.2.0 release candidate cut before the merge is read as
    1.2.0 (kvplan.core.releases.release_of) and books 0 for DeepSeek-V3 where it opened the workspace.

The size by release. `max_workspace_size_auto` returned 16,000,000 B at tp <= 2 and 8,000,000 B above
(`tensorrt_llm/plugin/plugin.py` @c20322ffd3dc0740ca530c9fad989b22e64f6e06, the 0.20-1.0 form); TensorRT-LLM#9145
("Enlarged the AllReduce workspace size to 64MB": 8 MB caused hangs; opened 2025-11-13) made it 67,108,864 B at
every tp, overridable by TRTLLM_ALLREDUCE_FUSION_WORKSPACE_SIZE (allreduce_helper.py L46-84, the default at L83).
The first release that carries it is 1.2.0 (FIXED_FROM): main had cut 1.2.0rc2 (2025-11-07,
triton-inference-server/tensorrtllm_backend#819) before it was opened, and cut 1.2.0's release candidates to
1.2.0rc8 (2026-01-15, #837) after. 1.1.x's release candidates predate it (1.1.0rc4: 2025-09-10, #796) and 1.1.0
(2025-12-19 on PyPI, kvplan.engines.trtllm.releases) comes from its release branch, whose release notes' fixed issues
do not name it (nvidia.github.io/TensorRT-LLM/release-notes.html, "TensorRT-LLM Release 1.1"). The v1.1.0 tag itself
could not be read here (the repository's snapshot is over the fetch limit and the code index keeps no tag), so
whether a cherry-pick reached 1.1.0 is not known: kvplan books 1.1.x the 64 MiB form, the safe side (without it 1.1.x
holds less, and the KV budget is low by the difference), and says so (`note`).

Where it lands: inside the budget. The workspace is made while the model is built, before weights load, and is held
(`cudaMalloc`, outside PyTorch's allocator) when `KvCacheCreator` reads the memory left after its warm-up run
(`_torch/pyexecutor/_util.py` @0004396720054fd8e205cbf616f21f0b57c6b412 configure_kv_cache_capacity: kv = (total -
peak) x free_gpu_memory_fraction, the peak counting non-torch memory), so it comes out of the pool as the weights do.
By hand at tp 8 on one node, 1.2.0 (and 1.1.x as booked): data 8 x 64 MiB = 512 MiB, barriers 2,048 B -> 2 MiB,
Lamport 3 x 512 = 1,536 MiB:
2,050 MiB; 0.20.0: 8 x 8,000,000 = 64,000,000 -> 31 pages (65,011,712), 2 MiB, 192,000,000 -> 92 pages
(192,937,984): 260,046,848 B (248 MiB). Tp 1 x dp 8 on one node: the same before #9542; 0 for DeepSeek-V3 from it.

At tp 1 (issue 22, round 46). `AllReduce.__init__` asks for the workspace only `if self.mapping.tp_size > 1` (every
code-index form of `_torch/distributed/ops.py` read, 0071496d among them), but `MoEAllReduce.__init__` calls
`get_allreduce_workspace(self.mapping)` with no test (the forms read), and the decoder layers of DeepSeek-V3 / V3.2
(`DeepseekV3DecoderLayer`), Qwen3-MoE (`Qwen3MoEDecoderLayer`), Llama 4 (`Llama4DecoderLayer`, modeling_llama.py, under
Llama4ForCausalLM and Llama4ForConditionalGeneration) and GLM-4-MoE (modeling_glm.py @0406f8aa, its own copy of
DeepseekV3DecoderLayer; other forms that register Glm4MoeForCausalLM not read) build `self.moe_allreduce =
MoEAllReduce(self.mapping)` with no tp test in the code-index forms before TensorRT-LLM#9542. At tp 1 that opens one
workspace over a group of one: `can_access_peer` skips its own device and returns True, `IpcMemory` opens (tp_size 1 <=
gpus_per_node), so a rank cudaMallocs size, 256 and 3 x size B, in 2 MiB pages: 16,000,000 -> 16,777,216 + 2,097,152 +
48,000,000 -> 48,234,496 = 64 MiB before #9145 (tp <= 2's size), 64 + 2 + 192 = 258 MiB with it. From #9542
DeepSeek-V3's layer builds it only `if not self.enable_attention_dp and self.mapping.tp_size > 1` (none at tp 1, kvplan
books 0); a later code-index form of modeling_qwen3_moe.py (03441af1) guards Qwen3-MoE's the same way, not dated to a
release, and the other classes' later forms were not read: kvplan books them the workspace at tp 1 in every release (the
safe side) and says so (`note`). gpt-oss (`modeling_gpt_oss.py`, 050b6cb9: no MoEAllReduce) and the dense models build
none at tp 1.
"""

from __future__ import annotations

from kvplan.core.intmath import round_up
from kvplan.core.releases import release_of
from kvplan.engines.trtllm.mlp_split import ARCHITECTURES as DEEPSEEK_V3

MIB = 2**20
PAGE = 2 * MIB  # IpcMemory.open_ipc_memory: align_size(size, 1 << 21)
BARRIERS_PER_RANK = 256  # allocate_allreduce_fusion_workspace: IpcMemory(mapping, 256 * tp_size)
FIXED_FROM = (1, 2, 0)  # the first release with TensorRT-LLM#9145's 64 MiB (module docstring)
UNREAD_LINE = (1, 1)  # 1.1.x: whether it carries #9145 was not read; booked the 64 MiB form, the safe side
FIXED = 67_108_864  # max_workspace_size_auto's default from TensorRT-LLM#9145
BEFORE_SMALL, BEFORE_LARGE = 16_000_000, 8_000_000  # before it: tp <= 2, and above
SKIPPED_UNDER_DP_FROM = (1, 2, 0)  # TensorRT-LLM#9542: no AllReduce module under attention DP (module docstring)
SKIPPED_UNDER_DP = DEEPSEEK_V3  # the model classes whose skip was read
# Decoder layers that build MoEAllReduce(mapping) with no tp test before #9542 (module docstring, "At tp 1")
MOE_ALLREDUCE_AT_TP1 = DEEPSEEK_V3 + ("Qwen3MoeForCausalLM", "Llama4ForCausalLM", "Llama4ForConditionalGeneration",
                                     "Glm4MoeForCausalLM")


def unread(v: tuple[int, ...] | None) -> bool:
    """Whether release `v` is of the 1.1.x line, whose size was not read (UNREAD_LINE)."""
    return v is not None and v[:2] == UNREAD_LINE


def _before_size(tp: int) -> int:
    """max_workspace_size_auto's size before TensorRT-LLM#9145: 16 MB at tp <= 2, 8 MB above."""
    return BEFORE_SMALL if tp <= 2 else BEFORE_LARGE


def workspace_size(tp: int, version: str | None) -> int:
    """`max_workspace_size_auto(tp, support_deterministic=False)` of TensorRT-LLM `version` (None: the newest form)."""
    v = release_of(version)
    if v is None or v >= FIXED_FROM or unread(v):
        return FIXED
    return _before_size(tp)


def workspace_bytes(tp: int, node: int, version: str | None) -> int:
    """Bytes per rank of the all-reduce workspace for a tp group of `tp` ranks on nodes of `node` GPUs: its three
    IpcMemory buffers in 2 MiB pages where the group sits on one node and tp > 1, else 0 (NCCL across nodes)."""
    if tp <= 1 or tp > node:
        return 0
    return _pages(workspace_size(tp, version), tp)


def _pages(size: int, tp: int) -> int:
    """The three IpcMemory buffers of `size` at `tp` ranks, each in whole 2 MiB pages."""
    return sum(round_up(b, PAGE) for b in (size * tp, BARRIERS_PER_RANK * tp, 3 * size * tp))


def skips_under_dp(model, version: str | None) -> bool:
    """Whether `model` builds no AllReduce module under attention DP at `version` (TensorRT-LLM#9542, read for
    DeepSeek-V3 / V3.2; None: the newest form)."""
    v = release_of(version)
    return (v is None or v >= SKIPPED_UNDER_DP_FROM) and model.architecture in SKIPPED_UNDER_DP


def group_ranks(model, dep, version: str | None) -> int:
    """The tp group whose workspace a rank opens: tp; under attention DP the whole group of tp x dp ranks (the one
    model Mapping every module is built on), or 1 (none) where the model skips its all-reduce modules."""
    if dep.dp == 1:
        return dep.tp
    return 1 if skips_under_dp(model, version) else dep.tp * dep.dp


def opens_alone(model, dep, version: str | None) -> bool:
    """Whether a rank of `model` at tp 1 without attention DP opens the workspace over a group of one: its decoder
    layers build MoEAllReduce with no tp test (MOE_ALLREDUCE_AT_TP1), but DeepSeek-V3's from #9542 (skips_under_dp)."""
    return dep.tp == 1 and dep.dp == 1 and model.architecture in MOE_ALLREDUCE_AT_TP1 \
        and not skips_under_dp(model, version)


def rank_bytes(model, dep, node: int, version: str | None) -> int:
    """Bytes per rank of the all-reduce workspace `model` at `dep` opens on nodes of `node` GPUs."""
    if opens_alone(model, dep, version):
        return _pages(workspace_size(1, version), 1)
    return workspace_bytes(group_ranks(model, dep, version), node, version)


def note(model, dep, booked: int, version: str | None) -> str | None:
    """What a plan states where the workspace it books (`booked`, rank_bytes) was not read: 1.1.x's size (booked as
    TensorRT-LLM#9145's), the workspace a MoEAllReduce opens at tp 1, and under attention DP from #9542 on the whole
    group's for a model class other than DeepSeek-V3's; else None."""
    v = release_of(version)
    if not booked:
        return None
    said = []
    if unread(v):
        group = group_ranks(model, dep, version)
        before = _pages(_before_size(group), group)
        said.append(f"whether TensorRT-LLM {version} carries the 64 MiB all-reduce workspace (TensorRT-LLM#9145, "
                    f"first in 1.2.0) was not read: {booked / MIB:,.0f} MiB a rank booked, {before / MIB:,.0f} MiB "
                    f"with the {_before_size(group) / 1e6:,.0f} MB form before it (kvplan.engines.trtllm.allreduce)")
    if opens_alone(model, dep, version):
        said.append(f"TensorRT-LLM's {model.architecture} decoder layers build MoEAllReduce with no tp test in the "
                    f"forms read (before TensorRT-LLM#9542), which opens the all-reduce workspace at tp 1: "
                    f"{booked / MIB:,.0f} MiB a rank booked in every release before the one read to guard it "
                    "(DeepSeek-V3's 1.2.0; none read for the other classes; kvplan.engines.trtllm.allreduce)")
    elif dep.dp > 1 and not skips_under_dp(model, version) and (v is None or v >= SKIPPED_UNDER_DP_FROM):
        said.append(f"TensorRT-LLM skips its all-reduce modules under attention DP from 1.2.0 (TensorRT-LLM#9542, "
                    f"read for DeepSeek-V3); for {model.architecture} it was not read, so the whole group's all-reduce "
                    f"workspace is booked ({dep.tp * dep.dp} ranks, {booked / MIB:,.0f} MiB a rank; "
                    "kvplan.engines.trtllm.allreduce)")
    return "; ".join(said) or None
