"""What a plan warns about, as data: `PlanWarning` (a message with raw integer fields the edge formats; a `note` where
it states an assumption at a default, not a danger), the
warnings on a weight dtype override and an assumed int4 group, on a GPU's memory figure (a tool's total, unified
memory), and the topics an engine's own, more exact wording replaces.
"""

from __future__ import annotations

from typing import NamedTuple

from kvplan.core.errors import arg
from kvplan.core.intmath import cdiv
from kvplan.hardware.facts import unified
from kvplan.model.spec import ModelSpec
from kvplan.model.weight_formats import PLAIN_BYTES
from kvplan.model.weights import assumed_int4_group, override_note
from kvplan.planning.deploy import node_of, nvlink_past_node

# weight dtypes vLLM and SGLang quantize a 16-bit checkpoint to as they load it (kvplan.engines.emit.weight_args),
# and how.
# fp8: vLLM's Fp8LinearMethod on a checkpoint not serialized in fp8 keeps one fp32 scale a tensor (`scaled_fp8_quant(
# layer.weight, scale=None)`, vllm 0.8.0 wheel model_executor/layers/quantization/fp8.py L291-293); SGLang one an output
# row where CUTLASS runs it (`per_token_group_quant_fp8(layer.weight, layer.weight.shape[-1])`, sglang 0.5.23 wheel
# srt/layers/quantization/fp8.py L1151-1170): 4 B a row of K inputs, Llama-3.1-8B 32 x (6,144 + 4,096 + 28,672 +
# 4,096) rows x 4 B = 5,505,024 B beside its 6.98 GB of fp8 weights. Neither is counted.
AT_LOAD = {"fp8": "vLLM's and SGLang's online fp8: e4m3 with fp32 scales, one a tensor (vLLM) or an output row "
                  "(SGLang), not counted",
           "nf4": "vLLM's and SGLang's bitsandbytes loader: NF4 in blocks of 64, a uint8 absmax each"}


class PlanWarning(NamedTuple):
    """Why a plan's verdict is what it is, as data: a message whose `{}` fields are `values` (raw
    integers), each read in its `units` entry (a key of kvplan.report.text.FIGURE_FORMATS) at the edge
    (kvplan.report.text.format_warning): no units in the core."""

    message: str
    values: tuple[int, ...] = ()
    units: tuple[str, ...] = ()
    # what the warning is about, where an engine states the same assumption more exactly (UNIFIED): the plan
    # then leaves out its own general wording, so each assumption is said once
    topic: str = ""
    # an assumption at a stated default (an engine's own layer split, an option off as it ships), printed `note:`;
    # a warning proper is what may make a figure wrong or asks the user to act
    note: bool = False

    @classmethod
    def literal(cls, text: str, **kw) -> "PlanWarning":
        """A warning with no figures: `text` as it reads (braces doubled, the message being a format string)."""
        return cls(text.replace("{", "{{").replace("}", "}}"), **kw)


def _override_warning(model: ModelSpec, weight_dtype: str | None, weights: int) -> list[PlanWarning]:
    """A dtype flag never re-plans a checkpoint silently (issue 22: int4 group 32 planned at 128), nor assumes an
    int4 group without saying so (int4 on a 16-bit checkpoint: kvplan.model.weights.INT4_GROUP)."""
    have = model.quantization.method
    if weight_dtype in AT_LOAD and have in PLAIN_BYTES:
        return [PlanWarning(f"the checkpoint is {have}: its weights are planned as {weight_dtype} ({{}} in all), as an "
                            f"engine that quantizes them while loading holds them ({AT_LOAD[weight_dtype]}); "
                            f"embeddings, LM head, norms and routers stay {have}", (weights,), ("GiB",))]
    replaced = override_note(model, weight_dtype)
    if not replaced:
        return []
    group = assumed_int4_group(model, weight_dtype)
    why = f": {int4_group_assumed(group)}" if group else ""
    return [PlanWarning(f"weights planned as {replaced} ({{}} in all){why}", (weights,), ("GiB",))]


def int4_group_assumed(group: int) -> str:
    """Why an int4 plan has this group (kvplan.model.weights.assumed_int4_group), for a plan and for a ranking."""
    return (f"the checkpoint states no int4 group, so {group} is assumed (with a zero point per group, the AWQ/GPTQ "
            "tools' default); to plan another group, plan a quantized checkpoint whose config states it")


