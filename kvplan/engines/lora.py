"""LoRA adapter memory per GPU as each engine reserves it at start-up, before the KV cache is sized.

Every engine preallocates room for `max_loras` adapters of the largest rank on each projection it wraps,
whether or not an adapter is loaded; the KV cache gets what is left. Widths per rank come from
kvplan.planning.lora (column-parallel projections split their output, row-parallel ones their input).

* vLLM (`vllm/lora/layers/base_linear.py` create_lora_weights, `vllm/lora/model_manager.py`
  _create_lora_modules, v0.11.0-v0.33.0): per wrapped projection and slice, lora_a (max_loras, 1, rank,
  in) and lora_b (max_loras, 1, out, rank) in the model's dtype (lora_dtype "auto"), made while the model
  loads, so "Model loading took" includes them. Packed projections are wrapped whole: naming q wraps the
  three slices of qkv_proj, gate wraps gate_up_proj (packed_modules_mapping). Without
  `--lora-target-modules` (added by vllm-project/vllm#34984, merged 2026-02-20 on 0.16.0rc2.dev, so
  first released in 0.17.0) every linear layer is wrapped, plus the embedding and LM-head modules the
  model lists (`embedding_modules`, get_supported_lora_modules in `vllm/lora/utils.py`): kvplan prices
  those as vocab x rank + hidden x rank each (an estimate: vocabulary padding is not modelled).
  max_cpu_loras is the host LRU of loaded adapters: no GPU memory.
* SGLang (`python/sglang/srt/lora/mem_pool.py`, LoRAMemoryPool): per layer and packed target module a
  buffer A (max_loras_per_batch, stacked x rank, in) and B (max_loras_per_batch, out, rank), allocated
  by the LoRA manager after the weights and before the KV pool (`srt/model_executor/model_runner.py`:
  init_lora_manager() runs before init_memory_pool(), which sizes the pool from the memory then free):
  the same element count as vLLM's.
* TensorRT-LLM (PyTorch backend, `tensorrt_llm/_torch/pyexecutor/py_executor_creator.py`:
  num_device_module_layer = max_lora_rank x num_hidden_layers x len(lora_target_modules +
  missing_qkv_modules) x max_loras; `cpp/tensorrt_llm/batch_manager/peftCacheManager.cpp`
  getPageManagerConfig / getMaxNumSlots): a paged device cache whose page width is the narrowest
  module's localIn + localOut, max1d the widest; slots = num_device_module_layer x ceil(max1d / width),
  slots per page = max(optimal x sum ceil(1d / width) x local layers, ceil(max_adapter x max1d / width))
  with optimal = min(8, rank) and max_adapter = min(64, rank); bytes = pages x slots per page x width x
  dtype. Naming any of q, k, v adds the others (missing_qkv_modules). Created with the executor's
  resource managers, before the KV cache estimate's profiling run measures what is free.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.intmath import cdiv
from kvplan.engines.base import parse_version
from kvplan.model.weight_formats import PLAIN_BYTES
from kvplan.planning.deploy import stage_ranges
from kvplan.planning.lora import MODULES, LoraRequest, adapted, check_model, stage_slices
from kvplan.readers.projections import projection_names

TARGET_MODULES_FIRST = (0, 17, 0)  # vLLM --lora-target-modules (vllm-project/vllm#34984)


def _packed(modules) -> tuple[str, ...]:
    """Modules widened to the packed projections engines wrap whole (qkv_proj, gate_up_proj)."""
    chosen = set(modules)
    if chosen & {"q", "k", "v"}:
        chosen |= {"q", "k", "v"}
    if chosen & {"gate", "up"}:
        chosen |= {"gate", "up"}
    return tuple(m for m in MODULES if m in chosen)


# vLLM's model classes load q_proj, k_proj and v_proj as one QKVParallelLinear `qkv_proj`, gate_proj and up_proj as
# one MergedColumnParallelLinear `gate_up_proj` (packed_modules_mapping; vllm 0.8.0 wheel llama.py, starcoder2.py
# L86, phi.py L88), and --lora-target-modules matches a wrapped module's last name (vllm/lora/utils.py
# is_in_target_modules: `module_suffix in target_module_set`): the packed names match in every release. SGLang's
# --lora-target-modules takes Llama's and the packed names only (choices=SUPPORTED_LORA_TARGET_MODULES + ["all"]:
# sglang 0.5.23 wheel, sglang/srt/arg_groups/fields/lora.py L51, sglang/srt/utils/common.py L4700-4721).
_VLLM_PACKED = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj", "gate_proj": "gate_up_proj",
                "up_proj": "gate_up_proj"}
_SGLANG_NAMES = frozenset({"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "qkv_proj",
                           "gate_up_proj"})


def target_names(model, modules, engine: str, allowed: frozenset | None = None) -> list[str]:
    """The module names `engine`'s --lora-target-modules takes for `modules` of `model`: its family's own
    (kvplan.readers.projections) as the engine loads them packed. A one-line refusal where kvplan has not read the
    family's names, where a name the engine matches also wraps a projection not asked for (GPT-2's c_proj is both the
    attention's output and the MLP's down projection), or where a name is not among those the flag takes (`allowed`,
    None: any)."""
    names = projection_names(model)
    if names is None:
        raise KvplanError(f"{model.name}: kvplan has not read what its family ({model.family or 'unknown'}) calls its "
                          f"projections, so it cannot name {','.join(modules)} in {engine}'s --lora-target-modules; "
                          f"drop MODULES from {arg('lora')} to adapt every linear layer (the engine's default)",
                          EXIT_USAGE, param="lora")
    wrapped = set(_packed(adapted(model, modules)))
    runtime = {role: _VLLM_PACKED.get(name, name) for role, name in names.items()}
    out = list(dict.fromkeys(runtime[m] for m in MODULES if m in wrapped and m in runtime))
    for name in out:
        more = sorted({role for role, n in runtime.items() if n == name} - wrapped)
        if more:
            roles = ", ".join(r for r in MODULES if runtime.get(r) == name)
            raise KvplanError(f"{model.name}: {roles} are all modules named {name}, and {engine}'s "
                              f"--lora-target-modules {name} wraps every one of them; add {','.join(more)} to MODULES "
                              f"in {arg('lora')}", EXIT_USAGE, param="lora")
    if allowed is not None and (odd := [n for n in out if n not in allowed]):
        raise KvplanError(f"{model.name}: {engine}'s --lora-target-modules takes Llama's projection names only, not "
                          f"{', '.join(odd)}; drop MODULES from {arg('lora')} to emit 'all'", EXIT_USAGE, param="lora")
    return out


def vllm_flags(lora: LoraRequest, version: str, model) -> list[str]:
    """`vllm serve` flags for the adapters (vllm/engine/arg_utils.py): --enable-lora, --max-loras, --max-lora-rank,
    and --lora-target-modules from 0.17.0 where MODULES was given, in `model`'s own module names (target_names)."""
    args = ["--enable-lora", "--max-loras", str(lora.max_loras), "--max-lora-rank", str(lora.rank)]
    if lora.modules and parse_version(version) >= TARGET_MODULES_FIRST:
        args += ["--lora-target-modules", *target_names(model, lora.modules, "vLLM")]
    return args


