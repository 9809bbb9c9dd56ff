"""TensorRT-LLM's narrowed tensor-parallel split of DeepSeek-V3's dense MLPs and shared experts.

TensorRT-LLM's PyTorch DeepSeek-V3 (`DeepseekV3ForCausalLM`, also registered for `DeepseekV32ForCausalLM`) does not
split every MLP over tensor_parallel_size. Read in NVIDIA/TensorRT-LLM@a43cf9e363d5657061b5ce0e12f3d993a08d8158
`tensorrt_llm/_torch/models/modeling_deepseekv3.py`:

* dense MLP layers (the first `first_k_dense_replace`): `DeepseekV3DecoderLayer._compute_mlp_tp_size` builds the
  GatedMLP with `overridden_tp_size` = gcd(intermediate_size / block, tp), and where that exceeds the mapping's
  gpus_per_node, its gcd with gpus_per_node ("Avoid costly inter-node TP"); 1 under attention DP;
* shared experts: `Deepseekv3MoE._compute_shared_expert_tp_size` = gcd(shared intermediate / block, tp), no node
  term (output scaled by shared_tp / tp before the all-reduce); 1 under attention DP;
* block: the quant_config's group_size (128 for the DeepSeek FP8 block recipe, 16 for NVFP4, per the function's
  docstring); both functions assert intermediate % block == 0.

The ranks not in the narrowed group hold a copy: each rank holds width / mlp_tp of the MLP, more than 1 / tp.

gpus_per_node is the LLM API's: `BaseLlmArgs.gpus_per_node` (trtllm-serve's `--gpus_per_node`), passed to the
`Mapping` the model reads (`_ParallelConfig(gpus_per_node=...)` in `validate_parallel_config`); left unset,
`validate_gpus_per_node` takes `torch.cuda.device_count()`, the GPUs the host shows
(NVIDIA/TensorRT-LLM@fcd3f31682808ae56118ae43c1d7864a3a945e6f `tensorrt_llm/llmapi/llm_args.py`; `Mapping`'s own
default, 8, is not what the LLM API passes). kvplan takes the Deployment's `node_gpus` (a user's gpus_per_node),
else the GPU profile's `node_gpus` (a GB200 or GB300 NVL72 tray shows 4), else NODE_GPUS (8, an HGX board, the
node its layout search assumes), and says which where it narrows anything.
A checkpoint that declares no group (16-bit) reads QuantConfig's default group_size, 128 (`group_size: int = 128`,
NVIDIA/TensorRT-LLM@01ea6d79d454bb3ab10c7510a6f706ba039090c2 `tensorrt_llm/models/modeling_utils.py` QuantConfig).
"""

from __future__ import annotations

from math import gcd

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.planning.deploy import node_of
from kvplan.readers.mlp_layout import dense_mlp_layers, exact_mlp_width

ARCHITECTURES = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM")  # register_auto_model at a43cf9e3
DEFAULT_GROUP = 128  # QuantConfig.group_size's default, what an unquantized checkpoint's block_size reads


def _width(model, params: int, layers: int, what: str, tp: int) -> int:
    """One MLP's intermediate width, refused where the parameter counts give none exactly."""
    return exact_mlp_width(model, params, layers, what, tp, "place TensorRT-LLM's narrowed split at")


def _narrowed(model, width: int, tp: int, node: int, what: str) -> int:
    """gcd(width / block, tp), and its gcd with the node's GPUs above them where `node` (0: no node term); refused
    where the width is not whole blocks (TensorRT-LLM's assertion)."""
    block = model.quantization.group_size if model.quantization.group_size > 0 else DEFAULT_GROUP
    if width % block:
        raise KvplanError(f"TensorRT-LLM refuses {model.name}: its {width}-wide {what} is not a whole number of "
                          f"{block}-wide quantization groups (\"intermediate_size must be divisible by "
                          "block_size.\")", EXIT_USAGE, param="model", value=model.name)
    split = gcd(width // block, tp)
    return gcd(split, node) if node and split > node else split


def splits(model, dep, gpu=None) -> tuple[int, int] | None:
    """(dense MLP split, shared experts' split) as TensorRT-LLM builds them at `dep` (tp within no attention DP), or
    None where its placement is the plain tensor-parallel one (not DeepSeek-V3's model class, tp 1, attention DP)."""
    if model.architecture not in ARCHITECTURES or dep.tp == 1 or dep.dp > 1:
        return None
    p = model.params
    n_dense = dense_mlp_layers(model)
    node = node_of(dep, gpu)[0]
    mlp = _narrowed(model, _width(model, p.mlp, n_dense, "dense MLP", dep.tp), dep.tp, node, "dense MLP") \
        if n_dense else dep.tp
    shared = dep.tp
    if p.shared_experts and p.num_moe_layers:
        width = _width(model, p.shared_experts, p.num_moe_layers, "shared experts'", dep.tp)
        shared = _narrowed(model, width, dep.tp, 0, "shared experts")
    return mlp, shared


def note(model, dep, gpu=None) -> str | None:
    """The assumption a plan states where the split is narrower than tp: the splits and the node size taken."""
    got = splits(model, dep, gpu)
    if got is None or got == (dep.tp, dep.tp):
        return None
    mlp, shared = got
    return (f"TensorRT-LLM splits {model.name}'s dense MLP layers over {mlp} and its shared experts over {shared} of "
            f"the {dep.tp} tensor-parallel ranks (DeepseekV3DecoderLayer._compute_mlp_tp_size: gcd(width / block, tp), "
            f"then with gpus_per_node; {node_of(dep, gpu)[1]}): each rank holds 1/{mlp} and 1/{shared} "
            "of them")