UNIFIED = "unified_memory"  # PlanWarning.topic: what a plan assumes of a GPU that shares its memory with the OS
# PlanWarning.topic of the warning on a checkpoint's declared KV cache (kvplan.engines.checkpoint_kv), by what
# the plan's cache is: the declared one the engine's 'auto' follows, the model dtype where 'auto' does not, a
# dtype asked by name
KV_TOPICS = {"checkpoint_kv followed": "followed", "checkpoint_kv not followed": "not followed",
             "checkpoint_kv asked": "asked"}
KV_FOLLOWED, KV_NOT_FOLLOWED, KV_ASKED = KV_TOPICS
# PlanWarning.topic of the warning that an engine's 'auto' gives this model a cache dtype of its own, not the model
# dtype (SGLang's fp8_e4m3 for DeepSeek-V4: kvplan.engines.sglang.dsv4.auto_cache); a ranking says it once
KV_ENGINE_AUTO = "kv engine auto"


def memory_warnings(gpu, usable: int, engine_says_unified: bool = False) -> list[PlanWarning]:
    """What a GPU's usable memory is itself an assumption of (profile data fields, kvplan/hardware/profiles/README.md:
    `memory_usable_above_torch`, `memory_unified`). `engine_says_unified`: the engine words what its budget assumes
    of unified memory (PlanWarning.topic UNIFIED), so only the fact is said here, once."""
    out = []
    if getattr(gpu, "memory_usable_above_torch", False):
        out.append(PlanWarning("the GPU's {} is a tool's device total (nvidia-smi, OpenCL), not torch's: engines "
                               "see 0.46-1.05 GiB less, so the KV room is an upper bound", (usable,), ("GiB",)))
    if unified(gpu):
        # the total is the profile's (memory_usable_source); an engine reads the device's own when it runs, and on a
        # unified part the system software sets it (kvplan/hardware/profiles/README.md, Memory)
        total = "the GPU's {} (the profile's total; the device's own, read at run time, moves with its system software)"
        out.append(PlanWarning(total + " are shared with the CPU and the OS (unified memory); what the engine's "
                               "budget assumes of that follows", (usable,), ("GiB",), UNIFIED) if engine_says_unified
                   else PlanWarning(total + " are shared with the CPU and the OS (unified memory): this plan's budget "
                                    "is its utilisation's share of that total, from which it subtracts nothing for "
                                    "what the OS, its page cache and other processes hold in the same memory",
                                    (usable,), ("GiB",), UNIFIED))
    return out


def node_span_warnings(gpu, dep, ranks: int | None = None, group: str = "") -> list[PlanWarning]:
    """A tensor-parallel group larger than a node (kvplan.planning.deploy.node_of) is planned with what kvplan
    cannot price: NCCL's buffers for peers on other nodes, and (unless multi-node NVLink holds the group:
    kvplan.planning.deploy.nvlink_past_node) the tp collectives over the network, not the scale-up link the speed
    terms price (docs/engines.md, "A tensor-parallel group across nodes"). The group is `dep.tp` ranks, or the
    `ranks` an engine names as its own (`group`: what it calls them; Engine.tp_group: SGLang's --tp-size and
    TensorRT-LLM's tensor_parallel_size under attention DP, every rank)."""
    node, whose = node_of(dep, gpu)
    ranks = ranks or dep.tp
    if ranks <= node:
        return []
    nvlink = nvlink_past_node(gpu, ranks)
    link = "multi-node NVLink" if nvlink else "the network: per channel and peer, NCCL_BUFFSIZE each"
    text = (f"{f'{group} of {ranks} ranks' if group else f'tensor parallelism {ranks}'} spans {cdiv(ranks, node)} "
            f"nodes ({whose}): the "
            f"buffers NCCL allocates for peers on other nodes (over {link}) are not priced, so the memory per GPU is "
            "low by them")
    if not nvlink:
        text += ("; its all-reduces run over the network, not the GPU's scale-up link the speed figures price, so "
                 "those are optimistic")
    return [PlanWarning.literal(text)]