def sglang_flags(lora: LoraRequest, model) -> list[str]:
    """`sglang.launch_server` flags for the adapters (srt/server_args.py): --enable-lora, --max-loras-per-batch,
    --max-lora-rank, --lora-target-modules (all: every linear layer; else `model`'s names, target_names)."""
    targets = target_names(model, lora.modules, "SGLang", _SGLANG_NAMES) if lora.modules else ["all"]
    return ["--enable-lora", "--max-loras-per-batch", str(lora.max_loras), "--max-lora-rank", str(lora.rank),
            "--lora-target-modules", *targets]


def _dtype(model) -> int:
    return PLAIN_BYTES.get(getattr(model, "dtype", "bf16"), 2)


def _stacks(model, dep, lora: LoraRequest, modules) -> int:
    """Elements of one adapter slot's A and B on the rank with the most layers."""
    return max(sum(lora.rank * (s.in_dim + s.out_dim) for s in stage_slices(model, modules, dep.tp, rng))
               for rng in stage_ranges(model, dep))


def vllm_bytes(model, dep, lora: LoraRequest, version: str) -> tuple[int, tuple[str, ...]]:
    """(bytes per GPU, notes) of vLLM's LoRA stacks for this release."""
    notes = []
    modules = lora.modules and adapted(model, lora.modules)
    if modules and parse_version(version) < TARGET_MODULES_FIRST:
        notes.append(f"vLLM {version} wraps every linear layer (--lora-target-modules came in 0.17.0): the "
                     f"LoRA slots are priced on all of them, not only {','.join(modules)}")
        modules = None
    vocab = 0
    if modules is None:
        check_model(model, MODULES)
        vocab = lora.rank * (model.vocab_size + model.hidden_size + model.hidden_size
                             + cdiv(model.vocab_size, dep.tp))
        notes.append("LoRA on every linear layer plus the embedding and LM head (vLLM's default without "
                     "--lora-target-modules; the vocabulary slots are an estimate)")
    wrapped = _packed(modules or MODULES)
    return lora.max_loras * (_stacks(model, dep, lora, wrapped) + vocab) * _dtype(model), tuple(notes)


def sglang_bytes(model, dep, lora: LoraRequest) -> tuple[int, tuple[str, ...]]:
    """(bytes per GPU, notes) of SGLang's LoRA memory pool (max_loras_per_batch slots)."""
    wrapped = _packed(adapted(model, lora.wrapped()))
    return lora.max_loras * _stacks(model, dep, lora, wrapped) * _dtype(model), ()


def trtllm_bytes(model, dep, lora: LoraRequest) -> tuple[int, tuple[str, ...]]:
    """(bytes per GPU, notes) of TensorRT-LLM's LoRA device cache sized by max_loras (paged, see above)."""
    modules = adapted(model, lora.wrapped())  # len(modules) counts them
    if set(modules) & {"q", "k", "v"}:
        modules = tuple(m for m in MODULES if m in set(modules) | {"q", "k", "v"})
    check_model(model, modules)
    layers = max(b - a for a, b in stage_ranges(model, dep))
    one = stage_slices(model, modules, dep.tp, (0, 1))  # TensorRT-LLM's modules are one layer's
    sizes = [s.in_dim + s.out_dim for s in one]
    width, widest = min(sizes), max(sizes)
    optimal, biggest = min(8, lora.rank), min(64, lora.rank)
    module_layers = lora.rank * model.num_layers * len(modules) * lora.max_loras
    slots = module_layers * cdiv(widest, width)
    per_page = max(optimal * sum(cdiv(s, width) for s in sizes) * layers, cdiv(biggest * widest, width))
    pages = cdiv(slots, per_page)
    return pages * per_page * width * _dtype(model), ()
